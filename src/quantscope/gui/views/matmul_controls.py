"""The Matmul lab's controls: operands, schemes, output, and the two outlier fixes.

Reading the controls gives one immutable :class:`~quantscope.state.matmul_lab.LabRequest`
(:meth:`LabControls.request`); every change emits ``changed`` and the view debounces it. The
defaults are the engine's (:mod:`quantscope.core.labs.outliers` ``DEFAULT_*_SCHEME``: TFLite's
asymmetric per-tensor activations, symmetric per-channel weights, half-away rounding, LiteRT's
single rounding requantization), so the first numbers equal ``quantized_matmul(A, W)``'s.
"""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, Signal
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
    QStyle,
    QStyleOptionComboBox,
    QVBoxLayout,
    QWidget,
)
from superqt import QLabeledDoubleSlider

from quantscope.core.tensors.generators import GENERATORS
from quantscope.errors import QuantscopeError
from quantscope.io import list_tensors
from quantscope.state.matmul_lab import (
    A_GENERATORS,
    REAL_A,
    REAL_W,
    W_GENERATORS,
    LabRequest,
    Operand,
    generated,
    scheme_a,
    scheme_w,
)

ROUNDINGS = (("half away from 0 (TFLite)", "half_away"), ("half to even", "half_even"))
OUTPUTS = (("int8 asymmetric", {"symmetric": False, "rounding": "half_away"}),
           ("int8 symmetric", {"symmetric": True, "rounding": "half_away"}),
           ("float (no requantization)", None))
#: Requantization rules (core/labs/requant.py), the engine's default first.
REQUANT = (("LiteRT reference (single rounding)", "single"),
           ("LiteRT default / XNNPACK (float32)", "fp32"),
           ("gemmlowp (double rounding)", "double"),
           ("LiteRT optimized / ruy (double rounding, ties up)", "ruy"))


#: A combo's drop-down arrow and margins, in characters of its text.
ARROW_CHARS = 3


def _combo(items) -> QComboBox:
    box = QComboBox()
    # shrink with the tab (the window gives views ~40% of its width): elide, don't push
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(5)
    box.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
    for text, data in items:
        box.addItem(text, data)
    return box


def _find(box: QComboBox, data) -> int:
    """Index of the item whose data equals ``data`` (Python equality), or -1."""
    return next((i for i in range(box.count()) if box.itemData(i) == data), -1)


class LabControls(QWidget):
    """Every input of the lab. ``changed`` fires on any edit; ``error(str)`` when a file
    cannot even be listed (the loading itself fails later, in the worker)."""

    changed = Signal()
    error = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        # one row per side: where the operand comes from, then its scheme
        self.a_sym = _combo((("asymmetric", False), ("symmetric", True)))
        self.a_gran = _combo((("per tensor", False), ("per row (token)", True)))
        self.a_round = _combo(ROUNDINGS)
        self.w_sym = _combo((("symmetric", True), ("asymmetric", False)))
        self.w_gran = _combo((("per output channel", True), ("per tensor", False)))
        self.w_round = _combo(ROUNDINGS)
        for box in (self.a_sym, self.w_sym):  # one word each, whole in a narrow tab
            box.setMinimumContentsLength(len("asymmetric"))
        self.out = _combo(OUTPUTS)
        self.requant = _combo(REQUANT)
        self.order = _combo((("channels: worst first", True), ("channels: by index", False)))
        grid = self.grid = QGridLayout()
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(4)
        self.sources, self.loaders, self.names = {}, {}, {}
        self.schemes = {"A": (self.a_sym, self.a_gran, self.a_round),
                        "W": (self.w_sym, self.w_gran, self.w_round)}
        for side, what, real, gens in (
                ("A", "activations [M, K]", "MiniLM layer-0 output [197×384]", A_GENERATORS),
                ("W", "weights [K, N]", "MiniLM FFN weightᵀ [384×1536]", W_GENERATORS)):
            name = self.names[side] = QLabel(f"<b>{side}</b>")
            name.setToolTip(what)
            box = _combo([(real, REAL_A if side == "A" else REAL_W)]
                         + [(f"generated: {GENERATORS[g].label}", ("generator", g)) for g in gens])
            self.sources[side] = box
            load = QPushButton(f"Load {side}…")
            load.clicked.connect(lambda _=False, s=side: self.open_dialog(s))
            # hidden in a talk, with the transpose option for loaded files: their column at a
            # talk's text size cut the choices beside it; a talk picks among the operands
            # listed (files loaded before it included), and loads none of its own
            load.setProperty("clutter", True)
            self.loaders[side] = load
            box.currentIndexChanged.connect(self._changed)
            for w in self.schemes[side]:
                w.currentIndexChanged.connect(self._changed)
        self.names["out"] = QLabel("<b>out</b>")
        self.out.currentIndexChanged.connect(self._changed)
        self.requant.currentIndexChanged.connect(self._changed)
        extra = QHBoxLayout()
        self.transpose = QCheckBox("W file [out, in]: transpose")
        self.transpose.setChecked(True)
        self.transpose.setProperty("clutter", True)
        self.dims = {}
        for name, value in (("M", 256), ("K", 1024), ("N", 1024), ("seed", 0)):
            spin = QSpinBox()
            spin.setRange(0 if name == "seed" else 1, 2**31 - 1 if name == "seed" else 8192)
            spin.setValue(value)
            spin.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
            spin.valueChanged.connect(self._changed)
            spin.setToolTip("shape and seed of generated operands (a fixed side sets K)")
            extra.addWidget(QLabel(name))
            extra.addWidget(spin)
            self.dims[name] = spin
        extra.addStretch(1)
        self.extra = QWidget()
        self.extra.setLayout(extra)
        self.extra.setProperty("clutter", True)
        extra.setContentsMargins(0, 0, 0, 0)
        self.stacked: bool | None = None
        self.set_stacked(False)
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
            check.toggled.connect(self._changed)
            slider.valueChanged.connect(lambda _v, c=check: self._slider_moved(c))
            fixes.addWidget(check)
            fixes.addWidget(slider, 1)
            fixes.addSpacing(16)
        layout.addLayout(fixes)

    def set_stacked(self, stacked: bool) -> None:
        """One row per side (source, then its scheme), or, ``stacked`` for a narrow tab, the
        scheme on a row under the source: side by side the controls need ~760 px, and a
        tab beside the panes scrolled them sideways."""
        if stacked == self.stacked:
            return
        self.stacked = stacked
        grid = self.grid
        a_sym, a_gran, a_round = self.schemes["A"]
        if stacked:
            # each side's scheme under its source: symmetry and granularity on one row, the
            # rounding rule (the longest words) on the next, so none is cut in a narrow tab
            places = []
            for side, top in (("A", 0), ("W", 3)):
                sym, gran, rounding = self.schemes[side]
                places += [(self.names[side], top, 0, 1, 1), (self.sources[side], top, 1, 1, 2),
                           (self.loaders[side], top, 3, 1, 1), (sym, top + 1, 1, 1, 1),
                           (gran, top + 1, 2, 1, 2), (rounding, top + 2, 1, 1, 3)]
            places += [(self.names["out"], 6, 0, 1, 1), (self.out, 6, 1, 1, 2),
                       (self.order, 6, 3, 1, 1), (self.requant, 7, 1, 1, 2),
                       (self.transpose, 7, 3, 1, 1), (self.extra, 8, 1, 1, 3)]
            # in proportion to their words here too ("half away from 0 (TFLite)" is longest)
            stretches = {col: max(len(box.itemText(0)) for box in boxes) + ARROW_CHARS
                         for col, boxes in ((1, (a_sym, self.w_sym)),
                                            (2, (a_gran, self.w_gran)),
                                            (3, (self.order,)))}
            stretches.update({4: 0, 5: 0})
        else:
            places = [(self.names["out"], 2, 0, 1, 1), (self.out, 2, 1, 1, 1),
                      (self.requant, 2, 3, 1, 2), (self.order, 2, 5, 1, 1),
                      (self.transpose, 3, 1, 1, 2), (self.extra, 3, 3, 1, 3)]
            for row, side in enumerate("AW"):
                places += [(self.names[side], row, 0, 1, 1), (self.sources[side], row, 1, 1, 1),
                           (self.loaders[side], row, 2, 1, 1),
                           *((w, row, col, 1, 1) for col, w in enumerate(self.schemes[side], 3))]
            # each column's share of the width follows the length of the words it opens on:
            # with the source taking three shares and each scheme one, a projector's 1280
            # pixels cut "half away from 0 (TFLite)" and "per output channel" while the
            # source had room to spare; in proportion, every combo is whole there and all
            # shrink alike below it
            stretches = {col: max(len(box.itemText(0)) for box in boxes) + ARROW_CHARS
                         for col, boxes in (
                             (1, (self.sources["A"], self.sources["W"], self.out)),
                             (3, (a_sym, self.w_sym)), (4, (a_gran, self.w_gran)),
                             (5, (a_round, self.w_round, self.order)))}
            stretches[2] = 0
        for widget, *_ in places:  # through PySide, which forgets the old item's wrapper
            grid.removeWidget(widget)
        for widget, row, col, rows, cols in places:
            grid.addWidget(widget, row, col, rows, cols)
        for col, stretch in stretches.items():
            grid.setColumnStretch(col, stretch)

    def cut_choices(self) -> bool:
        """Whether a shown combo box's choice is wider than its field as laid out now."""
        self.layout().activate()
        for box in self.findChildren(QComboBox):
            if box.isHidden():
                continue
            option = QStyleOptionComboBox()
            option.initFrom(box)
            field = box.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                               QStyle.SubControl.SC_ComboBoxEditField, box)
            if box.fontMetrics().horizontalAdvance(box.currentText()) > field.width():
                return True
        return False

    def _changed(self, *_args) -> None:
        self.changed.emit()

    def _slider_moved(self, check: QCheckBox) -> None:
        """Dragging a fix's slider turns the fix on: one gesture in a talk, not two."""
        if not check.isChecked():
            check.setChecked(True)  # schedules through toggled
        else:
            self._changed()

    def spec(self, side: str) -> Operand:
        """The operand ``side`` ("A" or "W") names now (generated ones from M, K, N, seed)."""
        data = self.sources[side].currentData()
        if isinstance(data, Operand):
            return data
        d = {k: s.value() for k, s in self.dims.items()}
        return generated(side, data[1], d["M"], d["K"], d["N"], d["seed"])

    def request(self) -> LabRequest:
        """The immutable request the controls stand for now."""
        return LabRequest(
            a=self.spec("A"), w=self.spec("W"),
            a_scheme=LabRequest.freeze(scheme_a(self.a_sym.currentData(),
                                                self.a_gran.currentData(),
                                                self.a_round.currentData())),
            w_scheme=LabRequest.freeze(scheme_w(self.w_sym.currentData(),
                                                self.w_gran.currentData(),
                                                self.w_round.currentData())),
            out_scheme=LabRequest.freeze(self.out.currentData()),
            alpha=float(self.alpha.value()) if self.smooth_on.isChecked() else None,
            threshold=float(self.threshold.value()) if self.split_on.isChecked() else None,
            requantization=self.requant.currentData(),
        )

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
            self.error.emit(str(exc))
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

    def select(self, side: str, spec: Operand) -> None:
        """Put ``side``'s combo back on ``spec`` and drop file entries that failed."""
        box = self.sources[side]
        box.blockSignals(True)
        try:
            want = spec if spec.kind != "generator" else ("generator", spec.name)
            box.setCurrentIndex(max(_find(box, want), 0))
            for i in reversed(range(box.count())):
                data = box.itemData(i)
                if isinstance(data, Operand) and data.kind == "file" and data != spec:
                    box.removeItem(i)
        finally:
            box.blockSignals(False)


__all__ = ["OUTPUTS", "REQUANT", "ROUNDINGS", "LabControls"]
