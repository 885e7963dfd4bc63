"""Per-channel (or per-group) detail: which channels cost the most, and why.

Left, three plots sharing the channel axis: each channel's value range (min..max, outlier
channels -- any ``|x| >= threshold``, LLM.int8()'s 6.0 by default -- in vermillion, the
threshold dashed), its scale, and its SQNR (the worst ones marked). Right, the worst channels
as a table, and the histogram of one channel over its *own* code buckets (click a channel in
any plot or a table row). With a group size set the units are groups, numbered in the order
of the per-group parameter array.

Numbers come from the per-channel pane's report (:func:`quantscope.core.labs.explain.channel_table`)
and the engine's quantization of one unit (:func:`quantscope.core.labs.explain.unit_histogram`).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from quantscope.core.labs.explain import (
    OUTLIER_THRESHOLD,
    ChannelTable,
    UnitHistogram,
    channel_table,
    range_segments,
    unit_histogram,
)
from quantscope.core.labs.outliers import axis_outliers, axis_outliers_text
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.stats.report import QuantReport
from quantscope.core.text.formatting import fmt_db, fmt_value
from quantscope.gui.caption_label import line_count
from quantscope.gui.style import reserve_lines, summary_label
from quantscope.gui.theme import Theme, current_theme, restyle, style_plot
from quantscope.gui.views.lifecycle import View
from quantscope.state import ExplorerState

#: Rows in the worst-channels table.
WORST_ROWS = 12
COLUMNS = ("unit", "SQNR dB", "min", "max", "scale", "codes", "outlier")


#: Lines the summary keeps room for until it has its text (which wraps in a tab beside the
#: panes); then the lines that text takes at the summary's width.
SUMMARY_LINES = 3

class ChannelsView(View):
    """Per-channel / per-group ranges, scales, SQNR, worst units and one unit's histogram.

    Its numbers are the per-channel pane's report, drawn on the GUI thread when the panes'
    results change (no work of its own to schedule)."""

    def __init__(self, state: ExplorerState | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("channelsView")
        self.state: ExplorerState | None = None
        self.table_data: ChannelTable | None = None
        self.unit_hist: UnitHistogram | None = None
        self.selected: int | None = None
        self._params: QuantParams | None = None
        self._build()
        restyle(self, current_theme())
        if state is not None:
            self.bind(state)

    # -- construction -------------------------------------------------------------------------
    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        bar = QHBoxLayout()
        self.scheme = QComboBox()
        self.scheme.addItems(["symmetric", "asymmetric"])
        self.threshold = QDoubleSpinBox()
        self.threshold.setDecimals(2)
        self.threshold.setValue(OUTLIER_THRESHOLD)
        self.threshold.setPrefix("outliers |x| ≥ ")
        self.threshold.setRange(0.0, 1e4)  # a shorter box: the views fit beside the panes
        self.threshold.setToolTip("a channel holding any |x| at or above this is an outlier "
                                  "channel (LLM.int8()'s threshold is 6)")
        self.threshold.setProperty("clutter", True)
        self.scheme.currentTextChanged.connect(self.refresh)
        self.threshold.valueChanged.connect(self.refresh)
        bar.addWidget(self.scheme)
        bar.addWidget(self.threshold)
        bar.addStretch(1)
        layout.addLayout(bar)
        self.summary = summary_label(layout, SUMMARY_LINES)
        self._summary_lines = SUMMARY_LINES
        self.summary.installEventFilter(self)

        split = QSplitter(Qt.Orientation.Horizontal)
        self.split = split
        self.graphics = pg.GraphicsLayoutWidget()
        self.range_plot = self.graphics.addPlot(row=0, col=0)
        self.scale_plot = self.graphics.addPlot(row=1, col=0)
        self.sqnr_plot = self.graphics.addPlot(row=2, col=0)
        for plot, label in ((self.range_plot, "value range"), (self.scale_plot, "scale"),
                            (self.sqnr_plot, "SQNR (dB)")):
            plot.setLabel("left", label)
            plot.showGrid(x=False, y=True, alpha=0.15)
            plot.getViewBox().setMouseEnabled(x=True, y=False)
            if plot is not self.range_plot:
                plot.setXLink(self.range_plot)
            if plot is not self.sqnr_plot:  # one set of channel numbers, at the bottom
                plot.getAxis("bottom").setStyle(showValues=False)
        self.sqnr_plot.setLabel("bottom", "channel")
        self.scale_plot.getAxis("left").enableAutoSIPrefix(False)
        self.ranges = pg.PlotDataItem([], [], connect="pairs")
        self.outlier_ranges = pg.PlotDataItem([], [], connect="pairs")
        self.thr_hi = pg.InfiniteLine(angle=0, movable=False)
        self.thr_lo = pg.InfiniteLine(angle=0, movable=False)
        for item in (self.ranges, self.outlier_ranges):
            self.range_plot.addItem(item)
        for item in (self.thr_hi, self.thr_lo):
            self.range_plot.addItem(item, ignoreBounds=True)
        self.scales = pg.PlotDataItem([], [], stepMode=None)
        self.scale_plot.addItem(self.scales)
        self.sqnrs = pg.PlotDataItem([], [], connect="finite")
        self.worst_dots = pg.PlotDataItem([], [], pen=None, symbol="o")
        self.sqnr_plot.addItem(self.sqnrs)
        self.sqnr_plot.addItem(self.worst_dots)
        self.cursors = [pg.InfiniteLine(angle=90, movable=False) for _ in range(3)]
        for plot, cursor in zip((self.range_plot, self.scale_plot, self.sqnr_plot), self.cursors,
                                strict=True):
            plot.addItem(cursor, ignoreBounds=True)
            cursor.hide()
        self.graphics.scene().sigMouseClicked.connect(self._on_plot_clicked)
        split.addWidget(self.graphics)

        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.horizontalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemSelectionChanged.connect(self._on_table_selected)
        rv.addWidget(self.table, 2)
        # at presentation sizes beside the panes the table showed one and a half rows and
        # squeezed the channel histogram until its axis label and ticks overlapped; the
        # speaker picks a channel by clicking the plots, so the table goes with the clutter
        self.table.setProperty("clutter", True)
        self.hist_widget = pg.PlotWidget()
        self.hist_plot = self.hist_widget.getPlotItem()
        self.hist_plot.setLabel("bottom", "value")
        self.hist_plot.getAxis("bottom").enableAutoSIPrefix(False)
        self.hist_plot.setLabel("left", "log₁₀(1 + n) per code")
        self.hist_plot.getViewBox().setMouseEnabled(x=True, y=False)
        self.window_region = pg.LinearRegionItem(movable=False)
        self.window_region.setZValue(-10)
        self.hist_plot.addItem(self.window_region, ignoreBounds=True)
        self.bucket_hist = pg.PlotDataItem([], [], stepMode="center", fillLevel=0)
        self.hist_plot.addItem(self.bucket_hist)
        rv.addWidget(self.hist_widget, 3)
        for plot in (self.range_plot, self.scale_plot, self.sqnr_plot, self.hist_plot):
            for side in ("left", "bottom"):
                # labelled ticks only: the minor ones, a tenth of a label's step apart, drew
                # a comb along the short axes at presentation sizes
                plot.getAxis(side).setStyle(maxTickLevel=0)
        self.unit_label = QLabel("")
        self.unit_label.setWordWrap(True)
        rv.addWidget(self.unit_label)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout.addWidget(split, 1)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        # plots beside the table when there is room; above it in a narrow tab
        want = (Qt.Orientation.Vertical if self.width() < 1.2 * self.height()
                else Qt.Orientation.Horizontal)
        if self.split.orientation() != want:
            self.split.setOrientation(want)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if obj is self.summary and event.type() == QEvent.Type.Resize:
            self._fit_summary()
        return False

    def _fit_summary(self) -> None:
        """Room for the lines the summary's text takes at its width: three lines kept for a
        narrow tab left an empty band above the plots when the view is full width."""
        text = self.summary.text()
        width = self.summary.contentsRect().width()
        if not text or width <= 0:
            return
        lines = line_count(QFontMetricsF(self.summary.font()), text, width)
        if lines != self._summary_lines:
            self._summary_lines = lines
            reserve_lines(self.summary, lines)

    def apply_theme(self, theme: Theme) -> None:
        self._theme = theme
        for w in (self.graphics, self.hist_widget):
            w.setBackground(theme.background)
        for plot in (self.range_plot, self.scale_plot, self.sqnr_plot, self.hist_plot):
            style_plot(plot, theme)
        w = max(1.0, theme.line_width * 0.75)
        self.ranges.setPen(pg.mkPen(theme.color("range"), width=w))
        self.outlier_ranges.setPen(pg.mkPen(theme.color("outlier"), width=w * 1.5))
        for line in (self.thr_hi, self.thr_lo):
            line.setPen(theme.pen("outlier", width_scale=0.6, dashed=True))
        self.scales.setPen(theme.pen("rounding"))
        self.sqnrs.setPen(theme.pen("sqnr"))
        self.worst_dots.setSymbolBrush(theme.brush("clipping"))
        self.worst_dots.setSymbolPen(pg.mkPen(theme.background, width=1.5))
        self.worst_dots.setSymbolSize(13 if theme.presentation else 8)
        for cursor in self.cursors:
            cursor.setPen(pg.mkPen(theme.color("current"), width=theme.marker_width * 0.5))
        self.bucket_hist.setPen(theme.pen("histogram", width_scale=0.7))
        self.bucket_hist.setBrush(theme.brush("rounding", 110))
        self.window_region.setBrush(theme.brush("sqnr", 30))
        for line in self.window_region.lines:
            line.setPen(pg.mkPen(theme.color("sqnr"), width=theme.line_width))

    # -- binding ------------------------------------------------------------------------------
    def bind(self, state: ExplorerState) -> None:
        """Follow ``state``: redraw when the per-channel panes get new reports."""
        self.state = state
        state.results_changed.connect(self.refresh)
        state.tensor_changed.connect(self._on_state_tensor_changed)
        self.refresh()

    def _on_state_tensor_changed(self) -> None:
        self.selected = None

    def pane(self) -> str:
        return f"{self.scheme.currentText()}/channel"

    def report(self) -> QuantReport | None:
        if self.state is None:
            return None
        rep = self.state.results.get(self.pane())
        return rep if rep is not None and rep.per_channel is not None else None

    def refresh(self) -> None:
        """Redraw everything from the current per-channel report (when visible: a hidden
        view defers the work to its next show, keeping slider drags light)."""
        if not self.on_screen():
            return
        rep = self.report()
        if rep is None:
            return
        table = channel_table(rep, self.threshold.value())
        previous = self.table_data
        if previous is None or (previous.kind, len(previous)) != (table.kind, len(table)):
            self.selected = None  # other units now (channels <-> groups): start at the worst
        self.table_data, self._params = table, rep.params
        unit_word = "group" if table.kind == "group" else "channel"
        self.sqnr_plot.setLabel("bottom", unit_word)
        xs, ys = range_segments(table)
        self.ranges.setData(xs, ys)
        oxs, oys = range_segments(table, table.outliers)
        self.outlier_ranges.setData(oxs, oys)
        self.thr_hi.setValue(table.threshold)
        self.thr_lo.setValue(-table.threshold)
        self.scales.setData(table.unit, table.scale)
        self.sqnrs.setData(table.unit, np.where(np.isfinite(table.sqnr_db), table.sqnr_db,
                                                np.nan))  # exact channels leave a gap
        worst = table.worst[:WORST_ROWS]
        worst = worst[np.isfinite(table.sqnr_db[worst])]
        self.worst_dots.setData(worst, table.sqnr_db[worst])
        self._fill_table(table)
        n_out = table.outliers.size
        first = int(table.worst[0])
        n = len(table)
        self.summary.setText(
            f"{n} {unit_word}{'s' if n != 1 else ''}; {n_out} outlier "
            f"{unit_word}{'s' if n_out != 1 else ''} (|x| ≥ {fmt_value(table.threshold)}); "
            f"worst {unit_word} {first}: {fmt_db(table.sqnr_db[first])}, median "
            f"{fmt_db(np.median(table.sqnr_db))}" + self._axes_text(table.threshold))
        self._fit_summary()
        if self.selected is None or self.selected >= len(table):
            self.selected = first
        self.select_unit(self.selected)

    def _axes_text(self, threshold: float) -> str:
        """Outlier channels counted along every axis of the tensor (an input-channel outlier
        of a weight quantized per output channel shows only along axis 1)."""
        ov = self.state.overview if self.state is not None else None
        if ov is None or ov.channel_abs_max is None:
            return ""
        return "; " + axis_outliers_text(axis_outliers(ov.channel_abs_max, threshold))

    def _fill_table(self, table: ChannelTable) -> None:
        rows = table.worst[:WORST_ROWS]
        self.table.blockSignals(True)
        self.table.setRowCount(len(rows))
        for r, unit in enumerate(rows):
            row = table.row(int(unit))
            cells = (str(row["unit"]), f"{row['sqnr_db']:.2f}", fmt_value(row["x_min"]),
                     fmt_value(row["x_max"]), f"{row['scale']:.4g}",
                     str(row["codes_used"]), "yes" if row["outlier"] else "")
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, int(unit))
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, item)
        self.table.blockSignals(False)

    # -- selecting one unit -----------------------------------------------------------------
    def select_unit(self, unit: int) -> None:
        """Show ``unit``'s own histogram over its own code buckets and mark it in the plots."""
        if self.state is None or self._params is None or self.state.tensor is None:
            return
        unit = int(unit)
        if not 0 <= unit < len(self.table_data):
            return
        self.selected = unit
        h = unit_histogram(self.state.tensor, self._params, unit)
        self.unit_hist = h
        self.bucket_hist.setData(h.edges, h.log_counts)
        self.window_region.setRegion(h.window)
        row = self.table_data.row(unit)
        word = "group" if self.table_data.kind == "group" else "channel"
        self.hist_plot.setTitle(f"{word} {unit}")
        self.unit_label.setText(f"<b>{word} {unit}</b>: {h.codes_used} of {h.counts.size} codes "
                                f"used, SQNR {fmt_db(row['sqnr_db'])}, scale {h.scale:.3g}, "
                                f"{h.clipped_below + h.clipped_above} clipped")
        self.hist_plot.setToolTip(f"scale {h.scale:.6g}, zero point {h.zero_point}, window "
                                  f"[{fmt_value(h.window[0])}, {fmt_value(h.window[1])}]")
        # show the unit's data (and its window) rather than all 256 buckets of empty space
        lo = min(h.x_min, h.window[0] if h.clipped_below else h.x_min)
        hi = max(h.x_max, h.window[1] if h.clipped_above else h.x_max)
        pad = 0.04 * (hi - lo) if hi > lo else 1.0
        self.hist_plot.setXRange(lo - pad, hi + pad, padding=0)
        self.hist_plot.enableAutoRange(axis=pg.ViewBox.YAxis)
        for cursor in self.cursors:
            cursor.setValue(unit)
            cursor.show()

    def _on_table_selected(self) -> None:
        items = self.table.selectedItems()
        if items:
            self.select_unit(items[0].data(Qt.ItemDataRole.UserRole))

    def _on_plot_clicked(self, event) -> None:
        if self.table_data is None:
            return
        for plot in (self.range_plot, self.scale_plot, self.sqnr_plot):
            vb = plot.getViewBox()
            if vb.sceneBoundingRect().contains(event.scenePos()):
                x = vb.mapSceneToView(event.scenePos()).x()
                self.select_unit(int(np.clip(round(x), 0, len(self.table_data) - 1)))
                return

    def export_data(self) -> dict:
        """The table of every unit (for CSV/JSON export)."""
        if self.table_data is None:
            return {}
        t = self.table_data
        return {"pane": self.pane(), "kind": t.kind, "threshold": t.threshold,
                "units": [t.row(i) for i in range(len(t))]}
