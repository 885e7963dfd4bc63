"""The model view's plan: one format per tensor under a bits budget, each row changeable.

The panel shows a :class:`~quantscope.state.plan.Plan` (computed outside the GUI thread's
hot path: measuring every candidate happens once, in ``quantscope.plan``); changing a row's
format pins it and re-plans the others, changing the budget re-solves -- both from the
measured candidates only, so they answer at once. No arithmetic here: the plan does it.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from quantscope.errors import QuantscopeError

KEEP = "keep"
COLUMNS = ("tensor", "shape", "format", "bits/elem", "SQNR dB", "error")


class PlanPanel(QWidget):
    """A plan's rows with a format chooser each, the budget, and the totals."""

    plan_changed = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("planPanel")
        self.plan = None
        self._updating = False
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 4, 0, 0)
        head = QHBoxLayout()
        head.addWidget(QLabel("Plan: budget"))
        self.budget = QDoubleSpinBox()
        self.budget.setRange(1.0, 64.0)
        self.budget.setDecimals(3)
        self.budget.setSingleStep(0.25)
        self.budget.setSuffix(" bits/element")
        self.budget.editingFinished.connect(self._on_budget_changed)
        head.addWidget(self.budget)
        self.free = QPushButton("Free every row")
        self.free.clicked.connect(self._on_free_clicked)
        head.addWidget(self.free)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        head.addWidget(self.summary, 1)
        outer.addLayout(head)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        outer.addWidget(self.table, 1)

    def set_plan(self, plan) -> None:
        """Show ``plan`` (every row, its format chooser, the totals)."""
        self.plan = plan
        self._updating = True
        try:
            self.budget.setValue(plan.budget)
            self.table.setRowCount(len(plan.rows))
            for i, r in enumerate(plan.rows):
                c = r.chosen
                values = (r.name, "x".join(map(str, r.shape)), None,
                          f"{r.bits / max(r.params, 1):.4f}",
                          f"{c.sqnr_db:.2f}" if c else "-",
                          f"{c.error:.4g}" if c else (r.kept or ""))
                for j, v in enumerate(values):
                    if v is not None:
                        self.table.setItem(i, j, QTableWidgetItem(v))
                self.table.setCellWidget(i, 2, self._chooser(r))
            self.summary.setText(plan.summary().splitlines()[-1])
            self.table.resizeColumnToContents(0)
            self.table.setColumnWidth(2, max(self.table.columnWidth(2), 170))
        finally:
            self._updating = False
        self.plan_changed.emit(plan)

    def _chooser(self, row) -> QComboBox:
        box = QComboBox()
        specs = [c.spec for c in row.candidates]
        box.addItems([*specs, KEEP] if specs else [KEEP])
        box.setCurrentText(row.spec or KEEP)
        if not specs:
            box.setEnabled(False)  # nothing measured: kept by rule (1-D, a keep pattern)
        box.setToolTip("pinned by you" if row.pinned else "chosen by the plan")
        box.currentTextChanged.connect(lambda text, name=row.name: self.choose(name, text))
        return box

    def choose(self, name: str, spec: str) -> None:
        """Pin ``name`` to ``spec`` (``"keep"``: stored precision) and re-plan the rest."""
        if self._updating or self.plan is None:
            return
        self._apply(lambda p: p.choose(name, None if spec == KEEP else spec))

    def _on_budget_changed(self) -> None:
        if not self._updating and self.plan is not None \
                and self.budget.value() != self.plan.budget:
            self._apply(lambda p: p.with_budget(self.budget.value()))

    def _on_free_clicked(self) -> None:
        if self.plan is not None:
            self._apply(lambda p: p.unpin_all())

    def _apply(self, change) -> None:
        try:
            new = change(self.plan)
        except QuantscopeError as exc:  # a pin or budget nothing fits: say so, keep the plan
            self.summary.setText(f"not applied: {exc}")
            self.set_plan_quietly()
            return
        self.set_plan(new)

    def set_plan_quietly(self) -> None:
        """Show the current plan again (the choosers back to what it holds)."""
        summary = self.summary.text()
        self.set_plan(self.plan)
        self.summary.setText(summary)
