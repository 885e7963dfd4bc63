"""One of the four panes: the values' histogram over the bucket grid, the code-occupancy strip,
and the numbers table.

Plot items are created once and updated in place (``setData``, ``setPath``), and a change
repaints each pane once, without moving its layout; every number shown is a formatted engine
number (:mod:`quantscope.gui.numbers`).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QPoint, QRectF, Qt, QTimer
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontDatabase,
    QPainter,
    QPainterPath,
    QPen,
    QRegion,
)
from PySide6.QtWidgets import (
    QFrame,
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from quantscope.core import QuantReport
from quantscope.gui.caption_label import CaptionLabel
from quantscope.gui.key_label import KeyLabel
from quantscope.gui.numbers import FIELDS, WIDE, WIDE_UNIT_SCALES
from quantscope.gui.pane_axes import (
    CodeAxis,
    CountAxis,
    RangeAxis,
    draw_axis,
    follow_width,
    reserve_tick_text,
)
from quantscope.gui.step_histogram import StepHistogram
from quantscope.gui.style import reserve_lines, reserve_width, selectable_on_hover
from quantscope.gui.tight_lines import tighten
from quantscope.state import PaneKey, TensorOverview
from quantscope.state.display import PaneDisplay, pane_display
from quantscope.state.histogram import bar_heights, overview_unit_heights

HIST_PEN = pg.mkPen("#1f4e9c", width=1.5)
HIST_BRUSH = pg.mkBrush(31, 78, 156, 70)
WINDOW_BRUSH = pg.mkBrush(46, 160, 67, 28)
CLIP_BRUSH = pg.mkBrush(214, 39, 40, 45)
GRID_PEN = pg.mkPen(QColor(90, 90, 90, 60), width=0)
EDGE_PEN = pg.mkPen("#2ca02c", width=2)
ZERO_PEN = pg.mkPen("#333333", width=1.5, style=Qt.PenStyle.DashLine)
SLOT_BRUSH = pg.mkBrush(235, 235, 235)
USED_BRUSH = pg.mkBrush("#1f4e9c")
#: Lines a caption keeps room for (it says what dominates the error in a sentence, broken in
#: at most two lines): a caption that wraps differently must not resize the four plots (see
#: ``reserve_lines`` and :mod:`quantscope.gui.caption_label`).
CAPTION_LINES = 2
#: At most this many histogram bins (about two per pixel of a wide pane).
MAX_BINS = 2048
#: Quiet time after a zoom step before the histogram is binned again.
REBIN_MS = 30


def mono_font(point_size: int = 11) -> QFont:
    """The system fixed-width font at ``point_size`` (numbers line up in columns)."""
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setPointSize(point_size)
    return font


def theme_brush(color: str, alpha: int) -> QBrush:
    """A solid brush of ``color`` at ``alpha`` (0-255)."""
    c = QColor(color)
    c.setAlpha(alpha)
    return QBrush(c)


def pane_key(theme, per_unit: bool, grid: str | None = None, short: bool = False) -> str:
    """The one-line key under a pane's title: a swatch in each mark's colour and its name
    (``short``: the grid's in one word, for a narrow pane; see
    :mod:`quantscope.gui.key_label`)."""
    def swatch(role: str, glyph: str) -> str:
        return f'<span style="color:{theme.mark(role)}; font-weight:700">{glyph}</span>'

    grid = "grid" if short else grid or ("median channel's grid" if per_unit else "code grid")
    return (f"{swatch('window', '[ ]')} window &nbsp;{swatch('clipped', '▀')} clipped "
            f"&nbsp;{swatch('zero', '┆')} zero point &nbsp;{swatch('grid', '│')} {grid}")


class FlatRegion(pg.LinearRegionItem):
    """A clip or window band, filled without antialiasing: the band is an axis-aligned
    rectangle, so antialiasing only softens its two edges by a pixel (its edge lines are
    separate items, still antialiased), while it made the raster engine fill the translucent
    rectangle through its generic path rasterizer -- 0.8 ms against 0.2 ms per fill of a
    plot-sized band, five bands per pane, four panes per settings change."""

    def __init__(self, *args, edges: bool = True, **kwargs) -> None:
        #: the bounds last computed, until the region, its span or the view moves: Qt asks a
        #: dozen times a repaint, and each answer was a dozen Python calls (the region's
        #: edges read, sorted and laid over the view's rectangle)
        self._bounds: QRectF | None = None
        super().__init__(*args, **kwargs)
        if not edges:
            # a band drawn without edges (no pen) still had its two edge lines painted --
            # nothing, through a Python ``paint`` -- and asked for their bounds in Python on
            # every repaint and move: four such bands a pane, eight lines, a tenth of a
            # change's GUI-thread time
            for line in self.lines:
                line.hide()

    def boundingRect(self) -> QRectF:
        if self._bounds is None:
            self._bounds = super().boundingRect()  # tells Qt when it changed, as before
        return self._bounds

    def lineMoved(self, i) -> None:
        self._bounds = None
        super().lineMoved(i)

    def setSpan(self, mn, mx) -> None:
        self._bounds = None
        super().setSpan(mn, mx)

    def viewTransformChanged(self) -> None:
        self._bounds = None  # the view's rectangle in this item's coordinates moved
        super().viewTransformChanged()

    def paint(self, p, *args) -> None:
        p.save()  # the items painted after it keep their antialiasing
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        super().paint(p, *args)
        p.restore()


def _path_item(pen: QPen | None = None, brush: QBrush | None = None) -> QGraphicsPathItem:
    """A plain Qt path item: Qt paints it without a call into Python, where a pyqtgraph
    curve runs a Python ``paint`` on every repaint (together a third of a pane's repaint and
    of ``set_report`` for the grid, slots and bars)."""
    item = QGraphicsPathItem()
    item.setPen(pen if pen is not None else QPen(Qt.PenStyle.NoPen))
    if brush is not None:
        item.setBrush(brush)
    return item


class Pane(QFrame):
    """Histogram + bucket grid, occupancy strip and numbers for one scheme.

    Attributes
    ----------
    plot, strip : pyqtgraph.PlotItem
        Value histogram (x: value) and code occupancy (x: code).
    values : dict[str, QLabel]
        The number labels by field key (see :data:`quantscope.gui.numbers.FIELDS`).
    report : QuantReport or None
        The report currently displayed.
    """

    def __init__(self, key: str, title: str, parent=None) -> None:
        super().__init__(parent)
        self.key = key
        self.report: QuantReport | None = None
        #: what is drawn of ``report`` (texts, grid, code strip), formed by the state's display
        self.display: PaneDisplay | None = None
        self._held = False  # see hold_paint
        self._changed: list[QWidget] = []  # what changed while held, itself held
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName("pane")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setSpacing(4)
        # the scheme in the title's size, its channel axis and count in a smaller line; the
        # detail is cut rather than widen the pane (the four keep equal shares)
        self.title = QLabel("")
        self.title.setObjectName("paneTitle")
        self.detail = QLabel("")
        self.detail.setObjectName("paneDetail")
        self.detail.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.title)
        self.key_label = KeyLabel()  # what the marks mean (see apply_theme)
        # a font with tall lines makes these lines no taller (see gui/tight_lines.py)
        for label in (self.title, self.detail, self.key_label):
            tighten(label)
        self.key_label.setObjectName("paneKey")
        # the detail shares the key's line (every pane has one, so rows stay level): no
        # height taken from the plots
        marks = QHBoxLayout()
        marks.setSpacing(12)
        marks.addWidget(self.key_label)
        marks.addWidget(self.detail, 1)
        self.detail.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        # the key beside it changes its words with the scheme ("median block's grid"): the
        # detail's room changes without the pane's size (see eventFilter)
        self.detail.installEventFilter(self)
        layout.addLayout(marks)
        self.set_title(title)
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.graphics.ci.layout.setContentsMargins(0, 0, 0, 0)
        self.graphics.ci.layout.setVerticalSpacing(2)
        # A dozen items need no spatial index; keeping Qt's BSP index current asked every
        # moved item for its bounding rectangle (a Python call in pyqtgraph), ~1 ms per pane
        # per change.
        self.graphics.scene().setItemIndexMethod(QGraphicsScene.ItemIndexMethod.NoIndex)
        # The plots' viewport covers itself with the (opaque) plot background before it draws
        # anything: said so, Qt leaves out what lies beneath -- the viewport's own and its
        # half-dozen ancestors' style-sheet backgrounds, filled over the plots' whole area on
        # every repaint of a pane (about a tenth of a change's GUI-thread time)
        self.graphics.viewport().setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        # a refused pane shows its reason where its plots were: same size, so the panes of a
        # row keep their tables level
        self.stack = QStackedWidget()
        self.stack.addWidget(self.graphics)
        layout.addWidget(self.stack, 1)
        self._build_plot()
        self._build_strip()
        # a font with tall lines makes its lines no taller than their letters need
        self.caption = tighten(CaptionLabel(CAPTION_LINES), every_line=True)
        self.caption.setObjectName("paneCaption")
        reserve_lines(self.caption, CAPTION_LINES)
        self.caption.hide()
        layout.addWidget(self.caption)
        self._cache_static_items()
        self.error = QLabel("")
        self.error.setObjectName("paneError")
        self.error.setWordWrap(True)
        self.error.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.stack.addWidget(self.error)
        layout.addLayout(self._build_table())

    # -- construction -------------------------------------------------------------------------
    def _cache_static_items(self) -> None:
        """Blit the axes from pixmaps: on a settings change they mostly stay, and replaying
        their text for four panes cost more than the numbers themselves (measured ~30% of a
        repaint)."""
        cache = QGraphicsItem.CacheMode.DeviceCoordinateCache
        for plot in (self.plot, self.strip):
            for side in ("left", "bottom"):
                plot.getAxis(side).setCacheMode(cache)

    def _build_plot(self) -> None:
        self.plot = self.graphics.addPlot(row=0, col=0, axisItems={"left": CountAxis("left"),
                                                          "bottom": RangeAxis("bottom")})
        self.plot.setLabel("left", "count")
        self.plot.getAxis("left").setToolTip(
            "values per 1/2048 of the tensor's range: the bars are binned on this pane's code "
            "buckets and scaled to that width, so zooming and new buckets keep the scale")
        self.plot.showGrid(x=False, y=True, alpha=0.15)
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot.getViewBox().setDefaultPadding(0.02)
        self.clip_lo = FlatRegion(brush=CLIP_BRUSH, pen=pg.mkPen(None), movable=False,
                                  edges=False)
        self.clip_hi = FlatRegion(brush=CLIP_BRUSH, pen=pg.mkPen(None), movable=False,
                                  edges=False)
        self.window = FlatRegion(brush=WINDOW_BRUSH, pen=EDGE_PEN, movable=False)
        # the tint alone is too faint to read on a projector: a solid band along the top of
        # each clipped range carries the mark (see apply_theme)
        self.clip_lo.band = FlatRegion(pen=pg.mkPen(None), movable=False, span=(0.95, 1.0),
                                       edges=False)
        self.clip_hi.band = FlatRegion(pen=pg.mkPen(None), movable=False, span=(0.95, 1.0),
                                       edges=False)
        for item in (self.clip_lo, self.clip_hi, self.window, self.clip_lo.band,
                     self.clip_hi.band):
            item.setZValue(-10)
            item.hide()
            self.plot.addItem(item, ignoreBounds=True)
        self.grid = _path_item(pen=GRID_PEN)
        self.grid.setZValue(-5)
        self.plot.addItem(self.grid, ignoreBounds=True)
        self.hist = StepHistogram(HIST_PEN, HIST_BRUSH)
        self.plot.addItem(self.hist, ignoreBounds=True)  # ranges are set, not followed
        # per channel or group, the values clipped in their own unit's window, over the
        # histogram: the one window drawn is the units' union, inside which a narrow
        # channel's clipped values would otherwise show as unclipped
        self.clipped_hist = StepHistogram(pg.mkPen(None), CLIP_BRUSH)
        self.clipped_hist.hide()
        self.plot.addItem(self.clipped_hist, ignoreBounds=True)
        self.zero = pg.InfiniteLine(angle=90, pen=ZERO_PEN, movable=False,
                                    label="zp", labelOpts={"position": 0.92, "color": "#333",
                                                           "fill": (255, 255, 255, 200)})
        self.zero.hide()
        self.plot.addItem(self.zero, ignoreBounds=True)
        self._grid_scale = 0.0
        self._grid_key: tuple = ()  # what the grid's path was built from (see _draw_regions)
        self._grid_alpha = -1
        #: ``(boundaries, view, max_bins) -> (edges, counts)`` or None: the histogram binned on
        #: this pane's buckets (the window sets it to ``ExplorerState.histogram``); without
        #: it the pane shows the tensor's overview histogram
        self.histogram_source = None
        #: ``report -> PaneDisplay`` or None: what the pane draws of a report, shaped with it
        #: off this thread (``ExplorerState.display``); without it the pane shapes it
        self.display_source = None
        #: ``(report, edges) -> counts`` or None: per bin, the report's elements clipped in
        #: their own unit's window (``ExplorerState.clipped_histogram``; None per tensor)
        self.clipped_source = None
        self._boundaries = np.zeros(0)
        self._binned: tuple = ()
        self._ytop: float | None = None
        self.rebin_timer = QTimer(self)
        self.rebin_timer.setSingleShot(True)
        self.rebin_timer.setInterval(REBIN_MS)
        self.rebin_timer.timeout.connect(self._rebin)
        self.plot.sigXRangeChanged.connect(lambda *_: (self._update_grid_pen(),
                                                       self.rebin_timer.start()))
        # the lines' spacing in pixels changes with the plot's width as well: a pane a talk
        # had widened kept the talk's darker grid after it
        self.plot.getViewBox().sigResized.connect(lambda *_: self._update_grid_pen())

    def _build_strip(self) -> None:
        self.strip = self.graphics.addPlot(row=1, col=0, axisItems={
            "left": RangeAxis("left"), "bottom": CodeAxis("bottom")})
        self.graphics.ci.layout.setRowStretchFactor(0, 4)
        self.graphics.ci.layout.setRowStretchFactor(1, 1)
        # the strip is a fifth of the pane: a rotated "log₁₀(1+n)" is taller than it and ran
        # into the histogram's own axis label at presentation sizes, so the unit goes under it
        self.strip.setLabel("bottom", "code  (bar height: log₁₀(1+n))")
        self.strip.setToolTip("code occupancy: values per code; grey slots are codes no value "
                              "uses")
        self.strip.getAxis("bottom").enableAutoSIPrefix(False)
        # a fifth of the pane high, the count axis has room for two or three labelled ticks;
        # pyqtgraph's minor levels added a comb of unlabelled ones (every 0.5 and 0.1)
        self.strip.getAxis("left").setStyle(maxTickLevel=0, maxTextLevel=0)
        self._strip_view: tuple = ()
        self.strip.setMouseEnabled(x=True, y=False)
        # the strip's plot area starts where the histogram's does, whatever the count axis
        # reserves (its label and tick font change with the theme)
        count_axis = self.plot.getAxis("left")
        count_axis.on_width = lambda w: follow_width(self.strip.getAxis("left"), w)
        follow_width(self.strip.getAxis("left"), count_axis.maximumWidth())
        # A light slot behind every code (one rectangle) and the occupancy over it as one
        # filled step path (not 255 bars), so empty codes show as empty slots.
        self.slots = QGraphicsRectItem()
        self.slots.setBrush(SLOT_BRUSH)
        self.slots.setPen(QPen(Qt.PenStyle.NoPen))
        self.bars = _path_item(brush=USED_BRUSH)
        self.bar_heights = np.zeros(0)  # what the bars show: log10(1 + count) per code
        for item in (self.slots, self.bars):  # the strip's ranges are set from the report
            self.strip.addItem(item, ignoreBounds=True)

    def _build_table(self) -> QVBoxLayout:
        """The scale on a line of its own (per channel it is three numbers, up to 37
        characters: inside the two-pair grid it would set the pane's minimum width), then the
        other numbers two per row. Every value keeps a reserved width (``reserve_width``), so
        new numbers never move the table or resize the plots."""
        table = QVBoxLayout()
        table.setSpacing(1)
        scale_row = QHBoxLayout()
        scale_row.setSpacing(8)
        grid = QGridLayout()
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(1)
        self.labels: dict[str, QLabel] = {}
        self.values: dict[str, QLabel] = {}
        font = mono_font()
        for i, (key, label) in enumerate(FIELDS):
            name = QLabel(label)
            name.setObjectName("fieldName")
            value = QLabel("—")
            value.setFont(font)
            value.setObjectName("fieldValue")
            tighten(name)
            tighten(value)
            selectable_on_hover(value)
            per_unit = key == "scale" and not PaneKey.parse(self.key).per_tensor
            reserve_width(value, WIDE_UNIT_SCALES if per_unit else WIDE[key])
            if key == "scale":
                scale_row.addWidget(name)
                scale_row.addWidget(value, 1)
            else:
                row, col = divmod(i - 1, 2)
                grid.addWidget(name, row, 2 * col)
                grid.addWidget(value, row, 2 * col + 1)
            self.labels[key], self.values[key] = name, value
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)
        table.addLayout(scale_row)
        table.addLayout(grid)
        return table

    # -- updates ------------------------------------------------------------------------------
    def set_title(self, title: str) -> None:
        """Change the heading (per-channel panes become per-group)."""
        head, sep, detail = title.partition(" · ")
        more, _, rest = detail.partition(" · ")
        self._set_text(self.title, head + sep + more)
        self.title.setToolTip(title)
        self.detail.setToolTip(title)
        self._heading = title
        self._detail = rest
        self._fit_detail()

    def _fit_detail(self) -> None:
        """The detail in full, or ``axis 0 · 384`` when the line is short (presentation
        sizes), never cut mid-word (the full text stays in the tooltips)."""
        room = self.detail.contentsRect().width()
        text = getattr(self, "_detail", "")
        metrics = self.detail.fontMetrics()
        if text and metrics.horizontalAdvance(text) > room:
            words = text.split(" · ")
            short = " · ".join([words[0], words[1].split(" ")[0]]) if len(words) > 1 else text
            text = short if metrics.horizontalAdvance(short) <= room else ""
        self._set_text(self.detail, text)

    def hasHeightForWidth(self) -> bool:
        """No: the grid's equal stretch alone sizes the four panes. A wrapped caption asked
        its row for the height its text needs, so under a TensorRT preset (the asymmetric
        row refused, without captions) the symmetric row took 100 px from the other, and
        after the undo the rows stayed a few pixels apart. The caption's room is reserved
        anyway (``CAPTION_LINES``)."""
        return False

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_detail()

    def eventFilter(self, obj, event) -> bool:
        """Fit the detail again when its own room changes: a key that grew narrowed it and
        its right-aligned text was cut at the left ("536" of "1536 channels")."""
        if obj is self.detail and event.type() == QEvent.Type.Resize:
            self._fit_detail()
        return super().eventFilter(obj, event)

    def heading(self) -> str:
        """The full title: scheme, then channel axis and count (what ``--metrics`` records)."""
        return self._heading

    def set_stale(self, stale: bool) -> None:
        """Grey the numbers while newer settings are being computed."""
        if stale == getattr(self, "_stale", False):
            return
        self._stale = stale
        for value in self.values.values():
            self._changing(value)
            value.setStyleSheet("color: #a0a4ab;" if stale else "")

    def set_short(self, short: bool) -> None:
        """In a short window (a 720-row laptop) the occupancy strip gives its rows to the
        histogram, which the table's numbers and the title would otherwise leave a few
        pixels; "codes used" stays in the table, and the strip returns when there is room."""
        if not hasattr(self, "_strip_heights"):
            self._strip_heights = (self.strip.minimumHeight(), self.strip.maximumHeight())
        lo, hi = (0.0, 0.0) if short else self._strip_heights
        self.strip.setVisible(not short)
        self.strip.setMinimumHeight(lo)  # a hidden layout item keeps its room otherwise
        self.strip.setMaximumHeight(hi)
        self.graphics.ci.layout.setRowStretchFactor(1, 0 if short else 1)
        # a hidden axis takes no width: shown again, it takes the histogram's
        follow_width(self.strip.getAxis("left"), self.plot.getAxis("left").maximumWidth())

    def set_caption(self, text: str) -> None:
        """A one-sentence explanation under the plot (views may set it; empty hides it)."""
        if self.caption.isHidden() == bool(text):
            self._changing(self)  # the plots and table move: the whole pane waits
        self._set_text(self.caption, text)
        if self.caption.toolTip() != text:  # the whole sentence, where its end is cut
            self.caption.setToolTip(text)
        self.caption.setVisible(bool(text))

    def set_error(self, text: str) -> None:
        """Show why this pane has no numbers (the engine refused its settings), in place of
        its plots, whose items are cleared: nothing of the previous scheme stays on show."""
        self._set_text(self.error, text)
        page = self.error if text else self.graphics
        if self.stack.currentWidget() is not page:
            self._changing(self.stack)
            self.stack.setCurrentWidget(page)
        if text:
            self.report = self.display = None
            for value in self.values.values():
                self._set_text(value, "—")
            for item in (self.window, self.clip_lo, self.clip_hi, self.zero):
                item.hide()
            self.grid.setPath(QPainterPath())
            self._grid_key = ()
            self.bars.setPath(QPainterPath())
            self.bar_heights = np.zeros(0)

    def set_overview(self, ov: TensorOverview | None, log: bool) -> None:
        """Draw the tensor's value histogram until the pane's own bucket-binned one is in
        (see :meth:`_rebin`), over the tensor's finite range."""
        if ov is None:
            self.hist.setData([], [])
            return
        counts = bar_heights(ov.hist_counts, log)
        self.plot.setLabel("left", "log₁₀(1+n)" if log else "count")
        # ranges set here, not followed automatically: a histogram re-binned on new buckets
        # would otherwise move them and paint every pane twice per change
        self.plot.getViewBox().disableAutoRange()
        self.show_range(ov)
        self._ytop = None
        self._set_heights(ov.hist_edges, counts)
        self._overview, self._log = ov, log
        self._binned = ()
        self._draw_regions()

    def show_range(self, ov: TensorOverview) -> None:
        """Show the tensor's finite range, unless the pane follows another's zoom (then the
        other sets it: each linked pane setting it too moved all of them again, since links
        align the views' pixels, and repainted every pane once per pane)."""
        if self.plot.getViewBox().linkedView(0) is None:
            self.plot.setXRange(ov.min, ov.max, padding=0.02)

    def _set_heights(self, edges: np.ndarray, heights: np.ndarray) -> None:
        """New histogram data; the count axis moves only when the bars outgrow it or shrink
        below half of it (then once, applied now, so the pane still paints once)."""
        self.hist.setData(edges, heights)
        top = float(heights.max()) * 1.05 if heights.size and heights.max() > 0 else 1.0
        if self._ytop is None or top > self._ytop or top < 0.5 * self._ytop:
            self._ytop = top
            self.plot.setYRange(0.0, top, padding=0)
            self.plot.getViewBox().updateMatrix()

    def set_report(self, report: QuantReport) -> None:
        """Show a report: the numbers, the bucket grid, the window and the occupancy."""
        self.report = report
        source = self.display_source
        self.display = shown = source(report) if source is not None else pane_display(report)
        self.set_error("")
        words = (shown.grid_words, shown.is_format)
        if words != getattr(self, "_key_words", None) and hasattr(self, "_theme"):
            self._key_words = words
            self._write_key()
        for key, value in self.values.items():
            text = shown.texts[key]
            self._set_text(value, text)
            if value.fontMetrics().horizontalAdvance(text) > value.minimumWidth():
                self._changing(self)  # the table's columns move: the whole pane waits
                reserve_width(value, text)  # the widest text yet: the column never shrinks
            self._set_text(self.labels[key], shown.labels[key])
        self._draw_regions()
        strip = shown.strip
        self.bar_heights = strip.heights
        self.bars.setPath(pg.arrayToQPath(  # the steps' outline, closed along the axis
            np.repeat(strip.edges, 2), np.concatenate([[0.0], np.repeat(strip.heights, 2), [0.0]])))
        view = (strip.qmin - 1, strip.qmax + 1, strip.top)
        if view != self._strip_view:  # unchanged ranges: no axis regeneration, no new slots
            self._strip_view = view
            self.slots.setRect(QRectF(strip.edges[0], 0.0, strip.edges[-1] - strip.edges[0],
                                      strip.top))
            self.strip.getAxis("bottom").set_codes(strip.qmin, strip.qmax)
            self.strip.setXRange(strip.qmin - 1, strip.qmax + 1, padding=0)
            self.strip.setYRange(0, strip.top, padding=0.05)
            # pyqtgraph applies a new range to the view's transform while painting, which
            # dirties the scene again: a second full repaint of the pane. Applied now, the
            # pane paints once.
            self.strip.getViewBox().updateMatrix()

    def _draw_regions(self) -> None:
        shown = self.display
        ov = getattr(self, "_overview", None)
        if shown is None or ov is None:
            return
        g = shown.grid
        lo, hi = g.window
        self._boundaries = g.boundaries
        self._rebin()
        top = 4.0 * (self._ytop or 1.0)  # past the view's top whatever the bins' heights
        # unchanged lines (a new rounding rule, a percentile that moves no boundary) keep
        # their path: 255 lines' path and their median spacing are rebuilt only when moved
        grid_key = (g.boundaries.tobytes(), top, g.spacing)
        if grid_key != self._grid_key:
            self._grid_key = grid_key
            self.grid.setPath(pg.arrayToQPath(np.repeat(g.boundaries, 2),
                                              np.tile([0.0, top], g.boundaries.size),
                                              connect="pairs"))
            self._grid_scale = g.spacing if g.spacing is not None else (
                float(np.median(np.diff(g.boundaries))) if g.boundaries.size > 1 else 0.0)
        self.window.setRegion((lo, hi))
        self.window.show()
        self._region(self.clip_lo, ov.min, lo, ov.min < lo)
        self._region(self.clip_hi, hi, ov.max, ov.max > hi)
        hidden = not self.zero.isVisible()
        self.zero.show()  # the label only re-renders while visible
        self.zero.setValue(g.zero)
        label = f"zero point {shown.texts['zero_point']}"
        if hidden or self.zero.label.format != label:  # each setFormat re-lays out the text
            self.zero.label.setFormat(label)
        if self.plot.toolTip() != g.note:
            self.plot.setToolTip(g.note)
        self._update_grid_pen()

    def _rebin(self) -> None:
        """Bin the histogram on this pane's buckets over the visible part of the data (see
        :mod:`quantscope.state.histogram`); again after every zoom."""
        self.rebin_timer.stop()
        ov = getattr(self, "_overview", None)
        if self.histogram_source is None or ov is None or self.report is None:
            return
        (x0, x1), _ = self.plot.getViewBox().viewRange()
        # never beyond the data: bins snapped outward past the view would widen the
        # auto-range, which would re-bin wider again
        view = (max(x0, ov.min), min(x1, ov.max))
        if not view[1] > view[0]:
            view = (ov.min, ov.max)
        bins = int(np.clip(2 * self.plot.getViewBox().width(), 256, MAX_BINS))
        per_unit = self.clipped_source is not None and self.report.per_channel is not None
        # per unit, a new report can clip other values on the same buckets
        key = (self._boundaries.tobytes(), view, bins, self._log,
               self.report if per_unit else None)
        if key == self._binned:
            return
        result = self.histogram_source(self._boundaries, view, bins)
        if result is None:
            return
        self._binned = key
        edges, counts = result
        heights, per_value = overview_unit_heights(ov.hist_edges, ov.hist_counts, edges, counts,
                                                   self._log)
        self._set_heights(edges, heights)
        self._set_clipped(edges, per_value)

    def _set_clipped(self, edges: np.ndarray, per_value: np.ndarray) -> None:
        """Draw the elements clipped in their own unit's window on ``edges``, in the
        histogram's height unit (``per_value``: one value's height in each bin), or nothing
        where the state has no per-unit clipping for this pane."""
        counts = (self.clipped_source(self.report, edges)
                  if self.clipped_source is not None else None)
        #: how many elements the clipped bars stand for (the report's clipped count)
        self.clipped_drawn = int(counts.sum()) if counts is not None else None
        if counts is None or not counts.any():
            self.clipped_hist.setData(np.zeros(0), np.zeros(0))
            self.clipped_hist.hide()
            return
        self.clipped_hist.setData(edges, bar_heights(counts * per_value, self._log))
        self.clipped_hist.show()

    def _update_grid_pen(self) -> None:
        """Fade the bucket boundaries when they are denser than a few pixels: at full zoom 255
        lines would paint a grey wash; zooming in spreads them and they darken."""
        width_px = max(self.plot.getViewBox().width(), 1.0)
        (x0, x1), _ = self.plot.getViewBox().viewRange()
        spacing_px = self._grid_scale * width_px / max(x1 - x0, 1e-300)
        # Overlapping lines add up: below ~4 px the alpha scales with the spacing so that a
        # full-zoom grid stays a faint tint; from ~4 px each line is drawn distinctly.
        # From ~9 px apart each line is opaque: a mark read from the back of a room.
        alpha = int(np.clip(28 * spacing_px, 3, 255))
        if alpha != self._grid_alpha:
            self._grid_alpha = alpha
            color = QColor(getattr(self, "_grid_color", QColor(60, 60, 60)))
            color.setAlpha(alpha)
            self.grid.setPen(pg.mkPen(color, width=0))

    @staticmethod
    def _region(item: pg.LinearRegionItem, a: float, b: float, visible: bool) -> None:
        for region in (item, item.band):
            if visible:
                region.setRegion((a, b))
            region.setVisible(visible)

    # -- look ---------------------------------------------------------------------------------
    themed = True  # quantscope.gui.theme calls apply_theme on every theme change

    def apply_theme(self, theme) -> None:
        """Draw the marks in ``theme``'s colours (each at least 3:1 on the plot's background,
        light and dark) and write the key to match."""
        mark = theme.mark
        thick = 1.5 if theme.presentation else 1.0
        self.hist.setPen(pg.mkPen(mark("histogram"), width=1.5 * thick))
        self.hist.setBrush(theme_brush(mark("histogram"), 70))
        self.window.setBrush(theme_brush(mark("window"), 28))
        for line in self.window.lines:
            line.setPen(pg.mkPen(mark("window"), width=2 * thick))
        self.clipped_hist.setBrush(theme_brush(mark("clipped"), 160))
        for item in (self.clip_lo, self.clip_hi):
            item.setBrush(theme_brush(mark("clipped"), 45))
            item.band.setBrush(theme_brush(mark("clipped"), 255))
        self.zero.setPen(pg.mkPen(mark("zero"), width=1.5 * thick,
                                  style=Qt.PenStyle.DashLine))
        fg, bg = theme.text("zero_label")
        self.zero.label.setColor(fg)
        self.zero.label.fill = theme_brush(bg, 220)
        font = QFont()
        font.setPointSize(theme.axis_font_pt)
        self.zero.label.setFont(font)
        self.slots.setBrush(theme_brush("#3A3A3A" if theme.dark else "#EBEBEB", 255))
        self.bars.setBrush(theme_brush(mark("histogram"), 255))
        self._grid_color = QColor(mark("grid"))
        self._grid_alpha = -1
        self._update_grid_pen()
        self._theme = theme
        self._write_key()
        reserve_tick_text(self.plot.getAxis("left"))  # the strip's axis follows it

    def _write_key(self) -> None:
        """The key and its tooltip for what the grid lines of the scheme on show are."""
        words, fmt = getattr(self, "_key_words", (None, False))
        per_unit = not PaneKey.parse(self.key).per_tensor if words is None else "median" in words
        self._changing(self.key_label)  # held with the pane, as every text is
        self.key_label.set_texts(pane_key(self._theme, per_unit, words),
                                 pane_key(self._theme, per_unit, words, short=True))
        lines = ("grey lines: the representable values" if fmt else
                 "grey lines: rounding boundaries between neighbouring codes")
        self.key_label.setToolTip(
            "shaded, between the green edges: the window of values the codes represent · "
            "red band: values beyond it, clipped to the end codes · dashed line: the value "
            "the zero point code stands for · " + lines +
            (" (of the median-scale unit)" if per_unit else ""))

    # -- paint pacing (the window gives each pane its own turn of the event loop) -------------
    def hold_paint(self) -> None:
        """Stop repainting until :meth:`paint_now`: the pane keeps its old picture while its
        new numbers and plots are set, and while panes it follows change their zoom.

        The plots stop at once; every other part of the pane stops when it is about to
        change (:meth:`_changing`), so that the turn's paint covers what changed and no more:
        a repaint of the whole pane also painted its two dozen unchanged labels and their
        style sheet backgrounds, ~1 ms of a pane's 4-5 ms paint."""
        self._held = True
        self.graphics.setUpdatesEnabled(False)

    def _changing(self, widget: QWidget) -> None:
        """``widget`` (a label, the plots' stack, or the pane itself when its layout moves)
        is about to change: while the pane is held it keeps its old picture until the turn."""
        if self._held and widget.updatesEnabled():
            widget.setUpdatesEnabled(False)
            self._changed.append(widget)

    def _set_text(self, label: QLabel, text: str) -> None:
        """``label.setText(text)``, held with the pane (see :meth:`hold_paint`)."""
        if label.text() != text:
            self._changing(label)
            label.setText(text)

    def paint_now(self) -> None:
        """Repaint at once, exactly once (after :meth:`prepare_paint`): the plots and what
        changed beside them while the pane was held."""
        self.prepare_paint()
        if not self._held:
            return
        changed = self.release_paint()
        if self in changed:
            self.repaint()
            return
        region = QRegion(self.stack.geometry())
        for widget in changed:
            region += QRegion(widget.rect()).translated(widget.mapTo(self, QPoint(0, 0)))
        self.repaint(region)

    def release_paint(self) -> list[QWidget]:
        """Let the pane repaint again (see :meth:`hold_paint`); returns what had changed."""
        changed, self._changed = self._changed, []
        self._held = False
        for widget in changed:
            widget.setUpdatesEnabled(True)
        self.graphics.setUpdatesEnabled(True)
        return changed

    def prepare_paint(self) -> None:
        """Apply what pyqtgraph would apply in the middle of the next paint -- a pending view
        range, the axes' new tick text and the width it needs, the bins of a moved view:
        applied mid-paint, each dirties the scene again and the pane paints a second time
        in the next turn. Cheap when nothing is pending."""
        self.graphics.scene().prepareForPaint()  # pending ranges -> transforms
        for plot in (self.plot, self.strip):
            for side in ("left", "bottom"):
                draw_axis(plot.getAxis(side))
        self.graphics.ci.layout.activate()  # an axis that grew moves the plots now
        if self.rebin_timer.isActive():  # the view moved (a zoom, a resize): bin it now
            self._rebin()
        # the zero-point label undoes the view's scaling in a transform of its own, which it
        # sets up in its first paint (later, on the scene's prepareForPaint): set there, it
        # moves the label and asks for a second paint right after the first
        self.zero.label.updateTransform()
        scene = self.graphics.scene()
        # the scene's queued dirty-item pass, now, while updates are off: run after the
        # paint, it would ask for a second one
        for _ in range(2):  # the pass posts the scene's "changed" in turn
            QCoreApplication.sendPostedEvents(scene, QEvent.Type.MetaCall)

    def displayed(self) -> dict[str, str]:
        """Field key -> the text shown (what ``--metrics`` records)."""
        return {key: label.text() for key, label in self.values.items()}



def link_plots(panes: list[Pane], hidden: tuple[Pane, ...] = ()) -> None:
    """Zoom the ``panes`` together (x follows the first) and unlink the ``hidden`` ones.

    pyqtgraph keeps linked views aligned on screen, so a hidden pane squeezed to a few pixels
    would pull the ranges of the shown ones (a count axis starting at 1.1 instead of 0). The
    count axes are not linked at all: side by side, two plots whose tops differ by a line
    (one pane's heading wraps) were lined up off zero; each pane sets its own from the same
    counts (``_set_heights``), and the count axis does not zoom by hand.
    """
    for pane in (*hidden, *panes):
        pane.plot.setXLink(None)
        pane.plot.setYLink(None)
    first = panes[0]
    for pane in panes[1:]:
        pane.plot.setXLink(first.plot)
