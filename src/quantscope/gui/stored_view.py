"""What a shipped quantization lost, in the model view: one row per stored weight.

Shown above the model view's int8 table once a quantized checkpoint is compared with its
original (File ▸ Compare with original…). The comparison
(:func:`quantscope.state.stored_compare.compare`) runs in a background lane of the window's
scheduler; the table lists every stored weight most-lost first: its stored format, bits per
element, SQNR against the original, the rounding / clipping split, and the best of the
engine's formats at the same or fewer bits with what it would have gained. Clicking a row
opens that tensor with the stored scheme in the first pane and the alternatives in the others.
"""

from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from quantscope.gui.jobs import Jobs, Lane
from quantscope.io.tensor_info import printable

HEADERS = ("tensor", "stored as", "bits", "SQNR dB", "MSE round / clip", "best at ≤ bits",
           "dB", "gain dB")
#: Columns of numbers (aligned right).
NUMERIC = {2, 3, 4, 6, 7}


def _db(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return "inf" if math.isinf(value) else f"{value:.2f}"


def _short(value: float) -> str:
    """``2.4e-5``: an MSE in few characters (the table's width is the screen's)."""
    mantissa, _, exponent = f"{value:.1e}".partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def common_prefix(names: list[str]) -> str:
    """The dotted prefix every name shares (``encoder.layer.0.``), shown once in the header."""
    if len(names) < 2:
        return ""
    parts = [n.split(".") for n in names]
    shared = []
    for pieces in zip(*(p[:-1] for p in parts), strict=False):
        if len(set(pieces)) != 1:
            break
        shared.append(pieces[0])
    return ".".join(shared) + "." if shared else ""


def row_cells(row, prefix: str = "", method: str = "") -> tuple[str, ...]:
    """One comparison row as the table's texts (also what tests read): the name without the
    shared ``prefix``, the stored format without the ``method`` the title already names."""
    s, b = row.stored, row.best
    name = printable(row.name.removeprefix(prefix).removesuffix(".weight"))
    if s is None:
        return (name, row.problem or "", *("",) * (len(HEADERS) - 2))
    gain = None if b is None else b.sqnr_db - s.sqnr_db
    label = s.format.removeprefix(method).strip() if method else s.format
    return (name, label, f"{s.bits_per_element:.2f}", _db(s.sqnr_db),
            f"{_short(s.rounding_mse)} / {_short(s.clipping_mse)}", b.spec if b else "-",
            _db(b.sqnr_db if b else None), _db(gain))


class StoredCompareView(QWidget):
    """The comparison table (see the module docstring).

    Signals
    -------
    row_chosen(object)
        A row was clicked: its :class:`~quantscope.state.stored_compare.CompareRow`.
    """

    row_chosen = Signal(object)
    failed = Signal(str)

    def __init__(self, parent: QWidget | None = None, *, jobs: Jobs | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("storedCompare")
        self.result = None
        self.rows: list = []
        self.quantized: Path | None = None
        self.reference: Path | None = None
        self.job = Lane("view:stored-compare", jobs, self)
        self.job.finished.connect(self._on_done)
        self.job.failed.connect(self._on_failed)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 4)
        self.title = QLabel("")
        self.title.setObjectName("modelTitle")
        self.title.setWordWrap(True)
        outer.addWidget(self.title)
        self.table = QTableWidget(0, len(HEADERS))
        self.table.setHorizontalHeaderLabels(HEADERS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        self.table.cellClicked.connect(self._on_clicked)
        outer.addWidget(self.table, 1)

    def compare(self, quantized: str | Path, reference: str | Path) -> None:
        """Measure ``quantized``'s stored weights against ``reference`` in the background."""
        # the comparison measures with the number formats, whose modules load Numba: only
        # when a checkpoint is compared
        from quantscope.state.stored_compare import compare

        self.quantized, self.reference = Path(quantized), Path(reference)
        self.result, self.rows = None, []
        self.table.setRowCount(0)
        self.title.setText(f"{printable(self.quantized.name)} against "
                           f"{printable(self.reference.name)}: decoding and measuring…")
        q, r = self.quantized, self.reference
        self.job.submit(lambda ctx: compare(q, r))

    def is_complete(self) -> bool:
        return self.result is not None and not self.job.busy

    def _on_done(self, result) -> None:
        self.result = result
        self.rows = result.ranked()
        measured = [r for r in self.rows if r.stored is not None]
        self.title.setText(
            f"What the stored quantization lost: {printable(self.quantized.name)} "
            f"({result.method}) against {printable(self.reference.name)} — "
            f"{len(measured)} weights, most lost first; best alternative = the engine's best "
            "format at the same or fewer bits, on the original. Click a row to open it.")
        prefix = common_prefix([r.name for r in self.rows])
        self.table.setHorizontalHeaderItem(0, QTableWidgetItem(
            f"{printable(prefix)}….weight" if prefix else "tensor (….weight)"))
        self.table.setRowCount(len(self.rows))
        for i, row in enumerate(self.rows):
            for j, text in enumerate(row_cells(row, prefix, result.method)):
                item = QTableWidgetItem(text)
                if j == 4 and row.stored is not None:
                    item.setToolTip(f"{100 * row.stored.clipped_fraction:.3f} % of the "
                                    "original values lie outside what their scale can decode")
                if j == 5 and row.best is not None:
                    item.setToolTip(f"{row.best.spec}: {row.best.bits_per_element:.3f} bits "
                                    "per element, scales included")
                if j in NUMERIC:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, item)
        fm = self.table.fontMetrics()
        longest = max((len(row_cells(r, prefix)[0]) for r in self.rows), default=12)
        self.table.setColumnWidth(0, fm.horizontalAdvance("0" * min(max(longest, 12), 22)) + 12)

    def _on_failed(self, message: str) -> None:
        self.title.setText(f"comparison failed: {message}")
        self.failed.emit(message)

    def _on_clicked(self, index: int, _column: int) -> None:
        if 0 <= index < len(self.rows) and self.rows[index].reference is not None:
            self.row_chosen.emit(self.rows[index])

    def shutdown(self) -> None:
        self.job.shutdown()
