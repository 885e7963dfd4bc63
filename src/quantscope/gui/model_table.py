"""The model view's table: one row per tensor of a checkpoint, sorted and filtered in Python.

A checkpoint can hold thousands of tensors whose rows arrive a few at a time; a
``QSortFilterProxyModel`` would re-sort through a Python ``data()`` call per comparison on
every arrival (hundreds of milliseconds at 10^4 rows). Here each row's texts and sort keys
are built once when its figures arrive, sorting is one ``sorted()`` over those keys, and the
window applies arrivals in batches (:meth:`ModelTable.update_rows`).
"""

from __future__ import annotations

import math

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont

from quantscope.io.tensor_info import printable
from quantscope.state.model_scan import ERROR, OK, PENDING, SKIPPED, ModelRow

#: Column titles and the text under them.
COLUMNS = ("tensor", "shape", "dtype", "params", "tensor dB", "channel dB", "gain dB",
           "clip %", "max |x|", "outliers", "suggested")
NUMERIC = frozenset(range(3, 10))
#: The order the columns are shown in: the figures a user reads first right after the name,
#: the descriptive columns last (the model keeps COLUMNS' order; the header moves sections).
VISUAL_ORDER = (0, 4, 5, 6, 10, 7, 8, 9, 3, 1, 2)
#: A typical text of each figure column: its width before the scan's figures arrive.
TYPICAL = {4: "-00.00", 5: "-00.00", 6: "00.00", 7: "00.000", 8: "0.000000", 9: "00/0000",
           10: "per-channel"}
TIPS = {
    "tensor dB": "SQNR with one symmetric scale for the whole tensor (per-tensor)",
    "channel dB": "SQNR with one symmetric scale per channel, along each tensor's own axis "
                  "(the one the panes give it: weights 0, activations -1)",
    "gain dB": "per-channel minus per-tensor: what finer scales buy",
    "clip %": "share of values clipped by the per-tensor scheme's range",
    "outliers": "channels holding a value with |x| >= 6 (LLM.int8() keeps those in fp16)",
    "suggested": "per-tensor unless per-channel buys 3 dB; below 20 dB int8 alone does not "
                 "serve",
}


def header_text(section: int) -> str:
    """A column's title on two lines ("channel" over "dB"), so the column is as narrow as
    its numbers."""
    return COLUMNS[section].replace(" ", "\n", 1)


def _db(v: float | None) -> str:
    if v is None:
        return "–"
    if math.isinf(v):
        return "exact" if v > 0 else "-inf"
    return "nan" if math.isnan(v) else f"{v:.2f}"


def _key(v):
    """Sort key: numbers first (NaN and missing last), text case-insensitively."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return (1, 0.0)
    if isinstance(v, str):
        return (0, v.lower())
    return (0, float(v))


def shared_prefix(names: list[str]) -> str:
    """The dotted prefix every name starts with ("encoder.layer.0." for one layer's file):
    the table shows the names without it, so a narrow column shows what tells them apart."""
    if len(names) < 2:
        return ""
    first, last = min(names), max(names)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:first.rfind(".", 0, n) + 1]


def row_cells(row: ModelRow, prefix: str = "") -> tuple[tuple[str, ...], tuple]:
    """The texts of one row (its name without the table's shared ``prefix``) and the values
    it sorts by."""
    info = row.info
    shape = "x".join(map(str, info.shape)) if info is not None else "?"
    dtype = (info.stored or info.dtype) if info is not None else "?"  # GGUF: its stored type
    params = f"{row.params:,}" if info is not None else ""
    base_text = (printable(row.name[len(prefix):]), shape, dtype, params)
    base_key = (row.name, row.params, dtype, row.params)
    f = row.figures
    if f is None:
        note = {PENDING: "…", SKIPPED: "not analysed", ERROR: "cannot read"}[row.status]
        if row.status == SKIPPED and row.reason.startswith("not floating"):
            note = f"not analysed ({dtype})"
        texts = (*base_text, "", "", "", "", "", "", note)
        keys = base_key + (None,) * 6 + (note,)
        return texts, keys
    outliers = "–" if f.outlier_channels is None else f"{f.outlier_channels}/{f.channels}"
    texts = (*base_text, _db(f.per_tensor_db), _db(f.per_channel_db), _db(f.gain_db),
             f"{100 * f.clipped_fraction:.3f}", f"{f.max_abs:.4g}", outliers, f.suggested)
    keys = (*base_key, f.per_tensor_db, f.per_channel_db, f.gain_db, f.clipped_fraction,
            f.max_abs, f.outlier_channels, f.suggested)
    return texts, keys


class ModelTable(QAbstractTableModel):
    """Rows of a :class:`~quantscope.state.model_scan.ModelRow` list, with sort and filter."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[ModelRow] = []
        self.prefix = ""
        self._cells: list[tuple[tuple[str, ...], tuple]] = []
        self._revision = 0
        self.visible: list[int] = []
        self.sort_column, self.sort_order = -1, Qt.SortOrder.AscendingOrder
        self.filter_text = ""
        self._grey = QBrush(QColor("#8a8a8a"))
        self._red = QBrush(QColor("#b3261e"))
        self._italic = QFont()
        self._italic.setItalic(True)

    # -- content ------------------------------------------------------------------------------
    def set_rows(self, rows: list[ModelRow]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.prefix = shared_prefix([r.name for r in self.rows])
        self._cells = [row_cells(r, self.prefix) for r in self.rows]
        self._revision += 1
        self._visible_locked()
        self.endResetModel()

    def update_rows(self, rows: list[ModelRow]) -> None:
        """Install finished rows (by their ``index``); re-sorts and re-filters once."""
        if not rows:
            return
        self.layoutAboutToBeChanged.emit()
        for r in rows:
            self.rows[r.index] = r
            self._cells[r.index] = row_cells(r, self.prefix)
        self._revision += 1
        self._relayout()

    def _relayout(self) -> None:
        """Recompute the visible order, keeping the selection on the same tensors."""
        old = self.persistentIndexList()
        old_rows = [self.visible[i.row()] if i.row() < len(self.visible) else None for i in old]
        self._visible_locked()
        where = {src: pos for pos, src in enumerate(self.visible)}
        self.changePersistentIndexList(old, [
            self.index(where[s], i.column()) if s in where else QModelIndex()
            for i, s in zip(old, old_rows, strict=True)])
        self.layoutChanged.emit()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self.beginResetModel()
        self._visible_locked()
        self.endResetModel()

    def _visible_locked(self) -> None:
        words = self.filter_text.split()
        idx = [i for i, c in enumerate(self._cells)
               if all(w in " ".join((self.rows[i].name, *c[0])).lower() for w in words)
               ] if words else list(range(len(self.rows)))
        if self.sort_column >= 0:
            col = self.sort_column
            reverse = self.sort_order == Qt.SortOrder.DescendingOrder
            present = [i for i in idx if _key(self._cells[i][1][col])[0] == 0]
            missing = [i for i in idx if _key(self._cells[i][1][col])[0] == 1]
            present.sort(key=lambda i: _key(self._cells[i][1][col]), reverse=reverse)
            idx = present + missing  # rows without a value stay last either way
        self.visible = idx

    def revision(self) -> int:
        """Changes whenever a row's texts may have (what the view's widths are cached by)."""
        return self._revision

    def column_texts(self, column: int) -> set[str]:
        """Every text ``column`` holds, filtered out or not (what its width must show)."""
        return {cells[0][column] for cells in self._cells}

    def row_at(self, view_row: int) -> ModelRow:
        return self.rows[self.visible[view_row]]

    def view_row_of(self, name: str) -> int | None:
        for pos, i in enumerate(self.visible):
            if self.rows[i].name == name:
                return pos
        return None

    # -- Qt model API -------------------------------------------------------------------------
    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008 - Qt's own default
        return 0 if parent.isValid() else len(self.visible)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            if section == 0 and self.prefix:
                return f"{COLUMNS[0]}\n{printable(self.prefix)}…"
            return header_text(section)
        if role == Qt.ItemDataRole.ToolTipRole:
            return TIPS.get(COLUMNS[section])
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        i = self.visible[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._cells[i][0][col]
        row = self.rows[i]
        if role == Qt.ItemDataRole.TextAlignmentRole and col in NUMERIC:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and row.status != OK:
            return self._red if row.status == ERROR else self._grey
        if role == Qt.ItemDataRole.FontRole and row.status in (SKIPPED, ERROR):
            return self._italic
        if role == Qt.ItemDataRole.ToolTipRole:
            if row.reason:
                return f"{printable(row.name)}: {row.reason}"
            if row.status == OK:
                return f"{printable(row.name)} — click to open it in the four panes"
        return None

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        self.sort_column, self.sort_order = column, order
        self.layoutAboutToBeChanged.emit()
        self._relayout()
