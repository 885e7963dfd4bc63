"""The Qt side of the one scheduler: it only listens.

:class:`quantscope.state.scheduler.Scheduler` runs every background job of a window; this module
hands its outcomes to the GUI thread. :class:`Jobs` is the window's: it owns the scheduler and
emits ``done`` / ``partial`` / ``failed`` / ``progress`` ``(kind, ticket, ...)`` from the job's
thread, so Qt queues them to their receivers, methods of objects living in the GUI thread; a
receiver checks :meth:`Jobs.is_current` on arrival (a newer request may have come meanwhile).
Each view has a :class:`Lane`, one key of the same scheduler, whose signals fire on the GUI
thread and only for the key's current request.

Nothing crosses to the GUI thread but the outcome (the event, from the scheduler's thread to a
queued signal): the jobs themselves capture immutable snapshots and no Qt object, so none of
them is released on another thread.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import ClassVar

from PySide6.QtCore import QObject, Signal

from quantscope.state.scheduler import (
    COMPUTE,
    LOAD,
    PREPARE,
    VIEW,
    Event,
    JobContext,
    Scheduler,
    plain_message,
)

#: The window's kinds of job and their priorities (a load makes a queued report moot).
KINDS = {"load": LOAD, "prepare": PREPARE, "compute": COMPUTE}

__all__ = ["KINDS", "JobContext", "Jobs", "Lane"]


class Jobs(QObject):
    """The window's background work: one :class:`Scheduler` and the signals of its outcomes.

    Signals carry ``(kind, ticket, ...)`` and are emitted from the job's thread (see the
    module docstring); the views' outcomes go to their lanes instead.
    """

    #: Every adapter ever made (weakly), so tests can assert none is left running.
    instances: ClassVar[weakref.WeakSet] = weakref.WeakSet()

    done = Signal(str, int, object)
    partial = Signal(str, int, object)
    failed = Signal(str, int, str)
    progress = Signal(str, int, float, str)
    _to_lane = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        # the scheduler holds this adapter weakly: no reference cycle through a Qt wrapper
        # for the cyclic collector to finalise (on whichever thread it runs)
        heard = weakref.WeakMethod(self._heard)

        def listener(event: Event) -> None:
            method = heard()
            if method is not None:
                method(event)

        self.scheduler = Scheduler(listener)
        self._lanes: dict[str, Lane] = {}
        self._to_lane.connect(self._deliver)  # queued: emitted from the scheduler's threads
        Jobs.instances.add(self)

    # -- the window's kinds -------------------------------------------------------------------
    def submit(self, kind: str, fn: Callable[[JobContext], object]) -> int:
        """Queue ``fn(ctx)`` as the latest job of ``kind`` (replacing a queued one). Returns
        its ticket."""
        if kind not in KINDS:
            raise ValueError(f"job kind must be one of {tuple(KINDS)}, got {kind!r}")
        return self.scheduler.submit(kind, fn, priority=KINDS[kind])

    def cancel(self, kind: str | None = None) -> None:
        """Cancel the queued and running jobs of ``kind`` (all the window's kinds when None)."""
        for k in KINDS if kind is None else (kind,):
            self.scheduler.cancel(k)

    def latest(self, kind: str) -> int:
        """Ticket of the most recent request of ``kind``."""
        return self.scheduler.latest(kind)

    def is_current(self, kind: str, ticket: int) -> bool:
        """True while ``ticket`` is the newest of its kind and not cancelled."""
        return self.scheduler.is_current(kind, ticket)

    def is_idle(self) -> bool:
        """No job of the window's kinds queued or running."""
        return self.scheduler.is_idle(KINDS)

    def is_running(self) -> bool:
        """True while any of the scheduler's threads is alive."""
        return self.scheduler.is_running()

    def shutdown(self, timeout_s: float = 30.0) -> bool:
        """Cancel every job (the lanes' too) and join the threads (call before deleting)."""
        return self.scheduler.shutdown(timeout_s)

    # -- the views' lanes ---------------------------------------------------------------------
    def lane(self, key: str, parent: QObject | None = None) -> Lane:
        """A :class:`Lane` of this scheduler for ``key`` (one per key)."""
        return Lane(key, self, parent)

    # -- delivery -----------------------------------------------------------------------------
    def _heard(self, event: Event) -> None:
        """On the job's thread: a lane's outcome is queued to the GUI thread; the window's are
        emitted from here (Qt queues them to the window)."""
        try:
            if event.key in self._lanes:
                self._to_lane.emit(event)
            elif event.what == "done":
                self.done.emit(event.key, event.ticket, event.value)
            elif event.what == "partial":
                self.partial.emit(event.key, event.ticket, event.value)
            elif event.what == "failed":
                self.failed.emit(event.key, event.ticket, event.value)
            else:
                fraction, text = event.value
                self.progress.emit(event.key, event.ticket, fraction, text)
        except RuntimeError:  # the adapter was deleted meanwhile: nobody to tell
            pass

    def _deliver(self, event: Event) -> None:
        lane = self._lanes.get(event.key)
        if lane is not None and self.scheduler.is_current(event.key, event.ticket):
            lane._deliver(event)


class Lane(QObject):
    """One view's key of the scheduler: the newest request wins, its outcome arrives on the
    GUI thread. Without ``jobs`` the lane makes a scheduler of its own (a view used alone),
    joined by :meth:`shutdown`.

    Signals
    -------
    finished(object)
        The result of the newest request (stale results are dropped).
    failed(str)
        The newest request raised; the message is the exception's text.
    progress(float)
        How far the newest request is (0..1).
    """

    finished = Signal(object)
    failed = Signal(str)
    progress = Signal(float)

    def __init__(self, key: str, jobs: Jobs | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._own = jobs is None
        self.jobs = Jobs(self) if jobs is None else jobs
        if key in self.jobs._lanes:
            raise ValueError(f"a lane {key!r} exists already")
        self.key = key
        self.jobs._lanes[key] = self

    @property
    def scheduler(self) -> Scheduler:
        return self.jobs.scheduler

    @property
    def busy(self) -> bool:
        """True while a request runs or waits (debounced ones included)."""
        return self.scheduler.busy(self.key)

    def submit(self, fn: Callable[[JobContext], object], delay_ms: int = 0) -> int | None:
        """Schedule ``fn(ctx)``, replacing any older request still waiting; returns its ticket.

        With ``delay_ms`` the request starts only once no other request came for that long
        (debounce): work that follows a dragged control then runs when the hand rests, instead
        of competing with the panes for the interpreter on every step.
        """
        return self.scheduler.submit(self.key, fn, priority=VIEW, delay_s=delay_ms / 1000,
                                     describe=plain_message)

    def cancel(self) -> None:
        """Forget every request: a running one stops at its next check; its result is
        dropped."""
        self.scheduler.cancel(self.key)

    def wait(self, timeout: float | None = 10.0) -> bool:
        """Block until no request of this lane runs or waits in the queue (tests and
        shutdown); results are still delivered."""
        return self.scheduler.wait(self.key, timeout)

    def shutdown(self) -> None:
        """Cancel and join: call when the owning view goes away, so no work outlives it."""
        self.cancel()
        self.wait()
        if self._own:
            self.jobs.shutdown()

    def _deliver(self, event: Event) -> None:
        if event.what == "done":
            self.finished.emit(event.value)
        elif event.what == "failed":
            self.failed.emit(event.value)
        elif event.what == "progress":
            self.progress.emit(event.value[0])
