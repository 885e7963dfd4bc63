"""Choosing one tensor of a multi-tensor file (.npz, .safetensors): name, shape, dtype, size,
with a filter box. Non-modal (``show()``, never ``exec()``) so nothing blocks, offscreen tests
included; the choice arrives through the ``chosen`` signal."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from quantscope.io import TensorInfo
from quantscope.io.tensor_info import format_bytes

COLUMNS = ("name", "shape", "dtype", "size")


class TensorPicker(QDialog):
    """Lists a file's tensors; emits ``chosen(name)`` on double-click or OK."""

    chosen = Signal(str)

    def __init__(self, path: str, infos: list[TensorInfo], parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Choose a tensor — {path}")
        self.setModal(False)
        self.resize(760, 480)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"{len(infos)} tensors in {path}"))
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("filter by name, e.g. weight")
        self.filter.setClearButtonEnabled(True)
        layout.addWidget(self.filter)
        self.table = QTableWidget(len(infos), len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for row, info in enumerate(infos):
            cells = (info.name, "x".join(map(str, info.shape)) or "scalar", info.dtype,
                     format_bytes(info.nbytes))
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == 0:
                    item.setData(Qt.ItemDataRole.UserRole, info.name)
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        layout.addWidget(buttons)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        self.table.cellDoubleClicked.connect(lambda _r, _c: self._accept())
        self.filter.textChanged.connect(self.apply_filter)
        if infos:
            self.table.selectRow(0)

    def apply_filter(self, text: str) -> None:
        """Hide rows whose name does not contain ``text`` (case-insensitive)."""
        needle = text.strip().lower()
        first = None
        for row in range(self.table.rowCount()):
            hidden = needle not in self.table.item(row, 0).text().lower()
            self.table.setRowHidden(row, hidden)
            if not hidden and first is None:
                first = row
        if first is not None:
            self.table.selectRow(first)

    def visible_names(self) -> list[str]:
        """Names of the rows the filter shows."""
        return [self.table.item(r, 0).text() for r in range(self.table.rowCount())
                if not self.table.isRowHidden(r)]

    def choose(self, name: str) -> None:
        """Pick ``name`` (what a double-click does)."""
        self.chosen.emit(name)
        self.accept()

    def _accept(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows and not self.table.isRowHidden(rows[0].row()):
            self.choose(self.table.item(rows[0].row(), 0).text())
