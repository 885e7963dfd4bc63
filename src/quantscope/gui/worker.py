"""One worker thread for all engine work: loads, preparations and reports.

Habits from napari and silx: each request carries a ticket (a generation number); a new request
of a kind *replaces* the queued one of that kind instead of stacking behind it (silx's
``tryTake``), so dragging a slider never builds a backlog; a result whose ticket is no longer
the latest of its kind is dropped on arrival. Cancel is cooperative (the job's ``check()``
raises between phases) and immediate for the user: a cancelled ticket's result is dropped even
if the engine call it was inside runs to completion.

Results are delivered by Qt signals emitted from the worker thread; every receiver is a method
of a QObject living in the GUI thread, so Qt queues the call there.
"""

from __future__ import annotations

import threading
import time
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from PySide6.QtCore import QThread, Signal

from quantscope.errors import Cancelled, QuantscopeError
from quantscope.state.compute import lower_thread_priority

#: Kinds of job, in the order a free worker picks them (a load makes a queued report moot).
KINDS = ("load", "prepare", "compute")


@dataclass
class JobContext:
    """What a running job may call: ``progress(fraction, text)`` and ``check()``."""

    worker: Worker
    kind: str
    ticket: int
    started: float = field(default_factory=time.perf_counter)

    def progress(self, fraction: float, text: str) -> None:
        """Report progress (0..1, or a negative fraction for 'busy, unknown length')."""
        self.check()
        self.worker.progress.emit(self.kind, self.ticket, float(fraction), text)

    def partial(self, result: object) -> None:
        """Deliver part of the result early (the window shows it while the rest computes)."""
        if self.worker.is_current(self.kind, self.ticket):
            self.worker.partial.emit(self.kind, self.ticket, result)

    def check(self) -> None:
        """Raise :class:`Cancelled` if this job was cancelled or superseded."""
        if not self.worker.is_current(self.kind, self.ticket):
            raise Cancelled


@dataclass
class _Job:
    kind: str
    ticket: int
    fn: Callable[[JobContext], object]


class Worker(QThread):
    """A single background thread with one mailbox slot per job kind.

    Signals carry ``(kind, ticket, ...)``; receivers should still compare the ticket with
    :meth:`latest` (the worker already drops results that were superseded before delivery).
    """

    #: Every worker ever created (weakly), so tests can assert none is left running.
    instances: ClassVar[weakref.WeakSet] = weakref.WeakSet()

    done = Signal(str, int, object)
    partial = Signal(str, int, object)
    failed = Signal(str, int, str)
    progress = Signal(str, int, float, str)
    busy_changed = Signal(bool)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("quantscope-worker")
        self._cond = threading.Condition()
        self._pending: dict[str, _Job] = {}
        self._latest: dict[str, int] = dict.fromkeys(KINDS, 0)
        self._cancelled: set[int] = set()
        self._running: _Job | None = None
        self._stop = False
        self._ticket = 0
        Worker.instances.add(self)

    # -- GUI-thread API -----------------------------------------------------------------------
    def submit(self, kind: str, fn: Callable[[JobContext], object]) -> int:
        """Queue ``fn(ctx)`` as the latest job of ``kind`` (replacing a queued one); start the
        thread on first use. Returns the job's ticket."""
        if kind not in KINDS:
            raise ValueError(f"job kind must be one of {KINDS}, got {kind!r}")
        with self._cond:
            self._ticket += 1
            self._latest[kind] = self._ticket
            self._pending[kind] = _Job(kind, self._ticket, fn)
            self._cond.notify()
        if not self.isRunning():
            self._stop = False
            self.start()
        return self._ticket

    def cancel(self, kind: str | None = None) -> None:
        """Cancel the queued and running jobs of ``kind`` (all kinds when None)."""
        with self._cond:
            for k in KINDS if kind is None else (kind,):
                self._pending.pop(k, None)
                self._cancelled.add(self._latest[k])
            self._cond.notify()

    def latest(self, kind: str) -> int:
        """Ticket of the most recent request of ``kind``."""
        return self._latest[kind]

    def is_current(self, kind: str, ticket: int) -> bool:
        """True while ``ticket`` is the newest of its kind and not cancelled."""
        return self._latest[kind] == ticket and ticket not in self._cancelled

    def is_idle(self) -> bool:
        """No job queued or running."""
        with self._cond:
            return self._running is None and not self._pending

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Stop after the current job; wait for the thread to end (call before deleting)."""
        with self._cond:
            self._stop = True
            self._pending.clear()
            self._cancelled.update(self._latest.values())
            self._cond.notify()
        return self.wait(timeout_ms) if self.isRunning() else True

    # -- worker thread ------------------------------------------------------------------------
    def run(self) -> None:
        lower_thread_priority()  # the window's own thread comes first
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                kind = next(k for k in KINDS if k in self._pending)
                job = self._running = self._pending.pop(kind)
            self.busy_changed.emit(True)
            self._execute(job)
            with self._cond:
                self._running = None
                idle = not self._pending
            if idle:
                self.busy_changed.emit(False)

    def _execute(self, job: _Job) -> None:
        ctx = JobContext(self, job.kind, job.ticket)
        try:
            result = job.fn(ctx)
        except Cancelled:
            return
        except QuantscopeError as exc:
            if self.is_current(job.kind, job.ticket):
                self.failed.emit(job.kind, job.ticket, str(exc))
            return
        except MemoryError:
            self.failed.emit(job.kind, job.ticket, "not enough memory for this tensor")
            return
        except Exception as exc:  # a bug: say so in the window instead of killing the thread
            traceback.print_exc()
            self.failed.emit(job.kind, job.ticket,
                             f"internal error ({type(exc).__name__}: {exc}); please report it")
            return
        if self.is_current(job.kind, job.ticket):
            self.done.emit(job.kind, job.ticket, result)
