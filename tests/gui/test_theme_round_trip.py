"""Any sequence of dark, presentation and F11 toggles that ends light, at a desk and not full
screen, leaves the window pixel for pixel as a window freshly opened there: no widget keeps a
look, a font or a size from the trip (a plot's axes kept the room a talk's big tick labels
took; the first window of a process kept a narrower side column than every later one)."""

from __future__ import annotations

import numpy as np
import pytest
from gui_measure import look, look_changes, settle
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PySide6.QtGui import QImage

#: The toggles a person has: View > Dark theme, View > Presentation mode, F11.
TOGGLES = ("dark", "present", "f11")


def _pixels(win) -> np.ndarray:
    image = win.grab().toImage().convertToFormat(QImage.Format.Format_ARGB32)
    return np.frombuffer(image.constBits(), np.uint32,
                         image.width() * image.height()).reshape(image.height(), -1).copy()


def _settled(win, qtbot) -> None:
    qtbot.waitUntil(win.all_shown, timeout=30_000)
    win.views_controller.settle()
    settle(win, qtbot)


def _toggle(win, qtbot, what: str) -> None:
    if what == "dark":
        win.dark_action.setChecked(not win.dark_action.isChecked())
    elif what == "present":
        win.presentation_action.setChecked(not win.presentation_action.isChecked())
    else:
        # F11 presents full screen; while presenting, full screen or not, it leaves the talk
        # (View > Full-screen presentation / leave): after View > Presentation mode it does
        # not go full screen, and a wait for full screen there waited out its timeout
        on = not win.presentation
        win.toggle_full_screen()
        qtbot.waitUntil(lambda: win.presentation == on and win.isFullScreen() == on,
                        timeout=5000)
    settle(win, qtbot)


@pytest.fixture(scope="module")
def windows(shared_app_window, request):
    """(the window taken on the trips, the fresh window's pixels and look, qtbot): the
    window the trips take is the process's first where this file runs alone."""
    from pytestqt.qtbot import QtBot

    qtbot = QtBot(request)
    win = shared_app_window(1000)
    fresh = shared_app_window(1000)
    _settled(fresh, qtbot)
    _settled(win, qtbot)
    found = (_pixels(fresh), look(fresh))
    shared_app_window.close(fresh)
    return win, found, qtbot


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(TOGGLES), min_size=1, max_size=4))
@example(["present", "dark", "present", "dark"])  # light, talk, dark talk, dark, light
@example(["f11", "dark", "f11", "dark"])
@example(["present", "f11"])  # F11 in a windowed talk leaves it
def test_every_toggle_sequence_ends_as_a_fresh_window(windows, toggles):
    win, (fresh_pixels, fresh_look), qtbot = windows
    for what in toggles:
        _toggle(win, qtbot, what)
    # back to light, at a desk, not full screen (F11 off also leaves the talk)
    if win.isFullScreen():
        _toggle(win, qtbot, "f11")
    if win.presentation_action.isChecked():
        _toggle(win, qtbot, "present")
    if win.dark_action.isChecked():
        _toggle(win, qtbot, "dark")
    assert (win.width(), win.height()) == (1600, 1000)
    _settled(win, qtbot)
    changed = {k: v for k, v in look_changes(fresh_look, look(win)).items()
               if "qt_scrollarea_" not in k}
    assert not changed, f"after {toggles}: {list(changed.items())[:5]}"
    pixels = _pixels(win)
    assert pixels.shape == fresh_pixels.shape
    differ = np.argwhere(pixels != fresh_pixels)
    assert len(differ) == 0, (
        f"after {toggles}: {len(differ)} pixels differ from a fresh window's, rows "
        f"{differ[:, 0].min()}-{differ[:, 0].max()}, columns {differ[:, 1].min()}-"
        f"{differ[:, 1].max()}")
