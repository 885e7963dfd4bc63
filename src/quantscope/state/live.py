"""The explorer's state, live: it owns the one scheduler and computes; front ends only listen.

napari's layer + slicer model. :class:`LiveExplorer` wraps an
:class:`~quantscope.state.explorer.ExplorerState` (tensor, settings, results) and owns one
:class:`~quantscope.state.scheduler.Scheduler`. A change goes one way round:

    state (a setting or tensor changed) → scheduler (latest request wins) → engine (a job
    thread) → inbox → owner's thread (:meth:`deliver`) → state (``accept``) → events → views

and nothing else moves data between the state and the engine. The window, a figure and the
Python handle subscribe to the events and draw; the views submit their own work through
:meth:`submit` (their keys of the same scheduler) and get its outcome as :attr:`outcome`.

Events (psygnal, emitted on the owner's thread):

``tensor_changed()`` / ``settings_changed()``
    The state's own signals (a new tensor; new settings).
``stale()``
    The results no longer belong to the tensor and settings; new ones are being computed.
``partial()`` / ``results_ready()``
    Some panes' / every pane's reports for the current tensor and settings are in the state
    (the state's ``partial_results`` / ``results_changed``).
``failed(kind, message)``
    A ``"load"``, ``"prepare"`` or ``"compute"`` job failed (a refused file, a bug).
``progress(kind, fraction, text)``
    How far the current load or preparation is (a negative fraction: busy, length unknown).
``loaded(ticket, outcome)``
    A load ended: ``True`` (installed), ``False`` (the state refused it) or a
    :class:`~quantscope.state.load_job.PickFirst` (several tensors, none named).
``outcome(event)``
    A :class:`~quantscope.state.scheduler.Event` of any other key (a view's), still current.

One staleness stamp: the state's ``generation`` (a result of an older one is dropped by
``ExplorerState.accept``; a preparation belongs to the very array it was made for). The
scheduler's tickets only say which request of a key is the latest (a superseded load's
outcome is dropped).

Threads: the scheduler calls :meth:`_heard` on its job threads, which only appends the event
to the inbox and calls ``wake()``. Whoever owns the state makes :meth:`deliver` run on its
thread: the Qt adapter (:class:`quantscope.gui.jobs.Jobs`) with a queued signal; without one,
:meth:`wait` runs it while it waits (a script, a figure's first step, the tests).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable

import numpy as np
from psygnal import Signal

from quantscope.state.clipped_histogram import report_clipped
from quantscope.state.compute import ComputeResult, compute_reports
from quantscope.state.drawing import with_drawing
from quantscope.state.explorer import ExplorerState
from quantscope.state.load_job import Loaded, PickFirst, Read, load_job
from quantscope.state.scheduler import (
    COMPUTE,
    LOAD,
    PREPARE,
    THREAD_NAME,
    THREADS,
    VIEW,
    Event,
    JobContext,
    Scheduler,
    plain_message,
)
from quantscope.state.settings import PANES, Settings
from quantscope.state.source import Source, overview, prepare_tensor

#: The state's own kinds of job and their priorities (a load makes a queued report moot).
KINDS = {"load": LOAD, "prepare": PREPARE, "compute": COMPUTE}

#: ``trace(step)``: called at each hand-off of a change, in order (see :meth:`trace_to`).
Tracer = Callable[[str], None]


def with_clipped(result: ComputeResult, prepared) -> ComputeResult:
    """``result`` with the values each per-channel or per-group report clips in its own
    units gathered (:func:`~quantscope.state.clipped_histogram.report_clipped`), on the
    job's thread: the owner's thread then only bins them. At 16M elements with outliers the
    gather and sort took 5-20 ms a pane, on the window's thread, in the turn that drew it."""
    clipped = {}
    for pane, report in result.reports.items():
        try:
            values = report_clipped(report, prepared)
        except ValueError:  # a layout that does not match: the drawing asks again, and says
            continue
        if values is not None:
            clipped[pane] = values
    return dataclasses.replace(result, clipped=clipped) if clipped else result


class LiveExplorer:
    """An :class:`ExplorerState` that computes itself (see the module docstring).

    Parameters
    ----------
    state : ExplorerState, optional
        The state to drive (a new one when None).
    wake : callable, optional
        ``wake()``, called on a job's thread after each outcome is queued: it must make
        :meth:`deliver` run soon on the owner's thread (thread-safe; may be set later).
    threads : int
        The scheduler's threads (see :class:`~quantscope.state.scheduler.Scheduler`).
    name : str
        Their names' prefix (a front end that outlives a window's checks names its own).
    """

    stale = Signal()
    failed = Signal(str, str)
    progress = Signal(str, float, str)
    loaded = Signal(int, object)
    outcome = Signal(object)

    def __init__(self, state: ExplorerState | None = None, *,
                 wake: Callable[[], None] | None = None, threads: int = THREADS,
                 name: str = THREAD_NAME) -> None:
        self.state = state if state is not None else ExplorerState()
        st = self.state
        # the state's own events, under the names front ends subscribe to
        self.tensor_changed = st.tensor_changed
        self.settings_changed = st.settings_changed
        self.results_ready = st.results_changed
        self.partial = st.partial_results
        self.wake = wake
        self._inbox: collections.deque[Event] = collections.deque()
        self._arrived = threading.Event()  # set with each outcome queued (see wait)
        self._preparing_for: np.ndarray | None = None  # the array being prepared
        self._trace: Tracer | None = None
        self.scheduler = Scheduler(self._heard, threads=threads, name=name)
        # connected before any front end: the job is queued before a view reacts
        st.tensor_changed.connect(self._on_tensor_changed)
        st.settings_changed.connect(self._on_settings_changed)

    # -- inputs (the owner's thread) -------------------------------------------------------
    def update_settings(self, **changes) -> bool:
        """Change settings by name (``ExplorerState.update_settings``); the reports follow."""
        self._step("state.update_settings")
        return self.state.update_settings(**changes)

    def set_tensor(self, x, source: Source | None = None, **kw) -> bool:
        """Install a tensor on this thread (``ExplorerState.set_tensor``); it is prepared and
        computed in the background."""
        return self.state.set_tensor(x, source, **kw)

    def load(self, source: Source, read: Read, *, settings: Settings | None = None,
             reports: bool = False) -> int:
        """Load what ``read`` returns (see :func:`~quantscope.state.load_job.load_job`) in the
        background, labelled ``source``; ``settings`` arrive with the tensor, checked against
        it. Returns the load's ticket; its end is announced by ``loaded`` or ``failed``."""
        given = settings
        current = settings or self.state.settings

        def job(ctx: JobContext):
            return load_job(source, read, current, given, ctx.progress, reports=reports)

        ticket = self.scheduler.submit("load", job, priority=LOAD)
        assert ticket is not None
        return ticket

    def cancel_loading(self) -> None:
        """Cancel a load or a preparation; the tensor and settings stay, and the reports of
        a tensor whose preparation was cancelled are computed without it."""
        self.scheduler.cancel("load")
        self.scheduler.cancel("prepare")
        self._preparing_for = None
        self.request_compute()

    def submit(self, key: str, fn: Callable[[JobContext], object], *, delay_s: float = 0.0,
               describe: Callable[[BaseException], str] = plain_message) -> int | None:
        """Queue a view's work under ``key`` (latest wins; ``delay_s`` debounces it: the one
        debounce of the house); its outcome comes back as ``outcome(event)``."""
        if key in KINDS:
            raise ValueError(f"{key!r} is the state's own kind of job")
        return self.scheduler.submit(key, fn, priority=VIEW, delay_s=delay_s,
                                     describe=describe)

    # -- the computation -------------------------------------------------------------------
    def preparing(self) -> bool:
        """True while the current tensor's preparation runs (the reports wait for it)."""
        return self._preparing_for is not None and self._preparing_for is self.state.tensor

    def computing(self) -> bool:
        """True while the reports of the current settings are not all in the state."""
        return self.state.tensor is not None and not self.has_results()

    def has_results(self) -> bool:
        """True when the state holds a report or an error for every pane."""
        st = self.state
        return all(k in st.results or k in st.errors for k in PANES)

    def request_compute(self) -> None:
        """Queue the reports of the current tensor and settings (latest wins); the results
        shown are stale from now on."""
        st = self.state
        if st.tensor is None or self.preparing():
            return  # computed when the preparation arrives
        request = st.request()
        self._step("live → scheduler.submit(compute)")
        trace = self._trace
        views, dtype = st.drawings.views(), st.stored_dtype

        def job(ctx: JobContext):
            if trace is not None:
                trace("scheduler → engine: compute_reports")
            prepared = request.prepared
            # the tensor's sorted values, which the histograms count (none before a pane
            # asked for a view: the panes bin the first results themselves)
            values = (prepared.layout(None, None).values if prepared is not None and views
                      else None)
            made: dict = {}  # the early panes' drawings, not shaped twice

            def partial(result: ComputeResult) -> None:
                ctx.partial(with_drawing(result, values, views, dtype, made))

            result = compute_reports(request, partial, ctx.beside)
            return with_drawing(with_clipped(result, prepared), values, views, dtype, made)

        self.scheduler.submit("compute", job, priority=COMPUTE)
        self.stale.emit()

    def _on_tensor_changed(self) -> None:
        st = self.state
        if st.overview is None and st.tensor is not None:  # set directly: prepare it here
            tensor, settings = st.tensor, st.settings
            self._preparing_for = tensor

            def job(ctx: JobContext):
                prepared = prepare_tensor(tensor, settings, None, lambda f, stage: ctx.progress(
                    f, f"preparing exact statistics: {stage} {f:.0%}"))
                ctx.progress(-1, "summarising")
                return tensor, prepared, overview(tensor, prepared=prepared)

            self.scheduler.submit("prepare", job, priority=PREPARE)
        else:
            self._preparing_for = None
        self.request_compute()

    def _on_settings_changed(self) -> None:
        self._step("state.settings_changed → live")
        self.request_compute()

    # -- outcomes ----------------------------------------------------------------------------
    def _heard(self, event: Event) -> None:
        """On a job's thread: queue the outcome for the owner's thread and wake it."""
        if self._trace is not None and event.key == "compute" and event.what == "done":
            self._trace("engine → inbox (job thread)")
        self._inbox.append(event)
        self._arrived.set()
        wake = self.wake
        if wake is not None:
            wake()

    def deliver(self) -> int:
        """Install the queued outcomes, on the owner's thread; returns how many there were.
        Stale ones (a superseded load, an older generation's reports, a preparation of an
        array that is no longer the tensor) are dropped here."""
        n = 0
        while self._inbox:
            event = self._inbox.popleft()
            n += 1
            try:
                self._deliver_one(event)
            finally:
                del event
        return n

    def _deliver_one(self, event: Event) -> None:
        key, what = event.key, event.what
        if key not in KINDS:
            if self.scheduler.is_current(key, event.ticket):
                self.outcome.emit(event)
            return
        if what == "progress":
            if key in ("load", "prepare") and event.ticket == self.scheduler.latest(key):
                self.progress.emit(key, *event.value)
            return
        if what == "failed":
            if key == "load" and not self.scheduler.is_current(key, event.ticket):
                return
            if key == "prepare":
                self._preparing_for = None
                self.request_compute()  # the reports go on without the preparation
            self.failed.emit(key, event.value)
            return
        if key == "compute":
            self._step("inbox → live.deliver (owner thread)")
            self._step("live → state.accept")
            self.state.accept(event.value)
        elif key == "prepare":
            tensor, prepared, ov = event.value
            if self._preparing_for is not None and tensor is self._preparing_for:
                self._preparing_for = None
                self.state.set_prepared(tensor, prepared, ov)
                self.request_compute()
        elif key == "load" and self.scheduler.is_current(key, event.ticket):
            self._install(event.ticket, event.value)

    def _install(self, ticket: int, outcome: Loaded | PickFirst) -> None:
        if isinstance(outcome, PickFirst):
            self.loaded.emit(ticket, outcome)
            return
        ok = self.state.set_tensor(outcome.tensor, outcome.source, prepared=outcome.prepared,
                                   overview=outcome.overview, checked=True,
                                   settings=outcome.settings)
        self.loaded.emit(ticket, ok)

    # -- waiting without an event loop -------------------------------------------------------
    def idle(self) -> bool:
        """No job of the state's kinds queued or running, and nothing left to deliver."""
        return self.scheduler.is_idle(KINDS) and not self._inbox

    def wait(self, until: Callable[[], bool] | None = None, timeout: float = 60.0) -> bool:
        """Deliver outcomes on this thread until ``until()`` (default: the state's work is
        done and its results are in) or ``timeout`` seconds; True if it held. For owners
        without an event loop; with the Qt adapter the event loop delivers instead."""
        done = until or (lambda: self.idle() and not self.preparing())
        deadline = time.monotonic() + timeout
        while True:
            self._arrived.clear()  # before draining: an outcome queued after it sets it again
            self.deliver()
            if done():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._arrived.wait(min(left, 0.05))

    def shutdown(self, timeout_s: float = 30.0) -> bool:
        """Cancel every job and join the scheduler's threads (idempotent); outcomes still
        queued are dropped."""
        ok = self.scheduler.shutdown(timeout_s)
        self._inbox.clear()
        self._preparing_for = None
        return ok

    # -- tracing ---------------------------------------------------------------------------------
    def trace_to(self, tracer: Tracer | None) -> None:
        """Call ``tracer(step)`` at each hand-off of a change (the owner's and the job's
        steps), or stop with None: what the closing note prints and a test bounds."""
        self._trace = tracer

    def _step(self, step: str) -> None:
        if self._trace is not None:
            self._trace(step)


__all__ = ["KINDS", "LiveExplorer", "Loaded", "PickFirst"]
