"""The window's model mode: a checkpoint opens as a :class:`ModelView` in place of the panes.

A mixin of :class:`quantscope.gui.window.MainWindow` (``self`` is the window). The view is
built on first use and sits in the central area beside the panes' splitter; one of the two is
shown. Clicking a tensor loads it into the four panes like any file (memory-mapped, one tensor
in memory at a time) and shows a bar above them to go back; the model view keeps its place
(sort, filter, scroll, selection) meanwhile. The window's settings flow into the view, which
scans again in the background when they change.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QPushButton, QWidget

from quantscope.gui.theme import style_page
from quantscope.io.tensor_info import printable
from quantscope.state import Source


class ModelMode:
    """Opening, showing and leaving the model view (see the module docstring)."""

    model_view = None

    def open_model(self, path: str | Path) -> None:
        """List and scan the checkpoint at ``path``; show the model view."""
        view = self._ensure_model_view()
        view.open(path, self.state.settings)
        self.model_label = (str(path), Path(path).name)
        self.show_model_view()

    def open_model_table(self, table, plan=None) -> None:
        """Show a model scanned in Python (a :class:`~quantscope.state.model_table.ModelTable`)
        and, if given, its plan; show the model view."""
        view = self._ensure_model_view()
        view.show_table(table, plan)
        self.model_label = (table.label, table.label)
        self.show_model_view()

    def model_active(self) -> bool:
        """True while the model view is on screen (instead of the panes)."""
        return self.model_view is not None and not self.model_view.isHidden()

    def model_headline(self) -> str:
        """The window's headline while the model view is on screen: what it shows."""
        bits = self.model_view.settings.bits
        if not self.model_view.compare_view.isHidden():
            return ("what each stored weight lost against the original, beside the best "
                    f"formats at its bits (above); every tensor at int{bits} (below)")
        if self.presentation:
            return f"every tensor at int{bits} · per tensor and per channel"
        return (f"every tensor quantized to int{bits}, per tensor and per channel: click a "
                "row or a chart point to open it")

    def show_model_view(self) -> None:
        if self.model_view is None:
            self.model_action.setChecked(False)
            return
        self.splitter.hide()
        self.model_view.show()
        self.narrow_side_panel()
        self.model_action.setChecked(True)
        self.label_what_is_shown()

    def narrow_side_panel(self) -> None:
        """The side panel at its least width while the model view shows (the window calls
        this on each resize too): the table's columns need the room more than the controls
        need their natural width, which at 1280 px cut the table's suggestions."""
        dock, scroll = self.side_dock, self.quant_scroll
        if not self.model_active() or dock.isHidden() or scroll.widget() is None:
            return
        # the controls' least width, not the dock's: below it they are cut, not scrolled.
        # Measured as the dock's room around the controls (both as last laid out: a new
        # theme's width for the dock may not have reached it yet) plus their least width.
        around = dock.width() - scroll.viewport().width()
        least = max(dock.minimumSizeHint().width(),
                    around + scroll.widget().minimumSizeHint().width())
        self.resizeDocks([dock], [least], Qt.Orientation.Horizontal)

    def show_panes(self) -> None:
        if self.model_view is None:
            return
        self.model_view.hide()
        self.splitter.show()
        self.model_action.setChecked(False)
        self.label_what_is_shown()

    def from_model(self) -> str | None:
        """The name of the tensor in the panes when it is one of the open checkpoint's
        tensors (None for any other: a generator, a file opened since)."""
        src, view = self.state.source, self.model_view
        if view is None or src is None or src.kind != "file" or src.tensor is None:
            return None
        if any(r.name == src.tensor and str(r.path) == str(src.name) for r in view.rows):
            return src.tensor
        return None

    def label_what_is_shown(self) -> None:
        """The headline, the status bar and the bar back to the model view say what is on
        screen now: the model view's checkpoint, or the tensor in the panes. Called whenever
        either changes, so no label keeps an earlier tensor's name."""
        st = self.state
        model = self.model_active()
        where, short = getattr(self, "model_label", ("", ""))
        if model:
            self.source_status.setText(printable(where))
        else:
            self.source_status.setText(st.source.label() if st.source else "")
        if self.model_view is not None:
            name = self.from_model()
            text = f"{printable(short)} · showing {printable(name or '')}"
            compared = getattr(self, "_compared", None)
            if name is None and compared is not None and st.source is not None and (
                    st.source.name, st.source.tensor) == compared[:2]:
                name, text = compared[1], compared[2]  # a compared weight's original
            self.model_back_bar.setVisible(not model and name is not None)
            self.model_back_label.setText(text)
        self.update_headline()

    def ready_to_render(self) -> bool:
        """What ``--screenshot`` waits for: the model view complete, or every pane and view."""
        if self.model_active():
            return self.model_view.is_complete()
        return self.all_shown() and self.views_ready()

    def open_folder_dialog(self) -> None:
        """File > Open checkpoint folder: a sharded checkpoint or a folder of .npy files."""
        dialog = QFileDialog(self, "Open a checkpoint folder", str(Path.cwd()))
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        dialog.fileSelected.connect(self.open_model)
        dialog.open()
        self.folder_dialog = dialog

    def _ensure_model_view(self):
        if self.model_view is not None:
            return self.model_view
        # the model view's modules (the scan, the plan, stored checkpoints) load when a model
        # first opens, not with every window
        from quantscope.gui.model_view import ModelView

        view = self.model_view = ModelView(jobs=self.jobs)
        view.hide()
        view.tensor_chosen.connect(self._open_model_tensor)
        view.compare_view.row_chosen.connect(self._open_compared)
        view.failed.connect(self.show_error)
        bar = self.model_back_bar = QWidget()
        h = QHBoxLayout(bar)
        h.setContentsMargins(0, 0, 0, 2)
        back = QPushButton("◀  Back to the model view")
        back.setObjectName("modelBack")
        back.clicked.connect(self.show_model_view)
        self.model_back_label = QLabel("")
        self.model_back_label.setObjectName("hint")
        h.addWidget(back)
        h.addWidget(self.model_back_label, 1)
        self.model_back_button = back
        bar.hide()
        outer = self.centralWidget().layout()
        at = outer.indexOf(self.splitter)
        outer.insertWidget(at, bar)
        outer.insertWidget(at + 2, view, 1)
        for page in (bar, view):  # the window's text sizes (its hints are smaller)
            style_page(self, page)
        self.state.settings_changed.connect(lambda: view.set_settings(self.state.settings))
        self.model_action.setEnabled(True)
        return view

    def compare_with_original(self, reference: str | Path) -> None:
        """Measure the open quantized checkpoint against ``reference``, its original: what
        each stored weight lost, beside the best formats at its bits (in the model view)."""
        if self.model_view is None or self.model_view.path is None:
            self.show_error("open a quantized checkpoint (File ▸ Open checkpoint folder…) "
                            "before comparing it with its original")
            return
        self.model_view.compare_with(reference)
        self.show_model_view()

    def compare_dialog(self) -> None:
        """File > Compare with original…: the unquantized checkpoint (a .safetensors file, or
        the *.index.json of a sharded one) the open quantized checkpoint was made from."""
        dialog = QFileDialog(self, "Compare with the original checkpoint", str(Path.cwd()))
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.setNameFilter("Checkpoints (*.safetensors *.index.json *.pt *.pth *.bin "
                             "*.gguf *.npz);;All files (*)")
        dialog.fileSelected.connect(self.compare_with_original)
        dialog.open()
        self.compare_file_dialog = dialog

    def _open_compared(self, row) -> None:
        """A compared weight opens as its original, the stored scheme's engine format in the
        first pane and the best alternatives at the same or fewer bits in the others."""
        import dataclasses


        view = self.model_view.compare_view
        settings = dataclasses.replace(self.state.settings, formats=row.panes(), axis=0)
        source = Source("file", str(view.reference), tensor=row.reference)
        self._compared = (source.name, source.tensor, (
            f"{printable(row.name)}: the original, first pane {row.panes()[0]} (stored as "
            f"{row.stored.format if row.stored else '?'}), then the best formats at its bits"))
        # the panes come back once they hold the original (see _open_model_tensor)
        self.load(source, settings=settings, on_loaded=self.show_panes)

    def _open_model_tensor(self, row) -> None:
        # the panes come back once they hold this tensor: shown at once they would say the
        # previous tensor's name (headline, status bar, Tensor box) until it loaded
        self.load(Source("file", row.path, tensor=row.name), on_loaded=self.show_panes)

    def _build_model_menu(self) -> None:
        """File > Open checkpoint folder…, View > Model view (Ctrl+M)."""
        menus = {a.text().replace("&", ""): a.menu() for a in self.menuBar().actions()
                 if a.menu()}
        file_menu = menus["File"]
        folder = QAction("Open checkpoint &folder…", self, triggered=self.open_folder_dialog)
        file_menu.insertAction(file_menu.actions()[1], folder)
        self.compare_action = QAction("&Compare with original…", self,
                                      triggered=self.compare_dialog)
        file_menu.insertAction(file_menu.actions()[2], self.compare_action)
        self.model_action = QAction("&Model view", self, checkable=True,
                                    shortcut=QKeySequence("Ctrl+M"))
        self.model_action.setEnabled(False)  # until a checkpoint is open
        self.model_action.triggered.connect(
            lambda on: self.show_model_view() if on else self.show_panes())
        self.view_menu.addAction(self.model_action)
