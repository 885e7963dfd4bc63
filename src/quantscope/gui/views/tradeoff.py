"""The rounding-vs-clipping trade-off: error split against the clip threshold, per scheme.

Two plots side by side (symmetric, asymmetric; in a narrow tab one at a time, with a picker,
so neither shrinks below readable). Each shows rounding MSE (grows as the window
widens: bigger steps), clipping MSE (shrinks: fewer values cut off) and their sum on a log
axis, SQNR on a second axis, the optimum (least total MSE) and the current threshold. Dragging
the current-threshold line sets a manual clip (``state.update_settings(method="manual",
manual_clip=...)``) and every pane follows live; when the panes change by any other control,
the lines follow the panes. A threshold ``t`` clips the values with ``|x| > t`` and nothing
else, in both schemes (:func:`quantscope.core.stats.sweep.window_for_threshold`; the axis label
says which side(s) that cuts), so both lines always agree.

All numbers come from :func:`quantscope.core.stats.sweep.clip_sweep_curve` (exact reports, run by
:class:`quantscope.state.tradeoff.SweepRequest` in the view's lane of the scheduler, once the
panes have their numbers and the controls rest, stopping early when superseded) and from the
panes' reports. On a first run, while the optimum's search is still being compiled, the curves
come first: no "best" is drawn and the summary says the optimum is being computed.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QBoxLayout,
    QComboBox,
    QGraphicsItem,
    QVBoxLayout,
    QWidget,
)

from quantscope.core.labs.explain import clip_threshold, threshold_sides
from quantscope.core.stats.sweep import ClipSweep
from quantscope.core.text.formatting import fmt_db, fmt_value
from quantscope.gui.jobs import Jobs
from quantscope.gui.style import reserve_lines, summary_label
from quantscope.gui.theme import Theme, current_theme, restyle, style_plot
from quantscope.gui.views._legend import fit_columns, legend_below
from quantscope.gui.views.lifecycle import StateView
from quantscope.state import ExplorerState, PaneKey, Settings
from quantscope.state.tradeoff import SCHEMES, SweepRequest, Sweeps, sweep_key, sweep_points

#: Quiet time after the panes' last update before a sweep starts (see Lane.submit).
SETTLE_MS = 250


def _positive(a: np.ndarray) -> np.ndarray:
    """Log axes cannot show 0: leave those points out (drawn as gaps)."""
    return np.where(a > 0, a, np.nan)


def _finite_points(x, y) -> tuple[np.ndarray, np.ndarray]:
    """Only the drawable points (symbols of NaN/inf points make pyqtgraph warn)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    ok = np.isfinite(y)
    return x[ok], y[ok]


#: How visible a curve of the previous settings stays while the new sweep is computed.
STALE_OPACITY = 0.25
#: Where the clip line's label sits: its top this fraction of the plot's height up from the
#: bottom edge (near the top, where it is easy to find while dragging).
CLIP_LABEL_AT = 0.94
#: Pixels between the clip line's label and the highest curve under it.
LANE_GAP_PX = 4


#: What the summary says for "best" while the MSE optimum's search is still being compiled (a
#: first run): in the window it follows; a picture is drawn without it.
OPTIMUM_PENDING = "best: computing the optimum (first run)…"
OPTIMUM_PENDING_STILL = "best: not drawn (first run: the optimum's search still compiles)"

#: Lines the summary keeps room for: a line per scheme and the hint (one more when a narrow tab
#: shows one scheme, whose line then wraps).
SUMMARY_LINES = 3


class _SchemePlot:
    """One scheme's plot: items created once, updated with setData."""

    def __init__(self, plot: pg.PlotItem, title: str, with_legend: bool) -> None:
        self.plot = plot
        plot.setTitle(title)
        plot.setLogMode(x=False, y=True)
        plot.setLabel("left", "MSE")
        plot.getAxis("left").enableAutoSIPrefix(False)  # "(x0.001)" on a log axis misleads
        plot.setLabel("bottom", "clip threshold t")
        # thresholds below one drew as 0 ... 700 with the "(x0.001)" cut off a narrow label,
        # beside a clip line labelled 0.53: the values themselves
        plot.getAxis("bottom").enableAutoSIPrefix(False)
        plot.showGrid(x=True, y=True, alpha=0.12)
        plot.getViewBox().setMouseEnabled(x=True, y=False)
        if with_legend:
            # under the x axis, outside the view box: every corner of the plot holds a curve
            # (clipping starts top-left, rounding rises bottom-left, SQNR peaks top-right)
            legend_below(plot, labelTextSize="9pt")
        self.rounding = plot.plot([], [], name="rounding", connect="finite")
        self.clipping = plot.plot([], [], name="clipping", connect="finite")
        self.total = plot.plot([], [], name="total", connect="finite")
        # SQNR on its own axis (right), sharing x
        self.sqnr_box = pg.ViewBox()
        plot.showAxis("right")
        plot.scene().addItem(self.sqnr_box)
        plot.getAxis("right").linkToView(self.sqnr_box)
        plot.getAxis("right").setLabel("SQNR (dB)")
        plot.getAxis("right").setLogMode(False, False)  # setLogMode(y=True) reached it too
        for side in ("left", "bottom", "right"):  # blitted while their range stays put
            plot.getAxis(side).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.sqnr_box.setXLink(plot)
        self.sqnr = pg.PlotDataItem([], [], connect="finite")
        self.sqnr_box.addItem(self.sqnr)
        if with_legend:
            plot.legend.addItem(self.sqnr, "SQNR")
        plot.getViewBox().sigResized.connect(self._sync_boxes)
        # labelled lines: the audience reads "best" and "clip" without a legend. Two anchors:
        # pyqtgraph puts a label on the side of its line nearer the view's centre, whenever the
        # view moves or resizes, so a line near either edge keeps its label in view
        self.best_line = pg.InfiniteLine(angle=90, movable=False, label="best",
                                         labelOpts={"position": 0.08, "anchors": [(0, 1), (1, 1)]})
        self.best_dot = pg.PlotDataItem([], [], pen=None, symbol="o", symbolSize=11)
        self.current = pg.InfiniteLine(angle=90, movable=True, label="clip {value:.3g}",
                                       labelOpts={"position": CLIP_LABEL_AT,
                                                  "anchors": [(0, 0), (1, 0)]})
        self.current.setHoverPen(pg.mkPen("#E69F00", width=6))
        self.current.setZValue(20)
        self.best_line.setZValue(10)
        # the dot lies on the total curve, which the range holds: counted, its symbol's size
        # padded the range, and pyqtgraph pads by the largest symbol the item ever drew, so
        # the x axis came back from a talk (its bigger dot) wider than it left
        for item in (self.best_line, self.current, self.best_dot):
            plot.addItem(item, ignoreBounds=True)
        self.name = title
        self.sweep: ClipSweep | None = None
        #: The sweep's optimum is still to come (see :class:`Sweeps`): no best is shown.
        self.optimum_pending = False

    def _sync_boxes(self) -> None:
        self.sqnr_box.setGeometry(self.plot.getViewBox().sceneBoundingRect())
        self.sqnr_box.linkedViewChanged(self.plot.getViewBox(), self.sqnr_box.XAxis)
        self._leave_lane()

    def _leave_lane(self) -> None:
        """Both y ranges with a lane above the curves as deep as the clip line's label
        reaches down: drawn over the curves, the label hid the top of the SQNR curve, which
        peaks near the clip when the clip is near the best. The lane's share of the height
        follows the plot's height (the label is a fixed number of pixels)."""
        box = self.plot.getViewBox()
        height = box.height()
        if height <= 0:
            return
        reach = (1 - CLIP_LABEL_AT) * height + self.current.label.boundingRect().height()
        lane = min((reach + LANE_GAP_PX) / height, 0.5)
        for view in (box, self.sqnr_box):
            bounds = view.childrenBounds()[1]
            if bounds is None or not np.all(np.isfinite(bounds)):
                continue
            lo, hi = bounds
            span = (hi - lo) or 1.0
            below = span * view.suggestPadding(pg.ViewBox.YAxis)  # as auto-range pads
            view.setYRange(lo - below, hi + span * lane / (1 - lane), padding=0)

    def style(self, theme: Theme) -> None:
        style_plot(self.plot, theme)
        self.rounding.setPen(theme.pen("rounding"))
        self.clipping.setPen(theme.pen("clipping"))
        self.total.setPen(theme.pen("total", width_scale=1.3))
        self.sqnr.setPen(theme.pen("sqnr", dashed=True))
        self.best_line.setPen(theme.pen("optimum", width_scale=0.8, dashed=True))
        self.best_dot.setSymbolPen(pg.mkPen(theme.background, width=2))
        self.best_dot.setSymbolBrush(theme.brush("optimum"))
        self.best_dot.setSymbolSize(18 if theme.presentation else 11)
        self.current.setPen(pg.mkPen(theme.color("current"), width=theme.marker_width))
        font = QFont()
        font.setPointSize(theme.axis_font_pt)
        font.setBold(True)
        for line, role in ((self.current, "current"), (self.best_line, "optimum")):
            line.label.setColor(theme.color(role))
            line.label.setFont(font)
            line.label.fill = pg.mkBrush(theme.background)
        self.current.setHoverPen(pg.mkPen(theme.color("current"),
                                          width=theme.marker_width * 1.8))

    def set_stale(self, stale: bool) -> None:
        """Fade the curves and hide the best point while a new sweep is computed (and while
        its optimum is still to come)."""
        for item in (self.rounding, self.clipping, self.total, self.sqnr):
            item.setOpacity(STALE_OPACITY if stale else 1.0)
        for item in (self.best_line, self.best_dot):
            item.setVisible(not stale and not self.optimum_pending)

    def set_sweep(self, sweep: ClipSweep, optimum_pending: bool = False) -> None:
        self.sweep = sweep
        self.optimum_pending = optimum_pending
        t = sweep.thresholds
        self.rounding.setData(t, _positive(sweep.rounding_mse))
        self.clipping.setData(t, _positive(sweep.clipping_mse))
        self.total.setData(t, _positive(sweep.mse))
        finite = np.where(np.isfinite(sweep.sqnr_db), sweep.sqnr_db, np.nan)
        self.sqnr.setData(t, finite)
        best_t, best_mse = sweep.best_threshold, sweep.best_mse
        self.best_line.setValue(best_t)
        self.best_dot.setData(*_finite_points([best_t], _positive(np.array([best_mse]))))
        self.best_line.setToolTip(f"least total MSE at |x| = {fmt_value(best_t)}")
        self.current.setBounds((float(t[0]), float(t[-1])))
        # which side(s) a threshold cuts: dragging moves only those ends of the window
        # (the long side on the axis, whose width a side tab narrows; the whole rule in the
        # axis's tooltip)
        sides = threshold_sides(sweep.x_min, sweep.x_max)
        self.plot.setLabel("bottom", f"t: {sides.split(',')[0]}")
        self.plot.getAxis("bottom").setToolTip(f"t: {sides}")
        # labels given explicitly, only inside the MSE values' range: pyqtgraph's automatic
        # log ticks drop every label once a short axis needs more than one decade per tick,
        # and label decades in the empty lane above the curves
        axis = self.plot.getAxis("left")
        ticks = sweep.mse_ticks()
        step = 1 if len(ticks) <= 9 else 2
        major = ticks[::step]
        axis.setTicks([list(zip(major, axis.logTickStrings(major, 1.0, 1.0), strict=True)),
                       [(d, "") for d in ticks if d not in major]])
        self.plot.getViewBox().enableAutoRange(axis=pg.ViewBox.XAxis)
        self._leave_lane()


class TradeoffView(StateView):
    """Rounding vs clipping error against the clip threshold (see the module docstring)."""

    lane = "view:tradeoff"
    settle_ms = SETTLE_MS

    def __init__(self, state: ExplorerState | None = None, parent: QWidget | None = None, *,
                 jobs: Jobs | None = None, still: bool = False):
        super().__init__(parent=parent, jobs=jobs)
        self.setObjectName("tradeoffView")
        # a picture (``qs.figure``) cannot be dragged: its summary says what the marks are
        self._hint = ("The orange line is the clip shown" if still else
                      "Drag the orange line to clip")
        # a picture is drawn once: it does not wait for an optimum still being compiled
        self._still = still
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.summary = summary_label(layout, SUMMARY_LINES)
        # in a narrow tab one plot at a time, full height, with this picker (hidden when wide)
        self.scheme = QComboBox()
        self.scheme.addItems([name for name, _ in SCHEMES])
        self.scheme.currentTextChanged.connect(lambda _: (self._arrange(force=True),
                                                          self._update_summary()))
        self.scheme.hide()
        layout.addWidget(self.scheme)
        # one plot widget per scheme in a Qt box layout: hiding one in a narrow tab is then
        # plain widget hiding (re-parenting plot items inside one pyqtgraph layout loses the
        # log axis' tick labels)
        self.plot_box = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        self.plot_box.setSpacing(4)
        layout.addLayout(self.plot_box, 1)
        self.widgets: dict[str, pg.PlotWidget] = {}
        self.plots: dict[str, _SchemePlot] = {}
        self._vertical = False
        for name, _ in SCHEMES:
            widget = pg.PlotWidget()
            self.widgets[name] = widget
            self.plot_box.addWidget(widget, 1)
            self.plots[name] = _SchemePlot(widget.getPlotItem(), name.capitalize(),
                                           with_legend=True)
            # sigDragged fires for the user's drags only; programmatic moves (following the
            # panes, clamping to new bounds) must never turn into a manual clip
            self.plots[name].current.sigDragged.connect(
                lambda line, n=name: self._on_marker_moved(n, line))
        self._arrange(force=True)
        self._syncing = False
        self.job.partial.connect(self._on_partial)
        restyle(self, current_theme())
        if state is not None:
            self.bind(state)

    # -- binding ------------------------------------------------------------------------------
    def bind(self, state: ExplorerState) -> None:
        """Follow ``state``: recompute the sweep when the tensor or the rules change, move the
        markers when the panes' results change."""
        super().bind(state)
        if state.results:
            self._on_results_changed()

    def _reserve_summary_height(self) -> None:
        """Room for the summary's longest text, so "computing the sweep…" and back never
        resize the plots (each resize regenerated every axis, four times a change)."""
        vertical = getattr(self, "_vertical", False)
        reserve_lines(self.summary, SUMMARY_LINES + 1 if vertical else SUMMARY_LINES)

    def apply_theme(self, theme: Theme) -> None:
        for widget in self.widgets.values():
            widget.setBackground(theme.background)
        for plot in self.plots.values():
            plot.style(theme)
        self._fit_legends()

    # -- the work (quantscope.state.tradeoff) ------------------------------------------------
    def depends(self, settings: Settings) -> tuple:
        return sweep_key(settings)

    def request(self, state: ExplorerState) -> SweepRequest:
        return SweepRequest.of(state, wait_for_optimum=not self._still)

    def _on_partial(self, outcome) -> None:
        """The curves, while the optimum is still to come (a first run's compile)."""
        key, sweeps = outcome
        self.shown_key = key
        self.show_result(sweeps)

    def show_computing(self) -> None:
        """The curves drawn belong to the previous settings: faded, and their best point
        hidden, until the new sweep replaces them (the panes' new clip line crossed old
        curves that still said where the best was)."""
        self.summary.setText("computing the sweep…")
        for plot in self.plots.values():
            plot.set_stale(True)

    def show_stale(self) -> None:
        """The settings the sweep depends on changed: the old curves fade and their best
        point goes at once, not only once the new sweep starts (the panes' new numbers and
        the marker on the new clip line arrive before it)."""
        for plot in self.plots.values():
            plot.set_stale(True)

    def show_progress(self, fraction: float) -> None:
        self.summary.setText(f"computing the sweep… {100 * fraction:.0f}%")

    def show_failure(self, message: str) -> None:
        self.summary.setText(f"sweep failed: {message}")

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._arrange()
        self._fit_legends()

    def _fit_legends(self) -> None:
        width = self.width() - 12  # the layout's margins
        for plot in self.plots.values():
            fit_columns(plot.plot, width if self._vertical else width / 2)

    def _arrange(self, force: bool = False) -> None:
        """Side by side when there is room; in a narrow tab beside the panes, one scheme at a
        time at full height (two stacked plots would be too short to read from a room)."""
        narrow = self.width() < 1.2 * self.height()
        if narrow == self._vertical and not force:
            return
        self._vertical = narrow
        self._reserve_summary_height()
        self._update_summary()  # the schemes and the lines it lists follow the arrangement
        self.scheme.setVisible(narrow)
        for k, (name, _) in enumerate(SCHEMES):
            shown = not narrow or name == self.scheme.currentText()
            self.widgets[name].setVisible(shown)
            # one legend is enough side by side
            self.plots[name].plot.legend.setVisible(narrow or k == 0)

    def on_show(self) -> None:
        # pyqtgraph re-renders a line's label only while it is visible: values set while
        # another tab was showing would leave the old text
        for plot in self.plots.values():
            plot.current.label.valueChanged()
            plot.best_line.label.valueChanged()

    def show_result(self, sweeps: Sweeps) -> None:
        for name, sweep in sweeps.by_scheme.items():
            self.plots[name].set_sweep(sweep, sweeps.optimum_pending)
            self.plots[name].set_stale(False)
        self._update_summary()
        self._on_results_changed()

    def on_results_changed(self) -> None:
        """Put each marker on its pane's current threshold (without echoing it back)."""
        self._syncing = True
        try:
            for name, _ in SCHEMES:
                rep = self._scheme_report(name)
                plot = self.plots[name]
                if rep is None:
                    continue
                if not plot.current.moving:  # never fight the user's drag
                    plot.current.setValue(clip_threshold(rep.params))
        finally:
            self._syncing = False
        self._update_summary()

    def _scheme_report(self, name: str):
        """The per-tensor pane's report of scheme ``name`` (None in the comparison layout,
        where the panes show other formats)."""
        if self.state is None or self.state.settings.formats is not None:
            return None
        return self.state.results.get(PaneKey.of(name == "symmetric", "tensor"))

    def _update_summary(self) -> None:
        """Current and best clip per scheme, in a label that wraps (plot titles would force
        a minimum width and get cut off in a narrow tab)."""
        lines = []
        for name, _ in SCHEMES:
            if self._vertical and name != self.scheme.currentText():
                continue  # narrow: only the scheme on show
            sweep = self.plots[name].sweep
            rep = self._scheme_report(name)
            parts = []
            if rep is not None:
                parts.append(f"clip |x| ≤ {fmt_value(clip_threshold(rep.params))} gives "
                             f"{fmt_db(rep.sqnr_db, 2)}")
            if sweep is not None and self.plots[name].optimum_pending:
                parts.append(OPTIMUM_PENDING_STILL if self._still else OPTIMUM_PENDING)
            elif sweep is not None:
                parts.append(f"best |x| ≈ {fmt_value(sweep.best_threshold)} gives "
                             f"{fmt_db(sweep.best_sqnr_db)}")
            if parts:
                # narrow, one scheme on show: a clause per line, where a line of both wrapped
                # anywhere ("best |x| ≈" / "21.2 gives 16.0 dB"), in the same lines' room
                lines.append(f"<b>{name}</b>: " + (";<br>" if self._vertical else "; ")
                             .join(parts))
        pending = any(plot.optimum_pending for plot in self.plots.values())
        hint = self._hint + ("." if pending else "; the dot marks the best.")  # no dot yet
        text = "<br>".join(lines) + "<br>" + hint
        if lines and text != self.summary.text():
            self.summary.setText(text)

    # -- view -> state --------------------------------------------------------------------------
    def _on_marker_moved(self, name: str, line: pg.InfiniteLine) -> None:
        if self._syncing or self.state is None:
            return
        sweep = self.plots[name].sweep
        if sweep is None:
            return
        t = float(line.value())
        if t <= 0:
            return
        # the other scheme's line shows the same threshold at once
        self._syncing = True
        try:
            for other, plot in self.plots.items():
                if other != name:
                    plot.current.setValue(t)
        finally:
            self._syncing = False
        self.state.update_settings(method="manual", manual_clip=sweep.window(t))

    def set_threshold(self, t: float, scheme: str = "symmetric") -> None:
        """Move a marker as a drag would (tests and keyboard control)."""
        line = self.plots[scheme].current
        line.setValue(float(t))
        self._on_marker_moved(scheme, line)

    def export_data(self) -> dict:
        """The sweeps' numbers (for CSV/JSON export)."""
        data = {name: plot.sweep.to_dict() for name, plot in self.plots.items()
                if plot.sweep is not None}
        for name, plot in self.plots.items():
            if name in data and plot.optimum_pending:  # the curve's least point: no best
                del data[name]["best_threshold"]
        return data


__all__ = ["TradeoffView", "sweep_points"]
