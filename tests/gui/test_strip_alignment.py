"""The occupancy strip under each histogram spans the same screen columns as the histogram's
plot, in every look: the strip's count axis copies the width the histogram's axis reserves,
and that width changes with the theme (a presentation's larger tick font, its axis label) and
after the strip has been hidden in a short window."""

from __future__ import annotations

import pytest

from quantscope.state import PANES


def _settle(win, qtbot) -> None:
    """Until every pane has had its turns of the event loop and its layout has run."""
    qtbot.waitUntil(win.all_shown, timeout=30_000)
    qtbot.wait(50)


def _edges(pane) -> tuple[tuple[float, float], tuple[float, float]]:
    """Scene x of the left and right edges of the histogram's and the strip's plot areas."""
    hist = pane.plot.getViewBox().sceneBoundingRect()
    strip = pane.strip.getViewBox().sceneBoundingRect()
    return (hist.left(), hist.right()), (strip.left(), strip.right())


def _assert_aligned(win) -> None:
    shown = [win.panes[key] for key in PANES
             if win.panes[key].isVisible() and win.panes[key].strip.isVisible()]
    assert shown, "no pane shows its strip"
    for pane in shown:
        hist, strip = _edges(pane)
        assert strip == hist, (pane.key, hist, strip)


@pytest.mark.parametrize("dark", [False, True])
def test_strips_line_up_with_their_histograms_presenting_and_after(app_window, qtbot, dark):
    win = app_window(1000)
    win.dark_action.setChecked(dark)
    _settle(win, qtbot)
    _assert_aligned(win)
    win.presentation_action.setChecked(True)
    try:
        _settle(win, qtbot)
        _assert_aligned(win)
        win.resize(1280, 720)  # a projector: the presentation text follows the height
        _settle(win, qtbot)
        _assert_aligned(win)
    finally:
        win.presentation_action.setChecked(False)  # the theme is process-wide
        win.dark_action.setChecked(False)
    win.resize(1920, 1080)
    _settle(win, qtbot)
    _assert_aligned(win)


def test_a_strip_shown_again_in_a_taller_window_lines_up(app_window, qtbot):
    win = app_window(720)  # short: the strips give their rows to the histograms
    _settle(win, qtbot)
    assert not any(pane.strip.isVisible() for pane in win.panes.values())
    win.resize(1920, 1080)
    _settle(win, qtbot)
    _assert_aligned(win)
