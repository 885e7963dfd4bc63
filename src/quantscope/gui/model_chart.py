"""The model view's per-layer chart: SQNR of each tensor kind across the layers.

Layers on x (parsed from names such as ``layers.N.``; tensors outside the layers before
layer 0 or after the last; file order when no name has a layer), SQNR on y, one colour per
tensor kind (``self_attn.q_proj.weight``, ``mlp.down_proj.weight``...), per-tensor as solid
lines and per-channel dashed, so the layers that break per-tensor int8 stand out as dips.
Matrices only: biases and norms would bury the weights under a band of high, flat points.
Hovering a point names the tensor; clicking it emits :attr:`ModelChart.tensor_clicked`.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from quantscope.gui.theme import Theme, current_theme, style_plot
from quantscope.gui.views._legend import fit_columns, legend_below
from quantscope.io.tensor_info import printable
from quantscope.state.model_scan import OK, ModelRow

#: Okabe-Ito first, then Tableau: distinguishable series for up to 18 kinds, then cycling.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7F7F7F",
           "#000000", "#F0E442", "#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F",
           "#EDC948", "#B07AA1", "#FF9DA7", "#9C755F")
MODES = {"both": "per-tensor (solid) and per-channel (dashed)", "tensor": "per-tensor SQNR",
         "channel": "per-channel SQNR", "gain": "gain of per-channel"}
#: A chart point of "exact" (infinite SQNR) is drawn this far above the finite ones.
EXACT_HEADROOM_DB = 6.0


def chart_points(rows: list[ModelRow]) -> tuple[dict[str, list[tuple[float, ModelRow]]], bool]:
    """The analysed matrices by kind, each with its x position; and whether x is layers."""
    mats = [r for r in rows if r.status == OK and r.info is not None and r.info.ndim >= 2]
    layered = [r for r in rows if r.layer is not None]
    series: dict[str, list[tuple[float, ModelRow]]] = {}
    if not layered:
        for pos, r in enumerate(mats):
            series.setdefault("tensors", []).append((float(pos), r))
        return series, False
    first = min(r.index for r in layered)
    last_layer = max(r.layer for r in layered)
    for r in mats:
        if r.layer is not None:
            x, kind = float(r.layer), r.kind
        else:
            x, kind = (-1.0 if r.index < first else last_layer + 1.0), r.name
        series.setdefault(kind, []).append((x, r))
    return series, True


class ModelChart(QWidget):
    """SQNR per layer and tensor kind (see the module docstring)."""

    themed = True
    tensor_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        top.addWidget(QLabel("show"))
        self.mode = QComboBox()
        for key, text in MODES.items():
            self.mode.addItem(text, key)
        self.mode.currentIndexChanged.connect(lambda _: self.redraw())
        top.addWidget(self.mode)
        self.hover = QLabel(" ")
        self.hover.setObjectName("hint")
        self.hover.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        top.addWidget(self.hover, 1)
        layout.addLayout(top)
        self.widget = pg.PlotWidget()
        layout.addWidget(self.widget, 1)
        self.plot = self.widget.getPlotItem()
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        self.plot.setLabel("left", "SQNR (dB)")
        self.plot.setLabel("bottom", "layer")
        self.plot.setMenuEnabled(False)
        self.plot.getAxis("bottom").enableAutoSIPrefix(False)
        self.plot.disableAutoRange()  # redraw sets both ranges from the rows
        self.legend = legend_below(self.plot, labelTextSize="9pt")
        self.rows: list[ModelRow] = []
        self._items: dict[tuple[str, str, bool], pg.PlotDataItem] = {}
        self.points: dict[str, list[tuple[float, ModelRow]]] = {}

    def set_rows(self, rows: list[ModelRow]) -> None:
        self.rows = rows
        self.redraw()

    def _y(self, r: ModelRow, which: str) -> float | None:
        f = r.figures
        v = {"tensor": f.per_tensor_db, "channel": f.per_channel_db, "gain": f.gain_db}[which]
        return None if v is None or math.isnan(v) else v

    def redraw(self) -> None:
        """Bring the series up to date with the rows.

        Each (kind, scheme) keeps its PlotDataItem and gets new data with ``setData``; items
        are created only for a kind seen for the first time and removed only when the mode
        drops their scheme. Re-creating the items on every update cost 0.7-1.3 s on the GUI
        thread with hundreds of tensors streaming in; updating them costs milliseconds.
        """
        self.points, layered = chart_points(self.rows)
        self._last = max((r.layer for r in self.rows if r.layer is not None), default=0)
        self.plot.setLabel("bottom", "layer" if layered else "tensor (file order)")
        mode = self.mode.currentData()
        schemes = ("tensor", "channel") if mode == "both" else (mode,)
        self.plot.setLabel("left", "gain (dB)" if mode == "gain" else "SQNR (dB)")
        finite = [y for pts in self.points.values() for _, r in pts for s in schemes
                  if (y := self._y(r, s)) is not None and math.isfinite(y)]
        top = (max(finite) if finite else 0.0) + EXACT_HEADROOM_DB
        wanted: dict[tuple[str, str, bool], tuple[int, np.ndarray, np.ndarray, list[str]]] = {}
        for k, (kind, pts) in enumerate(sorted(self.points.items())):
            pts = sorted(pts, key=lambda p: p[0])
            for scheme in schemes:
                xy = [(x, self._y(r, scheme), r) for x, r in pts]
                xy = [(x, top if math.isinf(y) else y, r) for x, y, r in xy if y is not None]
                if xy:
                    wanted[(kind, scheme, mode == "both")] = (
                        k, np.array([p[0] for p in xy]), np.array([p[1] for p in xy]),
                        [p[2].name for p in xy])
        legend_before = len(self.legend.items)
        for key in [key for key in self._items if key not in wanted]:
            self._drop(key)
        for key, (k, xs, ys, names) in wanted.items():
            item = self._items.get(key)
            if item is None or item.opts.get("color_index") != k % len(PALETTE):
                if item is not None:  # a new kind sorted in before it: its colour moved
                    self._drop(key)
                item = self._item(key, k, schemes)
            item.setData(xs, ys, data=names)
        xs = [x for pts in self.points.values() for x, _ in pts]
        if xs:
            self.plot.setXRange(min(xs) - 0.5, max(xs) + 0.5, padding=0.02)
            span = max(xs) - min(xs)
            step = max(1, int(np.ceil(span / 16)))
            ticks = [(v, str(v)) for v in range(0, int(max(xs)) + 1, step)]
            if layered and min(xs) < 0:
                ticks.insert(0, (-1.0, "emb"))
            if layered and max(xs) > self._last:
                ticks.append((self._last + 1.0, "out"))
            self.plot.getAxis("bottom").setTicks([ticks])
        if finite:  # the range is known here: the view box need not scan every series for it
            low = min(finite)
            self.plot.setYRange(low, top, padding=0.05)
        if len(self.legend.items) != legend_before or not wanted:
            fit_columns(self.plot, max(self.widget.width(), 200))

    def _item(self, key: tuple[str, str, bool], k: int,
              schemes: tuple[str, ...]) -> pg.PlotDataItem:
        """A new series for ``key`` = (kind, scheme, both schemes shown), in its kind's colour:
        per-channel dashed with triangles when both schemes are shown."""
        kind, scheme, both = key
        color = PALETTE[k % len(PALETTE)]
        theme = current_theme()
        dashed = scheme == "channel" and both
        pen = pg.mkPen(color, width=theme.line_width,
                       style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
        item = pg.PlotDataItem(
            pen=pen, symbol="t" if dashed else "o", symbolSize=7 + 2 * theme.presentation,
            symbolBrush=color, symbolPen=pg.mkPen(color),
            name=printable(kind) if scheme == schemes[0] else None)
        item.opts["color_index"] = k % len(PALETTE)
        item.sigPointsClicked.connect(self._clicked)
        item.sigPointsHovered.connect(self._hovered)
        item.scatter.opts["hoverable"] = True
        self.plot.addItem(item)
        self._items[key] = item
        return item

    def _drop(self, key: tuple[str, str, bool]) -> None:
        item = self._items.pop(key)
        self.plot.removeItem(item)  # its legend entry goes with it

    def _row(self, name: str) -> ModelRow | None:
        return next((r for r in self.rows if r.name == name), None)

    def _hovered(self, item, points, ev) -> None:
        if len(points) == 0:
            return
        row = self._row(points[0].data())
        if row is not None and row.figures is not None:
            f = row.figures
            channel = "–" if f.per_channel_db is None else f"{f.per_channel_db:.2f} dB"
            self.hover.setText(f"{printable(row.name)}: per-tensor {f.per_tensor_db:.2f} dB, "
                               f"per-channel {channel} — click to open")

    def _clicked(self, item, points, ev) -> None:
        if len(points):
            self.tensor_clicked.emit(points[0].data())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        fit_columns(self.plot, max(self.widget.width(), 200))

    def apply_theme(self, theme: Theme) -> None:
        style_plot(self.plot, theme)
        for key in list(self._items):  # pens and symbol sizes come from the theme
            self._drop(key)
        self.redraw()
