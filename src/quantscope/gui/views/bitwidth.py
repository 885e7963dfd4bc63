"""SQNR against bit width (2-8) for each of the four schemes, the current width marked.

Every extra bit halves the step, so where rounding dominates the curve climbs about 6 dB per
bit (the dotted guide); outliers and clipping bend it down, and the gap between per-tensor and
per-channel shows what finer scales buy at each width. Dragging the marker sets the bit width.

Each curve is :func:`quantscope.core.bitwidth.bitwidth_curve` over the pane's own parameter
rules (:func:`quantscope.state.pane_params` with ``bits`` changed), computed in a background
job, only while the view is visible.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from quantscope.core.bitwidth import BIT_WIDTHS, BitwidthCurve, bitwidth_curve, ideal_line
from quantscope.errors import Cancelled
from quantscope.gui.jobs import Jobs, Lane
from quantscope.gui.style import summary_label
from quantscope.gui.theme import Theme, current_theme, style_plot
from quantscope.gui.views._legend import fit_columns, legend_below
from quantscope.state import PANES, ExplorerState, Settings, analyze_with, pane_params, pane_title

#: Colour role and dash per pane: per-tensor blue, per-channel green; asymmetric dashed.
STYLE = {"symmetric/tensor": ("rounding", False), "asymmetric/tensor": ("rounding", True),
         "symmetric/channel": ("sqnr", False), "asymmetric/channel": ("sqnr", True)}

SHORT = {"symmetric/tensor": "sym/tensor", "symmetric/channel": "sym/channel",
         "asymmetric/tensor": "asym/tensor", "asymmetric/channel": "asym/channel"}


def _curves_for(x: np.ndarray, prepared, settings: Settings,
                should_stop=lambda: False) -> dict[str, BitwidthCurve]:
    """The four curves for one tensor and settings (runs in the background job; stops early
    with Cancelled when ``should_stop()`` says the result is no longer wanted)."""
    curves = {}
    for pane in PANES:
        def params_for_bits(b: int, pane: str = pane):
            time.sleep(0)  # let the GUI thread run between reports
            if should_stop():
                raise Cancelled
            # the int schemes at every width, also while the panes compare formats
            return pane_params(x, pane, dataclasses.replace(settings, bits=b, formats=None),
                               prepared=prepared)

        curves[pane] = bitwidth_curve(params_for_bits, lambda p: analyze_with(x, prepared, p))
    return curves


#: Lines the summary keeps room for (its text wraps in a tab beside the panes).
SUMMARY_LINES = 3

class BitwidthView(QWidget):
    """SQNR (dB) against bits for the four panes' schemes."""

    themed = True

    def __init__(self, state: ExplorerState | None = None, parent: QWidget | None = None, *,
                 jobs: Jobs | None = None):
        super().__init__(parent)
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
        self.state: ExplorerState | None = None
        self.job = Lane("view:bitwidth", jobs, self)
        self.job.finished.connect(self._on_curves_ready)
        self.job.failed.connect(lambda msg: self.summary.setText(f"failed: {msg}"))
        self._key: Settings | None = None
        self._dirty = True
        self._stale = True
        self.apply_theme(current_theme())
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
        fit_columns(self.plot, self.widget.width())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        fit_columns(self.plot, self.widget.width())

    # -- binding ------------------------------------------------------------------------------
    def bind(self, state: ExplorerState) -> None:
        self.state = state
        state.tensor_changed.connect(self._on_state_tensor_changed)
        state.prepared_changed.connect(self._on_state_tensor_changed)
        state.settings_changed.connect(self._on_state_settings_changed)
        state.results_changed.connect(self._on_state_results_changed)
        self._on_state_tensor_changed()

    # Curves are requested once the panes have their numbers, so they never compete with the
    # panes' own computation for a control change.
    def _on_state_tensor_changed(self) -> None:
        self._stale = True
        self.job.cancel()
        if self.state is not None and self.state.tensor is not None:
            self.current.setValue(self.state.settings.bits)
            if self.state.results:
                self._request()

    def _on_state_results_changed(self) -> None:
        if self._stale and self.state is not None and self.state.results:
            self._request(delay_ms=250)  # when the hand rests (see Lane.submit)

    @staticmethod
    def _curve_key(settings: Settings) -> Settings:
        # the curves span every width, and stay the int schemes' in the comparison layout
        return dataclasses.replace(settings, bits=8, formats=None)

    def _on_state_settings_changed(self) -> None:
        if self.state is None:
            return
        self.current.setValue(self.state.settings.bits)
        if self.job.busy:  # the panes are about to compute: step aside, resume afterwards
            self.job.cancel()
            self._stale = True
        if self._curve_key(self.state.settings) != self._key:
            self._stale = True

    def _request(self, delay_ms: int = 0) -> None:
        if self.state is None or self.state.tensor is None:
            return
        self.current.setValue(self.state.settings.bits)
        if not self.isVisible():
            self._dirty = True
            return
        self._dirty = self._stale = False
        x, prepared, settings = self.state.tensor, self.state.prepared, self.state.settings
        key = self._curve_key(settings)
        self.summary.setText("computing SQNR at 2–8 bits…")
        self.job.submit(lambda ctx: (key, _curves_for(x, prepared, settings, ctx.stale)),
                        delay_ms=delay_ms)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._dirty:
            self._request()

    def _on_curves_ready(self, result) -> None:
        key, curves = result
        self._key, self.data = key, curves
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

    def closeEvent(self, event) -> None:
        self.job.shutdown()
        super().closeEvent(event)

    def export_data(self) -> dict:
        return {pane: curve.to_dict() for pane, curve in self.data.items()}
