"""The one Qt adapter of the live state: it forwards outcomes to the GUI thread, and only that.

:class:`quantscope.state.live.LiveExplorer` owns the scheduler and the computation; its job
threads queue each outcome in the state's inbox and call ``wake()``. :class:`Jobs` makes that
wake a queued signal, so :meth:`LiveExplorer.deliver` runs on the GUI thread, where the state
installs results and emits its events. Nothing else crosses threads: the jobs capture
immutable snapshots and no Qt object.

Each view has a :class:`Lane`: one key of the same scheduler, submitting through the live
state (:meth:`LiveExplorer.submit`) and hearing the key's current outcome from its
``outcome`` event.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import ClassVar

from PySide6.QtCore import QObject, Signal

from quantscope.state.live import KINDS, LiveExplorer
from quantscope.state.scheduler import Event, JobContext, Scheduler

__all__ = ["KINDS", "JobContext", "Jobs", "Lane"]


class Jobs(QObject):
    """The live state's Qt side: its outcomes delivered on the GUI thread, its views' lanes.

    Parameters
    ----------
    live : LiveExplorer, optional
        The state to serve (one of its own when None: a view used alone).
    """

    #: Every adapter ever made (weakly), so tests can assert none is left running.
    instances: ClassVar[weakref.WeakSet] = weakref.WeakSet()

    _woken = Signal()

    def __init__(self, live: LiveExplorer | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.live = live if live is not None else LiveExplorer()
        self._lanes: dict[str, Lane] = {}
        self._wake_pending = False
        self._woken.connect(self._deliver)  # queued: emitted from the scheduler's threads
        # the state holds this adapter weakly: no reference cycle through a Qt wrapper for
        # the cyclic collector to finalise (on whichever thread it runs)
        woken = weakref.WeakMethod(self._wake)

        def wake() -> None:
            method = woken()
            if method is not None:
                method()

        self.live.wake = wake
        self.live.outcome.connect(self._to_lane)
        Jobs.instances.add(self)

    @property
    def scheduler(self) -> Scheduler:
        return self.live.scheduler

    # -- the state's kinds (tests and the window's cancel) ----------------------------------
    def submit(self, kind: str, fn: Callable[[JobContext], object]) -> int | None:
        """Queue ``fn(ctx)`` as the latest job of one of the state's kinds (tests stand in
        for a load this way); its outcome goes to the state like the state's own."""
        if kind not in KINDS:
            raise ValueError(f"job kind must be one of {tuple(KINDS)}, got {kind!r}")
        return self.scheduler.submit(kind, fn, priority=KINDS[kind])

    def cancel(self, kind: str | None = None) -> None:
        """Cancel the queued and running jobs of ``kind`` (all the state's kinds when None)."""
        for k in KINDS if kind is None else (kind,):
            self.scheduler.cancel(k)

    def latest(self, kind: str) -> int:
        return self.scheduler.latest(kind)

    def is_current(self, kind: str, ticket: int) -> bool:
        return self.scheduler.is_current(kind, ticket)

    def is_idle(self) -> bool:
        """No job of the state's kinds queued or running, and no outcome left to deliver."""
        return self.live.idle()

    def is_running(self) -> bool:
        """True while any of the scheduler's threads is alive."""
        return self.scheduler.is_running()

    def shutdown(self, timeout_s: float = 30.0) -> bool:
        """Cancel every job (the lanes' too) and join the threads (call before deleting)."""
        return self.live.shutdown(timeout_s)

    def lane(self, key: str, parent: QObject | None = None) -> Lane:
        """A :class:`Lane` of this scheduler for ``key`` (one per key)."""
        return Lane(key, self, parent)

    # -- delivery -------------------------------------------------------------------------------
    def _wake(self) -> None:
        """On a job's thread: one queued call per batch of outcomes (the flag is cleared
        before the inbox is drained, so an outcome queued meanwhile wakes it again)."""
        if self._wake_pending:
            return
        self._wake_pending = True
        try:
            self._woken.emit()
        except RuntimeError:  # the adapter was deleted meanwhile: nobody to tell
            pass

    def _deliver(self) -> None:
        self._wake_pending = False
        self.live.deliver()

    def _to_lane(self, event: Event) -> None:
        lane = self._lanes.get(event.key)
        if lane is not None:
            lane._deliver(event)


class Lane(QObject):
    """One view's key of the scheduler: the newest request wins, its outcome arrives on the
    GUI thread. Without ``jobs`` the lane makes a live state of its own (a view used alone),
    joined by :meth:`shutdown`.

    Signals
    -------
    finished(object)
        The result of the newest request (stale results are dropped).
    failed(str)
        The newest request raised; the message is the exception's text.
    progress(float)
        How far the newest request is (0..1).
    partial(object)
        Part of the newest request's result, delivered early (``ctx.partial``).
    """

    finished = Signal(object)
    failed = Signal(str)
    progress = Signal(float)
    partial = Signal(object)

    def __init__(self, key: str, jobs: Jobs | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._own = jobs is None
        self.jobs = Jobs(parent=self) if jobs is None else jobs
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
        (the scheduler's debounce): work that follows a dragged control then runs when the
        hand rests, instead of competing with the panes for the interpreter on every step.
        """
        return self.jobs.live.submit(self.key, fn, delay_s=delay_ms / 1000)

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
        elif event.what == "partial":
            self.partial.emit(event.value)
