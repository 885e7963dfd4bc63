"""The model view's per-layer chart: SQNR of each tensor kind across the layers.

Layers on x (parsed from names such as ``layers.N.``; tensors outside the layers before
layer 0 or after the last; file order when no name has a layer), SQNR on y, one colour per
tensor kind (``self_attn.q_proj.weight``, ``mlp.down_proj.weight``...), per-tensor as solid
lines with dots and per-channel dashed with triangles, so the layers that break per-tensor
int8 stand out as dips. Matrices only: biases and norms would bury the weights under a band
of high, flat points. Hovering a point names the tensor; clicking it emits
:attr:`ModelChart.tensor_clicked`; clicking a legend entry hides or shows that kind.

The chart is redrawn while a scan streams rows in, so an update must stay well inside the
GUI thread's budget with a thousand tensors and more. pyqtgraph's items cost too much for
that: a PlotDataItem per series spends milliseconds of Python per ``setData``, and Qt strokes
a wide antialiased polyline as one outline, which is slow beyond reason when it zigzags (a
per-layer series does: 0.2-1 s for 14 series). So every series is painted by one item,
:class:`SeriesItem`, in device pixels: lines as separate segments (dashes cut here, not by
Qt's dasher), symbols blitted from a pixmap per colour and shape, and hover and click found
by a nearest-point lookup of its own. The x range and ticks come from the listed rows (they
do not move while figures arrive), the y range is rounded outward to whole steps and the
axes are cached as pixmaps, so a delivery repaints the series and nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from pyqtgraph.graphicsItems.LegendItem import ItemSample
from pyqtgraph.graphicsItems.ScatterPlotItem import renderSymbol
from pyqtgraph.icons import invisibleEye
from pyqtgraph.Qt.internals import PrimitiveArray
from PySide6.QtCore import QEvent, QLineF, QObject, QPoint, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QPaintEngine, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QComboBox,
    QGraphicsItem,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from quantscope.core.stats.fused import suggest_floor_db
from quantscope.gui.theme import Theme, contrast_ratio, current_theme, style_plot
from quantscope.gui.views._legend import fit_columns, legend_below, place_legend
from quantscope.io.tensor_info import printable
from quantscope.state.model_scan import OK, PENDING, ModelRow

#: Okabe-Ito first, then Tableau: distinguishable series for up to 18 kinds, then cycling.
#: :func:`series_colors` darkens or lightens each to 3:1 against the plot's background.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7F7F7F",
           "#000000", "#F0E442", "#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F",
           "#EDC948", "#B07AA1", "#FF9DA7", "#9C755F")
#: The chart's choices; the longest sets the chart's least width, which a talk's text at 1280
#: px must leave the table's figures beside it.
MODES = {"both": "per-tensor solid, per-channel dashed", "tensor": "per-tensor SQNR",
         "channel": "per-channel SQNR", "gain": "gain of per-channel"}
#: A chart point of "exact" (infinite SQNR) is drawn this far above the finite ones.
EXACT_HEADROOM_DB = 6.0
#: The y range is rounded outward to multiples of this, so new rows rarely move the axes.
Y_STEP_DB = 5.0
#: Contrast of a series against the plot background (the theme's rule for plot marks).
MARK_CONTRAST = 3.0
#: Hover and click find the nearest point within its symbol's radius plus this, in pixels.
HIT_SLACK_PX = 4.0
#: What the hover line says while no point is under the mouse.
HOVER_HINT = "point at a tensor to name it; click it to open it"
#: The hint where the whole one does not fit (a talk's text in a narrow chart): a hint cut
#: in its middle reads as nonsense, where a tensor's name cut there keeps its ends.
SHORT_HOVER_HINT = "click a point to open its tensor"
#: Opacity (0-255) of the band under the int8 floor, light and dark.
FLOOR_ALPHA = {False: 44, True: 34}
#: Lines are antialiased while their points are at least this far apart on x, in pixels.
AA_MIN_STEP_PX = 2.0
#: The plot's margins and the spacing around its legend row, in pixels.
LEGEND_SLACK_PX = 24
#: Qt's dash pattern (DashLine): dash and gap in pen widths.
DASH, GAP = 4.0, 2.0
#: The most of the chart's width a legend beside its plot may take.
BESIDE_SHARE = 0.4


def _placed(rows: list[ModelRow]) -> tuple[list[tuple[float, str, ModelRow]], bool]:
    """Every matrix that is or will be charted (analysed or pending) with its x position and
    series; and whether x is layers. Positions come from the listing alone, so a point does
    not move when others arrive."""
    mats = [r for r in rows if r.status in (OK, PENDING) and r.info is not None
            and r.info.ndim >= 2]
    layered = [r for r in rows if r.layer is not None]
    if not layered:
        return [(float(pos), "tensors", r) for pos, r in enumerate(mats)], False
    first = min(r.index for r in layered)
    last_layer = max(r.layer for r in layered)
    out = []
    for r in mats:
        if r.layer is not None:
            out.append((float(r.layer), r.kind, r))
        else:
            out.append((-1.0 if r.index < first else last_layer + 1.0, r.name, r))
    return out, True


def chart_points(rows: list[ModelRow]) -> tuple[dict[str, list[tuple[float, ModelRow]]], bool]:
    """The analysed matrices by kind, each with its x position; and whether x is layers."""
    placed, layered = _placed(rows)
    series: dict[str, list[tuple[float, ModelRow]]] = {}
    for x, kind, r in placed:
        if r.status == OK:
            series.setdefault(kind, []).append((x, r))
    return series, layered


def legend_label(kind: str, kinds: set[str]) -> str:
    """A kind as the legend names it: without the ``.weight`` every matrix has (the hover
    line gives full names), unless that would merge it with another kind."""
    short = kind.removesuffix(".weight")
    return printable(short if short == kind or short not in kinds else kind)


def series_colors(theme: Theme) -> list[str]:
    """:data:`PALETTE` for ``theme``: each colour mixed toward the foreground until it has
    :data:`MARK_CONTRAST` against the background (yellow on white, black on dark)."""
    bg, fg = theme.background, QColor(theme.foreground)
    out = []
    for hex_ in PALETTE:
        c = QColor(hex_)
        for step in range(21):
            t = step / 20
            mixed = QColor.fromRgbF(c.redF() * (1 - t) + fg.redF() * t,
                                    c.greenF() * (1 - t) + fg.greenF() * t,
                                    c.blueF() * (1 - t) + fg.blueF() * t).name()
            if contrast_ratio(mixed, bg) >= MARK_CONTRAST:
                break
        out.append(mixed)
    return out


def nice_ticks(lo: float, hi: float, pixels: float, label_px: float,
               named: dict[float, str]) -> list[tuple[float, str]]:
    """Integer ticks from ``lo`` to ``hi`` every 1, 2, 5, 10, 20... positions, the smallest
    step whose labels (``label_px`` wide) fit in ``pixels``; ``named`` positions (``emb``,
    ``out``) always shown, numbers that would overlap them left out."""
    span = max(hi - lo, 1.0)
    per = pixels / (span + 1.0)  # pixels per position
    step = 1
    for step in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000):
        if step * per >= label_px:
            break
    ticks = [(x, text) for x, text in sorted(named.items())]
    start = int(math.ceil(max(lo, 0.0) / step) * step)
    for v in range(start, int(hi) + 1, step):
        if all(abs(v - x) * per >= label_px for x in named):
            ticks.append((float(v), str(v)))
    return sorted(ticks)


@dataclass(frozen=True)
class Series:
    """One (kind, scheme) line: its points in data coordinates and how it is drawn."""

    kind: str
    scheme: str
    color: str
    dashed: bool
    symbol: str
    x: np.ndarray
    y: np.ndarray
    rows: tuple[ModelRow, ...]


def dash_segments(px: np.ndarray, py: np.ndarray, on: float,
                  off: float) -> tuple[np.ndarray, ...]:
    """A polyline in device pixels cut into the segments of a dashed line (``on`` pixels
    drawn, ``off`` not, the pattern running on across its vertices as Qt's dasher does):
    x0, y0, x1, y1 arrays. Qt's own dashing of a wide antialiased polyline is the slow
    stroke this module avoids."""
    dx, dy = np.diff(px), np.diff(py)
    length = np.hypot(dx, dy)
    s1 = np.cumsum(length)
    s0 = s1 - length
    period = on + off
    k0 = np.floor(s0 / period).astype(np.int64)
    k1 = np.floor(s1 / period).astype(np.int64)
    counts = k1 - k0 + 1
    seg = np.repeat(np.arange(len(length)), counts)
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    k = np.repeat(k0, counts) + within  # the dash periods each segment overlaps
    a = np.maximum(s0[seg], k * period)
    b = np.minimum(s1[seg], k * period + on)
    keep = (b > a) & (length[seg] > 0)
    seg, a, b = seg[keep], a[keep], b[keep]
    t0 = (a - s0[seg]) / length[seg]
    t1 = (b - s0[seg]) / length[seg]
    x, y, ddx, ddy = px[seg], py[seg], dx[seg], dy[seg]
    return x + t0 * ddx, y + t0 * ddy, x + t1 * ddx, y + t1 * ddy


def _figure(r: ModelRow, scheme: str) -> float:
    """A row's figure for a chart scheme; NaN when it has none."""
    f = r.figures
    v = f.per_tensor_db if scheme == "tensor" else f.per_channel_db if scheme == "channel" \
        else f.gain_db
    return math.nan if v is None else v


class SeriesItem(pg.GraphicsObject):
    """Every series of the chart in one item (see the module docstring for why).

    On a raster device (the screen, a PNG) lines are drawn as one ``drawLines`` call per
    series and symbols as one ``drawPixmapFragments`` call per series, from a pixmap
    rendered once per colour, shape, size and pixel ratio; on a vector device (the SVG
    export records a QPicture) each symbol is drawn as a path, so the file stays vector.
    """

    def __init__(self) -> None:
        super().__init__()
        self.series: list[Series] = []
        self.line_width = 1.6
        self.symbol_size = 7.0
        self._lines = PrimitiveArray(QLineF, 4)
        self._frags = PrimitiveArray(QPainter.PixmapFragment, 10)
        self._sprites: dict[tuple[str, str, float, float], QPixmap] = {}
        self._bounds = QRectF()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, False)

    def set_series(self, series: list[Series], line_width: float, symbol_size: float) -> None:
        if (line_width, symbol_size) != (self.line_width, self.symbol_size):
            self._sprites.clear()
        self.series, self.line_width, self.symbol_size = series, line_width, symbol_size
        bounds = self._data_bounds()
        if bounds != self._bounds:
            self.prepareGeometryChange()
            self._bounds = bounds
        self.update()

    def _data_bounds(self) -> QRectF:
        """The points' extent with room for the symbols, in data coordinates. It depends on
        the data alone: a rectangle following the view (pyqtgraph's way for pixel-sized
        marks) changes geometry while the view prepares its paint, which paints it twice."""
        if not self.series:
            return QRectF()
        x0 = min(float(s.x.min()) for s in self.series)
        x1 = max(float(s.x.max()) for s in self.series)
        y0 = min(float(s.y.min()) for s in self.series)
        y1 = max(float(s.y.max()) for s in self.series)
        px, py = 0.5 + 0.05 * (x1 - x0), 1.0 + 0.1 * (y1 - y0)
        return QRectF(x0 - px, y0 - py, x1 - x0 + 2 * px, y1 - y0 + 2 * py)

    def boundingRect(self) -> QRectF:
        return QRectF(self._bounds)

    def _sprite(self, symbol: str, color: str, dpr: float) -> QPixmap:
        key = (symbol, color, self.symbol_size, dpr)
        pix = self._sprites.get(key)
        if pix is None:
            image = renderSymbol(symbol, self.symbol_size, pg.mkPen(color), pg.mkBrush(color),
                                 dpr=dpr)
            pix = self._sprites[key] = QPixmap.fromImage(image)
        return pix

    def paint(self, p: QPainter, *args) -> None:
        if not self.series:
            return
        tr = p.transform()
        engine = p.paintEngine()
        raster = engine is not None and engine.type() in (QPaintEngine.Type.Raster,
                                                          QPaintEngine.Type.OpenGL2)
        dpr = p.device().devicePixelRatioF() if p.device() is not None else 1.0
        p.resetTransform()
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        placed = []
        for s in self.series:
            px = np.clip(tr.m11() * s.x + tr.m21() * s.y + tr.dx(), -2.0 ** 30, 2.0 ** 30)
            py = np.clip(tr.m12() * s.x + tr.m22() * s.y + tr.dy(), -2.0 ** 30, 2.0 ** 30)
            placed.append((s, px, py))
            if len(px) < 2:
                continue
            # closer than this, a series is a band of strokes where antialiasing shows
            # nothing and costs most of the paint (3,000 tensors: 375 layers in 500 px)
            p.setRenderHint(QPainter.RenderHint.Antialiasing,
                            bool(np.median(np.abs(np.diff(px))) >= AA_MIN_STEP_PX))
            width = self.line_width
            if s.dashed:
                x0, y0, x1, y1 = dash_segments(px, py, DASH * width, GAP * width)
            else:
                x0, y0, x1, y1 = px[:-1], py[:-1], px[1:], py[1:]
            self._lines.resize(len(x0))
            lines = self._lines.ndarray()
            lines[:, 0], lines[:, 1], lines[:, 2], lines[:, 3] = x0, y0, x1, y1
            pen = QPen(QColor(s.color), width)
            pen.setCapStyle(Qt.PenCapStyle.FlatCap if s.dashed else Qt.PenCapStyle.SquareCap)
            p.setPen(pen)
            p.drawLines(*self._lines.drawargs())
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        for s, px, py in placed:  # symbols over every line
            if raster:
                pix = self._sprite(s.symbol, s.color, dpr)
                self._frags.resize(len(px))
                frags = self._frags.ndarray()
                frags[:, 0], frags[:, 1] = px, py
                frags[:, 2:6] = (0.0, 0.0, pix.width(), pix.height())
                frags[:, 6:10] = (1.0 / dpr, 1.0 / dpr, 0.0, 1.0)
                p.drawPixmapFragments(*self._frags.drawargs(), pix)
            else:
                pen, brush = pg.mkPen(s.color), pg.mkBrush(s.color)
                for x, y in zip(px, py, strict=True):
                    p.resetTransform()
                    p.translate(x, y)
                    pg.graphicsItems.ScatterPlotItem.drawSymbol(p, s.symbol, self.symbol_size,
                                                               pen, brush)


class BandSample(ItemSample):
    """The legend's swatch for the floor band: a filled square in its colour (clicking it
    hides or shows the band, as any legend sample does its item)."""

    def __init__(self, item, brush: QColor) -> None:
        super().__init__(item)
        self.brush = QColor(brush)
        solid = QColor(brush)
        solid.setAlpha(min(255, brush.alpha() * 3))
        self.edge = solid

    def paint(self, p: QPainter, *args) -> None:
        if not self.item.isVisible():  # the crossed-out eye, as ItemSample draws it (its own
            # paint reads the item's ``opts``, which a LinearRegionItem does not have)
            p.drawPixmap(QPoint(1, 1), invisibleEye.qicon.pixmap(18, 18))
            return
        p.setPen(pg.mkPen(self.edge, width=1))
        p.setBrush(self.brush)
        p.drawRect(QRectF(2, 4, 16, 14))


class LegendEntry:
    """What a legend sample draws (a line and a dot in a kind's colour) and toggles when
    clicked: the few attributes pyqtgraph's ItemSample reads, without a plot item behind it
    (a PlotDataItem per entry cost a few milliseconds each)."""

    def __init__(self, color: str, line_width: float, symbol_size: float) -> None:
        self.opts = {"pen": pg.mkPen(color, width=line_width), "symbol": "o",
                     "size": symbol_size, "brush": pg.mkBrush(color), "antialias": True}
        self._visible = True

    def isVisible(self) -> bool:  # the names ItemSample calls
        return self._visible

    def setVisible(self, on: bool) -> None:
        self._visible = bool(on)


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
        top.addStretch(1)
        layout.addLayout(top)
        self.hover = QLabel(HOVER_HINT)
        self.hover.setObjectName("hint")
        self.hover.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # a long tensor name must not widen the chart (and push the table aside): the line
        # takes the room there is and elides in the middle (see _show_hover_text)
        self.hover.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        #: The whole hover line (the label shows it elided when the chart is narrow).
        self.hover_line = HOVER_HINT
        self.hover.installEventFilter(self)  # elided again for a new text size
        layout.addWidget(self.hover)
        self.widget = pg.PlotWidget()
        layout.addWidget(self.widget, 1)
        self.plot = self.widget.getPlotItem()
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        self.plot.setLabel("left", "SQNR (dB)")
        self.plot.setLabel("bottom", "layer")
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.getAxis("bottom").enableAutoSIPrefix(False)
        # "emb" at x = -1 sits near the axis' left end: let it reach past it, not vanish
        self.plot.getAxis("bottom").setStyle(hideOverlappingLabels=16)
        for side in ("left", "bottom"):  # their grid spans the view: blit it, do not redraw
            self.plot.getAxis(side).setCacheMode(
                QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.plot.disableAutoRange()  # redraw sets both ranges from the rows
        self.legend = legend_below(self.plot, labelTextSize="9pt")
        self.legend_beside = False
        self.legend.sigSampleClicked.connect(self._legend_clicked)
        # below the engine's floor int8 does not serve (``suggest`` keeps such tensors in
        # 16-bit): a band there makes the layers that break it stand out
        self.floor = pg.LinearRegionItem(orientation="horizontal", movable=False,
                                         pen=pg.mkPen(None))
        self.floor.setZValue(-10)
        self.floor.hide()
        self.plot.addItem(self.floor, ignoreBounds=True)
        #: The bit width the rows' figures are computed at (the model view sets it from its
        #: settings, before their rows arrive): where the floor band ends.
        self.bits = 8
        self.floor_db: float | None = None
        self.floor_bits: int | None = None
        self.item = SeriesItem()
        self.plot.addItem(self.item)
        self.marker = pg.ScatterPlotItem(size=16, pen=pg.mkPen(current_theme().foreground,
                                                               width=2), brush=None,
                                         useCache=False)  # one point: drawn as a vector
        self.marker.setZValue(10)
        self.marker.hide()
        self.plot.addItem(self.marker)
        scene = self.widget.scene()
        scene.sigMouseMoved.connect(self._moved)
        scene.sigMouseClicked.connect(self._clicked)
        self.rows: list[ModelRow] = []
        self.points: dict[str, list[tuple[float, ModelRow]]] = {}
        #: Legend entries by kind, which the legend's samples draw (and hide, when clicked).
        self.entries: dict[str, LegendEntry] = {}
        self._legend_stale = False
        self.hidden: set[str] = set()
        self._colors = series_colors(current_theme())
        self._hit_x = self._hit_y = np.zeros(0)
        self._hit_rows: list[ModelRow] = []
        self._hovered: ModelRow | None = None
        self._ticks: tuple = ()
        self._x_span: tuple[float, float, bool, bool] | None = None
        self._x_range: tuple[float, float] | None = None
        self._y_range: tuple[float, float] | None = None

    def set_rows(self, rows: list[ModelRow]) -> None:
        self.rows = rows
        self.redraw()

    def redraw(self) -> None:
        """Bring the series up to date with the rows: new arrays for the one series item, the
        legend touched only when kinds come or go, the ranges only when they change. One
        pass over the rows in Python, the rest in NumPy: it runs on every delivery."""
        placed, layered = _placed(self.rows)
        mode = self.mode.currentData()
        schemes = ("tensor", "channel") if mode == "both" else (mode,)
        self._label("bottom", "layer" if layered else "tensor (file order)")
        self._label("left", "gain (dB)" if mode == "gain" else "SQNR (dB)")
        theme = current_theme()
        # every kind the listing holds, analysed yet or not: colours and legend are settled
        # when the checkpoint is listed and do not change while its figures stream in
        kinds = sorted({kind for _, kind, _ in placed})
        number = {kind: k for k, kind in enumerate(kinds)}
        done = [(x, kind, r) for x, kind, r in placed if r.status == OK]
        self.points = {}
        for x, kind, r in done:
            self.points.setdefault(kind, []).append((x, r))
        rows = np.empty(len(done), dtype=object)
        rows[:] = [r for _, _, r in done]
        xs = np.array([x for x, _, _ in done], dtype=float)
        ks = np.array([number[kind] for _, kind, _ in done], dtype=np.int64)
        order = np.lexsort((xs, ks))  # by kind, then x (stable: file order among equals)
        xs, ks, rows = xs[order], ks[order], rows[order]
        values = {scheme: np.array([_figure(r, scheme) for r in rows], dtype=float)
                  for scheme in schemes}
        finite = np.concatenate([v[np.isfinite(v)] for v in values.values()]) \
            if len(rows) else np.zeros(0)
        top = (float(finite.max()) if len(finite) else 0.0) + EXACT_HEADROOM_DB
        bounds = np.searchsorted(ks, np.arange(len(kinds) + 1))
        series = []
        for k, kind in enumerate(kinds):
            lo, hi = bounds[k], bounds[k + 1]
            if lo == hi:
                continue
            color = self._colors[k % len(self._colors)]
            for scheme in schemes:
                y = values[scheme][lo:hi]
                keep = ~np.isnan(y)  # no figure (or NaN): no point
                if not keep.any():
                    continue
                dashed = scheme == "channel" and mode == "both"
                series.append(Series(kind, scheme, color, dashed, "t" if dashed else "o",
                                     xs[lo:hi][keep], np.where(np.isinf(y[keep]), top, y[keep]),
                                     tuple(rows[lo:hi][keep])))
        self._set_floor(None if mode == "gain" or not placed else suggest_floor_db(self.bits))
        self._update_legend(kinds)
        shown = [s for s in series if s.kind not in self.hidden]
        self.item.set_series(shown, theme.line_width, 7 + 2 * theme.presentation)
        self._hit_x = np.concatenate([s.x for s in shown]) if shown else np.zeros(0)
        self._hit_y = np.concatenate([s.y for s in shown]) if shown else np.zeros(0)
        self._hit_rows = [r for s in shown for r in s.rows]
        self._set_hover(None)
        if placed:
            every = [x for x, _, _ in placed]
            last = max((r.layer for r in self.rows if r.layer is not None), default=0)
            lo, hi = min(every), max(every)
            span = (lo, hi, layered and lo < 0, layered and hi > last)
            if span != self._x_span:
                self._x_span = span
                self._set_x_axis()
        if len(finite):  # rounded outward: the axes (and their cached pixmaps) rarely change
            low = math.floor(float(finite.min()) / Y_STEP_DB) * Y_STEP_DB
            exact = any(np.isinf(v).any() for v in values.values())
            # headroom only for exact points drawn up there: on a projector the room counts
            high = math.ceil((top if exact else float(finite.max())) / Y_STEP_DB) * Y_STEP_DB
            if (low, high) != self._y_range:
                self._y_range = (low, high)
                self.plot.setYRange(low, high, padding=0.03)
        # the view box applies a new range when it next prepares a paint, and that moves
        # every item again after the paint was planned: a second full paint. Now, once.
        self.plot.vb.updateMatrix()

    def _label(self, side: str, text: str) -> None:
        """Set an axis label if it changed (setting one redraws and resizes the axis)."""
        axis = self.plot.getAxis(side)
        if axis.labelText != text:
            self.plot.setLabel(side, text)

    def _set_x_axis(self) -> None:
        """x range and ticks for the listed layers at the plot's width (``emb``/``out`` when
        tensors sit outside the layers), set only when they change (new ticks redraw the
        axis). The range leaves room for the outermost labels: pyqtgraph drops a label that
        reaches past the end of its axis."""
        if self._x_span is None:
            return
        lo, hi, before, after = self._x_span
        named = {}
        if before:
            named[-1.0] = "emb"
        if after:
            named[hi] = "out"
        axis = self.plot.getAxis("bottom")
        fm = QFontMetricsF(axis.style.get("tickFont") or axis.font())
        label = max(fm.horizontalAdvance(str(int(hi))), fm.horizontalAdvance("out")) + \
            fm.horizontalAdvance("0") * 1.5
        width = self.plot.vb.width() or max(self.widget.width() - 60, 100)
        x0, x1 = lo - 0.5, hi + 0.5
        for _ in range(2):  # the padding narrows each position a little: once more with it
            ticks = nice_ticks(lo, hi, width * (hi - lo + 1) / (x1 - x0), label, named)
            per = width / (x1 - x0)
            if ticks:
                first, last = ticks[0], ticks[-1]
                x0 = min(lo - 0.5, first[0] - (fm.horizontalAdvance(first[1]) / 2 + 4) / per)
                x1 = max(hi + 0.5, last[0] + (fm.horizontalAdvance(last[1]) / 2 + 4) / per)
        if (x0, x1) != self._x_range:
            self._x_range = (x0, x1)
            self.plot.setXRange(x0, x1, padding=0)
        if tuple(ticks) != self._ticks:
            self._ticks = tuple(ticks)
            axis.setTicks([ticks])

    def _set_floor(self, db: float | None) -> None:
        """Shade below ``db`` (None: no band, as in gain mode or with nothing listed)."""
        if (db, self.bits) == (self.floor_db, self.floor_bits):
            return
        self.floor_db, self.floor_bits = db, self.bits
        if db is None:
            self.floor.hide()
        else:
            self.floor.setRegion((db - 1e4, db))
            self.floor.show()
        self._legend_stale = True  # the legend names the band: rebuild it (even when no kind
        # is listed: an empty legend still held the band's sample of the last model)

    def _floor_brush(self) -> QColor:
        theme = current_theme()
        c = QColor(theme.color("clipping"))
        c.setAlpha(FLOOR_ALPHA[theme.dark])
        return c

    def _update_legend(self, kinds: list[str]) -> None:
        """One entry per kind in its colour; rebuilt (and refitted) only when the kinds or the
        look change: relaying the legend out is dear."""
        if list(self.entries) == kinds and not self._legend_stale:
            return
        self._legend_stale = False
        theme = current_theme()
        self.legend.clear()
        self.entries = {}
        known = set(kinds)
        for k, kind in enumerate(kinds):
            color = self._colors[k % len(self._colors)]
            entry = LegendEntry(color, theme.line_width, 7 + 2 * theme.presentation)
            entry.setVisible(kind not in self.hidden)
            self.entries[kind] = entry
            self.legend.addItem(entry, legend_label(kind, known))
        self.hidden &= known
        if self.floor_db is not None:
            self.floor.setBrush(self._floor_brush())
            self.legend.addItem(BandSample(self.floor, self._floor_brush()),
                                f"int{self.floor_bits} floor ({self.floor_db:.0f} dB)")
        self._fit_legend()

    def set_legend_beside(self, beside: bool) -> None:
        """The legend right of the plot (the chart wide and short, under the model's table)
        or under it (the chart beside the table)."""
        if beside != self.legend_beside:
            self.legend_beside = beside
            place_legend(self.plot, beside)
            self._fit_legend()

    def _fit_legend(self) -> None:
        """The legend in as many columns as the width allows, and no taller than the plot
        above it: at a talk's text size and 720 rows, one entry per row left the plot
        shorter than its legend (half the chart's height, less the x axis, is the most the
        legend may take). Beside the plot it may take up to :data:`BESIDE_SHARE` of the
        width and the plot's whole height."""
        below = self.plot.getAxis("bottom").height() + LEGEND_SLACK_PX
        if self.legend_beside:
            fit_columns(self.plot, 0, columns=(1, 2, 3),
                        height=max(self.widget.height() - below, 40),
                        room=max(self.widget.width() * BESIDE_SHARE, 100))
        else:
            fit_columns(self.plot, max(self.widget.width(), 200), columns=(4, 3, 2, 1),
                        height=max((self.widget.height() - below) / 2, 40))

    def _legend_clicked(self, entry) -> None:
        if entry is self.floor:  # the band's sample hid or showed it
            return
        self.hidden = {kind for kind, e in self.entries.items() if not e.isVisible()}
        self.redraw()

    # -- hover and click ----------------------------------------------------------------------
    def row_at(self, scene_pos: QPointF) -> ModelRow | None:
        """The row of the point drawn nearest ``scene_pos``, if within its symbol (plus
        :data:`HIT_SLACK_PX`); None elsewhere."""
        vb = self.plot.vb
        if not len(self._hit_x) or not vb.sceneBoundingRect().contains(scene_pos):
            return None
        at = vb.mapSceneToView(scene_pos)
        sx, sy = vb.viewPixelSize()
        if not (sx > 0 and sy > 0):
            return None
        d2 = ((self._hit_x - at.x()) / sx) ** 2 + ((self._hit_y - at.y()) / sy) ** 2
        i = int(np.argmin(d2))
        reach = self.item.symbol_size / 2 + HIT_SLACK_PX
        return self._hit_rows[i] if d2[i] <= reach * reach else None

    def point_of(self, name: str) -> QPointF | None:
        """Where the first point of tensor ``name`` is drawn, in scene coordinates."""
        for i, r in enumerate(self._hit_rows):
            if r.name == name:
                return self.plot.vb.mapViewToScene(QPointF(self._hit_x[i], self._hit_y[i]))
        return None

    def _moved(self, scene_pos: QPointF) -> None:
        self._set_hover(self.row_at(scene_pos), scene_pos)

    def _set_hover(self, row: ModelRow | None, scene_pos: QPointF | None = None) -> None:
        if row is None:
            if self._hovered is not None:
                self._hovered = None
                self.marker.hide()
                self.hover_line = HOVER_HINT
                self._show_hover_text()
            return
        if row is self._hovered:
            return
        self._hovered = row
        hits = [i for i, r in enumerate(self._hit_rows) if r is row]
        vb = self.plot.vb
        if scene_pos is not None and hits:  # the one of its points under the mouse
            at = vb.mapSceneToView(scene_pos)
            i = min(hits, key=lambda i: abs(self._hit_y[i] - at.y()))
            self.marker.setData([self._hit_x[i]], [self._hit_y[i]])
            self.marker.show()
        f = row.figures
        channel = "–" if f.per_channel_db is None else f"{f.per_channel_db:.2f} dB"
        self.hover_line = (f"{printable(row.name)}: per-tensor {f.per_tensor_db:.2f} dB, "
                            f"per-channel {channel} — click to open")
        self._show_hover_text()

    def _show_hover_text(self) -> None:
        """The hover line, elided in the middle when it is wider than its room (the full
        line is its tooltip)."""
        metrics = self.hover.fontMetrics()
        room = max(self.hover.width(), 40)
        line = self.hover_line
        if line == HOVER_HINT and metrics.elidedText(line, Qt.TextElideMode.ElideMiddle,
                                                     room) != line:
            line = SHORT_HOVER_HINT
        text = metrics.elidedText(line, Qt.TextElideMode.ElideMiddle, room)
        # Qt elides to fractional advances: at 11 pt the elided line came out 1 px wider
        # than the label in whole pixels
        for less in range(1, 4):
            if metrics.horizontalAdvance(text) <= room:
                break
            text = metrics.elidedText(line, Qt.TextElideMode.ElideMiddle, room - less)
        self.hover.setText(text)
        self.hover.setToolTip(self.hover_line if text != self.hover_line else "")

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.hover and event.type() in (QEvent.Type.FontChange,
                                                      QEvent.Type.StyleChange):
            self._show_hover_text()
        return super().eventFilter(watched, event)

    def _clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        row = self.row_at(event.scenePos())
        if row is not None:
            event.accept()
            self.tensor_clicked.emit(row.name)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._show_hover_text()
        self._fit_legend()
        self._set_x_axis()

    def apply_theme(self, theme: Theme) -> None:
        style_plot(self.plot, theme)
        self._colors = series_colors(theme)
        self.marker.setPen(pg.mkPen(theme.foreground, width=2))
        self.entries = {}  # colours and sizes come from the theme: every entry anew
        self._legend_stale = True
        self._ticks, self._x_range = (), None
        self.redraw()
        self._set_x_axis()
