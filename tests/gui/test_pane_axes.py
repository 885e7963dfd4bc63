"""An axis keeps the pictures of the ranges it showed (a change of bit width moves each strip's
code axis between a few ranges, and regenerating the ticks was ~1.5 ms per axis): a range
shown again uses its kept picture, which draws exactly what a regenerated one draws; anything
else that changes the axis forgets them."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPainter, QPicture

from quantscope.core.tensors.generators import generate
from quantscope.gui.pane_axes import draw_axis
from quantscope.state import ExplorerState, Source


@pytest.fixture
def window(make_window, wait_results):
    st = ExplorerState()
    win = make_window(st)
    assert st.set_tensor(generate("normal", (64, 256), seed=3),
                         Source.generator("normal", (64, 256), 3))
    wait_results(win)
    return win


def _image(axis) -> QImage:
    """The axis's current picture, rendered."""
    rect = axis.boundingRect().toAlignedRect()
    image = QImage(rect.size(), QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.translate(-rect.topLeft())
    axis.picture.play(painter)
    painter.end()
    return image


def _generations(monkeypatch) -> list:
    calls: list = []
    original = pg.AxisItem.generateDrawSpecs

    def counted(self, painter):
        calls.append(self)
        return original(self, painter)

    monkeypatch.setattr(pg.AxisItem, "generateDrawSpecs", counted)
    return calls


def _change(win, wait_results, **settings) -> None:
    win.state.update_settings(**settings)
    wait_results(win)


def test_a_range_shown_again_uses_its_kept_picture(window, wait_results, qtbot, monkeypatch):
    axis = window.panes["symmetric/tensor"].strip.getAxis("bottom")
    _change(window, wait_results, bits=6)
    qtbot.wait(20)
    six = axis.picture
    _change(window, wait_results, bits=8)
    qtbot.wait(20)
    assert axis.picture is not six and tuple(axis.range) == (-128, 128)
    calls = _generations(monkeypatch)
    _change(window, wait_results, bits=6)
    qtbot.wait(20)
    assert tuple(axis.range) == (-32, 32)
    assert axis.picture is six and axis not in calls
    kept = _image(axis)
    axis._kept = None  # forget it: what pyqtgraph itself draws for this range
    axis.picture = None
    draw_axis(axis)
    assert axis in calls and axis.picture is not six
    assert _image(axis) == kept


def test_anything_but_a_range_forgets_the_kept_pictures(window, wait_results, qtbot,
                                                        monkeypatch):
    axis = window.panes["symmetric/tensor"].strip.getAxis("bottom")
    _change(window, wait_results, bits=6)
    _change(window, wait_results, bits=8)
    qtbot.wait(20)
    assert axis._kept
    axis.setPen(pg.mkPen("#ff0000"))  # as a theme change does
    assert not axis._kept
    calls = _generations(monkeypatch)
    _change(window, wait_results, bits=6)
    qtbot.wait(20)
    assert axis in calls  # drawn anew, in the new pen


def _tick_specs(axis) -> tuple[list, list[str]]:
    """The axis's tick lines and the tick labels it draws, as its next paint would."""
    picture = QPicture()
    painter = QPainter(picture)
    try:
        if axis.style["tickFont"]:
            painter.setFont(axis.style["tickFont"])
        _, ticks, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return ticks, [text for _, _, text in texts]


def _assert_strip_labels_are_codes(window) -> None:
    """The strip's code axis labels only codes: the spare code at either end is no code."""
    for pane in window.panes.values():
        _, labels = _tick_specs(pane.strip.getAxis("bottom"))
        report = pane.report
        assert all(report.qmin <= float(t) <= report.qmax for t in labels), (pane.key, labels)


@pytest.mark.parametrize("log", [True, False])
def test_the_count_axis_labels_its_base(window, qtbot, log):
    """The count starts at 0 on the plot's bottom edge; its label is drawn there."""
    window.set_log_counts(log)
    qtbot.wait(20)
    for pane in window.panes.values():
        axis = pane.plot.getAxis("left")
        assert axis.range[0] == 0
        _, labels = _tick_specs(axis)
        assert "0" in labels, (pane.key, labels)
    _assert_strip_labels_are_codes(window)


def test_the_strip_count_axis_draws_only_labelled_ticks(window, qtbot):
    """The strip is a fifth of the pane high: a few labelled ticks, no comb of minor ones."""
    qtbot.wait(20)
    for pane in window.panes.values():
        ticks, labels = _tick_specs(pane.strip.getAxis("left"))
        assert 2 <= len(labels) <= 4, (pane.key, labels)
        assert len(ticks) == len(labels), (pane.key, len(ticks), labels)


def test_the_strip_code_axis_draws_only_labelled_ticks(window, qtbot):
    """Under a strip a fifth of the pane high, every tick of the code axis has its label."""
    qtbot.wait(20)
    for pane in window.panes.values():
        ticks, labels = _tick_specs(pane.strip.getAxis("bottom"))
        assert len(labels) >= 3, (pane.key, labels)
        assert len(ticks) == len(labels), (pane.key, len(ticks), labels)


def test_a_format_whose_codes_start_at_0_labels_the_0(window, wait_results, qtbot):
    """An FP8 strip's codes start at 0, a code's width from the axis's left end: its "0"
    reaches past that end, and is drawn all the same."""
    from quantscope.state.formats import DEFAULT_COMPARISON

    _change(window, wait_results, formats=DEFAULT_COMPARISON)
    qtbot.wait(20)
    fp8 = [p for p in window.panes.values() if p.title.text().startswith("FP8")]
    assert fp8
    for pane in fp8:
        axis = pane.strip.getAxis("bottom")
        assert axis.range[0] < 0 <= axis.range[0] + 1
        _, labels = _tick_specs(axis)
        assert "0" in labels, (pane.key, labels)
    _assert_strip_labels_are_codes(window)
