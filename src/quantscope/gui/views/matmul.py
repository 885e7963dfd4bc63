"""The integer matmul lab: int8 A × int8 W → int32 → int8, and what outlier fixes buy.

Pick A (activations) and W (weights) -- the bundled MiniLM layer-0 pair by default, a
generator, or a file --, each side's scheme, the output and the requantization rounding
(TFLite's reference double rounding or the LiteRT runtime's single rounding), then drag
SmoothQuant's α and LLM.int8()'s threshold. Every control change becomes one immutable
:class:`~quantscope.gui.views.matmul_model.LabRequest`, debounced (40 ms) and run in the view's
one :class:`~quantscope.gui.views._jobs.LatestJob` (generation stamps; stale results dropped).
The result of :func:`quantscope.core.outliers.quantized_matmul` is drawn as it is: the big
numbers are :func:`~quantscope.gui.views.matmul_model.display_text` of it, the plots its error
array and per-channel SQNR, with the plain path (no fix) as a grey ghost for comparison.

A bad file shows a message and the previous operands stay (the combo boxes go back to them).
"""

from __future__ import annotations

import os

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)
from superqt import QLabeledDoubleSlider

from quantscope.core.generators import GENERATORS
from quantscope.errors import QuantscopeError
from quantscope.gui.theme import Theme, current_theme, style_plot
from quantscope.gui.views._jobs import LatestJob
from quantscope.gui.views.matmul_model import (
    A_GENERATORS,
    REAL_A,
    REAL_W,
    W_GENERATORS,
    LabCache,
    LabOutcome,
    LabRequest,
    Operand,
    generated,
    scheme_a,
    scheme_w,
)
from quantscope.io import list_tensors

DEBOUNCE_MS = 40
ROUNDINGS = (("half away from 0 (TFLite)", "half_away"), ("half to even", "half_even"))
OUTPUTS = (("int8 asymmetric", {"symmetric": False, "rounding": "half_away"}),
           ("int8 symmetric", {"symmetric": True, "rounding": "half_away"}),
           ("float (no requantization)", None))
REQUANT = (("TFLite reference (double rounding)", False),
           ("LiteRT runtime (single rounding)", True))
#: The big numbers, in reading order: (key in display_text, caption).
NUMBERS = (("sqnr", "SQNR vs float A·W"), ("headroom", "int32 accumulator headroom"),
           ("saturated", "Saturation"), ("zero_points", "Zero-point cost"),
           ("outliers", "LLM.int8() split"))
DETAILS = {"sqnr": ("sqnr_plain", "max_error"), "headroom": ("accumulator", "safe_k"),
           "saturated": ("saturated_detail",), "zero_points": ("zp_detail",),
           "outliers": ("outliers_detail",)}


def _combo(items) -> QComboBox:
    box = QComboBox()
    for text, data in items:
        box.addItem(text, data)
    return box


def _find(box: QComboBox, data) -> int:
    """Index of the item whose data equals ``data`` (Python equality), or -1."""
    return next((i for i in range(box.count()) if box.itemData(i) == data), -1)


class MatmulView(QWidget):
    """The Matmul lab (see the module docstring). ``outcome`` is the last result shown."""

    themed = True
    outcome_changed = Signal(object)
    error_shown = Signal(str)

    def __init__(self, state=None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("matmulView")
        self.outcome: LabOutcome | None = None
        self.cache = LabCache()
        self.job = LatestJob(self)
        self.job.finished.connect(self._on_outcome)
        self.job.failed.connect(self._on_failed)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(DEBOUNCE_MS)
        self.timer.timeout.connect(self._submit)
        self._good: tuple[Operand, Operand] = (REAL_A, REAL_W)
        self._pending_request: LabRequest | None = None
        self._dirty = True
        self._chan_pens: dict = {}
        self._build()
        self.apply_theme(current_theme())
        if state is not None:
            self.bind(state)

    def bind(self, state) -> None:
        """The lab has its own two operands; the explorer's tensor does not drive it."""

    # -- construction -------------------------------------------------------------------------
    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        # one row per side: where the operand comes from, then its scheme
        self.a_sym = _combo((("asymmetric", False), ("symmetric", True)))
        self.a_gran = _combo((("per tensor", False), ("per row (token)", True)))
        self.a_round = _combo(ROUNDINGS)
        self.w_sym = _combo((("symmetric", True), ("asymmetric", False)))
        self.w_gran = _combo((("per output channel", True), ("per tensor", False)))
        self.w_round = _combo(ROUNDINGS)
        self.out = _combo(OUTPUTS)
        self.requant = _combo(REQUANT)
        self.order = _combo((("channels: worst first", True), ("channels: by index", False)))
        self.order.currentIndexChanged.connect(self._draw_channels)
        grid = QGridLayout()
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(4)
        self.sources, self.loaders = {}, {}
        for row, (side, what, real, gens, scheme) in enumerate((
                ("A", "A activations", "MiniLM layer-0 output [197×384]", A_GENERATORS,
                 (self.a_sym, self.a_gran, self.a_round)),
                ("W", "W weights", "MiniLM FFN weightᵀ [384×1536]", W_GENERATORS,
                 (self.w_sym, self.w_gran, self.w_round)))):
            grid.addWidget(QLabel(f"<b>{what}</b>"), row, 0)
            box = _combo([(real, REAL_A if side == "A" else REAL_W)]
                         + [(f"generated: {GENERATORS[g].label}", ("gen", g)) for g in gens])
            self.sources[side] = box
            grid.addWidget(box, row, 1)
            load = QPushButton(f"Load {side}…")
            load.clicked.connect(lambda _=False, s=side: self.open_dialog(s))
            self.loaders[side] = load
            grid.addWidget(load, row, 2)
            for col, w in enumerate((box, *scheme), start=3):
                w.currentIndexChanged.connect(self._schedule)
                if w is not box:
                    grid.addWidget(w, row, col)
        grid.addWidget(QLabel("<b>Output</b>"), 2, 0)
        grid.addWidget(self.out, 2, 1)
        grid.addWidget(self.requant, 2, 3, 1, 3)
        self.out.currentIndexChanged.connect(self._schedule)
        self.requant.currentIndexChanged.connect(self._schedule)
        extra = QHBoxLayout()
        self.transpose = QCheckBox("W file is [out, in]: transpose")
        self.transpose.setChecked(True)
        extra.addWidget(self.transpose)
        self.dims = {}
        for name, value in (("M", 256), ("K", 1024), ("N", 1024), ("seed", 0)):
            spin = QSpinBox()
            spin.setRange(0 if name == "seed" else 1, 2**31 - 1 if name == "seed" else 8192)
            spin.setValue(value)
            spin.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
            spin.valueChanged.connect(self._schedule)
            spin.setToolTip("shape and seed of generated operands (a fixed side sets K)")
            spin.setMinimumWidth(80)
            extra.addWidget(QLabel(name))
            extra.addWidget(spin)
            self.dims[name] = spin
        extra.addStretch(1)
        self.extra = QWidget()
        self.extra.setLayout(extra)
        self.extra.setProperty("clutter", True)
        extra.setContentsMargins(0, 0, 0, 0)
        grid.addWidget(self.extra, 3, 1, 1, 5)
        grid.addWidget(self.order, 2, 6)
        grid.setColumnStretch(1, 1)
        layout.addLayout(grid)

        # the outlier fixes: a checkbox and a slider each; dragging a slider turns its fix on
        fixes = QHBoxLayout()
        self.smooth_on = QCheckBox("SmoothQuant α")
        self.alpha = QLabeledDoubleSlider(Qt.Orientation.Horizontal)
        self.alpha.setRange(0.0, 1.0)
        self.alpha.setDecimals(2)
        self.alpha.setValue(0.5)
        self.split_on = QCheckBox("LLM.int8() threshold")
        self.threshold = QLabeledDoubleSlider(Qt.Orientation.Horizontal)
        self.threshold.setRange(0.5, 20.0)
        self.threshold.setDecimals(1)
        self.threshold.setValue(6.0)
        for check, slider in ((self.smooth_on, self.alpha), (self.split_on, self.threshold)):
            check.toggled.connect(self._schedule)
            slider.valueChanged.connect(lambda _v, c=check: self._slider_moved(c))
            fixes.addWidget(check)
            fixes.addWidget(slider, 1)
            fixes.addSpacing(16)
        layout.addLayout(fixes)

        self.message = QLabel("")
        self.message.setObjectName("banner")
        self.message.setWordWrap(True)
        self.message.hide()
        layout.addWidget(self.message)

        body = QHBoxLayout()
        panel = QVBoxLayout()
        self.shapes = QLabel("")
        self.shapes.setWordWrap(True)
        panel.addWidget(self.shapes)
        self.captions, self.values, self.details = {}, {}, {}
        for key, caption in NUMBERS:
            cap = QLabel(caption)
            value = QLabel("…")
            value.setWordWrap(True)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.captions[key], self.values[key] = cap, value
            panel.addWidget(cap)
            panel.addWidget(value)
            for detail in DETAILS.get(key, ()):
                self.details[detail] = QLabel("")
                self.details[detail].setWordWrap(True)
                panel.addWidget(self.details[detail])
            panel.addSpacing(6)
        self.path = QLabel("")
        self.path.setWordWrap(True)
        self.path.setProperty("clutter", True)
        panel.addWidget(self.path)
        panel.addStretch(1)
        side = QWidget()
        side.setLayout(panel)
        side.setMinimumWidth(360)
        side.setMaximumWidth(720)
        body.addWidget(side, 3)
        self.graphics = pg.GraphicsLayoutWidget()
        self.hist_plot = self.graphics.addPlot(row=0, col=0)
        self.chan_plot = self.graphics.addPlot(row=1, col=0)
        self.hist_plot.setTitle("Output error: int8 path − float A·W")
        self.hist_plot.setLabel("bottom", "error")
        self.hist_plot.setLabel("left", "outputs")
        self.hist_plot.setLogMode(x=False, y=True)
        self.chan_plot.setTitle("SQNR per output channel")
        self.chan_plot.setLabel("bottom", "output channel n")
        self.chan_plot.setLabel("left", "SQNR (dB)")
        # legends where the curves are not: top right of the bell, bottom right of the
        # ascending worst-first curve
        for plot, corner in ((self.hist_plot, (1, 0)), (self.chan_plot, (1, 1))):
            plot.showGrid(x=True, y=True, alpha=0.15)
            legend = plot.addLegend()
            legend.anchor(itemPos=corner, parentPos=corner,
                          offset=(-10, 10 if corner[1] == 0 else -10))
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
        self.chan_plot.addItem(self.chan_total, ignoreBounds=True)
        body.addWidget(self.graphics, 7)
        layout.addLayout(body, 1)

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
        for key, label in self.values.items():
            size = pt * 1.4 + 10 if key in ("sqnr", "headroom") else pt * 1.0 + 3.5
            label.setStyleSheet(f"font-size: {round(size)}pt; font-weight: 700;"
                                f" color: {fg};")
        for label in self.captions.values():
            label.setStyleSheet(f"font-size: {round(pt * 0.7 + 3.5)}pt; color: {muted};")
        for label in (*self.details.values(), self.shapes):
            label.setStyleSheet(f"font-size: {round(pt * 0.75 + 3.5)}pt; color: {fg};")
        self.path.setStyleSheet(f"font-size: {pt}pt; color: {muted};")

    # -- controls -> request ------------------------------------------------------------------
    def _slider_moved(self, check: QCheckBox) -> None:
        if not check.isChecked():
            check.setChecked(True)  # schedules through toggled
        else:
            self._schedule()

    def _schedule(self, *_args, user: bool = True) -> None:
        """A control changed: (re)start the debounce timer; the request is read when it fires."""
        if user:
            self._clear_error()
        self.timer.start()

    def _spec(self, side: str) -> Operand:
        data = self.sources[side].currentData()
        if isinstance(data, Operand):
            return data
        d = {k: s.value() for k, s in self.dims.items()}
        return generated(side, data[1], d["M"], d["K"], d["N"], d["seed"])

    def request(self) -> LabRequest:
        """The immutable request the controls stand for now."""
        return LabRequest(
            a=self._spec("A"), w=self._spec("W"),
            a_scheme=LabRequest.freeze(scheme_a(self.a_sym.currentData(),
                                                self.a_gran.currentData(),
                                                self.a_round.currentData())),
            w_scheme=LabRequest.freeze(scheme_w(self.w_sym.currentData(),
                                                self.w_gran.currentData(),
                                                self.w_round.currentData())),
            out_scheme=LabRequest.freeze(self.out.currentData()),
            alpha=float(self.alpha.value()) if self.smooth_on.isChecked() else None,
            threshold=float(self.threshold.value()) if self.split_on.isChecked() else None,
            single_rounding=bool(self.requant.currentData()),
        )

    def _submit(self) -> None:
        if not self.isVisible():
            self._dirty = True  # computed when first shown: a hidden tab costs nothing
            return
        self._dirty = False
        req = self._pending_request = self.request()
        cache = self.cache
        self.job.submit(lambda: cache.run(req))

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._dirty:
            self.timer.start()

    # -- files --------------------------------------------------------------------------------
    def open_dialog(self, side: str) -> None:
        """Ask for a file (and a tensor when it holds several) for ``side``."""
        path, _ = QFileDialog.getOpenFileName(self, f"Load {side}", "",
                                              "Tensors (*.npy *.npz *.safetensors);;All (*)")
        if not path:
            return
        tensor = None
        try:
            infos = [i for i in list_tensors(path) if len(i.shape) == 2]
        except QuantscopeError as exc:
            self._show_error(str(exc))
            return
        if len(infos) > 1:
            name, ok = QInputDialog.getItem(self, "Tensor", "2-D tensor:",
                                            [i.name for i in infos], 0, False)
            if not ok:
                return
            tensor = name
        self.load_file(side, path, tensor)

    def load_file(self, side: str, path: str | os.PathLike, tensor: str | None = None) -> None:
        """Use a file's tensor as ``side`` ("A" or "W"); failures keep the previous operands."""
        spec = Operand("file", str(path), tensor,
                       transpose=side == "W" and self.transpose.isChecked())
        box = self.sources[side]
        index = _find(box, spec)
        if index < 0:
            box.addItem(f"file: {spec.label()}", spec)
            index = box.count() - 1
        box.setCurrentIndex(index)  # schedules

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
        self.path.setText(f"int32 product: {text['path']}")
        self.hist_plain.setData(outcome.hist_centres, outcome.plain_counts)
        self.hist_now.setData(outcome.hist_centres, outcome.hist_counts)
        self._draw_channels()
        total = outcome.result.vs_float.sqnr_db
        self.chan_total.setValue(total if np.isfinite(total) else 0.0)
        self.chan_plot.setTitle(f"SQNR per output channel (dashed: total {text['sqnr']})")
        self.outcome_changed.emit(outcome)

    def _draw_channels(self) -> None:
        outcome = self.outcome
        if outcome is None:
            return
        ranked = self.order.currentData()
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
            if self._spec(side) != good:
                self._select(side, good)
                reverted = True
        if reverted:  # recompute with the previous operands and the current schemes
            self._schedule(user=False)

    def _select(self, side: str, spec: Operand) -> None:
        """Put ``side``'s combo back on ``spec`` and drop file entries that failed."""
        box = self.sources[side]
        box.blockSignals(True)
        try:
            want = spec if spec.kind != "generated" else ("gen", spec.name)
            box.setCurrentIndex(max(_find(box, want), 0))
            for i in reversed(range(box.count())):
                data = box.itemData(i)
                if isinstance(data, Operand) and data.kind == "file" and data != spec:
                    box.removeItem(i)
        finally:
            box.blockSignals(False)

    def _show_error(self, message: str) -> None:
        self.message.setText(message)
        self.message.show()
        self.error_shown.emit(message)

    def _clear_error(self) -> None:
        self.message.hide()
        self.message.setText("")

    # -- lifetime -----------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the debounce timer and join the worker (no thread outlives the view)."""
        self.timer.stop()
        self.job.shutdown()

    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)


__all__ = ["DEBOUNCE_MS", "MatmulView"]
