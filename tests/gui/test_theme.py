"""Themes: presentation mode enlarges fonts and lines and hides clutter (and undoes it), dark
reaches plots and widgets, and presentation is always light."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QLabel, QMainWindow, QStatusBar, QVBoxLayout, QWidget

from quantscope.gui.theme import (
    CLUTTER_PROPERTY,
    Theme,
    apply_theme,
    current_theme,
    resolve,
    stylesheet,
)
from quantscope.gui.views.bitwidth import BitwidthView
from quantscope.state import ExplorerState


@pytest.fixture
def window(qtbot):
    win = QMainWindow()
    win.setStatusBar(QStatusBar())
    central = QWidget()
    lay = QVBoxLayout(central)
    win.plot = pg.PlotWidget()
    win.plot.setTitle("t")
    lay.addWidget(win.plot)
    win.clutter = QLabel("detail")
    win.clutter.setProperty(CLUTTER_PROPERTY, True)
    lay.addWidget(win.clutter)
    win.view = BitwidthView(ExplorerState())
    lay.addWidget(win.view)
    win.setCentralWidget(central)
    qtbot.addWidget(win)
    win.show()
    yield win
    apply_theme(win, dark=False, presentation=False)  # leave the process default behind


def test_presentation_is_big_thick_light_and_uncluttered(window):
    normal = apply_theme(window, dark=False, presentation=False)
    pen_normal = window.view.curves["symmetric/tensor"].opts["pen"].widthF()
    theme = apply_theme(window, dark=True, presentation=True)
    assert theme == Theme(dark=False, presentation=True) == current_theme()
    assert theme.font_pt > normal.font_pt and theme.line_width >= 2 * normal.line_width
    assert window.view.curves["symmetric/tensor"].opts["pen"].widthF() > 2 * pen_normal
    assert window.clutter.isHidden() and window.statusBar().isHidden()
    assert "font-size: 14pt" in window.styleSheet()
    axis_font = window.plot.getPlotItem().getAxis("bottom").style["tickFont"]
    assert axis_font.pointSize() == theme.axis_font_pt
    # leaving presentation restores exactly what was visible before
    apply_theme(window, dark=False, presentation=False)
    assert not window.clutter.isHidden() and not window.statusBar().isHidden()
    assert window.view.curves["symmetric/tensor"].opts["pen"].widthF() == pen_normal


def test_clutter_hidden_before_stays_hidden(window):
    window.clutter.hide()
    apply_theme(window, presentation=True)
    apply_theme(window, presentation=False)
    assert window.clutter.isHidden()


def test_dark_reaches_plots_and_style_sheet(window):
    theme = apply_theme(window, dark=True, presentation=False)
    assert theme.dark
    bg = window.plot.backgroundBrush().color().name()
    assert bg == theme.background.lower() != "#ffffff"
    assert window.view.widget.backgroundBrush().color().name() == bg
    assert f"color: {theme.foreground}" in window.styleSheet()
    label = window.plot.getPlotItem().titleLabel
    assert label.opts["color"] == theme.foreground


def test_resolve_and_every_pen_has_a_width():
    assert resolve(True, False).dark and not resolve(True, True).dark
    for theme in (resolve(False, False), resolve(True, False), resolve(False, True)):
        for role in ("rounding", "clipping", "total", "sqnr", "current", "optimum"):
            assert theme.pen(role).widthF() > 0  # no cosmetic 0-width hairlines
        assert "QMainWindow" in stylesheet(theme)
    assert np.isfinite(resolve(False, True).line_width)
