"""The percentile slider has room to be dragged in every look: on a row of its own under the
number, as wide as the clip window's slider, never the stub beside its spin box that it was
(a few dozen pixels at 1280x720, its handle filling it)."""

from __future__ import annotations

import pytest

#: A slider this wide (px) steps through its 500 positions about one per pixel or two.
USABLE_PX = 150


def _settle(win, qtbot) -> None:
    qtbot.waitUntil(win.all_shown, timeout=30_000)
    qtbot.wait(50)


@pytest.mark.parametrize("dark", [False, True])
def test_the_percentile_slider_is_usable_in_every_size_and_look(app_window, qtbot, dark):
    win = app_window(1000)
    win.dark_action.setChecked(dark)
    controls = win.controls
    widths = {}
    try:
        for presentation in (False, True):
            win.presentation_action.setChecked(presentation)
            if presentation:
                win.stage.toggle_controls()  # presentation hides them: C shows them
            for size in ((1280, 720), (1920, 1080)):
                win.resize(*size)
                for method in ("minmax", "percentile"):
                    win.state.update_settings(method=method)
                    _settle(win, qtbot)
                    slider = controls.percentile_slider
                    assert slider.isVisible()
                    assert slider.isEnabled() == (method == "percentile")
                    assert controls.percentile.isEnabled() == (method == "percentile")
                    widths[presentation, size, method] = slider.width()
                    assert slider.width() >= USABLE_PX, widths
                    assert slider.width() >= controls.clip.width() - 1, widths
                    assert slider.width() >= controls.bits.width(), widths
    finally:
        win.presentation_action.setChecked(False)  # the theme is process-wide
        win.dark_action.setChecked(False)
