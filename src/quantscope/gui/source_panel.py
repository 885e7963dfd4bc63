"""The source panel: generators (form built from the registry), bundled samples, files, and the
summary of the tensor on screen.

The panel never loads anything itself: it builds a :class:`quantscope.state.Source` and asks the
window (``request_source`` / ``request_open``) to load it in the worker, so a 16M-element
generator or a large file never blocks the GUI thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from quantscope.core.tensors.generators import GENERATORS, GeneratorError, check_shape
from quantscope.gui.pane import mono_font
from quantscope.io.samples import list_samples
from quantscope.state import ExplorerState, Source


def parse_shape(text: str) -> tuple[int, ...]:
    """``"256x1024"``, ``"256, 1024"`` or ``"4096"`` -> a validated shape tuple.

    Every separator must sit between two numbers: ``"3x"`` or ``"x4"`` is a typo, not the
    shape (3,) or (4,), and is refused rather than guessed at."""
    parts = re.split(r"\s*[x×,]\s*|\s+", text.strip())
    if not all(p.isascii() and p.isdigit() and len(p) <= 12 for p in parts):
        raise GeneratorError(f"shape {text[:40]!r}: write it as e.g. 256x1024")
    return check_shape([int(p) for p in parts])


class SourcePanel(QWidget):
    """Generator form, samples list, open-file button and tensor summary."""

    def __init__(self, state: ExplorerState, request_source: Callable[[Source], None],
                 request_open: Callable[[], None], parent=None) -> None:
        super().__init__(parent)
        self.state = state
        self.request_source = request_source
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)

        gen_box = QGroupBox("Generate")
        self.form = QFormLayout(gen_box)
        self.generator = QComboBox()
        for g in GENERATORS.values():
            self.generator.addItem(g.label, g.name)
        self.form.addRow("distribution", self.generator)
        self.description = QLabel()
        self.description.setWordWrap(True)
        self.description.setObjectName("hint")
        self.form.addRow(self.description)
        self.shape = QLineEdit()
        self.form.addRow("shape", self.shape)
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.form.addRow("seed", self.seed)
        self.param_widgets: dict[str, QDoubleSpinBox | QSpinBox] = {}
        self._param_rows: list[QWidget] = []
        self.generate_button = QPushButton("Generate")
        self.generate_button.setDefault(True)
        self.generate_button.clicked.connect(self.generate)
        self.form.addRow(self.generate_button)
        layout.addWidget(gen_box)

        sample_box = QGroupBox("Samples and files")
        sv = QVBoxLayout(sample_box)
        self.samples = QListWidget()
        for name, _path, description in list_samples():
            item = QListWidgetItem(name)
            item.setToolTip(description)
            item.setData(Qt.ItemDataRole.UserRole, name)
            self.samples.addItem(item)
        self.samples.setMaximumHeight(6 + 22 * self.samples.count())
        self.samples.itemActivated.connect(self._sample_activated)
        self.samples.itemClicked.connect(self._sample_activated)
        sv.addWidget(self.samples)
        buttons = QHBoxLayout()
        self.open_button = QPushButton("Open file…")
        self.open_button.clicked.connect(request_open)
        buttons.addWidget(self.open_button)
        buttons.addWidget(QLabel("or drop a tensor file, checkpoint or model folder"), 1)
        sv.addLayout(buttons)
        layout.addWidget(sample_box)

        # The summary box is placed by the window (under the controls); the panel fills it.
        self.summary_box = summary_box = QGroupBox("Tensor")
        tv = QVBoxLayout(summary_box)
        self.source_label = QLabel("—")
        self.source_label.setWordWrap(True)
        self.source_label.setObjectName("sourceLabel")
        tv.addWidget(self.source_label)
        self.summary = QTableWidget(0, 2)
        self.summary.horizontalHeader().hide()
        self.summary.verticalHeader().hide()
        self.summary.horizontalHeader().setStretchLastSection(True)
        self.summary.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.summary.setShowGrid(False)
        self.summary.setFont(mono_font(10))
        tv.addWidget(self.summary)
        layout.addStretch(1)

        self.generator.currentIndexChanged.connect(self._generator_changed)
        self._generator_changed()
        state.tensor_changed.connect(self.refresh)
        state.prepared_changed.connect(self.refresh)

    # -- generator form -----------------------------------------------------------------------
    def _generator_changed(self) -> None:
        gen = GENERATORS[self.generator.currentData()]
        for w in self._param_rows:
            self.form.removeRow(w)
        self._param_rows.clear()
        self.param_widgets.clear()
        self.description.setText(gen.description)
        self.shape.setText("x".join(map(str, gen.default_shape)))
        insert_at = self.form.rowCount() - 1  # before the Generate button
        for p in gen.params:
            if p.integer:
                w = QSpinBox()
                w.setRange(int(p.minimum), int(min(p.maximum, 2**31 - 1)))
            else:
                w = QDoubleSpinBox()
                w.setDecimals(4)
                w.setRange(float(p.minimum), float(p.maximum))
            w.setValue(p.default)
            w.setToolTip(p.help)
            self.form.insertRow(insert_at, p.name, w)
            insert_at += 1
            self._param_rows.append(w)
            self.param_widgets[p.name] = w

    def current_source(self) -> Source:
        """The generator source the form describes (raises GeneratorError on a bad shape)."""
        name = self.generator.currentData()
        params = {k: w.value() for k, w in self.param_widgets.items()}
        return Source.generator(name, parse_shape(self.shape.text()), self.seed.value(),
                                **params)

    def set_generator(self, name: str, **params) -> None:
        """Select a generator and fill its form (for the command line and sessions)."""
        self.generator.setCurrentIndex(self.generator.findData(name))
        for k, v in params.items():
            self.param_widgets[k].setValue(v)

    def generate(self) -> None:
        """Ask the window to build the generator's tensor."""
        try:
            source = self.current_source()
        except GeneratorError as exc:
            self.state.error.emit(str(exc))
            return
        self.request_source(source)

    def _sample_activated(self, item: QListWidgetItem) -> None:
        self.request_source(Source("sample", item.data(Qt.ItemDataRole.UserRole)))

    # -- summary ------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Show the current source and its summary statistics."""
        src = self.state.source
        self.source_label.setText(src.label() if src else "—")
        ov = self.state.overview
        rows = ov.rows() if ov is not None else []
        self.summary.setRowCount(len(rows))
        for i, (label, text) in enumerate(rows):
            self.summary.setItem(i, 0, QTableWidgetItem(label))
            value = QTableWidgetItem(text)
            value.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.summary.setItem(i, 1, value)
        self.summary.resizeColumnToContents(0)
        self.summary.resizeRowsToContents()

    def summary_rows(self) -> list[tuple[str, str]]:
        """The summary table's text (for tests)."""
        return [(self.summary.item(i, 0).text(), self.summary.item(i, 1).text())
                for i in range(self.summary.rowCount())]
