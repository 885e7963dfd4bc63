"""The histogram's rotated count-axis label ("log₁₀(1+n)") sits at the same place in every
pane -- the same distance from the pane's left edge, centred on its axis -- whatever happened
before: the first numbers (which change its text from "count"), a new bit width, a new tensor,
a theme or a window size. pyqtgraph placed it only when the axis was resized, so a pane whose
axis kept its size kept the label where the previous text or font had been centred."""

from __future__ import annotations

from PySide6.QtCore import QPoint

from quantscope.core.tensors.generators import generate
from quantscope.state import PANES, Source


def _settle(win, qtbot) -> None:
    qtbot.waitUntil(win.all_shown, timeout=30_000)
    qtbot.wait(50)


def _placement(pane) -> tuple[int, float]:
    """The label's left edge in the pane's pixels, and how far its centre sits below the
    middle of its axis (px)."""
    axis = pane.plot.getAxis("left")
    label = axis.label
    rect = label.mapRectToParent(label.boundingRect())  # the label is rotated: map it
    scene_left = axis.mapToScene(rect.topLeft()).x()
    view_left = pane.graphics.mapFromScene(scene_left, 0).x()
    left = pane.graphics.mapTo(pane, QPoint(view_left, 0)).x()
    return left, rect.center().y() - axis.size().height() / 2


def _assert_same_place(win) -> None:
    shown = [win.panes[key] for key in PANES if win.panes[key].isVisible()]
    assert shown
    placed = {pane.key: _placement(pane) for pane in shown}
    for pane in shown:
        assert pane.plot.getAxis("left").labelText == "log₁₀(1+n)"
    lefts = {left for left, _ in placed.values()}
    assert len(lefts) == 1, placed
    for key, (_, off_centre) in placed.items():
        assert abs(off_centre) <= 1, (key, placed)


def test_the_count_label_sits_alike_in_every_pane_after_each_update(app_window, qtbot):
    win = app_window(720)
    _settle(win, qtbot)
    _assert_same_place(win)
    win.state.update_settings(bits=4)
    _settle(win, qtbot)
    _assert_same_place(win)
    assert win.state.set_tensor(generate("laplace", (96, 384), seed=2),
                                Source.generator("laplace", (96, 384), 2))
    _settle(win, qtbot)
    _assert_same_place(win)
    win.resize(1920, 1080)
    _settle(win, qtbot)
    _assert_same_place(win)
    win.presentation_action.setChecked(True)
    try:
        _settle(win, qtbot)
        _assert_same_place(win)
        win.resize(1280, 720)
        _settle(win, qtbot)
        _assert_same_place(win)
    finally:
        win.presentation_action.setChecked(False)  # the theme is process-wide
    win.state.update_settings(bits=8)
    _settle(win, qtbot)
    _assert_same_place(win)


def test_a_new_label_text_is_centred_at_once(app_window, qtbot):
    """No resize follows a new text: the label is centred for it all the same."""
    win = app_window(1000)
    _settle(win, qtbot)
    pane = win.panes[PANES[0]]
    for text in ("count", "log₁₀(1+n)"):
        pane.plot.setLabel("left", text)
        assert abs(_placement(pane)[1]) <= 1, text
