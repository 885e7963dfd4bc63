"""SQNR against bits per element for every number format on the current tensor.

Each format is one point at its storage cost, scale overhead included (MXFP4 at 4.25, NVFP4 at
4.5, INT4 g128 at 4.125...); int2..int8 per channel are joined as a curve, and the dotted
6.02 dB-per-bit line through int8 per channel is the guide: a point above it buys more than
a bit's worth of SQNR for its storage, a point below less. The formats the panes show are
ringed (in the classic layout: the symmetric per-channel int scheme at the current width).

The points come from :func:`quantscope.state.formats.format_points` (the panes' own rules),
computed by :class:`quantscope.state.formats.PointsRequest` in the view's lane of the
scheduler while the view is visible.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QSizeF
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QGraphicsTextItem, QVBoxLayout, QWidget

from quantscope.core.labs.bitwidth import DB_PER_BIT
from quantscope.gui.jobs import Jobs
from quantscope.gui.style import summary_label
from quantscope.gui.theme import Theme, current_theme, restyle, style_plot
from quantscope.gui.views._point_labels import place_labels
from quantscope.gui.views.lifecycle import StateView
from quantscope.state import ExplorerState
from quantscope.state.choices import FormatChoice
from quantscope.state.formats import FormatPoint, PointsRequest, format_title

#: The most names one block of labels may hold before only the key formats are named.
MAX_BLOCK_LINES = 3
#: Right end of the bits axis: room for the labels of the 8.25-bit MX points.
X_MAX = 10.0
#: Colour role of each family of formats.
FAMILY = {"int": "total", "fp": "rounding", "mx": "sqnr", "nv": "clipping", "nf": "optimum"}


def family(spec: str) -> str:
    """``"int"``, ``"fp"``, ``"mx"``, ``"nv"`` or ``"nf"``."""
    return spec[:2] if spec[:2] in FAMILY else (
        "int" if spec.startswith(("int", "gptq", "awq")) else "fp")


def marked_specs(settings) -> list[str]:
    """The formats the panes show, as format specs."""
    if settings.formats is not None:
        return list(settings.formats)
    return [f"int{settings.bits}/channel"]


class FormatsView(StateView):
    """Every format's SQNR against its bits per element, the panes' formats ringed."""

    lane = "view:formats"
    needs_results = True  # the points follow the panes' results

    def __init__(self, state: ExplorerState | None = None, parent: QWidget | None = None, *,
                 jobs: Jobs | None = None):
        super().__init__(parent=parent, jobs=jobs)
        self.setObjectName("formatsView")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.summary = summary_label(layout, 3)
        self.widget = pg.PlotWidget()
        layout.addWidget(self.widget, 1)
        self.plot = self.widget.getPlotItem()
        self.plot.setLabel("bottom", "bits per element (scales included)")
        self.plot.setLabel("left", "SQNR (dB)")
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        self.plot.getViewBox().setMouseEnabled(x=False, y=False)
        self.guide = pg.PlotDataItem([], [])
        self.int_curve = pg.PlotDataItem([], [], symbol="o")
        self.points = {f: pg.ScatterPlotItem() for f in FAMILY}
        self.rings = pg.ScatterPlotItem(symbol="o", brush=None)
        for item in (self.guide, self.int_curve, *self.points.values(), self.rings):
            self.plot.addItem(item)
        self.labels: list[pg.TextItem] = []
        self.data: list[FormatPoint] = []
        # the names are placed in pixels: again whenever the plot's size or range changes
        self._named: list[FormatPoint] = []
        self._key_specs: set[str] = set()  # named even where names would pile up
        self._measure_item = QGraphicsTextItem()
        box = self.plot.getViewBox()
        box.sigResized.connect(self._place_labels)
        box.sigRangeChanged.connect(self._place_labels)
        self._theme = current_theme()
        restyle(self, self._theme)
        if state is not None:
            self.bind(state)

    def apply_theme(self, theme: Theme) -> None:
        self._theme = theme
        # the names' size, set: a text item left alone takes the application's font of the
        # moment it is made, which is the window's text size (11 pt at a desk)
        self._label_font = QFont()
        self._label_font.setPointSize(theme.font_pt)
        self._measure_item.setFont(self._label_font)
        self.widget.setBackground(theme.background)
        style_plot(self.plot, theme)
        size = 14 if theme.presentation else 9
        for fam, item in self.points.items():
            item.setBrush(theme.brush(FAMILY[fam]))
            item.setPen(pg.mkPen(theme.background, width=1))
            item.setSize(size)
        self.int_curve.setPen(theme.pen("total"))
        self.int_curve.setSymbolBrush(theme.brush("total"))
        self.int_curve.setSymbolSize(size - 2)
        self.guide.setPen(pg.mkPen(theme.color("histogram"), width=max(1.0, theme.line_width / 2),
                                   style=pg.QtCore.Qt.PenStyle.DotLine))
        self.rings.setPen(pg.mkPen(theme.color("current"), width=theme.marker_width))
        self.rings.setSize(size * 2.2)
        if self.data:
            self._draw()

    # -- the work (quantscope.state.formats) ------------------------------------------------
    def request(self, state: ExplorerState) -> PointsRequest:
        return PointsRequest.of(state)  # depends on every setting (the default)

    def on_tensor_changed(self) -> None:
        self.data = []

    def show_computing(self) -> None:
        self.summary.setText("computing every format…")

    def show_failure(self, message: str) -> None:
        self.summary.setText(f"failed: {message}")

    def is_ready(self) -> bool:
        """True unless the view is on show with points not yet of the current tensor and
        settings (hidden, it computes nothing, and has nothing stale to show)."""
        if not self.isVisible() or self.state is None or self.state.tensor is None:
            return True
        return not self.is_stale() and not self.job.busy and bool(self.data)

    # -- drawing ------------------------------------------------------------------------------
    def show_result(self, points: list[FormatPoint]) -> None:
        self.data = points
        self._draw()

    def _draw(self) -> None:
        pts = [p for p in self.data if np.isfinite(p.sqnr_db)]
        curve = [p for p in pts if _int_width(p.spec) is not None]
        curve.sort(key=lambda p: p.bits_per_element)
        others = [p for p in pts if _int_width(p.spec) is None]
        self.int_curve.setData([p.bits_per_element for p in curve], [p.sqnr_db for p in curve])
        for fam, item in self.points.items():
            mine = [p for p in others if family(p.spec) == fam]
            item.setData([p.bits_per_element for p in mine], [p.sqnr_db for p in mine],
                         data=[p.spec for p in mine])
        self._named = pts
        self._key_specs = set(marked_specs(self.shown_key)) | {
            p.spec for p in _best_of_tiers(pts).values()}
        self._place_labels()
        anchor = next((p for p in curve if p.spec == "int8/channel"), None)
        if anchor is not None:
            xs = np.array([1.5, X_MAX])
            self.guide.setData(xs, anchor.sqnr_db + DB_PER_BIT * (xs - anchor.bits_per_element))
        marked = [p for p in pts if p.spec in marked_specs(self.shown_key)]
        self.rings.setData([p.bits_per_element for p in marked], [p.sqnr_db for p in marked])
        self.plot.setXRange(1.5, X_MAX, padding=0)
        self.plot.enableAutoRange(axis=pg.ViewBox.YAxis)
        best = _best_of_tiers(others + curve)
        lines = [f"best {tier}: {_title(p.spec)} {p.sqnr_db:.2f} dB at "
                 f"{p.bits_per_element:.3f} bits" for tier, p in best.items()]
        lines.append("ringed: the panes' formats · dotted: 6.02 dB per bit through int8 "
                     "per channel")
        self.summary.setText("\n".join(lines))

    def _place_labels(self) -> None:
        """Each point's name beside it, names that would cover each other in one block
        (:func:`quantscope.gui.views._point_labels.place_labels`)."""
        for label in self.labels:
            self.plot.removeItem(label)
        self.labels = []
        box = self.plot.getViewBox()
        if not self._named or box.width() <= 0 or box.height() <= 0:
            return
        sizes: dict[tuple[str, ...], QSizeF] = {}  # a block is measured again on each merge

        def measure(lines: list[str]) -> QSizeF:
            key = tuple(lines)
            if key not in sizes:
                sizes[key] = self._measure(lines)
            return sizes[key]

        # every name where each has a place near its point; where names would pile up in
        # blocks (a narrow tab: two dozen formats in 300 pixels ended as one block of names
        # in the top corner, far from their points) only the panes' formats and the best
        # of each tier are named, the others are named by their tooltips
        named = self._named
        where = {p.spec: box.mapViewToScene(QPointF(p.bits_per_element, p.sqnr_db))
                 for p in self._named}
        # a point's symbol and its outline (a ringed one's ring is thin and may be crossed)
        marker = self.points["int"].opts["size"] / 2 + 2
        for _ in range(2):
            points = [(where[p.spec], _short(p.spec)) for p in named]
            shown = {p.spec for p in named}
            blocks = place_labels(points, measure, box.sceneBoundingRect(),
                                  [at for spec, at in where.items() if spec not in shown],
                                  marker)
            if max((len(b.lines) for b in blocks), default=0) <= MAX_BLOCK_LINES:
                break
            named = [p for p in self._named if p.spec in self._key_specs]
        for block in blocks:
            text = pg.TextItem("\n".join(block.lines), color=self._theme.color("total"),
                               anchor=(0, 0))
            text.setFont(self._label_font)
            text.setPos(box.mapSceneToView(block.rect.topLeft()))
            self.plot.addItem(text, ignoreBounds=True)
            self.labels.append(text)

    def _measure(self, lines: list[str]) -> QSizeF:
        """The size ``lines`` take drawn as a label (a TextItem's text, in its font)."""
        self._measure_item.setPlainText("\n".join(lines))
        return self._measure_item.boundingRect().size()

    def export_data(self) -> dict:
        return {p.spec: {"bits_per_element": p.bits_per_element, "sqnr_db": p.sqnr_db,
                         "rounding_mse": p.rounding_mse, "clipping_mse": p.clipping_mse}
                for p in self.data}


def _best_of_tiers(points: list[FormatPoint]) -> dict[str, FormatPoint]:
    """The highest-SQNR format of the 8-bit tier (6.5 bits and up) and of the 4-bit tier
    (under 5 bits), by tier."""
    best: dict[str, FormatPoint] = {}
    for p in points:
        tier = "8-bit" if p.bits_per_element >= 6.5 else (
            "4-bit" if p.bits_per_element < 5 else None)
        if tier and (tier not in best or p.sqnr_db > best[tier].sqnr_db):
            best[tier] = p
    return best


def _int_width(spec: str) -> int | None:
    """``b`` for the int curve's ``"int{b}/channel"`` points, else None."""
    choice = FormatChoice(spec)
    if choice.per_channel and choice.name.startswith("int") and choice.name[3:].isdigit():
        return int(choice.name[3:])
    return None


def _title(spec: str) -> str:
    b = _int_width(spec)
    return f"int{b} · per-channel" if b is not None else format_title(spec)


#: Short names of the formats named for a tool's rule.
_TOOL_SHORT = {"gptq_int4_g128": "GPTQ", "gptq_int4_g128_asym": "GPTQa",
               "awq_int4_g128": "AWQ", "nvfp4_modelopt": "nvfp4·mo"}


def _short(spec: str) -> str:
    choice = FormatChoice(spec)
    name, gran = choice.name, choice.granularity
    if name.startswith("gguf_"):  # llama.cpp's own short names: Q4_K, Q8_0
        return name[5:].upper()
    if name in _TOOL_SHORT:  # a tool's rule by the tool's name: the plot is narrow
        return _TOOL_SHORT[name]
    return name + ("" if gran in (None, "channel") and _int_width(spec) else
                   {"tensor": "·t", "channel": "·c", None: ""}[gran])
