"""Presentation mode on the two common projectors, 1280x720 and 1920x1080: the window goes
down to the size, every text (numbers, ticks and axis labels included) is at least 18 px at
720 rows and 24 px at 1080, nothing is cut off, and each histogram is at least a quarter of
the screen tall -- measured on the panes and on every view the keys bring up."""

from __future__ import annotations

import pytest
from gui_measure import (
    axis_labels_cut,
    cut_combo_texts,
    cut_labels,
    scene_texts,
    settle,
    widget_texts,
)

SIZES = [((1280, 720), 18), ((1920, 1080), 24)]


@pytest.fixture(params=["light", "dark"])
def dark(request):
    return request.param == "dark"


@pytest.fixture
def app_window(shared_talk_window):
    """One window for every test here, each entering a talk on it afresh."""
    return shared_talk_window


def _present(app_window, qtbot, size, dark):
    win = app_window(1000)
    win.dark_action.setChecked(dark)
    win.presentation_action.setChecked(True)
    win.resize(*size)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == size, timeout=5000)
    qtbot.wait(100)  # the resize re-sizes the text (a zero timer) and relays out
    settle(win, qtbot)
    return win


def _plots_cut(view):
    """The plot widgets of ``view`` that a scroll area shows only in part (the Matmul view's
    per-channel plot once sat below the fold under a column of big numbers)."""
    import pyqtgraph as pg

    return [w.objectName() or type(w).__name__ for w in view.findChildren(pg.GraphicsView)
            if w.isVisible() and w.visibleRegion().boundingRect() != w.rect()]


def _check_screen(win, min_px):
    small = [(what, px) for what, px in widget_texts(win) + scene_texts(win) if px < min_px]
    assert not small, f"texts under {min_px} px: {small[:8]}"
    assert not cut_labels(win), cut_labels(win)
    assert not axis_labels_cut(win), axis_labels_cut(win)


@pytest.mark.parametrize(("size", "min_px"), SIZES)
def test_the_panes_read_from_the_back_of_the_room(app_window, qtbot, size, min_px, dark):
    win = _present(app_window, qtbot, size, dark)
    assert win.minimumSizeHint().width() <= size[0]
    assert win.minimumSizeHint().height() <= size[1]
    shown = [k for k, p in win.panes.items() if p.isVisible()]
    assert shown == ["symmetric/tensor", "asymmetric/tensor"]  # the default pair
    for key in shown:
        box = win.panes[key].plot.getViewBox()
        assert box.height() >= size[1] / 4, f"{key}: histogram {box.height():.0f} px tall"
    assert win.stage.keys.isVisible() and "F11" in win.stage.keys.text()
    assert win.headline.isVisible()
    _check_screen(win, min_px)


@pytest.mark.parametrize(("size", "min_px"), SIZES)
def test_every_pair_and_view_a_key_away(app_window, qtbot, size, min_px):
    win = _present(app_window, qtbot, size, False)
    for key in "234":
        win.stage.actions[key].trigger()
        settle(win, qtbot)
        assert [k for k, p in win.panes.items() if p.isVisible()] == list(
            win.stage.visible_panes())
        for pane in win.stage.visible_panes():
            assert win.panes[pane].plot.getViewBox().height() >= size[1] / 4
        _check_screen(win, min_px)
    win.stage.actions["V"].trigger()
    for i in range(win.views.count()):
        win.views.setCurrentIndex(i)
        qtbot.wait(50)
        settle(win, qtbot)
        assert win.views.isVisible() and not any(p.isVisible() for p in win.panes.values())
        bar = win.views.tabBar()
        assert sum(bar.tabRect(j).width() for j in range(bar.count())) <= bar.width()
        _check_screen(win, min_px)
        assert not _plots_cut(win.views.currentWidget()), (
            win.views.tabText(i), _plots_cut(win.views.currentWidget()))
    win.stage.actions["1"].trigger()
    assert win.panes["symmetric/tensor"].isVisible() and not win.views.isVisible()


def test_controls_a_key_away_and_the_window_still_fits(app_window, qtbot):
    win = _present(app_window, qtbot, (1280, 720), False)
    assert win.side_dock.isHidden()
    win.stage.actions["C"].trigger()
    settle(win, qtbot)
    assert win.side_dock.isVisible()
    assert win.stage.visible_panes() == ("symmetric/tensor",)  # no room for its partner
    # the controls re-wrap for the stage over a few turns of the event loop (on a loaded
    # machine more than the two paints of settle): the window's layout catches up by itself
    qtbot.waitUntil(lambda: win.minimumSizeHint().width() <= 1280, timeout=5000)
    assert win.minimumSizeHint().height() <= 720
    assert (win.width(), win.height()) == (1280, 720)


def test_the_matmul_controls_show_their_words(app_window, qtbot):
    """Every scheme, rounding and output choice of the Matmul view reads whole at 1280x720
    ("half away from 0 (TFLite)" was cut to "half away from (" beside a half-empty source)."""
    from PySide6.QtWidgets import QComboBox

    win = _present(app_window, qtbot, (1280, 720), False)
    index = next(i for i in range(win.views.count()) if win.views.tabText(i) == "Matmul")
    win.views.setCurrentIndex(index)
    win.stage.show_views(True)
    qtbot.wait(50)
    settle(win, qtbot)
    boxes = [b for b in win.views.currentWidget().findChildren(QComboBox) if b.isVisible()]
    assert len(boxes) >= 9
    cut = cut_combo_texts(boxes)
    assert not cut, cut


@pytest.mark.parametrize("fixes", [False, True])
def test_the_matmul_numbers_read_whole_without_scrolling(app_window, qtbot, fixes, request):
    """At 1280x720 in a talk every number of the Matmul view is on screen (saturation, zero
    points and the outlier split were below the fold of a scrolled column), each label's
    text is the engine's, and a line breaks between phrases ("for K ≤" / "105,026" and "→" /
    "[197, 1536]" did not)."""
    from test_caption_fit import drawn_lines, split_phrases

    win = _present(app_window, qtbot, (1280, 720), True)
    index = next(i for i in range(win.views.count()) if win.views.tabText(i) == "Matmul")
    win.views.setCurrentIndex(index)
    win.stage.show_views(True)
    view = win.views.currentWidget()
    qtbot.waitUntil(lambda: view.outcome is not None, timeout=30_000)
    if fixes:
        found = view.controls.alpha.value(), view.controls.threshold.value()
        view.controls.alpha.setValue(0.8)
        view.controls.threshold.setValue(3.0)
        qtbot.waitUntil(lambda: view.outcome.request.threshold == 3.0
                        and view.outcome.request.alpha is not None, timeout=30_000)
        request.addfinalizer(lambda: (view.controls.alpha.setValue(found[0]),
                                      view.controls.threshold.setValue(found[1])))
    settle(win, qtbot)
    text = view.outcome.text
    labels = {"shapes": view.shapes, **view.values, **view.details}
    area = view.side_area
    assert area.verticalScrollBar().maximum() == 0
    for key, label in labels.items():
        assert label.text() == text[key], key
        if label.isHidden():
            continue
        top = label.mapTo(area.viewport(), label.rect().topLeft()).y()
        bottom = label.mapTo(area.viewport(), label.rect().bottomLeft()).y()
        assert 0 <= top and bottom <= area.viewport().height(), (key, top, bottom)
        for part in label.shown_text().split("\n"):  # the engine's own lines, one by one
            lines = drawn_lines(part, label.font(), label.contentsRect().width())
            # a parenthesis on a line of its own is a phrase whole ("589,824 offline" /
            # "(W column sums)"); the brackets' balance is checked below
            bad = [pair for pair in split_phrases(lines) if " / '(" not in pair]
            assert not bad, (key, lines)
            for line in lines[:-1]:
                assert not line.endswith(("→", "×", "≤", "/")), (key, lines)
                assert line.count("[") == line.count("]"), (key, lines)
                assert line.count("(") == line.count(")"), (key, lines)
    _check_screen(win, 18)
