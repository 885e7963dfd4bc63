"""A view's background computation: latest request wins, results delivered on the GUI thread.

Sweeps and bit-width curves evaluate dozens of reports; on a 16M-element tensor that is far
beyond the 50 ms the GUI thread may block. Each view owns one :class:`LatestJob`: a request
runs in a short-lived thread, is stamped with a generation number, and its result is
delivered through a queued Qt signal only if no newer request was made meanwhile (napari's
pattern). Requests made while one is running are coalesced: only the newest runs next, so a
dragged slider never queues up work.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from quantscope.state.compute import lower_thread_priority


class LatestJob(QObject):
    """Run the newest submitted function off the GUI thread; emit ``finished(result)``.

    Signals
    -------
    finished(object)
        The result of the newest request (stale results are dropped).
    failed(str)
        The newest request raised; the message is the exception's text.
    """

    finished = Signal(object)
    failed = Signal(str)
    progress = Signal(float)
    _delivered = Signal(int, object, str)
    _progressed = Signal(int, float)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._generation = 0
        self._pending: tuple[int, Callable[[], object]] | None = None
        self._thread: threading.Thread | None = None
        self._last: threading.Thread | None = None  # the newest thread, until joined
        self._lock = threading.Lock()
        self._running = 0
        self._delivered.connect(self._on_delivered)  # queued: emitted from the worker thread
        self._progressed.connect(self._on_progressed)
        self._later: Callable[[], object] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timer)

    @property
    def busy(self) -> bool:
        """True while a request runs or waits (debounced ones included)."""
        if self._timer.isActive():
            return True
        with self._lock:
            return self._thread is not None or self._pending is not None

    def submit(self, fn: Callable[[], object], delay_ms: int = 0) -> int | None:
        """Schedule ``fn()``; any older request still waiting is replaced. Returns its stamp.

        With ``delay_ms`` the request starts only once no other request came for that long
        (debounce): work that follows a dragged control then runs when the hand rests, instead
        of competing with the panes for the interpreter on every step.
        """
        if delay_ms > 0:
            self._later = fn
            self._timer.start(int(delay_ms))
            return None
        self._timer.stop()
        self._later = None
        with self._lock:
            self._generation += 1
            self._pending = (self._generation, fn)
            if self._thread is None:
                self._start_locked()
            return self._generation

    def _on_timer(self) -> None:
        fn, self._later = self._later, None
        if fn is not None:
            self.submit(fn)

    def stale(self) -> bool:
        """True when the running request has been superseded or cancelled: long work polls
        this (from the worker thread) and stops early instead of finishing for nobody."""
        return self._running != self._generation

    def report_progress(self, fraction: float) -> None:
        """From the worker thread: how far the running request is (0..1)."""
        try:
            self._progressed.emit(self._running, float(fraction))
        except RuntimeError:  # the owning view is gone
            pass

    def cancel(self) -> None:
        """Forget every request: a running one finishes but its result is dropped."""
        self._timer.stop()
        self._later = None
        with self._lock:
            self._generation += 1
            self._pending = None

    def wait(self, timeout: float | None = 10.0) -> None:
        """Block until no thread runs (tests and shutdown); results are still delivered."""
        while True:
            with self._lock:
                thread = self._thread or self._last
            if thread is None:
                return
            thread.join(timeout)
            if thread.is_alive():
                return
            with self._lock:
                if self._last is thread:  # its last steps (delivery) ran after _thread = None
                    self._last = None

    def shutdown(self) -> None:
        """Cancel and join: call when the owning view goes away, so no thread outlives it."""
        self.cancel()
        self.wait()

    def _start_locked(self) -> None:
        stamp, fn = self._pending
        self._pending = None
        self._thread = self._last = threading.Thread(target=self._run, args=(stamp, fn),
                                                     name="quantscope-view-job", daemon=True)
        self._thread.start()

    def _run(self, stamp: int, fn: Callable[[], object]) -> None:
        lower_thread_priority()  # like the panes' engine threads: the GUI thread comes first
        self._running = stamp
        try:
            result, message = fn(), ""
        except Exception as exc:  # delivered as a message; the view shows it
            result, message = None, f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
        with self._lock:
            if self._pending is not None:
                self._start_locked()
            else:
                self._thread = None
        try:
            self._delivered.emit(stamp, result, message)
        except RuntimeError:  # the owning view was deleted meanwhile: nobody to tell
            pass

    def _on_progressed(self, stamp: int, fraction: float) -> None:
        if stamp == self._generation:
            self.progress.emit(fraction)

    def _on_delivered(self, stamp: int, result: object, message: str) -> None:
        if stamp != self._generation:
            return
        if message:
            self.failed.emit(message)
        else:
            self.finished.emit(result)
