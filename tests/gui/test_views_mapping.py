"""The Mapping view draws the engine's numbers: the seed example's codes, scales and zero
points beside each scheme, the codes symmetric never uses shaded, and the cast without clamp
with its count of wrapped values."""

from __future__ import annotations

import numpy as np
import pytest
from gui_measure import rich_text_lines

from quantscope.core.mapping import map_values
from quantscope.gui.views.mapping import MappingView


@pytest.fixture
def view(qtbot):
    v = MappingView()
    qtbot.addWidget(v)
    v.resize(1200, 700)
    v.show()
    return v


def test_the_seed_example_is_what_the_view_shows(view):
    data = view.export_data()
    assert data["symmetric"]["codes"] == [-42, 0, 21, 127]
    assert data["asymmetric"]["codes"] == [-128, -64, -32, 127]
    assert data["asymmetric"]["zero_point"] == -64
    assert data["symmetric"]["unreachable"] == [[-128, -43]]
    sym, asym = map_values([-1, 0, 0.5, 3])
    text = view.info["symmetric"].text()
    assert f"s = {sym.scale:.6g}" in text and "z = 0" in text and "-128 … -43" in text
    assert f"max |error| = {sym.max_error:.3g}" in text
    assert f"z = {asym.zero_point}" in view.info["asymmetric"].text()


def test_cast_without_clamp_counts_the_wrapped_values(view):
    view.wrap_box.setChecked(True)
    cast = view.export_data()["cast_without_clamp"]
    assert 200 in cast["unclamped"]
    i = cast["unclamped"].index(200)
    assert cast["clamped"][i] == 127 and cast["wrapped"][i] == -56
    assert cast["wrap_count"] == 1
    text = view.info["cast"].text()
    assert "→ 200 → clamp 127 (12.7)" in text and "-56 (-5.6)" in text
    assert "1 of 5 would wrap" in text
    assert view.plots["cast"].isVisible() and not view.plots["symmetric"].isVisible()


def test_bad_values_are_said_and_the_figure_kept(view):
    before = view.export_data()
    view.set_values("1, two, 3")
    assert view.error.isVisible() and "'two' is not a number" in view.error.text()
    assert view.export_data() == before
    view.set_values(np.linspace(-2, 2, 64).tolist())
    assert not view.error.isVisible() and len(view.export_data()["symmetric"]["codes"]) == 64




def test_a_range_of_unused_codes_stays_on_one_line(view, qtbot):
    """Beside a narrow figure the range reads "-128 … -43", never "-128" / "… -43"."""
    label = view.info["symmetric"]
    label.setFixedWidth(label.fontMetrics().horizontalAdvance("codes never used: -128 …"))
    qtbot.wait(20)
    lines = rich_text_lines(label)
    assert any("-128 … -43" in line for line in lines), lines


def _tick_label_rows(view, name: str, side: str) -> tuple[float, float]:
    """Top and bottom (in the view's pixels) of the tick labels ``side`` of a scheme's plot."""
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QPainter, QPicture

    widget = view.plots[name]
    axis = widget.getPlotItem().getAxis(side)
    picture = QPicture()
    painter = QPainter(picture)
    try:
        painter.setFont(axis.style["tickFont"] or axis.font())
        _, _, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    assert texts
    tops, bottoms = [], []
    for rect, _, _ in texts:
        scene = axis.mapRectToScene(rect)
        box = widget.mapFromScene(scene).boundingRect()
        tops.append(widget.mapTo(view, QPoint(0, box.top())).y())
        bottoms.append(widget.mapTo(view, QPoint(0, box.bottom())).y())
    return min(tops), max(bottoms)


@pytest.mark.parametrize("presentation", [False, True])
def test_the_two_schemes_axes_read_apart(view, qtbot, presentation):
    """The symmetric plot's code labels (-64, 0, 64) and the asymmetric plot's value labels
    under them are a line apart: stacked, their two "0"s read as one column of numbers."""
    from quantscope.gui.theme import resolve

    view.apply_theme(resolve(True, presentation, 720))
    view.resize(1260, 560)
    qtbot.wait(50)
    view.grab()
    _, codes_bottom = _tick_label_rows(view, "symmetric", "bottom")
    values_top, _ = _tick_label_rows(view, "asymmetric", "top")
    line = view.plots["symmetric"].getPlotItem().getAxis("bottom").style["tickFont"]
    from PySide6.QtGui import QFontMetrics
    height = QFontMetrics(line).height() if line is not None else 12
    assert values_top - codes_bottom >= height, (codes_bottom, values_top, height)
