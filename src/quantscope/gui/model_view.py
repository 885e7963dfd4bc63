"""The model view: a whole checkpoint's int8 figures, a table and a per-layer chart.

Opening a checkpoint lists it and scans it in one background job (a
:class:`~quantscope.gui.jobs.Lane` of the live state's scheduler, as every view's: latest
request wins, results delivered on the GUI thread); :class:`~quantscope.state.model_scan.ModelScan`
runs inside it on every core. Finished rows and progress come back as the job's partial results
(the scheduler drops a superseded scan's), and the GUI thread applies them in batches
(:data:`FLUSH_MS`), so a checkpoint of thousands of tensors never holds it up. Cancel stops the
scan where it is; Resume scans what is left; new settings (the window's, shown above the table)
scan again once they rest (the scheduler's debounce).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QStyle,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from quantscope.errors import QuantscopeError
from quantscope.gui.dotted_names import DottedNameDelegate, initials
from quantscope.gui.jobs import Jobs, Lane
from quantscope.gui.model_chart import ModelChart
from quantscope.gui.model_table import COLUMNS, TYPICAL, VISUAL_ORDER, ModelTable
from quantscope.gui.plan_panel import PlanPanel
from quantscope.gui.stored_view import StoredCompareView
from quantscope.io.stored import source_checkpoint
from quantscope.io.tensor_info import format_bytes, printable
from quantscope.state import Settings
from quantscope.state.model_records import row_record, to_csv, to_json
from quantscope.state.model_scan import OK, PENDING, ModelRow, ModelScan, model_rows, reset

#: Finished rows and progress reach the table and chart at most this often (a chart update
#: with its paint takes about 10-35 ms with 800 tensors, 30-40 ms with 3,000:
#: ``bench/model_chart.py``).
FLUSH_MS = 150
#: Settings changes are scanned once the controls rest this long.
RESCAN_DELAY_MS = 300
#: Pixels a column's header needs beside its longest line: the section's padding and border;
#: and the sort arrow's, which only the column sorted by shows.
HEADER_ROOM, ARROW_ROOM = 12, 12


def count_text(n: int) -> str:
    """``1.77 M``, ``2.11 B``: a parameter count at a glance."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return str(n)


def _scan_settings(s: Settings) -> Settings:
    """The settings as the scan uses them: the open tensor's channel axis is not the scan's
    (each tensor gets its own), so opening another tensor does not scan the model again."""
    return dataclasses.replace(s, axis=0)


def settings_text(s: Settings) -> str:
    """The settings the numbers follow, in one line above the table."""
    method = s.method if s.method != "percentile" else f"percentile {s.percentile:g}"
    parts = [f"int{s.bits} symmetric", method, s.rounding.replace("_", " "),
             "each tensor's own channel axis" + (f", groups of {s.group_size}"
                                                 if s.group_size else ""),
             f"preset: {s.runtime or 'none'}"]
    return " · ".join(parts) + "   (change them in the Quantization panel)"


class ModelView(QWidget):
    """A checkpoint's table and chart (see the module docstring).

    Signals
    -------
    tensor_chosen(object)
        A row or chart point was clicked: the :class:`ModelRow` to open in the panes.
    scan_finished()
        Every analysable row has its numbers.
    """

    tensor_chosen = Signal(object)
    scan_finished = Signal()
    failed = Signal(str)

    def __init__(self, parent: QWidget | None = None, *, jobs: Jobs | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelView")
        self.path: Path | None = None
        self.settings = Settings()
        self.problems: list[str] = []
        self.rows: list[ModelRow] = []
        self.job = Lane("view:model", jobs, self)
        self.job.finished.connect(self._on_job_finished)
        self.job.failed.connect(self._on_job_failed)
        self.job.partial.connect(self._on_partial)
        self._arrived: list[ModelRow] = []
        self._done = self._total = 0
        self._started = 0.0
        #: The columns' widths and the names' least width, with what they were measured for.
        self._widths: tuple[tuple, list[int], int] | None = None
        self.flush_timer = QTimer(self)
        self.flush_timer.setInterval(FLUSH_MS)
        self.flush_timer.timeout.connect(self._flush)
        self._build()

    # -- layout -------------------------------------------------------------------------------
    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        self.title = QLabel("")
        self.title.setObjectName("modelTitle")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        head.addWidget(self.title, 1)
        self.export_csv = QPushButton("Export CSV…")
        self.export_json = QPushButton("Export JSON…")
        head.addWidget(self.export_csv)
        head.addWidget(self.export_json)
        outer.addLayout(head)
        self.settings_label = QLabel("")
        self.settings_label.setObjectName("hint")
        # at a talk's text size the line is wider than a 1280-px projector: it wraps
        self.settings_label.setWordWrap(True)
        outer.addWidget(self.settings_label)
        bar = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setMaximumWidth(260)
        bar.addWidget(self.progress)
        self.progress_label = QLabel("")
        # wraps rather than push the filter (as wide as its placeholder) out of a talk
        self.progress_label.setWordWrap(True)
        bar.addWidget(self.progress_label, 1)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.resume_button = QPushButton("Resume")
        self.resume_button.clicked.connect(self.resume)
        bar.addWidget(self.cancel_button)
        bar.addWidget(self.resume_button)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("filter tensors (words in name, dtype, suggestion)")
        self.filter.setClearButtonEnabled(True)
        bar.addWidget(self.filter)
        outer.addLayout(bar)
        self.problems_label = QLabel("")
        self.problems_label.setObjectName("banner")
        self.problems_label.setWordWrap(True)
        self.problems_label.hide()
        outer.addWidget(self.problems_label)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.model = ModelTable(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSortingEnabled(True)
        # worst per-tensor SQNR first, as ``quantscope scan`` ranks
        self.table.horizontalHeader().setSortIndicator(4, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        # names shortened from their start, component by component: what tells rows apart
        # is in their middle and end
        self.name_delegate = DottedNameDelegate(self.table)
        self.table.setItemDelegateForColumn(0, self.name_delegate)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionsMovable(True)
        for visual, logical in enumerate(VISUAL_ORDER):  # the figures beside the names
            header.moveSection(header.visualIndex(logical), visual)
        header.setStretchLastSection(True)
        # the sort arrow's room moves to the column sorted by
        header.sortIndicatorChanged.connect(lambda *_: self.fit_timer.start())
        self.table.clicked.connect(self._on_table_clicked)
        self.table.activated.connect(self._on_table_clicked)
        self.splitter.addWidget(self.table)
        self.chart = ModelChart()
        self.chart.tensor_clicked.connect(self._on_chart_clicked)
        self.splitter.addWidget(self.chart)
        self.splitter.setStretchFactor(0, 13)
        self.splitter.setStretchFactor(1, 7)

        self.compare_view = StoredCompareView(jobs=self.job.jobs)
        self.compare_view.hide()
        self.compare_view.failed.connect(self.failed)
        self.vertical = QSplitter(Qt.Orientation.Vertical)
        self.vertical.addWidget(self.compare_view)
        self.vertical.addWidget(self.splitter)
        self.vertical.setStretchFactor(0, 3)
        self.vertical.setStretchFactor(1, 2)
        outer.addWidget(self.vertical, 1)
        self.filter.textChanged.connect(self.model.set_filter)
        # the columns, the splitter and the filter's width follow the text size (a talk's
        # is larger) and the window's width
        self.fit_timer = QTimer(self)
        self.fit_timer.setSingleShot(True)
        self.fit_timer.setInterval(0)
        self.fit_timer.timeout.connect(self._fit)
        self.table.installEventFilter(self)
        self._fit_filter()
        self.export_csv.clicked.connect(lambda: self._export_dialog("csv"))
        self.export_json.clicked.connect(lambda: self._export_dialog("json"))
        self._set_running(False)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.table and event.type() in (QEvent.Type.FontChange,
                                                      QEvent.Type.StyleChange):
            self.fit_timer.start()
        return super().eventFilter(watched, event)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.fit_timer.start()  # once the splitter has its new width

    def _fit(self) -> None:
        """Size the columns and the filter to the text size and width of the moment: sized
        once when the checkpoint was listed, a talk's larger text elided the figures and
        pushed the suggestions out of view."""
        self._fit_filter()
        if self.rows:
            self._size_columns()

    def _fit_filter(self) -> None:
        """The filter field as wide as its placeholder, which says what it matches."""
        fm = self.filter.fontMetrics()
        margins = self.filter.textMargins()
        clear = self.filter.sizeHint().height()  # the clear button is about square
        self.filter.setFixedWidth(fm.horizontalAdvance(self.filter.placeholderText()) + clear
                                  + margins.left() + margins.right() + 16)

    def _column_widths(self) -> tuple[list[int], int]:
        """Each column as wide as its header's longest line (with room for the sort arrow) or
        its widest text: of the rows listed, and a typical figure's until the scan brings its
        own. Also the least width of the names' column: its header and every name with its
        leading components shortened to their initials (:mod:`quantscope.gui.dotted_names`),
        so no name loses its start. Measured again only when the texts, the font or the
        sort column changed (a window being resized asks on every step, and a checkpoint of
        thousands of tensors has tens of thousands of texts)."""
        fm = self.table.fontMetrics()
        sorted_by = self.table.horizontalHeader().sortIndicatorSection()
        key = (self.model.revision(), self.table.font().key(), sorted_by)
        if self._widths is not None and self._widths[0] == key:
            return list(self._widths[1]), self._widths[2]
        pending = any(r.figures is None for r in self.rows)
        heads = []
        for col in range(len(COLUMNS)):
            title = max(map(fm.horizontalAdvance, self.model.headerData(
                col, Qt.Orientation.Horizontal).split("\n")))
            heads.append(title + HEADER_ROOM + (ARROW_ROOM if col == sorted_by else 0))
        widths = []
        for col in range(len(COLUMNS)):
            texts = self.model.column_texts(col)
            if pending and col in TYPICAL:
                texts.add(TYPICAL[col])
            widths.append(max(max(map(fm.horizontalAdvance, texts), default=0) + 12,
                              heads[col]))
        names = {r.name[len(self.model.prefix):] for r in self.rows}
        least = min(widths[0], max([heads[0]] + [fm.horizontalAdvance(initials(printable(n)))
                                                 + 12 for n in names]))
        self._widths = (key, list(widths), least)
        return widths, least

    def _size_columns(self) -> None:
        """Every column whole beside the chart where the width allows, else the chart under
        the table: at 1280 px beside the side panel, a table cut at its suggestions or its
        names cut in the middle could not be read. The names take what the figures leave,
        down to their initials (:meth:`_column_widths`)."""
        widths, least = self._column_widths()
        others = sum(widths[1:])
        frame = 2 * self.table.frameWidth()
        bar = self.table.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent, None,
                                             self.table)
        need, floor = widths[0] + others + frame + bar, least + others + frame + bar
        total, handle = self.splitter.width(), self.splitter.handleWidth()
        if total <= 0:
            return
        chart = self.chart.minimumSizeHint().width()
        side = total >= floor + handle + chart
        orientation = Qt.Orientation.Horizontal if side else Qt.Orientation.Vertical
        if self.splitter.orientation() != orientation:
            self.splitter.setOrientation(orientation)
            self.chart.set_legend_beside(not side)  # under the table the chart is wide
        if side:  # the table as wide as it needs, the chart at least a third where it can
            left = min(need, max(floor, total - handle - max(chart, total // 3)))
            self.splitter.setSizes([left, total - handle - left])
        else:  # the table as tall as its rows, up to 45 %; the chart, its legend beside
            # its plot, the rest (with less, a talk's legend was taller than the plot)
            left = total
            high = self.splitter.height() - handle
            rows = (self.table.horizontalHeader().sizeHint().height() + frame
                    + self.table.verticalHeader().defaultSectionSize() * len(self.rows))
            top = min(rows, int(high * 0.45))
            self.splitter.setSizes([top, high - top])
        widths[0] = max(least, min(widths[0], left - (frame + bar + others)))
        for col, width in enumerate(widths):
            self.table.setColumnWidth(col, width)

    # -- opening and scanning -----------------------------------------------------------------
    def open(self, path: str | Path, settings: Settings) -> None:
        """List and scan the checkpoint at ``path`` under ``settings`` (in the background)."""
        settings = _scan_settings(settings)
        self.path = Path(path)
        self.settings = settings
        self.chart.bits = settings.bits
        self.rows, self.problems = [], []
        self.model.set_rows([])
        self.chart.set_rows([])
        self.title.setText(f"{printable(str(self.path))}: listing…")
        self.problems_label.hide()
        self.compare_view.hide()  # a comparison belongs to the checkpoint it was made for
        self._start(listing=True)

    def show_table(self, table, plan=None) -> None:
        """Show a model already scanned in Python (``quantscope.view(model)``): its rows as
        they are, nothing to scan; with a ``plan``, the plan panel below them."""
        self.job.cancel()
        self.path = None
        self.settings = _scan_settings(table.settings)
        self.chart.bits = self.settings.bits
        self.rows, self.problems = list(table.rows), []
        self.model.set_rows(self.rows)
        self.chart.set_rows(self.rows)
        self.settings_label.setText(settings_text(self.settings))
        self.title.setText(f"{printable(table.label)}: {len(table.analysed)} tensors "
                           f"(scanned in Python)")
        self.progress_label.setText("")
        self._set_running(False)
        self._size_columns()
        if plan is not None:
            self.show_plan(plan)

    def show_plan(self, plan) -> None:
        """Show (or replace) the plan panel's plan."""
        if getattr(self, "plan_panel", None) is None:
            self.plan_panel = PlanPanel(self)
            self.layout().addWidget(self.plan_panel, 1)
        self.plan_panel.set_plan(plan)
        self.plan_panel.show()

    def set_settings(self, settings: Settings) -> None:
        """New window settings: scan again once they rest (only if they change the numbers)."""
        settings = _scan_settings(settings)
        if settings == self.settings or self.path is None:
            return

        self.settings = settings
        self.chart.bits = settings.bits
        self.settings_label.setText(settings_text(settings))
        # the old numbers belong to the old settings: blank them now, scan when they rest
        self.job.cancel()
        self._arrived.clear()
        self.rows = reset(self.rows)
        self.model.update_rows(self.rows)
        self.chart.set_rows(self.rows)
        self.progress_label.setText("settings changed: scanning again…")
        self.rescan(RESCAN_DELAY_MS)

    def rescan(self, delay_ms: int = 0) -> None:
        """Scan every pending row under the current settings (once no newer request came
        for ``delay_ms``: the scheduler's debounce)."""
        if self.path is not None:
            self._start(listing=False, delay_ms=delay_ms)

    def resume(self) -> None:
        """Scan the rows a cancel left pending."""
        if self.path is not None and any(r.status == PENDING for r in self.rows):
            self._start(listing=False)

    def cancel(self) -> None:
        """Stop the scan where it is; the finished rows stay."""
        self.job.cancel()
        self._flush()
        self.chart.set_rows(self.rows)
        self._set_running(False)
        left = sum(1 for r in self.rows if r.status == PENDING)
        self.progress_label.setText(f"cancelled: {left} tensors left — Resume scans them")

    def _start(self, listing: bool, delay_ms: int = 0) -> None:
        path, settings = self.path, self.settings
        rows = None if listing else list(self.rows)
        self.settings_label.setText(settings_text(settings))
        self._arrived.clear()
        self._started = time.perf_counter()

        def work(ctx):
            nonlocal rows
            problems = []
            if rows is None:
                ckpt = source_checkpoint(path)
                rows, problems = model_rows(ckpt), ckpt.problems
                ctx.partial(("rows", (rows, problems)))
            last = [0.0]

            def progress(done: int, total: int, name: str) -> None:
                now = time.perf_counter()
                if now - last[0] >= 0.05 or done >= total:
                    last[0] = now
                    ctx.partial(("progress", (done, total)))

            return ModelScan(rows, settings, background=True).run(
                on_row=lambda r: ctx.partial(("row", r)), on_progress=progress,
                should_stop=ctx.stale)

        self._set_running(True)
        self.job.submit(work, delay_ms=delay_ms)

    def _set_running(self, on: bool) -> None:
        self.cancel_button.setVisible(on)
        self.resume_button.setVisible(not on and any(r.status == PENDING for r in self.rows))
        self.progress.setVisible(on or self.resume_button.isVisible())
        if on:
            self.flush_timer.start()
        else:
            self.flush_timer.stop()

    # -- arrivals (GUI thread; the lane passes on the current scan's only) -------------------
    def _on_partial(self, part) -> None:
        what, value = part
        if what == "row":
            self._arrived.append(value)
        elif what == "progress":
            self._done, self._total = value
        else:
            self._on_listed(value)

    def _on_listed(self, listed) -> None:
        self.rows, self.problems = listed
        self.model.set_rows(self.rows)
        self._size_columns()
        self._show_title()
        if self.problems:
            shown = "\n".join(f"⚠  {p}" for p in self.problems[:4])
            more = f"\n… and {len(self.problems) - 4} more" if len(self.problems) > 4 else ""
            self.problems_label.setText(shown + more)
            self.problems_label.show()
        self.chart.set_rows(self.rows)

    def _show_title(self) -> None:
        n = len(self.rows)
        params = sum(r.params for r in self.rows)
        nbytes = sum(r.nbytes for r in self.rows)
        files = len({r.file for r in self.rows})
        where = f" in {files} files" if files > 1 else ""
        self.title.setText(f"<b>{printable(self.path.name)}</b> — {n} tensors{where}, "
                           f"{count_text(params)} parameters, {format_bytes(nbytes)}")

    def _flush(self) -> None:
        """Apply the rows and progress that arrived since the last flush (one relayout)."""
        if self._arrived:
            batch, self._arrived = self._arrived, []
            for r in batch:
                self.rows[r.index] = r
            self.model.update_rows(batch)
            self.chart.set_rows(self.rows)
        self._show_progress()

    def _show_progress(self) -> None:
        total = max(self._total, 1)
        frac = min(self._done / total, 1.0)
        self.progress.setValue(int(1000 * frac))
        elapsed = time.perf_counter() - self._started
        left = sum(1 for r in self.rows if r.status == PENDING)
        rate = self._done / elapsed if elapsed > 0 else 0.0
        eta = f", ~{elapsed * (1 - frac) / frac:.0f} s left" if 0 < frac < 1 and elapsed > 1 \
            else ""
        self.progress_label.setText(
            f"{format_bytes(self._done)} of {format_bytes(self._total)}"
            f" · {rate / 1e9:.2f} GB/s{eta} · {left} tensors to go")

    def _on_job_finished(self, rows) -> None:
        self._arrived.clear()
        self.rows = rows
        self.model.update_rows(rows)
        self.chart.set_rows(rows)
        self._done = self._total
        self._size_columns()  # the figures' own widths, for the typical ones
        self._set_running(False)
        ok = sum(1 for r in rows if r.status == OK)
        self.progress_label.setText(
            f"{ok} tensors analysed in {time.perf_counter() - self._started:.1f} s")
        self.scan_finished.emit()

    def _on_job_failed(self, message: str) -> None:
        self._set_running(False)
        self.title.setText(f"{printable(str(self.path))}: cannot be opened")
        self.progress_label.setText("")
        self.failed.emit(message)

    # -- clicks -------------------------------------------------------------------------------
    def _on_table_clicked(self, index) -> None:
        row = self.model.row_at(index.row())
        if row.status == OK or row.status == PENDING:
            self.tensor_chosen.emit(row)

    def _on_chart_clicked(self, name: str) -> None:
        row = next((r for r in self.rows if r.name == name), None)
        if row is None:
            return
        pos = self.model.view_row_of(name)
        if pos is not None:
            self.table.selectRow(pos)
            self.table.scrollTo(self.model.index(pos, 0))
        self.tensor_chosen.emit(row)

    # -- state for the window -----------------------------------------------------------------
    def is_complete(self) -> bool:
        """Every analysable row has its numbers and nothing is running (the comparison with
        an original included, when one is shown)."""
        return (bool(self.rows) and not self.job.busy
                and not any(r.status == PENDING for r in self.rows)
                and (self.compare_view.isHidden() or self.compare_view.is_complete()))

    def compare_with(self, reference: str | Path) -> None:
        """Measure the open (quantized) checkpoint against its ``reference`` original: the
        comparison table shows above the int8 table."""
        if self.path is None:
            return
        self.compare_view.show()
        total = max(self.vertical.height(), 400)
        self.vertical.setSizes([total * 3 // 5, total - total * 3 // 5])
        self.compare_view.compare(self.path, reference)

    def records(self) -> list[dict]:
        return [row_record(r, sharded=True) for r in self.rows]

    def metrics(self) -> dict:
        """The table as ``--metrics`` writes it."""
        return {"source": str(self.path), "settings": self.settings.to_dict(),
                "problems": self.problems, "tensors": self.records()}

    def save(self, path: str | Path) -> None:
        """Export the table: CSV or JSON by the file's suffix."""
        path = Path(path)
        if path.suffix.lower() == ".csv":
            text = to_csv(self.rows)
        else:
            shown = [r for r in self.rows if r.status == OK]
            text = to_json(str(self.path), self.rows, shown, self.settings, True)
        try:
            path.write_text(text)
        except OSError as exc:
            raise QuantscopeError(f"{path}: cannot write ({exc.strerror or exc})") from None

    def _export_dialog(self, kind: str) -> None:
        from PySide6.QtWidgets import QFileDialog

        dialog = QFileDialog(self, f"Export the table as {kind.upper()}",
                             str(Path.cwd() / f"{self.path.stem if self.path else 'model'}-"
                                 f"scan.{kind}"), f"{kind.upper()} (*.{kind})")
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
        dialog.fileSelected.connect(self._save_guarded)
        dialog.open()
        self.export_dialog = dialog

    def _save_guarded(self, path: str) -> None:
        try:
            self.save(path)
        except QuantscopeError as exc:
            self.failed.emit(str(exc))

    def shutdown(self) -> None:
        """Stop the scan and every timer (the window calls this as it closes)."""
        self.flush_timer.stop()
        self.fit_timer.stop()
        self.compare_view.shutdown()
        self.job.shutdown()
