"""SQNR against bit width (2-8) for each of the four schemes, the current width marked.

Every extra bit halves the step, so where rounding dominates the curve climbs about 6 dB per
bit (the dotted guide); outliers and clipping bend it down, and the gap between per-tensor and
per-channel shows what finer scales buy at each width. Dragging the marker sets the bit width.

Each curve is :func:`quantscope.core.labs.bitwidth.bitwidth_curve` over the pane's own parameter
rules (:func:`quantscope.state.pane_params` with ``bits`` changed), computed by
:class:`quantscope.state.bitwidth.CurvesRequest` in the view's lane of the scheduler, only while
the view is visible.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from quantscope.core.labs.bitwidth import BIT_WIDTHS, BitwidthCurve, ideal_line
from quantscope.gui.jobs import Jobs
from quantscope.gui.style import summary_label
from quantscope.gui.theme import Theme, current_theme, restyle, style_plot
from quantscope.gui.views._legend import fit_columns, legend_below
from quantscope.gui.views.lifecycle import StateView
from quantscope.state import PANES, ExplorerState, Settings, pane_title
from quantscope.state.bitwidth import CurvesRequest, curve_key

#: Colour role and dash per pane: per-tensor blue, per-channel green; asymmetric dashed.
STYLE = {"symmetric/tensor": ("rounding", False), "asymmetric/tensor": ("rounding", True),
         "symmetric/channel": ("sqnr", False), "asymmetric/channel": ("sqnr", True)}

SHORT = {"symmetric/tensor": "sym/tensor", "symmetric/channel": "sym/channel",
         "asymmetric/tensor": "asym/tensor", "asymmetric/channel": "asym/channel"}


#: Lines the summary keeps room for (its text wraps in a tab beside the panes).
SUMMARY_LINES = 3

class BitwidthView(StateView):
    """SQNR (dB) against bits for the four panes' schemes."""

    lane = "view:bitwidth"

    def __init__(self, state: ExplorerState | None = None, parent: QWidget | None = None, *,
                 jobs: Jobs | None = None):
        super().__init__(parent=parent, jobs=jobs)
        self.setObjectName("bitwidthView")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.summary = summary_label(layout, SUMMARY_LINES)
        self.widget = pg.PlotWidget()
        layout.addWidget(self.widget, 1)
        self.plot = self.widget.getPlotItem()
        self.plot.setLabel("bottom", "bits")
        self.plot.setLabel("left", "SQNR (dB)")
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        self.plot.getAxis("bottom").setTicks([[(b, str(b)) for b in BIT_WIDTHS]])
        self.plot.getViewBox().setMouseEnabled(x=False, y=False)
        self.plot.setXRange(BIT_WIDTHS[0] - 0.3, BIT_WIDTHS[-1] + 0.3, padding=0)
        # under the axis: in the top-left corner it hid the 7- and 8-bit points
        self.legend = legend_below(self.plot, labelTextSize="9pt")
        self.guide = pg.PlotDataItem([], [], name="6.02 dB per bit")
        self.plot.addItem(self.guide)
        # symmetric circles, asymmetric squares: tells them apart in the legend and in print
        self.curves = {pane: self.plot.plot([], [], name=pane_title(pane),
                                            symbol="o" if pane.startswith("sym") else "s")
                       for pane in PANES}
        self.current = pg.InfiniteLine(angle=90, movable=True, bounds=(2, 8))
        self.current.setZValue(20)
        self.current.sigPositionChangeFinished.connect(self._on_marker_released)
        self.plot.addItem(self.current, ignoreBounds=True)
        self.data: dict[str, BitwidthCurve] = {}
        restyle(self, current_theme())
        if state is not None:
            self.bind(state)

    def apply_theme(self, theme: Theme) -> None:
        self.widget.setBackground(theme.background)
        style_plot(self.plot, theme)
        for pane, item in self.curves.items():
            role, dashed = STYLE[pane]
            item.setPen(theme.pen(role, dashed=dashed))
            item.setSymbolBrush(theme.brush(role))
            item.setSymbolPen(pg.mkPen(theme.background, width=1))
            item.setSymbolSize(14 if theme.presentation else 8)
        self.guide.setPen(pg.mkPen(theme.color("histogram"), width=max(1.0, theme.line_width / 2),
                                   style=pg.QtCore.Qt.PenStyle.DotLine))
        self.current.setPen(pg.mkPen(theme.color("current"), width=theme.marker_width))
        self._fit_legend()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_legend()

    def _fit_legend(self) -> None:
        """The legend's five entries in as few rows as the width allows: in two columns they
        took three rows, and on a 768-row screen the curves above them were shorter than the
        legend under them."""
        fit_columns(self.plot, self.widget.width(), columns=(3, 2, 1))

    # -- the work (quantscope.state.bitwidth) -----------------------------------------------
    def depends(self, settings: Settings) -> Settings:
        return curve_key(settings)

    def request(self, state: ExplorerState) -> CurvesRequest:
        return CurvesRequest.of(state)

    def follow(self) -> None:
        self.current.setValue(self.state.settings.bits)  # the width in use, marked at once

    def show_computing(self) -> None:
        self.summary.setText("computing SQNR at 2–8 bits…")

    def show_failure(self, message: str) -> None:
        self.summary.setText(f"failed: {message}")

    def show_result(self, curves: dict[str, BitwidthCurve]) -> None:
        key = self.shown_key
        self.data = curves
        best_pane, best = None, -np.inf
        for pane, curve in curves.items():
            ok = np.isfinite(curve.sqnr_db)  # an exact width (inf dB) has no point to draw
            self.curves[pane].setData(curve.bits[ok], curve.sqnr_db[ok])
            if np.isfinite(curve.sqnr_db[-1]) and curve.sqnr_db[-1] > best:
                best_pane, best = pane, float(curve.sqnr_db[-1])
        if best_pane is not None:
            bits = np.array(BIT_WIDTHS, np.float64)
            self.guide.setData(bits, ideal_line(bits, BIT_WIDTHS[-1], best))
        self._retitle(key)
        slopes = [f"{SHORT[p]} {c.db_per_bit():.1f}" for p, c in curves.items()]
        self.summary.setText("dB gained per bit: " + " · ".join(slopes)
                             + " (6.02 when only rounding error remains)")
        self.plot.enableAutoRange(axis=pg.ViewBox.YAxis)

    def _retitle(self, settings: Settings) -> None:
        """Legend names follow the panes' titles (per-channel panes become per-group)."""
        for sample, label in self.legend.items:
            for pane, curve in self.curves.items():
                if sample.item is curve:
                    label.setText(pane_title(pane, settings))

    def _on_marker_released(self) -> None:
        if self.state is None:
            return
        bits = int(np.clip(round(self.current.value()), BIT_WIDTHS[0], BIT_WIDTHS[-1]))
        self.current.setValue(bits)
        if bits != self.state.settings.bits:
            self.state.update_settings(bits=bits)

    def export_data(self) -> dict:
        return {pane: curve.to_dict() for pane, curve in self.data.items()}
