"""F11 twice is a no-op: leaving presentation restores the window exactly as it was, from any
tab and after any of the stage's keys -- every widget's style sheet, font, visibility, enabled
state and text colours, the window's sheet, the layout and the current tab."""

from __future__ import annotations

from gui_measure import build_every_tab, look, look_changes, settle
from PySide6.QtGui import QColor, QImage


def test_f11_off_restores_exactly_what_f11_on_found(app_window, qtbot):
    win = app_window(1000)
    keys = ["2", "V", "]", "C", "3"]
    # a tab first shown during the talk is not among what F11 found (a tab built during a
    # talk is checked in tests/gui/test_lazy_tabs.py)
    build_every_tab(win)
    for tab in range(win.views.count()):
        win.views.setCurrentIndex(tab)
        settle(win, qtbot)
        before = look(win)
        win.presentation_action.setChecked(True)
        settle(win, qtbot)
        for key in keys[: tab + 2]:
            win.stage.actions[key].trigger()
        settle(win, qtbot)
        win.presentation_action.setChecked(False)
        settle(win, qtbot)
        diff = look_changes(before, look(win))
        assert not diff, f"tab {win.views.tabText(tab)}: {list(diff.items())[:5]}"


def _ink(widget) -> QColor:
    """The darkest pixel of a widget as drawn (its text, on a light theme)."""
    img: QImage = widget.grab().toImage()
    best = QColor("#ffffff")
    for y in range(0, img.height(), 2):
        for x in range(0, img.width(), 2):
            c = img.pixelColor(x, y)
            if c.lightness() < best.lightness():
                best = c
    return best


def test_a_disabled_control_looks_disabled_before_and_after_f11(app_window, qtbot):
    win = app_window(1000)
    spin = win.controls.percentile  # the percentile is off while the method is min / max
    enabled = win.controls.clip_lo
    assert not spin.isEnabled() and enabled.isEnabled()
    for _ in range(2):
        assert _ink(spin).lightness() > _ink(enabled).lightness() + 40
        win.presentation_action.setChecked(True)
        settle(win, qtbot)
        win.presentation_action.setChecked(False)
        settle(win, qtbot)
