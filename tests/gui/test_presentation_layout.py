"""Presentation mode at projector sizes: the window keeps the size asked for, and nothing a
speaker shows is cut off or drawn over (each defect here was seen in a 1600x1000 screenshot)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QFormLayout

from quantscope.state import PANES


@pytest.fixture(scope="module")
def opened(shared_app_window):
    return shared_app_window(1000)


@pytest.fixture
def window(opened, qtbot):
    """The window of these tests in a talk, entered afresh for each: leaving a talk puts
    back exactly what entering it found (the controls, the views, the panes)."""
    opened.presentation_action.setChecked(True)
    qtbot.wait(50)
    yield opened
    opened.presentation_action.setChecked(False)  # the theme is process-wide: leave it as found


def test_presentation_fits_1600_pixels(window, qtbot):
    assert window.minimumSizeHint().width() <= 1600
    assert window.width() == 1600
    window.stage.show_views(True)
    qtbot.wait(20)
    # every view tab fits (no scroll arrows hiding one)
    bar = window.views.tabBar()
    assert sum(bar.tabRect(i).width() for i in range(bar.count())) <= bar.width()


def test_controls_stack_labels_over_fields_so_the_sliders_keep_their_room(window, qtbot):
    window.stage.toggle_controls()  # presentation hides them: C shows them
    qtbot.wait(20)
    controls = window.controls
    assert controls.form.rowWrapPolicy() == QFormLayout.RowWrapPolicy.WrapAllRows
    assert controls.percentile_slider.width() >= 60
    assert controls.clip.width() >= controls.width() // 2
    # the clip ends get the row, not the word between them
    assert controls.clip_lo.width() >= 100 and controls.clip_hi.width() >= 100
    window.presentation_action.setChecked(False)
    assert controls.form.rowWrapPolicy() == QFormLayout.RowWrapPolicy.DontWrapRows


def test_the_strip_has_no_rotated_label_to_collide_with_the_histograms(window):
    for key in PANES:
        pane = window.panes[key]
        assert not pane.strip.getAxis("left").label.isVisible()
        assert "log₁₀(1+n)" in pane.strip.getAxis("bottom").labelText


def test_tradeoff_legend_sits_under_the_axis_and_line_labels_stay_in_view(window, qtbot):
    view = window.views.widget(0)
    window.views.setCurrentIndex(0)
    window.stage.show_views(True)
    qtbot.waitUntil(lambda: all(p.sweep is not None for p in view.plots.values()),
                    timeout=30_000)
    qtbot.wait(50)
    for scheme in view.plots.values():
        if not view.widgets[scheme.name.lower()].isVisible():
            continue
        box = scheme.plot.getViewBox().sceneBoundingRect()
        legend = scheme.plot.legend.sceneBoundingRect()
        assert legend.top() >= box.bottom()  # below the curves, covering none
        assert legend.right() <= scheme.plot.sceneBoundingRect().right() + 1
        for line in (scheme.best_line, scheme.current):
            label = line.label.sceneBoundingRect()
            assert box.left() - 1 <= label.left() and label.right() <= box.right() + 1
