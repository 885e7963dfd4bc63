"""Getting a tensor into the window: sources, files, the picker, drag-and-drop, progress and
cancel. A mixin of :class:`quantscope.gui.window.MainWindow`; the load itself is the live
state's (:meth:`quantscope.state.live.LiveExplorer.load`), run in its scheduler.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from quantscope.gui.picker import TensorPicker
from quantscope.io import kinds
from quantscope.state import Settings, Source
from quantscope.state.load_job import PickFirst, Read, is_checkpoint, source_reader


def file_filter() -> str:
    """The Open dialog's filter: every registered kind's extensions (a parser registered later
    is offered too), checkpoint indexes, and all files (kinds are recognised by content)."""
    patterns = " ".join(f"*{s}" for kind in kinds() for s in kind.suffixes)
    return f"Tensor files and checkpoints ({patterns} *.index.json);;All files (*)"


class Loading:
    """Loading, picking, dropping, progress and cancel (``self`` is the MainWindow)."""

    def load(self, source: Source, *, pick: bool = True, settings: Settings | None = None,
             on_loaded: Callable[[], None] | None = None,
             fallback: Source | None = None) -> int | None:
        """Build or read ``source`` in the background; the tensor changes when it is ready.

        A checkpoint -- a folder, an index, a file holding several tensors -- with no tensor
        named opens the model view; a sample holding several opens the (non-modal) picker
        when ``pick`` is true, otherwise the loader's error lists the names. Files are listed
        in the background too (a huge header must not freeze the window). ``settings`` (a
        session's, the command line's) are checked against the tensor in the background and
        arrive with it, then ``on_loaded()`` runs; without them the tensor-dependent ones
        are derived for it (``ExplorerState.set_tensor``). If the load fails nothing
        changes, or ``fallback`` is loaded instead. Returns the load's ticket (None when a
        checkpoint opened the model view instead).
        """
        if is_checkpoint(source):
            self.open_model(source.name)  # a checkpoint folder or index: the model view
            return None
        return self.load_from(source, source_reader(source, pick=pick), settings=settings,
                              progress=True, on_loaded=on_loaded, fallback=fallback)

    def load_from(self, source: Source, read: Read, settings: Settings | None = None, *,
                  progress: bool = False, on_loaded: Callable[[], None] | None = None,
                  fallback: Source | None = None) -> int:
        """Load what ``read()`` returns, ``(array, stored dtype name)``, labelled ``source``:
        ``read``, the checks, the summary and the preparation run in the live state's
        scheduler, as for a file (Python callers hand in-memory tensors this way). With
        ``progress``, ``read`` is called with the job's ``progress(fraction, text)`` (which
        also raises on a cancel). Returns the job's ticket. ``settings``, ``on_loaded`` and
        ``fallback`` as for :meth:`load`."""
        self._load_source = source
        self._load_extras = (settings, on_loaded, fallback)  # for the latest load only
        self._start_progress(f"loading {source.label()}")
        self._own_load = self.live.load(source, read, settings=settings, reports=progress)
        return self._own_load

    def _loaded(self, ticket: int, outcome) -> None:
        """The live state's load ended (its latest): a picker or the model view to show, or
        the tensor installed (True) or refused (False, its error shown by the state). A load
        the window did not start (the Python handle's) is its starter's to resolve."""
        self._stop_progress()
        settings, on_loaded, _ = self._load_extras
        self._load_extras = (None, None, None)
        if ticket != self._own_load:  # the handle's: the tensor is in, or the names are its
            if outcome is True:
                self.clear_error()
            return
        if isinstance(outcome, PickFirst):  # several tensors and none named
            if outcome.source.kind == "file":
                self.open_model(outcome.path)  # the model view lists them all
            else:
                self._show_picker(outcome.source, outcome.infos, settings)  # the user picks
            return
        if outcome:
            self.clear_error()
            if on_loaded is not None:
                on_loaded()

    def _load_failed(self) -> None:
        """A load failed (its error is shown): load the fallback, if one was given."""
        fallback = self._load_extras[2]
        self._load_extras = (None, None, None)
        # the state reports its latest load's failure only: the window's, or the handle's
        if fallback is not None and self.live.scheduler.latest("load") == self._own_load:
            self.load(fallback)

    def open_path(self, path: str | os.PathLike, tensor: str | None = None) -> None:
        """Open a file: one tensor loads at once, several open the (non-modal) picker."""
        self.load(Source("file", str(path), tensor=tensor))

    def _show_picker(self, source: Source, infos, settings=None) -> None:
        if self.picker is not None:
            self.picker.close()
            self.picker.deleteLater()
        self.picker = TensorPicker(source.label(), infos, self)
        self.picker.chosen.connect(
            lambda name: self.load(dataclasses.replace(source, tensor=name), settings=settings))
        self.picker.show()

    def open_dialog(self) -> None:
        """File > Open: a non-native, non-blocking file dialog."""
        dialog = QFileDialog(self, "Open a tensor file", str(Path.cwd()), file_filter())
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.open_path)
        dialog.open()
        self.file_dialog = dialog

    def dragEnterEvent(self, event) -> None:
        if any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        files = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if files:
            event.acceptProposedAction()
            self.open_path(files[0])

    def cancel_long_work(self) -> None:
        """Cancel a load or preparation; the previous tensor and settings stay."""
        self.live.cancel_loading()
        self._stop_progress()
        self.statusBar().showMessage("cancelled; the previous tensor stays", 8000)

    def _job_progress(self, kind: str, fraction: float, text: str) -> None:
        self._start_progress(text, fraction)  # the state passes on its current jobs' only

    def _start_progress(self, text: str, fraction: float = -1) -> None:
        self.progress_label.setText(text)
        if fraction < 0:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * fraction))
        self.progress_box.show()

    def _stop_progress(self) -> None:
        self.progress_box.hide()
        self.progress.setRange(0, 1000)  # stops the busy animation's timer
