"""The Formats tab of the side panel: turn the comparison layout on and pick each pane's format.

Like the other controls it only writes ``state.update_settings(formats=...)`` and reads the
settings back with its signals blocked, so a value echoed back never computes twice.
"""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QGroupBox, QLabel, QPushButton

from quantscope.state import ExplorerState
from quantscope.state.formats import CHOICES, DEFAULT_COMPARISON, format_title

#: Where each pane sits in the 2x2 grid (the order of ``quantscope.state.PANES``).
POSITIONS = ("top left", "top right", "bottom left", "bottom right")


class FormatControls(QGroupBox):
    """A check box for the comparison layout and one format menu per pane."""

    themed = False

    def __init__(self, state: ExplorerState, parent=None) -> None:
        super().__init__("Number formats", parent)
        self.setObjectName("formatControls")
        self.state = state
        form = QFormLayout(self)
        self.compare = QCheckBox("Compare formats")
        self.compare.setToolTip("Each pane shows a number format of its own on the same "
                                "tensor; off: the four int schemes")
        form.addRow(self.compare)
        self.menus: list[QComboBox] = []
        for pos, default in zip(POSITIONS, DEFAULT_COMPARISON, strict=True):
            box = QComboBox()
            # the longest title would otherwise set the side panel's minimum width
            box.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            box.setMinimumContentsLength(8)
            for spec in CHOICES:
                box.addItem(format_title(spec), spec)
            box.setCurrentIndex(CHOICES.index(default))
            box.currentIndexChanged.connect(self._on_menu_changed)
            self.menus.append(box)
            form.addRow(pos, box)
        self.reset = QPushButton("int8 · FP8 · MXFP4 · INT4")
        self.reset.setToolTip("The comparison that answers 'int8 or FP8, and can it go to 4 "
                              "bits?'")
        self.reset.clicked.connect(self._on_reset_clicked)
        form.addRow(self.reset)
        note = QLabel("Block formats run along the last axis; element formats use the "
                      "Quantization tab's method and axis.")
        note.setWordWrap(True)
        note.setObjectName("fieldName")
        form.addRow(note)
        self.compare.toggled.connect(self._on_compare_toggled)
        state.settings_changed.connect(self.sync)
        self.sync()

    def chosen(self) -> tuple[str, str, str, str]:
        """The four menus' formats, in pane order."""
        return tuple(box.currentData() for box in self.menus)

    def _on_compare_toggled(self, on: bool) -> None:
        self.state.update_settings(formats=self.chosen() if on else None)

    def _on_menu_changed(self, _index: int) -> None:
        if self.compare.isChecked():
            self.state.update_settings(formats=self.chosen())

    def _on_reset_clicked(self) -> None:
        self.state.update_settings(formats=DEFAULT_COMPARISON)

    def sync(self) -> None:
        """Show the state's settings (signals blocked: no echo back into the state)."""
        formats = self.state.settings.formats
        widgets = [self.compare, *self.menus]
        blocked = [w.blockSignals(True) for w in widgets]
        try:
            self.compare.setChecked(formats is not None)
            if formats is not None:
                for box, spec in zip(self.menus, formats, strict=True):
                    box.setCurrentIndex(CHOICES.index(spec))
        finally:
            for w, b in zip(widgets, blocked, strict=True):
                w.blockSignals(b)

