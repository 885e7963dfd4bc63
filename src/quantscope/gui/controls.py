"""The quantization controls: range method, percentile, manual clip, rounding, narrow/full range,
bit width, channel axis, group size, runtime preset.

The panel only *writes* settings through ``state.update_settings`` and *reads* them back on
``settings_changed`` inside a signals-blocked block (napari's habit), so a value echoed back never
triggers a second computation. A dragged slider writes every step at once: the live state's
scheduler keeps only the newest request of the reports, so the panes never fall behind and no
timer of the panel's own holds a value back.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QWidget,
)
from superqt import QDoubleRangeSlider

from quantscope.gui.caption_label import CaptionCombo
from quantscope.state import (
    RUNTIME_DESCRIPTIONS,
    ExplorerState,
    Settings,
    preset_in_force,
    preset_rules,
)
from quantscope.state.settings import MAX_GROUP_SIZE

METHOD_LABELS = {"minmax": "min / max", "percentile": "percentile", "mse": "MSE-optimal",
                 "entropy": "entropy (TensorRT KL)", "manual": "manual clip"}
ROUNDING_LABELS = {"half_even": "half to even", "half_away": "half away from zero"}
NARROW_LABELS = {None: "default", True: "narrow", False: "full"}
NARROW_TIPS = {None: "the engine default: narrow for symmetric, full for asymmetric",
               True: "narrow: drop the most negative code (-127..127 at 8 bits)",
               False: "full: every code (-128..127 at 8 bits)"}
ROLE_LABELS = {None: "from its name and shape", "weight": "weight [out, in…]: axis 0",
               "activation": "activation […, features]: axis -1"}
#: The preset list: runtime, version and device of each (the tooltips say which ops).
RUNTIME_LABELS = {None: "none (engine)", "pytorch": "PyTorch 2.13 CPU",
                  "pytorch-fake": "PyTorch 2.13 CPU fake quant / PT2E",
                  "pytorch-2.11": "PyTorch 2.11 CPU", "pytorch-cuda": "PyTorch 2.11 CUDA",
                  "pytorch-cuda-fake": "PyTorch 2.11 CUDA fake quant",
                  "onnxruntime": "ONNX Runtime 1.32 CPU",
                  "onnxruntime-dynamic": "ONNX Runtime 1.32 CPU DynamicQuantizeLinear",
                  "tflite": "LiteRT 2.3 reference",
                  "tflite-xnnpack": "LiteRT 2.3 XNNPACK",
                  "tflite-optimized": "LiteRT 2.3 optimized, no delegate",
                  "tensorrt": "TensorRT / ModelOpt 0.47"}
#: Slider positions per decade of "nines": 0 -> p90, 100 -> p99, 300 -> p99.99, 500 -> p99.9999.
_NINES = 100


def percentile_to_slider(p: float) -> int:
    """Slider position of a percentile on the 'nines' scale (p100 pins to the right end)."""
    if p >= 100:
        return 5 * _NINES
    return max(0, min(5 * _NINES, round(_NINES * (1 - math.log10(100 - p)))))


def slider_to_percentile(v: int) -> float:
    """Inverse of :func:`percentile_to_slider` (rounded to 6 decimals for display)."""
    return round(100 - 10 ** (1 - v / _NINES), 6)


def _combo(options: dict, tips: dict | None = None, box: QComboBox | None = None) -> QComboBox:
    box = box if box is not None else QComboBox()
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(8)
    for value, label in options.items():
        box.addItem(label, value)
        if tips:
            box.setItemData(box.count() - 1, tips[value], Qt.ItemDataRole.ToolTipRole)
    return box


class ControlsPanel(QGroupBox):
    """All quantization settings as widgets bound to an :class:`ExplorerState`."""

    themed = True  # quantscope.gui.theme calls apply_theme on presentation/dark toggles

    def __init__(self, state: ExplorerState, parent=None) -> None:
        super().__init__("Quantization", parent)
        self.state = state
        form = self.form = QFormLayout(self)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.method = _combo(METHOD_LABELS)
        form.addRow("range", self.method)

        self.percentile = QDoubleSpinBox()
        self.percentile.setDecimals(4)
        self.percentile.setRange(50.0, 100.0)
        self.percentile.setKeyboardTracking(False)
        self.percentile_slider = QSlider(Qt.Orientation.Horizontal)
        self.percentile_slider.setRange(0, 5 * _NINES)
        # the number to type on the row, the slider to drag under it (as the clip window):
        # beside the spin box, which is as wide as "100.0000" and its arrows, the slider was
        # left a stub of the column
        form.addRow("percentile", self.percentile)
        form.addRow("", self.percentile_slider)

        # The manual clip window: a range slider to drag, and the two ends as numbers to type.
        self.clip = QDoubleRangeSlider(Qt.Orientation.Horizontal)
        self.clip.setRange(-1.0, 1.0)
        self.clip.setValue((-1.0, 1.0))
        self.clip_lo, self.clip_hi = QDoubleSpinBox(), QDoubleSpinBox()
        for box in (self.clip_lo, self.clip_hi):
            box.setDecimals(4)
            box.setRange(-1e30, 1e30)
            box.setKeyboardTracking(False)
            # its size hint would fit "-1e30" in full: let the form decide the width instead
            box.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
            box.setMinimumWidth(70)
            box.setButtonSymbols(QDoubleSpinBox.ButtonSymbols.NoButtons)
        ends = QHBoxLayout()
        ends.setContentsMargins(0, 0, 0, 0)
        ends.addWidget(self.clip_lo, 1)  # the ends share the room, not the word "to"
        ends.addWidget(QLabel("to"))
        ends.addWidget(self.clip_hi, 1)
        ends_row = QWidget()
        ends_row.setLayout(ends)
        form.addRow("clip window", ends_row)
        form.addRow("", self.clip)

        self.rounding = _combo(ROUNDING_LABELS)
        form.addRow("rounding", self.rounding)
        self.narrow = _combo(NARROW_LABELS, NARROW_TIPS)
        form.addRow("code range", self.narrow)
        self.bits = QSlider(Qt.Orientation.Horizontal)
        self.bits.setRange(2, 8)
        self.bits.setTickPosition(QSlider.TickPosition.TicksBelow)
        self.bits.setPageStep(1)
        self.bits_label = QSpinBox()
        self.bits_label.setRange(2, 8)
        self.bits_label.setSuffix(" bits")
        self.bits_label.setKeyboardTracking(False)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.bits, 1)
        row.addWidget(self.bits_label)
        bits_row = QWidget()
        bits_row.setLayout(row)
        form.addRow("bit width", bits_row)
        self.role = _combo(ROLE_LABELS, box=CaptionCombo())
        self.role.setToolTip("what the tensor is: its channel axis follows (picked again for "
                             "every new tensor)")
        # its first choice is the rule that picked the axis, a sentence with the tensor's
        # name in it: under its label, the panel's full width and two lines
        form.addRow(QLabel("tensor is"))
        form.addRow(self.role)
        self.axis = QSpinBox()
        self.axis.setKeyboardTracking(False)
        form.addRow("channel axis", self.axis)
        self.group = QSpinBox()
        self.group.setRange(0, MAX_GROUP_SIZE)  # what Settings.check accepts
        self.group.setSpecialValueText("off")
        self.group.setToolTip("elements per group along the channel axis; off = per channel")
        self.group.setKeyboardTracking(False)
        form.addRow("group size", self.group)
        self.runtime = _combo(RUNTIME_LABELS, RUNTIME_DESCRIPTIONS)
        form.addRow("runtime preset", self.runtime)
        # what cannot be honoured as the controls show it (a preset under a manual window)
        self.note = QLabel("")
        self.note.setObjectName("controlsNote")
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #b3261e;")
        self.note.hide()
        form.addRow(self.note)
        self.log_counts = QCheckBox("log counts")
        form.addRow("histogram", self.log_counts)
        self._connect()
        state.settings_changed.connect(self.sync)
        state.tensor_changed.connect(self.sync)
        state.prepared_changed.connect(self.sync)
        state.results_changed.connect(self._show_window_in_use)
        self.sync()

    def apply_theme(self, theme) -> None:
        """Presentation mode: each label above its field. Side by side, the 17 pt labels left
        the fields a stub of the column (the percentile slider vanished, the clip ends read
        "-0.17(") unless the column grew wider than a 1600-pixel projector allows."""
        policy = QFormLayout.RowWrapPolicy
        self.form.setRowWrapPolicy(policy.WrapAllRows if theme.presentation
                                   else policy.DontWrapRows)

    def _connect(self) -> None:
        st = self.state
        self.method.activated.connect(lambda _i: self._set_method(self.method.currentData()))
        self.rounding.activated.connect(
            lambda _i: st.update_settings(rounding=self.rounding.currentData()))
        self.narrow.activated.connect(
            lambda _i: st.update_settings(narrow_range=self.narrow.currentData()))
        self.runtime.activated.connect(
            lambda _i: st.update_settings(runtime=self.runtime.currentData()))
        self.role.activated.connect(lambda _i: st.set_role(self.role.currentData()))
        self.axis.valueChanged.connect(lambda v: st.update_settings(axis=int(v)))
        self.group.valueChanged.connect(lambda v: st.update_settings(group_size=int(v) or None))
        self.percentile.valueChanged.connect(lambda v: st.update_settings(percentile=float(v)))
        self._slider(self.percentile_slider,
                     lambda v: dict(percentile=slider_to_percentile(v)))
        self._slider(self.bits, lambda v: dict(bits=int(v)))
        self.bits_label.valueChanged.connect(lambda v: st.update_settings(bits=int(v)))
        self._slider(self.clip, lambda v: dict(method="manual",
                                              manual_clip=(float(v[0]), float(v[1]))))
        self.clip_lo.valueChanged.connect(lambda _v: self._typed_clip())
        self.clip_hi.valueChanged.connect(lambda _v: self._typed_clip())

    def _typed_clip(self) -> None:
        lo, hi = self.clip_lo.value(), self.clip_hi.value()
        if lo < hi:
            self.state.update_settings(method="manual", manual_clip=(lo, hi))
        else:
            self.state.error.emit(f"clip window: the low end ({lo:g}) must be below the high "
                                  f"end ({hi:g})")

    def _slider(self, slider, changes) -> None:
        """Every step of a slider goes to the state at once, dragged or not: the state's
        scheduler keeps only the newest request of the reports (a drag never builds a
        backlog), so no timer here holds a value back."""
        slider.valueChanged.connect(lambda value: self.state.update_settings(**changes(value)))

    def _set_method(self, method: str) -> None:
        changes: dict = {"method": method}
        ov = self.state.overview
        if method == "manual" and self.state.settings.manual_clip is None and ov is not None:
            changes["manual_clip"] = (ov.min, ov.max) if ov.max > ov.min else None
        self.state.update_settings(**changes)

    def sync(self) -> None:
        """Show the state's settings (signals blocked: no echo back into the state)."""
        st = self.state
        s: Settings = st.settings
        # the rules that compute the panes: a preset's own, except under a manual window
        rules = preset_rules(preset_in_force(s), s.bits)
        widgets = (self.method, self.percentile, self.percentile_slider, self.clip, self.clip_lo,
                   self.clip_hi, self.rounding, self.narrow, self.bits, self.bits_label,
                   self.axis, self.group, self.runtime, self.role)
        blocked = [w.blockSignals(True) for w in widgets]
        try:
            self.method.setCurrentIndex(self.method.findData(s.method))
            self.percentile.setValue(s.percentile)
            self.percentile_slider.setValue(percentile_to_slider(s.percentile))
            # a control the preset decides shows the preset's value, greyed
            self._show_rounding(s.rounding, rules)
            self._show_code_range(s.narrow_range, rules["code_range"])
            self.bits.setValue(s.bits)
            self.bits_label.setValue(s.bits)
            ndim = st.tensor.ndim if st.tensor is not None else 1
            self.axis.setRange(-ndim, ndim - 1)
            self.axis.setValue(s.axis)
            self.axis.setEnabled(ndim > 1)
            role = st.source.role if st.source is not None else None
            self.role.setCurrentIndex(list(ROLE_LABELS).index(role))
            self.role.setEnabled(ndim > 1)
            self.group.setValue(s.group_size or 0)
            self.runtime.setCurrentIndex(list(RUNTIME_LABELS).index(s.runtime))
            ov = st.overview
            if ov is not None and ov.max > ov.min:
                pad = 0.25 * max(abs(ov.min), abs(ov.max))
                self.clip.setRange(ov.min - pad, ov.max + pad)
        finally:
            for w, b in zip(widgets, blocked, strict=True):
                w.blockSignals(b)
        self._show_window_in_use()
        for widget in (self.percentile, self.percentile_slider):
            widget.setEnabled(s.method == "percentile")
        self.rounding.setEnabled(rules["rounding_text"] is None)
        self.rounding.setToolTip("" if rules["rounding_text"] is None
                                 else "the runtime preset decides the rounding")
        self.narrow.setEnabled(rules["code_range"] is None)
        applied = st.applied()
        rule = applied["axis_rule"] if st.tensor is not None else ROLE_LABELS[None]
        self.role.setItemText(0, rule if role is None else ROLE_LABELS[None])
        self.role.setToolTip(f"channel axis: {rule}")
        notes = applied["notes"]
        self.note.setText("⚠ " + "; ".join(notes) if notes else "")
        self.note.setVisible(bool(notes))

    def _show_rounding(self, rounding: str, rules: dict) -> None:
        """The rounding combo: the setting, the preset's rule (greyed), or, where the preset
        rounds its schemes differently, each scheme's rule (one rule shown for both was
        false for one of them)."""
        if self.rounding.count() > len(ROUNDING_LABELS):
            self.rounding.removeItem(len(ROUNDING_LABELS))
        text = rules["rounding_text"]
        if text is None or rules["rounding"] is not None:
            self.rounding.setCurrentIndex(self.rounding.findData(rules["rounding"] or rounding))
            return
        for key, label in ROUNDING_LABELS.items():
            text = text.replace(key, label)
        self.rounding.addItem(f"preset: {text}", "preset")
        self.rounding.setCurrentIndex(len(ROUNDING_LABELS))

    def _show_code_range(self, narrow: bool | None, preset_text: str | None) -> None:
        """The code range combo: the setting, or (greyed) the range the preset imposes."""
        if self.narrow.count() > len(NARROW_LABELS):
            self.narrow.removeItem(len(NARROW_LABELS))
        if preset_text is None:
            self.narrow.setCurrentIndex(list(NARROW_LABELS).index(narrow))
            self.narrow.setToolTip("")
            return
        self.narrow.addItem(f"preset: {preset_text}", "preset")
        self.narrow.setCurrentIndex(len(NARROW_LABELS))
        self.narrow.setToolTip("the runtime preset decides the code range")

    def _show_window_in_use(self) -> None:
        """The clip-window fields show the window the panes use in every mode (typing or
        dragging there switches to a manual window)."""
        window = self.state.window_in_use()
        ov = self.state.overview
        if window is None:
            window = (ov.min, ov.max) if ov is not None else (-1.0, 1.0)
        lo, hi = (float(v) for v in window)
        widgets = (self.clip, self.clip_lo, self.clip_hi)
        blocked = [w.blockSignals(True) for w in widgets]
        try:
            self.clip.setValue((lo, hi))
            self.clip_lo.setValue(lo)
            self.clip_hi.setValue(hi)
        finally:
            for w, b in zip(widgets, blocked, strict=True):
                w.blockSignals(b)
