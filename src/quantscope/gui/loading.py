"""Getting a tensor into the window: sources, files, the picker, drag-and-drop, progress and
cancel. A mixin of :class:`quantscope.gui.window.MainWindow`; all heavy work runs in its scheduler.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QFileDialog

from quantscope.errors import QuantscopeError
from quantscope.gui.jobs import JobContext
from quantscope.gui.picker import TensorPicker
from quantscope.io import kinds, list_tensors
from quantscope.io.samples import sample_path
from quantscope.state import (
    Settings,
    SettingsError,
    Source,
    choose_axis,
    load_source,
    overview,
    prepare_tensor,
    tensor_problem,
    working_tensor,
)


def file_filter() -> str:
    """The Open dialog's filter: every registered kind's extensions (a parser registered later
    is offered too), checkpoint indexes, and all files (kinds are recognised by content)."""
    patterns = " ".join(f"*{s}" for kind in kinds() for s in kind.suffixes)
    return f"Tensor files and checkpoints ({patterns} *.index.json);;All files (*)"


class _PickFirst(Exception):  # a signal from the load job, not an error
    """Raised in a load job for a file or sample with several tensors and none named."""

    def __init__(self, path, infos) -> None:
        super().__init__()
        self.path, self.infos = path, infos


class Loading:
    """Loading, picking, dropping, progress and cancel (``self`` is the MainWindow)."""

    def load(self, source: Source, *, pick: bool = True, settings: Settings | None = None,
             on_loaded: Callable[[], None] | None = None,
             fallback: Source | None = None) -> None:
        """Build or read ``source`` in the background; the tensor changes when it is ready.

        A checkpoint -- a folder, an index, a file holding several tensors -- with no tensor
        named opens the model view; a sample holding several opens the (non-modal) picker
        when ``pick`` is true, otherwise the loader's error lists the names. Files are listed
        in the background too (a huge header must not freeze the window). ``settings`` (a
        session's, the command line's) are checked against the tensor in the background and
        arrive with it, then ``on_loaded()`` runs; without them the tensor-dependent ones
        are derived for it (``ExplorerState.set_tensor``). If the load fails nothing
        changes, or ``fallback`` is loaded instead.
        """
        if source.kind == "file" and source.tensor is None and (
                Path(source.name).is_dir() or source.name.endswith(".index.json")):
            self.open_model(source.name)  # a checkpoint folder or index: the model view
            return
        wants_list = source.tensor is None and (
            source.kind == "file" or (pick and source.kind == "sample"))

        def read(report):
            if wants_list:
                report(-1, f"listing {source.label()}")
                path = source.name if source.kind == "file" else sample_path(source.name)
                try:
                    infos = list_tensors(path)
                except QuantscopeError:
                    if source.kind != "file":
                        raise
                    infos = []  # load_source below reports it
                if len(infos) > 1:
                    raise _PickFirst(path, infos)
            return load_source(source, report)

        self.load_from(source, read, settings=settings, progress=True, on_loaded=on_loaded,
                       fallback=fallback)

    def load_from(self, source: Source, read, settings: Settings | None = None, *,
                  progress: bool = False, on_loaded: Callable[[], None] | None = None,
                  fallback: Source | None = None) -> int:
        """Load what ``read()`` returns, ``(array, stored dtype name)``, labelled ``source``:
        ``read``, the checks, the summary and the preparation run in the background, as for a
        file (Python callers hand in-memory tensors this way). With ``progress``, ``read``
        is called with the job's ``progress(fraction, text)`` (which also raises on a
        cancel). Returns the job's ticket. ``settings``, ``on_loaded`` and ``fallback`` as
        for :meth:`load`."""
        self._load_source = source
        self._load_extras = (settings, on_loaded, fallback)  # for the latest load only
        given = settings
        settings = settings or self.state.settings

        def job(ctx: JobContext):
            ctx.progress(-1, f"loading {source.label()}")
            try:
                x, dtype = read(ctx.progress) if progress else read()  # progress: cancels
            except _PickFirst as pick:
                return pick
            problem = tensor_problem(x)
            if problem is None and source.axis is not None and x.ndim > 0 and not (
                    -x.ndim <= source.axis < x.ndim):
                problem = f"channel axis {source.axis} is out of range for shape {x.shape}"
            if problem is not None:
                raise QuantscopeError(f"{source.label()}: {problem}")
            axis = choose_axis(x.shape, source).axis
            if given is not None:  # refused here, the load fails and nothing changes
                try:
                    dataclasses.replace(given, axis=axis).check(x.ndim)
                except SettingsError as exc:
                    raise SettingsError(f"{source.label()}: {exc}") from None
            # every O(N) step here, in the background: the GUI thread only installs the result
            x = working_tensor(x, lambda f, stage: ctx.progress(f, stage))
            prepared = prepare_tensor(
                x, settings, axis,
                lambda f, stage: ctx.progress(f, f"preparing exact statistics: {stage} {f:.0%}"))
            ctx.progress(-1, "summarising")
            return source, x, prepared, overview(x, dtype, prepared), given

        self._start_progress(f"loading {source.label()}")
        return self.jobs.submit("load", job)

    def _loaded(self, result) -> None:
        """A load job's result on the GUI thread: the model view or a picker to show, or
        the tensor (with the settings it came with) to install."""
        self._stop_progress()
        settings, on_loaded, _ = self._load_extras
        self._load_extras = (None, None, None)
        if isinstance(result, _PickFirst):  # several tensors and none named
            if self._load_source.kind == "file":
                self.open_model(result.path)  # the model view lists them all
            else:
                self._show_picker(self._load_source, result.infos, settings)  # the user picks
            return
        source, x, prepared, ov, settings = result
        if self.state.set_tensor(x, source, prepared=prepared, overview=ov, checked=True,
                                 settings=settings):
            self.clear_error()
            if on_loaded is not None:
                on_loaded()
        self._settle_heap()

    def _load_failed(self) -> None:
        """A load failed (its error is shown): load the fallback, if one was given."""
        fallback = self._load_extras[2]
        self._load_extras = (None, None, None)
        if fallback is not None:
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
        self.jobs.cancel("load")
        self.jobs.cancel("prepare")
        self._preparing_for = None
        self._stop_progress()
        self.statusBar().showMessage("cancelled; the previous tensor stays", 8000)
        self._request_compute()


    @Slot(str, int, float, str)
    def _job_progress(self, kind: str, ticket: int, fraction: float, text: str) -> None:
        if kind in ("load", "prepare") and ticket == self.jobs.latest(kind):
            self._start_progress(text, fraction)

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
