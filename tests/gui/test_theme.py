"""Themes: presentation mode enlarges fonts and lines and hides clutter (and undoes it), dark
reaches plots and widgets (presenting too), and both themes pass contrast checks computed from
their colours."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QMainWindow,
    QStatusBar,
    QVBoxLayout,
    QWidget,
)

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
    theme = apply_theme(window, dark=False, presentation=True, height=720)
    assert theme == Theme(dark=False, presentation=True, text_px=18) == current_theme()
    assert theme.font_pt > normal.font_pt and theme.line_width >= 2 * normal.line_width
    assert window.view.curves["symmetric/tensor"].opts["pen"].widthF() > 2 * pen_normal
    assert window.clutter.isHidden() and window.statusBar().isHidden()
    # every text at the stage's size, the sheet left as it was (a new sheet re-polishes
    # every widget); the application's font too, for what is made later
    assert window.styleSheet() == stylesheet(normal)
    assert window.clutter.font().pointSize() == theme.text_pt == theme.font_pt
    assert window.centralWidget().font().pointSize() == theme.text_pt
    assert QApplication.font().pointSize() == theme.text_pt
    axis_font = window.plot.getPlotItem().getAxis("bottom").style["tickFont"]
    assert axis_font.pointSize() == theme.axis_font_pt
    # leaving presentation restores exactly what was visible before
    apply_theme(window, dark=False, presentation=False)
    assert window.clutter.font().pointSize() == normal.text_pt == 11
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
    assert resolve(True, False).dark and resolve(True, True).dark  # dark rooms exist
    assert resolve(False, True, 720).text_px == 18 and resolve(False, True, 1080).text_px == 24
    for theme in (resolve(False, False), resolve(True, False), resolve(False, True),
                  resolve(True, True)):
        for role in ("rounding", "clipping", "total", "sqnr", "current", "optimum"):
            assert theme.pen(role).widthF() > 0  # no cosmetic 0-width hairlines
        assert "QMainWindow" in stylesheet(theme)
    assert np.isfinite(resolve(False, True).line_width)


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("presentation", [False, True], ids=["desk", "stage"])
def test_every_text_and_mark_contrasts_with_its_background(qapp, dark, presentation):
    """WCAG: text at least 4.5:1, graphical marks at least 3:1 (computed from the colours).
    The style sheet measures the application's font, so it needs the application (``qapp``):
    run first in a fresh worker, without it, Qt aborted the process."""
    from quantscope.gui.theme import MARK_ROLES, contrast_ratio

    theme = resolve(dark, presentation)
    assert contrast_ratio(theme.foreground, theme.background) >= 4.5
    for role, (fg, bg) in theme.text_roles().items():
        assert contrast_ratio(fg, bg) >= 4.5, f"{role}: {fg} on {bg}"
    for role in MARK_ROLES:
        assert contrast_ratio(theme.mark(role), theme.background) >= 3.0, role
    # the sheet draws with these colours, not others
    sheet = stylesheet(theme)
    for role in ("muted", "title", "caption", "error"):
        assert theme.text(role)[0] in sheet


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_the_panes_draw_their_marks_in_contrasting_colours(qtbot, dark):
    """Measured on a pane as drawn: histogram outline, window edges, clipped band, zero line
    and (zoomed in, where each line is drawn apart) the code grid, each 3:1 on the plot; the
    occupancy bars 3:1 on their slots; the zero-point label 4.5:1 on its fill."""
    from quantscope.core import analyze, params_from_range
    from quantscope.gui.pane import Pane
    from quantscope.gui.theme import contrast_ratio, over
    from quantscope.state import overview

    x = np.random.default_rng(0).normal(size=4000).astype(np.float32)
    pane = Pane("asymmetric/tensor", "t")
    qtbot.addWidget(pane)
    pane.resize(600, 400)
    pane.show()
    theme = apply_theme(pane, dark=dark)
    pane.set_overview(overview(x), True)
    params = params_from_range(-1.0, 1.0, symmetric=False)  # clips both tails
    pane.set_report(analyze(x, params))
    assert pane.clip_lo.band.isVisible() and pane.clip_hi.band.isVisible()
    bg = theme.background
    drawn = {"histogram": pane.hist.opts["pen"].color(),
             "window": pane.window.lines[0].pen.color(),
             "clipped": pane.clip_lo.band.brush.color(),
             "zero": pane.zero.pen.color()}
    scale = float(np.asarray(params.scale).reshape(-1)[0])
    pane.plot.setXRange(0, 30 * scale, padding=0)
    drawn["grid"] = pane.grid.pen().color()
    for role, color in drawn.items():
        assert contrast_ratio(over(color, bg), bg) >= 3.0, f"{role}: {color.name()} on {bg}"
    bars, slots = pane.bars.brush().color(), pane.slots.brush().color()
    assert contrast_ratio(over(bars, bg), over(slots, bg)) >= 3.0
    label = pane.zero.label
    assert contrast_ratio(label.color.name(), over(label.fill.color(), bg)) >= 4.5
    apply_theme(pane, dark=False)
