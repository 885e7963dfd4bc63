"""The Mapping view: a few typed or pasted values, the real axis above, the int8 code cells
below, an arrow from each value to its code -- symmetric above asymmetric -- and, with "cast
without clamp", what a bare ``astype(np.int8)`` stores instead of the clamp.

The real axis is drawn on the code axis scaled by the scheme's step: a value ``x`` sits above
position ``x / s + z``, so each arrow leans by exactly the rounding it undergoes. Every number
comes from :mod:`quantscope.core.labs.mapping` (the engine's parameters and arithmetic); this module
only draws them.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFont, QFontInfo, QFontMetrics
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QGraphicsTextItem,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from quantscope.core.labs.mapping import (
    DEFAULT_VALUES,
    INT8,
    CastResult,
    SchemeMapping,
    cast_without_clamp,
    map_values,
    parse_values,
)
from quantscope.core.tensors.validate import EngineValueError
from quantscope.gui.style import summary_label
from quantscope.gui.theme import Theme, current_theme, restyle, style_plot
from quantscope.gui.views._code_axis import CodeRangeAxis
from quantscope.gui.views.lifecycle import View

#: Values shown with their own labels (more would overlap; the arrows still show them all).
LABELLED = 8
#: Added to the values when "cast without clamp" is switched on over the default example.
WRAP_EXAMPLE = 20.0
WRAP_SCALE = 0.1


def _text(values) -> str:
    return ", ".join(f"{v:g}" for v in values)


def _error(e: float, scale: float) -> str:
    """An error as shown: float32 rounding noise far below the step reads as 0."""
    return "±0" if abs(e) < scale * 1e-4 else f"{e:+.2g}"


def _label_rows(at, texts, *, span, px: float, char_px: float, rows: int = 3,
                anchors=None) -> list[int]:
    """A row (0 to ``rows - 1``) for each label so that none overlaps the one before it in
    its row, or -1 when no row has room (the value then goes unlabelled). ``anchors`` says
    where each label hangs from its position (0 left edge, 0.5 centre, 1 right edge)."""
    per_code = px / max(span[1] - span[0], 1e-9)
    anchors = [0.5] * len(texts) if anchors is None else anchors
    ends = [-np.inf] * rows
    out = [-1] * len(texts)
    for i in np.argsort(np.asarray(at, np.float64), kind="stable"):
        width = len(texts[i]) * char_px / per_code
        left, right = at[i] - anchors[i] * width, at[i] + (1 - anchors[i]) * width
        for r in range(rows):
            if left > ends[r]:
                ends[r] = right + 8 / per_code
                out[i] = r
                break
    return out


def _text_item_line(font: QFont) -> tuple[float, float]:
    """(height of one line of text, margin around it) of a text item in ``font``, in
    pixels: what a label under the codes takes."""
    item = QGraphicsTextItem("0")
    item.setFont(font)
    margin = item.document().documentMargin()
    return item.boundingRect().height() - 2 * margin, margin


def _nice_ticks(a: float, b: float, count: int = 5) -> list[float]:
    """Round values (1, 2 or 5 times a power of ten apart) between ``a`` and ``b``."""
    raw = (b - a) / count
    power = 10.0 ** np.floor(np.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = np.ceil(a / step) * step
    return [float(v) + 0.0 for v in np.round(np.arange(first, b + step / 2, step) / step)
            * step if a <= v <= b]


class MappingView(View):
    """See the module docstring."""

    defers_while_hidden = False  # a few values: computed at once, drawn when shown (_draw)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        self.summary = summary_label(layout, 2)
        self.summary.setText("each value x (on the real axis, top) goes to the int8 code "
                             "round(x / s) + z (the cells, bottom); the arrow leans by the "
                             "rounding, and the code comes back as s · (q − z)")
        row = QHBoxLayout()
        row.addWidget(QLabel("values"))
        self.values_edit = QLineEdit(_text(DEFAULT_VALUES))
        self.values_edit.setToolTip("up to 64 numbers, separated by commas or spaces")
        self.values_edit.editingFinished.connect(self.refresh)
        row.addWidget(self.values_edit, 1)
        self.wrap_box = QCheckBox("cast without clamp")
        self.wrap_box.setToolTip("what naive code stores: astype(np.int8) wraps around where "
                                 "the clamp saturates")
        self.wrap_box.toggled.connect(self._wrap_toggled)
        row.addWidget(self.wrap_box)
        self.scale_box = QDoubleSpinBox()
        self.scale_box.setDecimals(4)
        self.scale_box.setRange(1e-4, 1e4)
        self.scale_box.setValue(WRAP_SCALE)
        self.scale_box.setPrefix("s = ")
        self.scale_box.setKeyboardTracking(False)
        self.scale_box.valueChanged.connect(self.refresh)
        self.scale_box.hide()
        row.addWidget(self.scale_box)
        layout.addLayout(row)
        self.error = QLabel("")
        self.error.setObjectName("paneError")
        self.error.hide()
        layout.addWidget(self.error)
        grid = self.grid = QGridLayout()
        self.info: dict[str, QLabel] = {}
        self.plots: dict[str, pg.PlotWidget] = {}
        for i, name in enumerate(("symmetric", "asymmetric", "cast")):
            info = QLabel("")
            info.setWordWrap(True)
            info.setMinimumWidth(240)
            info.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
            plot = pg.PlotWidget(axisItems={"bottom": CodeRangeAxis("bottom")})
            plot.setMenuEnabled(False)
            plot.setMouseEnabled(x=True, y=False)
            plot.hideAxis("left")
            plot.showAxis("top")
            plot.setMinimumHeight(120)
            grid.addWidget(info, i, 0)
            grid.addWidget(plot, i, 1)
            grid.setColumnStretch(1, 1)
            self.info[name], self.plots[name] = info, plot
        layout.addLayout(grid, 1)
        self.mappings: tuple[SchemeMapping, SchemeMapping] | None = None
        self.cast: CastResult | None = None
        self._unpainted = False  # a draw put off while on a tab not shown (see _draw)
        restyle(self, current_theme())
        # the labels' rows follow the plots' height in pixels: redrawn once a resize settles
        self._redraw = QTimer(self)
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(0)
        self._redraw.timeout.connect(lambda: self.mappings is not None and self._draw())
        self.refresh()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._redraw.start()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._unpainted:  # before the tab's first paint, not a turn later
            self._paint()
        self._redraw.start()

    # -- model ----------------------------------------------------------------------------------
    def set_values(self, values) -> None:
        """Show ``values`` (a sequence of numbers, or text as typed)."""
        self.values_edit.setText(values if isinstance(values, str) else _text(values))
        self.refresh()

    def _wrap_toggled(self, on: bool) -> None:
        if on and WRAP_EXAMPLE not in self._values_or_default():
            self.values_edit.setText(self.values_edit.text() + f", {WRAP_EXAMPLE:g}")
        self.scale_box.setVisible(on)
        self.refresh()

    def _values_or_default(self) -> list[float]:
        try:
            return parse_values(self.values_edit.text()).tolist()
        except EngineValueError:
            return list(DEFAULT_VALUES)

    def refresh(self) -> None:
        """Recompute from the fields and redraw; a bad entry is said, the figure kept."""
        try:
            x = parse_values(self.values_edit.text())
            mappings = map_values(x)
            cast = cast_without_clamp(x, self.scale_box.value()) if self.wrap_box.isChecked() \
                else None
        except EngineValueError as exc:
            self.error.setText(f"⚠  {exc}")
            self.error.show()
            return
        self.error.hide()
        self.mappings, self.cast = mappings, cast
        self._draw()

    def figure_widgets(self) -> list[QWidget]:
        """What an export of this view holds: the sentence, each scheme's numbers and
        figure (not the fields that set them)."""
        if self._unpainted:
            self._paint()
        return [self.summary, *self.info.values(), *self.plots.values()]

    def is_ready(self) -> bool:
        return self.mappings is not None and not (self._unpainted and self.isVisible())

    def export_data(self) -> dict:
        if self.mappings is None:
            return {}
        out = {}
        for m in self.mappings:
            out["symmetric" if m.symmetric else "asymmetric"] = {
                "values": m.values.tolist(), "scale": m.scale, "zero_point": m.zero_point,
                "codes": m.codes.tolist(), "dequantized": m.dequantized.tolist(),
                "errors": m.errors.tolist(), "max_error": m.max_error,
                "unreachable": [list(r) for r in m.unreachable]}
        if self.cast is not None:
            c = self.cast
            out["cast_without_clamp"] = {"scale": c.scale, "unclamped": c.unclamped.tolist(),
                                         "clamped": c.clamped.tolist(),
                                         "wrapped": c.wrapped.tolist(),
                                         "wrap_count": c.wrap_count}
        return out

    # -- drawing --------------------------------------------------------------------------------
    def apply_theme(self, theme: Theme) -> None:
        self._theme = theme
        for plot in self.plots.values():
            plot.setBackground(theme.background)
            style_plot(plot.getPlotItem(), theme)
        # a line of tick text between the two schemes: the symmetric plot's code labels
        # (-64 0 64) sat just above the asymmetric plot's value labels, two "0"s in a column
        font = self.plots["symmetric"].getPlotItem().getAxis("bottom").style["tickFont"]
        self.grid.setVerticalSpacing(QFontMetrics(font or self.font()).height())
        if self.mappings is not None:
            self._draw()

    def _draw(self) -> None:
        """The numbers beside each figure, and which figures show, at once; the figures
        themselves only if the view is on screen, else when it is shown (or exported): they
        are ~50 ms of items and labels, and the window's build and every theme change drew
        them on a tab no one could see."""
        for m in self.mappings:
            name = "symmetric" if m.symmetric else "asymmetric"
            # a range is one phrase: wrapped inside, "-128" ended a line and "… -43" began
            # the next
            never = (", ".join(f'<span style="white-space:nowrap">{lo} … {hi}</span>'
                               for lo, hi in m.unreachable) if m.unreachable else "none")
            self.info[name].setText(
                f"<b>{name}</b><br>s = {m.scale:.6g}<br>z = {m.zero_point}<br>"
                f"max |error| = {m.max_error:.3g}<br>codes never used: {never}")
        cast_plot, cast_info = self.plots["cast"], self.info["cast"]
        wrap = self.cast is not None  # the switch turns the figure into the cast's
        for name in ("symmetric", "asymmetric"):
            self.plots[name].setVisible(not wrap)
            self.info[name].setVisible(not wrap)
        cast_plot.setVisible(wrap)
        cast_info.setVisible(wrap)
        if self.cast is not None:
            c = self.cast
            worst = int(np.argmax(np.abs(c.unclamped)))
            cast_info.setText(
                f"<b>cast without clamp</b><br>s = {c.scale:g}, z = {c.zero_point}<br>"
                f"x = {c.values[worst]:g} → {c.unclamped[worst]} → clamp "
                f"{c.clamped[worst]} ({c.clamped_back[worst]:.4g})<br>astype(int8): "
                f"{c.wrapped[worst]} ({c.wrapped_back[worst]:.4g})<br>"
                f"{c.wrap_count} of {c.values.size} would wrap, {c.sign_flips} flip sign")
        if not self.isVisible():
            self._unpainted = True
            return
        self._paint()

    def _paint(self) -> None:
        """The figures of :meth:`_draw`."""
        self._unpainted = False
        theme = self._theme
        for m in self.mappings:
            name = "symmetric" if m.symmetric else "asymmetric"
            self._draw_scheme(self.plots[name].getPlotItem(), m.values, m.scale, m.zero_point,
                              m.codes, m.unreachable, theme)
        if self.cast is not None:
            c = self.cast
            self._draw_scheme(self.plots["cast"].getPlotItem(), c.values, c.scale,
                              c.zero_point, c.clamped, (), theme, wrapped=c.wrapped)

    def _draw_scheme(self, plot: pg.PlotItem, values, scale, zp, codes, unreachable,
                     theme: Theme, wrapped=None) -> None:
        plot.clear()
        x = np.asarray(values, np.float64)
        pos = x / scale + zp  # where each value sits over the code axis
        lo, hi = INT8
        # values beyond the codes (a cast without clamp) stay in view, past the last cell
        x0, x1 = min(lo, float(pos.min())) - 4, max(hi, float(pos.max())) + 4
        # the code cells: every int8 code a slot, the used ones filled, the never-used shaded
        cells = pg.BarGraphItem(x=np.arange(lo, hi + 1), height=0.3, width=0.9, y0=0.0,
                                brush=pg.mkBrush("#3A3A3A" if theme.dark else "#E4E7EC"),
                                pen=pg.mkPen(None))
        plot.addItem(cells)
        never = np.concatenate([np.arange(a, b + 1) for a, b in unreachable]) if unreachable \
            else np.zeros(0)
        if never.size:
            plot.addItem(pg.BarGraphItem(x=never, height=0.3, width=1.0, y0=0.0,
                                         brush=pg.mkBrush(theme.mark("grid")),
                                         pen=pg.mkPen(None)))
        used = np.unique(np.clip(codes, lo, hi))
        plot.addItem(pg.BarGraphItem(x=used, height=0.3, width=0.9, y0=0.0,
                                     brush=pg.mkBrush(theme.mark("histogram")),
                                     pen=pg.mkPen(None)))
        # the real axis as a line at the top, the values on it
        plot.plot([x0, x1], [1.0, 1.0], pen=pg.mkPen(theme.foreground, width=1.5))
        plot.plot(pos, np.ones_like(pos), pen=None, symbol="o", symbolSize=10,
                  symbolBrush=pg.mkBrush(theme.mark("histogram")), symbolPen=None)
        arrow_pen = pg.mkPen(theme.foreground, width=max(1.5, theme.line_width * 0.6))
        for p, q in zip(pos, np.clip(codes, lo, hi), strict=True):
            plot.plot([p, q], [0.95, 0.35], pen=arrow_pen)
        plot.plot(np.clip(codes, lo, hi).astype(float), np.full(len(codes), 0.38), pen=None,
                  symbol="t", symbolSize=12, symbolBrush=pg.mkBrush(theme.foreground),
                  symbolPen=None)
        if wrapped is not None:
            bad = wrapped != codes
            wrap_pen = pg.mkPen(theme.color("clipping"), width=arrow_pen.widthF(),
                                style=Qt.PenStyle.DashLine)
            for p, q in zip(pos[bad], wrapped[bad], strict=True):
                plot.plot([p, q], [0.95, 0.35], pen=wrap_pen)
                label = pg.TextItem(f"astype(int8): {q} → {scale * (q - zp):.3g}",
                                    color=theme.color("clipping"), anchor=(0.5, 1.0))
                font = label.textItem.font()
                font.setPointSize(theme.axis_font_pt)
                label.setFont(font)
                label.setPos(q, 0.33)
                plot.addItem(label)
            plot.plot(wrapped[bad].astype(float), np.full(int(bad.sum()), 0.38), pen=None,
                      symbol="t", symbolSize=12, symbolBrush=pg.mkBrush(theme.color("clipping")),
                      symbolPen=None)
        # the labels under the codes go in rows of text measured in pixels: in data units a
        # short plot (two schemes at 720 rows) stacked them into each other and the axis.
        # A row is a line of the labels' text as a text item lays it out and a pixel, and
        # below the last one the margin the item keeps above its text and a pixel: rows a
        # line and a quarter of the text's size apart put the third row's letters on the
        # code axis
        font = QFont()
        font.setPointSize(theme.axis_font_pt)
        line_px, margin = _text_item_line(font)
        line_px += 1
        height = plot.getViewBox().height() or 150.0
        below_px = margin + 1
        rows = max(0, min(3, int((height - 60.0 - below_px) // line_px))) \
            if x.size <= LABELLED else 0
        below_px = below_px if rows else 0.0
        # px per unit, cells to axis
        per_unit = max((height - rows * line_px - below_px) / 1.2, 1.0)
        step = line_px / per_unit
        if rows:
            deq = scale * (np.clip(codes, lo, hi) - zp)
            shown = np.clip(codes, lo, hi)
            texts = [f"{q} → {d:.3g} ({_error(d - v, scale)})"
                     for q, v, d in zip(shown, x, deq, strict=True)]
            # labels at the ends hang inward, so they stay in the plot
            anchors = [0.0 if q < x0 + 20 else 1.0 if q > x1 - 20 else 0.5 for q in shown]
            placed = _label_rows(shown, texts, span=(x0, x1), px=plot.width() or 1000,
                                 char_px=0.62 * QFontInfo(font).pixelSize(), rows=rows,
                                 anchors=anchors)
            for q, text, row, ax in zip(shown, texts, placed, anchors, strict=True):
                if row < 0:
                    continue  # no room: the arrow and its code still show it
                below = pg.TextItem(text, color=theme.foreground, anchor=(ax, 0.0))
                below.setPos(q, -0.02 - step * row)
                below.setFont(font)
                plot.addItem(below)
        plot.setXRange(x0, x1, padding=0)
        plot.setYRange(-0.05 - step * rows - below_px / per_unit, 1.15, padding=0)
        # the values themselves are the real axis' ticks (too close ones are left out by the
        # axis); many values get round ticks instead
        ticks = ([(float(p), f"{v:g}") for p, v in zip(pos, x, strict=True)]
                 if x.size <= LABELLED else
                 [(v / scale + zp, f"{v:g}") for v in
                  _nice_ticks((x0 - zp) * scale, (x1 - zp) * scale)])
        plot.getAxis("top").setTicks([ticks])
        plot.getAxis("bottom").set_codes(lo, hi)
