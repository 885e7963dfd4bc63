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
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
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
from quantscope.gui.views import _code_labels as code_labels
from quantscope.gui.views._code_axis import ApartAxis, CodeRangeAxis
from quantscope.gui.views.lifecycle import View

#: Values shown with their own labels (more would overlap; the arrows still show them all).
LABELLED = 8
#: Added to the values when "cast without clamp" is switched on over the default example.
WRAP_EXAMPLE = 20.0
WRAP_SCALE = 0.1
#: Pixels between a wrapped value's code (its marker's centre) and its label.
WRAP_LABEL_PX = 10.0


def _text(values) -> str:
    return ", ".join(f"{v:g}" for v in values)


def _error(e: float, scale: float) -> str:
    """An error as shown: float32 rounding noise far below the step reads as 0."""
    return "±0" if abs(e) < scale * 1e-4 else f"{e:+.2g}"


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
            plot = pg.PlotWidget(axisItems={"bottom": CodeRangeAxis("bottom"),
                                            "top": ApartAxis("top")})
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
        # the labels' rows are laid out in pixels of the plots' height: redrawn once a resize
        # settles -- the plot's own, not only the view's: its axes take their height from the
        # tick labels they measure as they paint, after the view's resize, and rows spaced
        # for the height before sat closer or wider on screen
        self._redraw = QTimer(self)
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(0)
        self._redraw.timeout.connect(lambda: self.mappings is not None and self._draw())
        for plot in self.plots.values():
            plot.getViewBox().sigResized.connect(lambda _box: self._redraw.start())
        self.refresh()

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
            # each label beside its arrow's end, in two short lines on the side the arrow
            # does not come from where they fit there, else on the other side (centred over
            # the end, the dashed line ran through its words)
            per_code = (plot.getViewBox().width() or 1000.0) / (x1 - x0)
            for p, q in zip(pos[bad], wrapped[bad], strict=True):
                plot.plot([p, q], [0.95, 0.35], pen=wrap_pen)
                label = pg.TextItem(f"astype(int8): {q}\n→ {scale * (q - zp):.3g}",
                                    color=theme.color("clipping"))
                font = label.textItem.font()
                font.setPointSize(theme.axis_font_pt)
                label.setFont(font)
                need = (label.textItem.boundingRect().width() + WRAP_LABEL_PX) / per_code
                fits_left, fits_right = q - need >= x0, q + need <= x1
                left = (fits_left or not fits_right) if p > q else (fits_left and not fits_right)
                label.setAnchor((1.0 if left else 0.0, 1.0))
                label.setPos(q - WRAP_LABEL_PX / per_code if left
                             else q + WRAP_LABEL_PX / per_code, 0.33)
                plot.addItem(label)
            plot.plot(wrapped[bad].astype(float), np.full(int(bad.sum()), 0.38), pen=None,
                      symbol="t", symbolSize=12, symbolBrush=pg.mkBrush(theme.color("clipping")),
                      symbolPen=None)
        # the labels under the codes: rows laid out in pixels from what their items
        # measure (see _code_labels), below the cells and above the code axis's ticks
        vb = plot.getViewBox()
        height, width = vb.height() or 150.0, vb.width() or 1000.0
        shown = np.clip(codes, lo, hi)
        bottom = -0.05  # no labels: the cells a little above the code axis
        if x.size <= LABELLED:
            font = QFont()
            font.setPointSize(theme.axis_font_pt)
            labels = [pg.TextItem(f"{q} → {d:.3g} ({_error(d - v, scale)})",
                                  color=theme.foreground, anchor=(0.0, 0.0))
                      for q, v, d in zip(shown, x, scale * (shown - zp), strict=True)]
            for label in labels:
                label.setFont(font)
            boxes = code_labels.measure([label.textItem for label in labels])
            ticks_px = max(0.0, -float(plot.getAxis("bottom").style["tickLength"]))
            per_code = width / (x1 - x0)
            placed = code_labels.place((shown - x0) * per_code, boxes, width,
                                       code_labels.rows_that_fit(height, boxes, ticks_px))
            rows = 1 + max(row for row, _ in placed)  # the rows used: the rest to the arrows
            band = code_labels.band_px(rows, boxes, ticks_px)
            per_unit = max((height - band) / 1.15, 1.0)  # px per unit, cells to the top
            for label, (row, left) in zip(labels, placed, strict=True):
                if row < 0:
                    continue  # no room: the arrow and its code still show it
                label.setPos(x0 + left / per_code,
                             -code_labels.item_top_px(row, boxes) / per_unit)
                plot.addItem(label)
            if rows:
                bottom = -band / per_unit
        plot.setXRange(x0, x1, padding=0)
        plot.setYRange(bottom, 1.15, padding=0)
        # the values themselves are the real axis' ticks (too close ones are left out by the
        # axis); many values get round ticks instead
        ticks = ([(float(p), f"{v:g}") for p, v in zip(pos, x, strict=True)]
                 if x.size <= LABELLED else
                 [(v / scale + zp, f"{v:g}") for v in
                  _nice_ticks((x0 - zp) * scale, (x1 - zp) * scale)])
        plot.getAxis("top").setTicks([ticks])
        plot.getAxis("bottom").set_codes(lo, hi)
