"""The integer matmul lab: int8 A × int8 W → int32 → int8, and what outlier fixes buy.

Pick A (activations) and W (weights) -- the bundled MiniLM layer-0 pair by default, a
generator, or a file --, each side's scheme, the output and the requantization (LiteRT's
reference single rounding, XNNPACK's float32 path or gemmlowp's double rounding), then drag
SmoothQuant's α and LLM.int8()'s threshold. Every control change becomes one immutable
:class:`~quantscope.state.matmul_lab.LabRequest`, run in the view's one
:class:`~quantscope.gui.jobs.Lane` of the live state's scheduler (the newest request wins;
stale results are dropped).
The result of :func:`quantscope.core.labs.outliers.quantized_matmul` is drawn as it is: the big
numbers are :func:`~quantscope.state.matmul_lab.display_text` of it, the plots its error
array and per-channel SQNR, with the plain path (no fix) as a grey ghost for comparison.

A bad file shows a message and the previous operands stay (the combo boxes go back to them).
"""

from __future__ import annotations

import os

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QBoxLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from quantscope.gui.caption_label import PhraseLabel
from quantscope.gui.jobs import Jobs, Lane
from quantscope.gui.theme import Theme, current_theme, restyle, style_plot
from quantscope.gui.tight_lines import tighten
from quantscope.gui.views._legend import fit_columns, legend_below
from quantscope.gui.views.lifecycle import View
from quantscope.gui.views.matmul_controls import LabControls
from quantscope.state.matmul_lab import (
    REAL_A,
    REAL_W,
    LabCache,
    LabOutcome,
    LabRequest,
    Operand,
)

#: Below this width the numbers stack above the plots (the window's default split gives the
#: tabs ~40% of the screen; F9 gives them all of it).
NARROW_PX = 900
#: The widest the numbers beside the plots get, per column.
SIDE_MAX_PX = 720
#: The numbers' groups in the first column when there are two (the SQNR and the accumulator;
#: saturation, zero points and the outlier split beside them).
FIRST_COLUMN = 2
#: The big numbers, in reading order: (key in display_text, caption).
NUMBERS = (("sqnr", "SQNR vs float A·W"), ("headroom", "int32 accumulator headroom"),
           ("saturated", "Saturation"), ("zero_points", "Zero-point cost"),
           ("outliers", "LLM.int8() split"))
DETAILS = {"sqnr": ("sqnr_plain", "max_error"), "headroom": ("accumulator", "safe_k"),
           "saturated": ("saturated_detail",), "zero_points": ("zp_detail",),
           "outliers": ("outliers_detail",)}


class MatmulView(View):
    """The Matmul lab (see the module docstring). ``outcome`` is the last result shown.

    It follows its own controls, not the explorer's state: a control change builds the
    :class:`LabRequest` and submits it (when on screen)."""

    outcome_changed = Signal(object)
    error_shown = Signal(str)

    def __init__(self, state=None, parent: QWidget | None = None, *,
                 jobs: Jobs | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("matmulView")
        self.outcome: LabOutcome | None = None
        self.cache = LabCache()
        self.job = Lane("view:matmul", jobs, self)
        self.job.finished.connect(self._on_outcome)
        self.job.failed.connect(self._on_failed)
        self._good: tuple[Operand, Operand] = (REAL_A, REAL_W)
        self._pending_request: LabRequest | None = None
        self._chan_pens: dict = {}
        self._row_width = 0  # the controls' width side by side (see _fit_controls)
        self._build()
        restyle(self, current_theme())
        if state is not None:
            self.bind(state)

    def bind(self, state) -> None:
        """The lab has its own two operands; the explorer's tensor does not drive it."""

    # -- construction -------------------------------------------------------------------------
    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        self.controls = LabControls()
        self.controls.changed.connect(self._schedule)
        self.controls.error.connect(self._show_error)
        self.controls.order.currentIndexChanged.connect(self._draw_channels)
        # in a narrow tab the controls scroll sideways instead of widening the whole window
        self.controls_area = QScrollArea()
        self.controls_area.setWidget(self.controls)
        self.controls_area.setWidgetResizable(True)
        self.controls_area.setFrameShape(QFrame.Shape.NoFrame)
        self.controls_area.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.controls_area.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.controls_area.horizontalScrollBar().rangeChanged.connect(self._fit_controls)
        layout.addWidget(self.controls_area)

        self.message = QLabel("")
        self.message.setObjectName("banner")
        self.message.setWordWrap(True)
        self.message.hide()
        layout.addWidget(self.message)

        body = self.body = QHBoxLayout()
        panel = QVBoxLayout()
        # a font with tall lines makes none of the numbers' lines taller than their letters
        # need (see gui/tight_lines.py): at 1280x720 in a talk its empty room pushed the
        # last lines of the left column below the fold
        self.shapes = tighten(PhraseLabel(), every_line=True)
        panel.addWidget(self.shapes)
        # the numbers in groups (caption, big number, details) that stand in one column or,
        # when one column is taller than the tab, in two (see _fit_controls)
        columns = self.columns_box = QHBoxLayout()
        columns.setSpacing(12)
        self.columns = (QVBoxLayout(), QVBoxLayout())
        for column in self.columns:
            column.addStretch(1)
            columns.addLayout(column)
        panel.addLayout(columns)
        self.captions, self.values, self.details = {}, {}, {}
        self.groups: dict[str, QWidget] = {}
        for key, caption in NUMBERS:
            group = self.groups[key] = QWidget()
            lines = QVBoxLayout(group)
            lines.setContentsMargins(0, 0, 0, 6)
            lines.setSpacing(2)
            cap = tighten(QLabel(caption))
            # the numbers break between their phrases rather than run out of a narrow tab
            # ("14.5 bits spa", "K ≤ 10" cut off at 1600 px; "for K ≤" / "105,026" wrapped)
            value = tighten(PhraseLabel(), every_line=True)
            value.setText("…")
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.captions[key], self.values[key] = cap, value
            lines.addWidget(cap)
            lines.addWidget(value)
            for detail in DETAILS.get(key, ()):
                self.details[detail] = tighten(PhraseLabel(), every_line=True)
                lines.addWidget(self.details[detail])
        self._columns = 0
        self._arrange(1)
        self.path = QLabel("")
        for clutter in (self.path, self.details["max_error"],
                        self.details["saturated_detail"]):  # hidden when presenting
            clutter.setProperty("clutter", True)
        panel.addWidget(self.path)
        panel.addStretch(1)
        side = QWidget()
        side.setLayout(panel)
        self.side = side
        # beside the plots the numbers scroll on their own, so the plots keep the tab's height
        # (at 1280x720 in a talk a column of big numbers pushed the per-channel plot out of view)
        self.side_area = QScrollArea()
        self.side_area.setWidget(side)
        self.side_area.setWidgetResizable(True)
        self.side_area.setFrameShape(QFrame.Shape.NoFrame)
        self.side_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.side_area.setMaximumWidth(SIDE_MAX_PX)
        body.addWidget(self.side_area, 3)
        self.graphics = pg.GraphicsLayoutWidget()
        self.hist_plot = self.graphics.addPlot(row=0, col=0)
        self.chan_plot = self.graphics.addPlot(row=1, col=0)
        self.hist_plot.setTitle("Output error: int8 path − float A·W")
        self.hist_plot.setLabel("bottom", "error")
        self.hist_plot.setLabel("left", "outputs")
        self.hist_plot.setLogMode(x=False, y=True)
        self.chan_plot.setTitle("SQNR per output channel")  # the dashed line: the total
        self.chan_plot.setLabel("bottom", "output channel n")
        self.chan_plot.setLabel("left", "dB")  # the title says SQNR: a short label fits 720 rows
        for plot in (self.hist_plot, self.chan_plot):
            plot.showGrid(x=True, y=True, alpha=0.15)
        # both plots draw the same two paths in the same colours: one legend, under the lower
        # plot's axis (floating in a corner it covered the bell's tail and the curve's end)
        legend_below(self.chan_plot, labelTextSize="9pt")
        # dots as well as lines: a lone tail bin (a saturated output) has no neighbour to join
        self.hist_plain = self.hist_plot.plot([], [], name="without fixes", connect="finite",
                                              symbol="o")
        self.hist_now = self.hist_plot.plot([], [], name="current", connect="finite",
                                            symbol="o")
        self.chan_plain = self.chan_plot.plot([], [], pen=None, symbol="o", symbolSize=4,
                                              name="without fixes")
        self.chan_now = self.chan_plot.plot([], [], pen=None, symbol="o", symbolSize=4,
                                            name="current")
        self.chan_total = pg.InfiniteLine(angle=0, movable=False)
        self.chan_total_label = pg.InfLineLabel(self.chan_total, "", position=0.06,
                                                anchors=[(0, 1), (0, 1)])
        self.chan_plot.addItem(self.chan_total, ignoreBounds=True)
        body.addWidget(self.graphics, 7)
        # narrow tab: numbers above the plots, scrolled vertically (see _fit_controls)
        self.body_area = QScrollArea()
        self.body_area.setWidgetResizable(True)
        self.body_area.setFrameShape(QFrame.Shape.NoFrame)
        self.body_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        content = QWidget()
        content.setLayout(body)
        body.setContentsMargins(0, 0, 0, 0)
        self.body_area.setWidget(content)
        layout.addWidget(self.body_area, 1)

    def apply_theme(self, theme: Theme) -> None:
        """Big numbers (shown in talks), thick lines; the plain path in grey."""
        pt = theme.font_pt
        self.graphics.setBackground(theme.background)
        for plot in (self.hist_plot, self.chan_plot):
            style_plot(plot, theme)
        grey = theme.brush("histogram", 150)
        self.hist_plain.setPen(pg.mkPen(grey, width=theme.line_width))
        self.hist_now.setPen(theme.pen("rounding", width_scale=1.2))
        for item, brush in ((self.hist_plain, grey), (self.hist_now, theme.brush("rounding"))):
            item.setSymbolBrush(brush)
            item.setSymbolPen(None)
            item.setSymbolSize(9 if theme.presentation else 5)
        size = 7 if theme.presentation else 4
        self.chan_plain.setSymbolBrush(grey)
        self.chan_plain.setSymbolPen(None)
        self.chan_now.setSymbolBrush(theme.brush("rounding", 200))
        self.chan_now.setSymbolPen(None)
        for item in (self.chan_plain, self.chan_now):
            item.setSymbolSize(size)
        self._chan_pens = {self.chan_plain: pg.mkPen(grey, width=theme.line_width),
                           self.chan_now: theme.pen("rounding", width_scale=1.2)}
        self._draw_channels()
        self.chan_total.setPen(theme.pen("current", dashed=True))
        fg, muted = theme.foreground, "#9AA0A6" if theme.dark else "#555B66"
        # presenting, no text under the theme's size (the projector's minimum)
        least = pt if theme.presentation else 0

        def size(points: float) -> int:
            return max(least, round(points))

        for key, label in self.values.items():
            big = pt * 1.4 + 10 if key in ("sqnr", "headroom") else pt * 1.0 + 3.5
            label.setStyleSheet(f"font-size: {size(big)}pt; font-weight: 700;"
                                f" color: {fg};")
        for label in self.captions.values():
            label.setStyleSheet(f"font-size: {size(pt * 0.7 + 3.5)}pt; color: {muted};")
        for label in (*self.details.values(), self.shapes):
            label.setStyleSheet(f"font-size: {size(pt * 0.75 + 3.5)}pt; color: {fg};")
        self.path.setStyleSheet(f"font-size: {pt}pt; color: {muted};")
        self.chan_total_label.setColor(theme.color("current"))
        font = QFont()
        font.setPointSize(theme.axis_font_pt)
        font.setBold(True)
        self.chan_total_label.setFont(font)
        self.controls.set_stacked(False)  # measured again in the new font
        self._fit_controls()

    # -- controls -> request ------------------------------------------------------------------
    def _schedule(self, *_args, user: bool = True) -> None:
        """A control changed: request what the controls say now. No timer of the view's own
        holds a dragged value back: the lane keeps only the newest request (a queued one is
        replaced, a running one's result dropped), as the panes' reports do."""
        if user:
            self._clear_error()
        self._submit()

    def request(self) -> LabRequest:
        """The immutable request the controls stand for now."""
        return self.controls.request()

    def load_file(self, side: str, path: str | os.PathLike, tensor: str | None = None) -> None:
        """Use a file's tensor as ``side`` ("A" or "W"); a failure keeps the previous operands
        and shows the reason."""
        self.controls.load_file(side, path, tensor)

    def refresh(self) -> None:
        """Compute what the controls say (see :meth:`_schedule`)."""
        self._submit()

    def _submit(self) -> None:
        if not self.on_screen():
            return  # computed when first shown: a hidden tab costs nothing
        req = self._pending_request = self.request()
        cache = self.cache
        self.job.submit(lambda ctx: cache.run(req))

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._fit_controls()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_controls()
        fit_columns(self.chan_plot, self.graphics.width())

    def _fit_controls(self) -> None:
        """The controls side by side when they fit, else each side's scheme under its
        source; their own height, plus the sideways scroll bar when even that does not fit;
        in a narrow tab the numbers go above the plots instead of beside them."""
        controls = self.controls
        if not controls.stacked:  # the width the controls need side by side, in this font
            self._row_width = controls.minimumSizeHint().width()
        # decided on screen only: a tab not shown keeps the size it last had (or Qt's
        # default), and the controls decide again when it is shown (showEvent)
        if self.isVisible():
            controls.set_stacked(self.controls_area.width() < self._row_width)
            # the side-by-side minimum lets the combo boxes shrink to a few letters: where
            # that cuts a choice ("half away from 0 (TFLit", "per output chan" at a desk's
            # 1280 px), side by side needs more than this width. Not in a talk: at 720 rows
            # the three rows stacking adds are the numbers' (a wide font's last lines went
            # below the fold)
            if not (controls.stacked or current_theme().presentation) \
                    and controls.cut_choices():
                self._row_width = self.controls_area.width() + 1
                controls.set_stacked(True)
        bar = self.controls_area.horizontalScrollBar()
        self.controls_area.setFixedHeight(self.controls.sizeHint().height()
                                          + (bar.sizeHint().height() if bar.maximum() else 0))
        narrow = self.width() < NARROW_PX
        self.body.setDirection(QBoxLayout.Direction.TopToBottom if narrow
                               else QBoxLayout.Direction.LeftToRight)
        two = not narrow and self._one_column_overflows()
        self._arrange(2 if two else 1)
        # two columns of numbers take about half the width (each nearly as wide as the one)
        self.body.setStretchFactor(self.side_area, 0 if narrow else 8 if two else 3)
        self.side_area.setMaximumWidth(SIDE_MAX_PX * (2 if two else 1))
        self.graphics.setMinimumHeight(560 if narrow else 0)
        # above the plots the whole body scrolls: the numbers show in full there
        policy = Qt.ScrollBarPolicy
        self.side_area.setVerticalScrollBarPolicy(
            policy.ScrollBarAlwaysOff if narrow else policy.ScrollBarAsNeeded)
        self.side_area.setMinimumHeight(self.side.minimumSizeHint().height() if narrow else 0)

    def _one_column_overflows(self) -> bool:
        """Whether the numbers in one column beside the plots are taller than the tab has
        room for: in a talk at 1280x720 the saturation, zero-point and outlier numbers (what
        the sliders change) were below the fold of a scrolled column.

        In one column this is the column's own height for its width. In two, it is that of
        the groups stacked at the one column's width, with a line to spare, so that a
        height at the edge does not switch back and forth."""
        room = self.body_area.viewport().height()
        if room <= 0:
            return False
        layout = self.side.layout()
        if self._columns == 1:
            return layout.totalHeightForWidth(self.side_area.viewport().width()) > room
        share = self.body.stretch(self.body.indexOf(self.graphics))
        width = min(SIDE_MAX_PX, (self.body_area.viewport().width() - self.body.spacing())
                    * 3 / (3 + share))
        margins = layout.contentsMargins()
        width = round(width) - margins.left() - margins.right()
        shown = [w for w in (self.shapes, *self.groups.values(), self.path)
                 if not w.isHidden() and not (isinstance(w, QLabel) and not w.text())]
        needed = sum(w.heightForWidth(width) if w.hasHeightForWidth()
                     else w.sizeHint().height() for w in shown)
        needed += layout.spacing() * len(shown) + margins.top() + margins.bottom()
        return needed + self.shapes.fontMetrics().lineSpacing() > room

    def _arrange(self, columns: int) -> None:
        """The numbers' groups in ``columns`` (1 or 2) columns, in reading order."""
        if columns == self._columns:
            return
        self._columns = columns
        for column in self.columns:
            for group in self.groups.values():
                column.removeWidget(group)
        for i, group in enumerate(self.groups.values()):
            column = self.columns[0 if columns == 1 or i < FIRST_COLUMN else 1]
            column.insertWidget(column.count() - 1, group)  # before the column's stretch
        # the first column holds the two biggest numbers ("14.5 bits spare" on one line);
        # alone, it has the whole width
        self.columns_box.setStretch(0, 6)
        self.columns_box.setStretch(1, 0 if columns == 1 else 5)

    # -- results ------------------------------------------------------------------------------
    def _on_outcome(self, outcome: LabOutcome) -> None:
        self.outcome = outcome
        req = outcome.request
        self._good = (req.a, req.w)
        text = outcome.text
        self.shapes.setText(text["shapes"])
        for key, label in self.values.items():
            label.setText(text[key])
        for key, label in self.details.items():
            label.setText(text[key])
        self.path.setText(text["path"])
        self.side.layout().activate()  # line counts changed: lay out now, not on next event
        self._fit_controls()
        self.hist_plain.setData(outcome.hist_centres, outcome.plain_counts)
        self.hist_now.setData(outcome.hist_centres, outcome.hist_counts)
        self._draw_channels()
        total = outcome.result.vs_float.sqnr_db
        self.chan_total.setValue(total if np.isfinite(total) else 0.0)
        self.chan_total_label.setFormat(f"total {text['sqnr']}")
        self.outcome_changed.emit(outcome)

    def _draw_channels(self) -> None:
        outcome = self.outcome
        if outcome is None:
            return
        ranked = self.controls.order.currentData()
        x = outcome.channels
        self.chan_plain.setData(x, outcome.plain_sorted_sqnr if ranked
                                else outcome.plain_channel_sqnr)
        self.chan_now.setData(x, outcome.sorted_sqnr if ranked else outcome.channel_sqnr)
        self.chan_plot.setLabel("bottom", "output channels, worst first" if ranked
                                else "output channel n")
        for item in (self.chan_plain, self.chan_now):  # a curve when sorted, dots otherwise
            item.setSymbol(None if ranked else "o")
            item.setPen(self._chan_pens[item] if ranked else None)

    def _on_failed(self, message: str) -> None:
        self._show_error(message)
        good_a, good_w = self._good
        reverted = False
        for side, good in (("A", good_a), ("W", good_w)):
            if self.controls.spec(side) != good:
                self.controls.select(side, good)
                reverted = True
        if reverted:  # recompute with the previous operands and the current schemes
            self._schedule(user=False)

    def _show_error(self, message: str) -> None:
        self.message.setText(message)
        self.message.show()
        self.error_shown.emit(message)

    def _clear_error(self) -> None:
        self.message.hide()
        self.message.setText("")

    def figure_widgets(self) -> list[QWidget]:
        """What an export of this view holds: the numbers beside the plots and the plots
        (not the operand controls above them)."""
        return [self.side, self.graphics]

    def export_data(self) -> dict:
        """The shown numbers and texts, for the window's CSV/JSON export (empty before the
        first result)."""
        if self.outcome is None:
            return {}
        res, req = self.outcome.result, self.outcome.request
        rep = res.int8
        return {
            "a": req.a.label(), "w": req.w.label(), "alpha": req.alpha,
            "threshold": req.threshold, "requantization": req.requantization,
            "sqnr_db": res.vs_float.sqnr_db, "plain_sqnr_db": self.outcome.plain.vs_float.sqnr_db,
            "mse": res.vs_float.mse, "max_abs_error": res.vs_float.max_abs_error,
            "accumulator_min": rep.accumulator_min, "accumulator_max": rep.accumulator_max,
            "headroom_bits": rep.headroom_bits, "max_safe_k": rep.max_safe_k,
            "accumulator_overflows": rep.accumulator_overflows,
            "output_saturated": res.output_saturated,
            "zero_point_terms_per_output": rep.zero_point_terms_per_output,
            "outlier_columns": res.outlier_columns.tolist(),
            "sqnr_db_per_channel": res.vs_float.sqnr_db_per_channel.tolist(),
            "text": dict(self.outcome.text),
        }

    # -- lifetime -----------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Join the view's job (no work outlives the view)."""
        super().shutdown()


__all__ = ["MatmulView"]
