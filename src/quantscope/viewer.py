"""quantscope from Python: ``view(tensor)`` opens the explorer, ``run()`` blocks until it closes,
and the :class:`Viewer` it returns scripts the window.

napari's convention: in IPython with a Qt event loop (``%gui qt``, switched on here when IPython
is running without one) ``view`` returns at once and the window stays live while the user keeps
typing; in a plain script the window appears, and ``run()`` hands the thread to Qt until the
last window closes. The QApplication is made on first use and kept for the process.

The handle and the window's controls are one thing: both change :class:`ExplorerState`, the
panes follow its signals, and :meth:`Viewer.numbers` reads what the panes display. Loads and
reports run in the live state's scheduler (:class:`~quantscope.state.live.LiveExplorer`, as for
``figure``: the handle asks the state, not the window, for a tensor); :meth:`Viewer.wait` turns
the event loop until every pane shows the numbers of the current tensor and settings. Nothing
here imports Qt until a window is asked for, so ``import quantscope`` stays a pure engine.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import sys
import time
import weakref
from pathlib import Path

from quantscope.errors import QuantscopeError, UserError
from quantscope.inputs import resolve_source, settings_changes
from quantscope.state import ExplorerState, Settings
from quantscope.state.load_job import PickFirst, is_checkpoint, source_reader
from quantscope.state.numbers import pane_numbers

#: How long :meth:`Viewer.wait` waits by default (a 10^8-element tensor prepares in seconds).
WAIT_TIMEOUT_S = 120.0
#: The window's size when none is given.
DEFAULT_SIZE = (1600, 1000)

_APP = None
#: True once :func:`qt_app` chose the offscreen platform itself (a figure with no display).
_OFFSCREEN_CHOSEN = False
_VIEWERS: weakref.WeakSet[Viewer] = weakref.WeakSet()


class ViewerClosedError(UserError):
    """A call on a :class:`Viewer` whose window was closed."""


def ipython_shell():
    """The running IPython shell, or None (IPython is looked up, never imported)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def ipython_has_qt_loop() -> bool:
    """True when IPython integrates Qt's event loop (``%gui qt``): the prompt keeps the windows
    live, so nothing needs to block."""
    shell = ipython_shell()
    return shell is not None and getattr(shell, "active_eventloop", None) == "qt"


def qt_app(*, offscreen_if_headless: bool = False):
    """The process's QApplication, made on first use (and kept: it must outlive every widget).

    With no display (Linux without DISPLAY/WAYLAND_DISPLAY and no QT_QPA_PLATFORM) Qt would
    abort the process; ``offscreen_if_headless`` renders offscreen instead (figures), otherwise
    the user is told what to do.
    """
    global _APP, _OFFSCREEN_CHOSEN
    from quantscope.gui.launch import _no_display

    if "PySide6.QtWidgets" in sys.modules:
        from PySide6.QtWidgets import QApplication

        if QApplication.instance() is not None:
            _APP = QApplication.instance()
            return _APP
    if _no_display():
        if not offscreen_if_headless:
            raise UserError("no display to open the window on (DISPLAY and WAYLAND_DISPLAY are "
                            "unset): quantscope.figure(x) draws the panes without one, and "
                            "QT_QPA_PLATFORM=offscreen gives a window to script but not to see")
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        _OFFSCREEN_CHOSEN = True
    from PySide6.QtWidgets import QApplication

    _APP = QApplication.instance() or QApplication([sys.argv[0] if sys.argv and sys.argv[0]
                                                    else "quantscope"])
    if os.environ.get("QT_QPA_PLATFORM") == "offscreen":
        from quantscope.gui.qt_messages import drop_offscreen_noise

        drop_offscreen_noise()
    return _APP


def run() -> None:
    """Show the open windows until the last one closes (a plain script's ``napari.run()``).

    Returns at once where an event loop already runs: in IPython with ``%gui qt``, or inside
    a running Qt loop. Without an open window there is nothing to run, and a warning says so.
    """
    if ipython_has_qt_loop():
        return
    live = [v for v in list(_VIEWERS) if not v.closed and v.window.isVisible()]
    if not live:
        import warnings

        warnings.warn("quantscope.run(): no window is open (quantscope.view(x) opens one)",
                      stacklevel=2)
        return
    app = qt_app()
    if app.thread().loopLevel() > 0:
        return
    app.exec()


def _close_all() -> None:
    """Close every window before the interpreter tears Qt down (PySide6 + pyqtgraph can crash
    when the final garbage collection deletes widgets in arbitrary order)."""
    for v in list(_VIEWERS):
        v.close()


class Viewer:
    """The explorer window on a tensor, scriptable (see the module docstring).

    Build it with :func:`view`. Every method returns quickly: loads and reports run in the
    live state's scheduler, and :meth:`wait` is the one call that waits for them.

    Attributes
    ----------
    window : quantscope.gui.window.MainWindow
    state : quantscope.state.ExplorerState
    """

    def __init__(self, data=None, *, name: str | None = None, tensor: str | None = None,
                 show: bool = True, size: tuple[int, int] | None = None,
                 install_views: bool = True, **settings) -> None:
        from quantscope.gui import create_window

        qt_app()
        if not _VIEWERS:
            # registered after PySide6's own exit handler, so it runs before Qt is torn down
            atexit.unregister(_close_all)
            atexit.register(_close_all)
        self.state = ExplorerState(Settings())
        # a first run: NumPy twins paint the panes while another process compiles the loops
        # create_window would otherwise compile (a minute on a busy machine); a compile that
        # still happens here is announced, with progress, on a notebook cell's stderr too
        from quantscope.core.kernels.compile_notice import announce_compiles
        from quantscope.state.compile_ahead import stand_in_if_cold

        stand_in_if_cold()
        announce_compiles()
        self.window = create_window(self.state, install_views=install_views)
        if show:  # a first run: the loops of formats, scans and the API compile meanwhile
            from quantscope.state.compile_ahead import start_if_cold

            start_if_cold()
        if show:  # on a screen: fitting it (a laptop's 1280x720 gets a maximized window)
            from quantscope.gui.compact import open_fitting

            open_fitting(self.window, size)
        else:
            self.window.resize(*(size or DEFAULT_SIZE))
        self.closed = False
        self._load_ticket = 0
        self._load_done = True
        self._failure: str | None = None
        w = self.window
        w.closed.connect(self._on_closed)
        w.live.loaded.connect(self._on_loaded)  # the live state's events, not the window's
        w.live.failed.connect(self._on_failed)
        _VIEWERS.add(self)
        if settings:
            self.set(**settings)
        self.load(data, tensor=tensor, name=name)
        if show:
            w.show()
            w.raise_()

    # -- the background jobs' outcomes ------------------------------------------------------
    def _on_closed(self) -> None:
        self.closed = True
        _VIEWERS.discard(self)

    def _on_loaded(self, ticket: int, outcome) -> None:
        if ticket != self._load_ticket:
            return  # another load's (the window's own, or a superseded one)
        self._load_done = True
        if isinstance(outcome, PickFirst):  # several tensors, none named: show them all
            self.window.open_model(outcome.path)

    def _on_failed(self, kind: str, message: str) -> None:
        # the state reports only its latest load's failure: this handle's, or a newer one
        if kind == "load":
            self._load_done = True
        self._failure = message

    def _check_open(self) -> None:
        if self.closed:
            raise ViewerClosedError("the window was closed; quantscope.view(x) opens a new one")

    def _load_pending(self) -> bool:
        scheduler = self.window.live.scheduler
        return not self._load_done and scheduler.is_current("load", self._load_ticket)

    # -- commands ---------------------------------------------------------------------------
    def load(self, data=None, *, tensor: str | None = None, name: str | None = None) -> Viewer:
        """Show another tensor: an array of any framework (copied now, so it may change
        afterwards), a file path, a bundled sample's or a generator's name, or a
        :class:`~quantscope.state.Source`; None is the demo tensor.

        ``tensor`` names the tensor inside a multi-tensor file; ``name`` labels an in-memory
        one. Returns at once; :meth:`wait` waits for the panes. Refused input (complex,
        sparse, a file that does not exist) raises here; a file the loader refuses raises in
        :meth:`wait`, and the window keeps its tensor either way.
        """
        self._check_open()
        source, read, hint = resolve_source(data, tensor=tensor, name=name)
        self._failure = None
        # a new tensor resets the manual window: the tensor's own one arrives with it
        given = dataclasses.replace(self.state.settings, **hint) if hint else None
        if is_checkpoint(source):  # a folder or an index: the window's model view lists it
            self.window.open_model(source.name)
            self._load_ticket, self._load_done = 0, True
            return self
        # the live state loads it, as for a figure: the window only listens (its progress
        # bar, its panes); a file of several tensors comes back as the names to pick from
        reader = read if read is not None else source_reader(source, pick=False)
        self._load_ticket = self.window.live.load(source, reader, settings=given,
                                                  reports=read is None)
        self._load_done = False
        return self

    def set(self, **settings) -> Viewer:
        """Change settings by name, exactly as the window's controls do (through the state).

        Names are :class:`~quantscope.state.Settings`' fields (``method``, ``percentile``,
        ``manual_clip``, ``rounding``, ``narrow_range``, ``bits``, ``axis``, ``group_size``,
        ``runtime``, ``formats``) or the command line's words for them (``clip=(lo, hi)`` for a
        manual clip window, ``code_range="narrow" | "full" | "default"``, ``preset=``), as
        :data:`quantscope.state.setting_names.SETTING_NAMES` lists them. A setting the tensor cannot
        have raises :class:`~quantscope.state.SettingsError` and changes nothing. Settings
        apply to the tensor being loaded, so a pending :meth:`load` is waited for first.
        """
        self._check_open()
        if self._load_pending():
            self._run_until(lambda: not self._load_pending(), WAIT_TIMEOUT_S)
        st = self.state
        changes = settings_changes(st.settings, settings,
                                   None if st.tensor is None else st.tensor.ndim)
        self._failure = None
        st.update_settings(**changes)
        return self

    @property
    def settings(self) -> Settings:
        """The current settings (the controls show the same)."""
        return self.state.settings

    def is_current(self) -> bool:
        """True when every pane shows the numbers of the current tensor and settings."""
        w, st = self.window, self.state
        if self.closed or self._load_pending() or not w.all_shown():
            return False
        return all(w.panes[k].report is r for k, r in st.results.items())

    def wait(self, timeout: float = WAIT_TIMEOUT_S) -> Viewer:
        """Turn the event loop until :meth:`is_current` (every pane shows the current numbers).

        Raises
        ------
        QuantscopeError
            If the last load or computation failed (the message is the window's).
        TimeoutError
            If the panes are not current after ``timeout`` seconds.
        """
        self._check_open()
        done = self._run_until(lambda: self.is_current() or self._failure is not None, timeout)
        if self._failure is not None:
            message, self._failure = self._failure, None
            raise QuantscopeError(message)
        if not done:
            raise TimeoutError(f"the panes did not show the current numbers within {timeout} s")
        return self

    def _run_until(self, predicate, timeout: float) -> bool:
        """Run Qt's event loop until ``predicate()`` or ``timeout`` seconds; True if it held."""
        from PySide6.QtCore import QEventLoop, QTimer

        if predicate():
            return True
        deadline = time.monotonic() + timeout
        loop = QEventLoop()

        def check() -> None:
            if predicate() or self.closed or time.monotonic() >= deadline:
                loop.quit()

        timer = QTimer()
        timer.timeout.connect(check)
        timer.start(10)
        loop.exec()
        timer.stop()
        return bool(predicate())

    def numbers(self) -> dict:
        """The four panes' numbers as displayed, keyed as ``quantscope report --json``.

        ``schemes`` maps each pane to its report's ``summary()`` (or ``{"error": text}`` for a
        pane the engine refused); in the comparison layout ``formats`` maps each format
        (``"nvfp4"``, ``"fp8_e4m3/tensor"``) to its summary with ``format``,
        ``bits_per_element`` and the ``pane`` showing it; ``current`` says whether they
        belong to the current tensor and settings (call :meth:`wait` first to be sure they
        do).
        """
        self._check_open()
        w = self.window
        shown = {k: pane.report for k, pane in w.panes.items() if pane.report is not None}
        refused = {k: pane.error.text() or "not computed yet" for k, pane in w.panes.items()
                   if pane.report is None}
        return state_numbers(self.state, shown, refused, current=self.is_current())

    def screenshot(self, path: str | os.PathLike, size: tuple[int, int] | None = None,
                   timeout: float = WAIT_TIMEOUT_S) -> Path:
        """Save the window as shown once every pane and view is current: ``.png`` at twice
        the pixel density, or ``.svg``. ``size`` (width, height) renders it at that size and
        restores the window's own afterwards. Returns the path."""
        from quantscope.gui.export import save_image

        path = Path(path)
        self.wait(timeout)
        w = self.window
        old = w.size()
        if size is not None:
            w.resize(*size)
        try:
            self._run_until(w.views_ready, timeout)
            qt_app().processEvents()
            settle = getattr(getattr(w, "views_controller", None), "settle", None)
            if settle is not None:
                settle()
            save_image(w, path)
        finally:
            if size is not None:
                w.resize(old)
        return path

    def close(self) -> None:
        """Close the window and stop its work (idempotent)."""
        if self.closed:
            return
        w = self.window
        w.shutdown()
        w.close()
        self._on_closed()
        qt_app().processEvents()

    def __repr__(self) -> str:
        st = self.state
        what = st.source.label() if st.source else "no tensor"
        shape = "x".join(map(str, st.tensor.shape)) if st.tensor is not None else "-"
        return (f"<quantscope.Viewer {what} [{shape}], {st.settings.method}, "
                f"{st.settings.bits} bits{', closed' if self.closed else ''}>")


def state_numbers(st: ExplorerState, shown: dict | None = None, refused: dict | None = None,
                  *, current: bool = True) -> dict:
    """The panes' numbers keyed as ``quantscope report --json`` (:meth:`Viewer.numbers`):
    ``shown`` / ``refused`` are the reports and refusals on screen (default: the state's)."""
    shown = st.results if shown is None else shown
    refused = st.errors if refused is None else refused
    numbers = pane_numbers(st.settings, shown, refused)
    section = "schemes" if "schemes" in numbers else "formats"
    for key, text in numbers["errors"].items():  # a refused pane keeps its place
        numbers[section][key] = {"error": text}
    return {"source": st.source.label() if st.source else None,
            "shape": list(st.tensor.shape) if st.tensor is not None else None,
            "axis": st.settings.axis, "settings": st.settings.to_dict(),
            section: numbers[section], "current": current}


def view(data=None, *, name: str | None = None, tensor: str | None = None,
         size: tuple[int, int] | None = None, **settings) -> Viewer:
    """Open the explorer on ``data`` and return its :class:`Viewer`.

    Parameters
    ----------
    data : array_like, str, path, Source, model, ModelTable or Plan, optional
        A tensor of any framework (NumPy, torch CPU/CUDA of any float dtype with or without
        gradients, JAX, CuPy, DLPack, nested lists), a file (.npy, .npz, .safetensors), the
        name of a bundled sample or a generator; None opens the demo tensor. An
        ``nn.Module`` or a state dict (scanned with ``settings``), a table from
        ``quantscope.scan`` / ``observe``, or a plan from ``quantscope.plan`` opens the model
        view on it (with the plan: its rows, each format changeable, re-planned live).
    name : str, optional
        The label of an in-memory tensor (window title and status bar).
    tensor : str, optional
        The tensor inside a multi-tensor file.
    size : (int, int), optional
        The window's size in pixels (default 1600 x 1000).
    **settings
        Initial settings, as :meth:`Viewer.set` takes them (``bits=4``, ``method="mse"``...).

    In IPython the Qt event loop is switched on (as ``%gui qt`` does) and the call returns at
    once with the window live; in a script call :func:`run` to keep it open.
    """
    shell = ipython_shell()
    qt_app()
    if _OFFSCREEN_CHOSEN:
        import warnings

        warnings.warn("there is no display: the window is offscreen, to script and screenshot "
                      "but not to see (quantscope.figure(x) shows the panes in a notebook)",
                      stacklevel=2)
    if shell is not None and not ipython_has_qt_loop() and hasattr(shell, "enable_gui"):
        shell.enable_gui("qt")
    model = _as_model_table(data, settings)
    if model is not None:  # a model: the window opens on its model view
        v = Viewer(None, size=size)
        v.window.open_model_table(*model)
        return v
    return Viewer(data, name=name, tensor=tensor, size=size, **settings)


def _as_model_table(data, settings: dict):
    """``(table, plan)`` when ``data`` is a model rather than a tensor: a plan, a scanned
    table, an ``nn.Module`` or a state dict (scanned here under ``settings``); else None."""
    from collections.abc import Mapping

    from quantscope.state.memory_scan import is_module
    from quantscope.state.model_table import ModelTable
    from quantscope.state.plan import Plan

    if isinstance(data, Plan):
        return data.table, data
    if isinstance(data, ModelTable):
        return data, None
    if is_module(data) or isinstance(data, Mapping):
        from quantscope.state.scan_api import scan

        return scan(data, **settings), None
    return None


__all__ = ["Viewer", "ViewerClosedError", "run", "state_numbers", "view"]
