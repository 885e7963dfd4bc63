"""One scheduler for all background work: loads, preparations, the panes' reports, the views'.

napari's model owns one slicer with one executor and its Qt side only listens; here the live
state (:class:`quantscope.state.live.LiveExplorer`) owns one :class:`Scheduler`: it submits the
loads, preparations and the panes' reports itself, and every view submits its work through it.
The rules:

* **Latest request wins, per key.** A request replaces the queued one of its key (a dragged
  slider never builds a backlog) and makes a running one stale. Every request is stamped with
  a ticket (a generation number); only the newest ticket of its key is *current*.
* **One way to cancel.** A job receives a :class:`JobContext`; ``ctx.check()`` raises
  :class:`quantscope.errors.Cancelled` once the ticket is no longer current (superseded or
  cancelled), ``ctx.stale()`` says the same as a bool for code that takes a ``should_stop``.
  A stale job's result is dropped even if it runs to completion.
* **Panes before views.** Requests carry a priority (:data:`LOAD` < :data:`PREPARE` <
  :data:`COMPUTE` < :data:`VIEW`); a free thread takes the most urgent due request. Pane work
  (every priority below :data:`VIEW`) runs one request at a time, most urgent first, as one
  worker did: a load never runs beside the reports it makes moot. Pane work has a thread of
  its own and views' work the others (:data:`LANES`), so a pane request always finds its thread
  at once, however long a sweep or a scan runs.
* **The compiled work the user waits for is not niced.** Every job thread runs
  :data:`~quantscope.state.compute.BACKGROUND_NICENESS` nicer than the window's thread
  (:func:`~quantscope.state.compute.lower_thread_priority`, counted from the main thread, never
  compounded): their Python yields the CPU to the window's thread (with the panes' thread at
  the window's priority, the window was blocked half as long again during a 16M load). The
  engine's shares of pane work (:mod:`quantscope.core.kernels.parallel`, compiled loops that release
  the GIL) run at the priority of the thread that made the scheduler, on a pool started by it;
  views' shares run niced, on a pool of their own. On a pool niced by whichever thread used it
  first, one unrelated busy process made the panes' reports a third slower, and views' shares
  queued with the panes'. A job's parts (:meth:`JobContext.beside`) run as the job does.
* **Debounce without a timer.** ``submit(..., delay_s=d)`` holds the request until no other
  request of its key came for ``d`` seconds; it becomes the key's latest only then.

Nothing here knows Qt. Outcomes go to one ``listener(event)`` called on the worker thread
(:class:`Event`: done, failed, partial or progress): the live state's, which queues them for
its owner's thread (the GUI's adapter, ``quantscope.gui.jobs``, wakes that thread), where the
current ticket or generation is checked again. A job is a function of its context that captures
the state it needs (immutable snapshots) and mutates none of the state's.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from quantscope.core.kernels.parallel import share_niceness, shares_at, start_pool, thread_niceness
from quantscope.errors import Cancelled, QuantscopeError
from quantscope.state.compute import lower_thread_priority

#: Priorities, most urgent first (a smaller number runs first).
LOAD, PREPARE, COMPUTE, VIEW = 0, 1, 2, 10

#: What each of a scheduler's threads runs, by its index (the last lane for every further one):
#: pane work (loads, preparations, the panes' reports), its engine shares at the owner's
#: priority; views' work, its shares niced.
LANES = ("panes", "views")
#: Threads a scheduler runs: one for pane work, the others for views.
THREADS = 3
#: Threads that run the parts of one job side by side (:meth:`JobContext.beside`).
HELPERS = 2
#: Name prefix of the scheduler's threads (they end with :meth:`Scheduler.shutdown`).
THREAD_NAME = "quantscope-job"

def error_message(exc: BaseException) -> str:
    """The window's message for a failed job: a user error's own text; a bug says so (and its
    traceback goes to stderr) instead of passing for a problem with the input."""
    if isinstance(exc, QuantscopeError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "not enough memory for this tensor"
    traceback.print_exception(exc)
    return f"internal error ({type(exc).__name__}: {exc}); please report it"


def plain_message(exc: BaseException) -> str:
    """A view's message for a failed job: the exception's text (its type when it has none)."""
    return str(exc) or f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class Event:
    """What became of a job: ``what`` is ``"done"`` (``value`` is the result), ``"failed"``
    (the message), ``"partial"`` (part of the result, delivered early) or ``"progress"``
    (``(fraction, text)``; a negative fraction means busy, length unknown)."""

    key: str
    ticket: int
    what: str
    value: Any = None


@dataclass
class _Job:
    key: str
    fn: Callable[[JobContext], object]
    priority: int
    describe: Callable[[BaseException], str]
    ticket: int = 0
    due: float = 0.0


@dataclass
class JobContext:
    """What a running job may call (from its own thread)."""

    scheduler: Scheduler
    key: str
    ticket: int
    started: float = field(default_factory=time.perf_counter)

    def stale(self) -> bool:
        """True once this job was superseded or cancelled: long work polls it (or passes it on
        as a ``should_stop``) and stops early instead of finishing for nobody."""
        return not self.scheduler.is_current(self.key, self.ticket)

    def check(self) -> None:
        """Raise :class:`Cancelled` if this job was superseded or cancelled."""
        if self.stale():
            raise Cancelled

    def progress(self, fraction: float, text: str = "") -> None:
        """Report progress (0..1, or a negative fraction for 'busy, unknown length'); raises
        :class:`Cancelled` when the job is stale, so a progress callback is also a stop."""
        self.check()
        self.scheduler._tell(Event(self.key, self.ticket, "progress", (float(fraction), text)))

    def partial(self, result: object) -> None:
        """Deliver part of the result early (shown while the rest computes)."""
        if not self.stale():
            self.scheduler._tell(Event(self.key, self.ticket, "partial", result))

    def beside(self, fns: list[Callable[[], object]]) -> Callable[[], list]:
        """Start ``fns`` on the scheduler's helper threads; returns ``wait()``, which waits for
        all of them and gives their results in order (re-raising the first exception). The
        caller goes on with other work meanwhile (the per-tensor panes while the per-channel
        ones run)."""
        return self.scheduler.beside(fns)


class Scheduler:
    """The background threads and their queue (see the module docstring).

    Parameters
    ----------
    listener : callable, optional
        ``listener(event)`` for every :class:`Event`, called on the job's thread.
    threads : int
        Threads for jobs (at least 2: the first runs pane work, the others views').
    """

    def __init__(self, listener: Callable[[Event], None] | None = None, *,
                 threads: int = THREADS, name: str = THREAD_NAME) -> None:
        self.listener = listener
        self.name = name
        self._size = max(len(LANES), int(threads))
        self._cond = threading.Condition()
        self._ticket = 0
        self._latest: dict[str, int] = {}
        self._cancelled: set[str] = set()  # keys whose latest ticket was cancelled
        self._deferred: dict[str, _Job] = {}  # debounced: not the key's latest yet
        self._pending: dict[str, _Job] = {}
        self._running: dict[str, _Job] = {}
        self._threads: list[threading.Thread] = []  # by index: the lanes of LANES
        self._stop = False
        # by the nice value and the share priority of the jobs they serve
        self._helpers: dict[tuple[int, int], _Helpers] = {}

    # -- the owner's side (any thread; the GUI thread in the window) -------------------------
    def submit(self, key: str, fn: Callable[[JobContext], object], *, priority: int = VIEW,
               delay_s: float = 0.0,
               describe: Callable[[BaseException], str] = error_message) -> int | None:
        """Queue ``fn(ctx)`` as the latest request of ``key``; returns its ticket (None when
        ``delay_s`` defers it: the ticket is given once the delay has passed with no newer
        request of the key). A request without delay drops a deferred one of its key.
        ``describe(exc)`` turns what the job raises into the failure's message."""
        job = _Job(key, fn, int(priority), describe)
        with self._cond:
            if self._stop:
                self._stop = False  # a window re-used after shutdown starts afresh
            if delay_s > 0:
                job.due = time.monotonic() + float(delay_s)
                self._deferred[key] = job
                ticket = None
            else:
                self._deferred.pop(key, None)
                ticket = self._enqueue_locked(job)
            self._start_threads_locked()
            self._cond.notify_all()
        return ticket

    def cancel(self, key: str | None = None) -> None:
        """Forget the queued and deferred requests of ``key`` (every key when None) and make
        the running one stale: it stops at its next check, and its result is dropped."""
        with self._cond:
            keys = list(self._latest) + list(self._deferred) if key is None else [key]
            for k in keys:
                self._pending.pop(k, None)
                self._deferred.pop(k, None)
                self._cancelled.add(k)
            self._cond.notify_all()

    def latest(self, key: str) -> int:
        """Ticket of the most recent request of ``key`` (0 before any)."""
        return self._latest.get(key, 0)

    def is_current(self, key: str, ticket: int) -> bool:
        """True while ``ticket`` is the newest of its key and not cancelled."""
        return self._latest.get(key) == ticket and key not in self._cancelled

    def busy(self, key: str | None = None) -> bool:
        """A request of ``key`` (any key when None) deferred, queued or running."""
        with self._cond:
            if key is None:
                return bool(self._deferred or self._pending or self._running)
            return key in self._deferred or key in self._pending or key in self._running

    def is_idle(self, keys: Iterable[str] | None = None) -> bool:
        """No request of ``keys`` (of any key when None) queued or running (deferred ones
        are not work yet)."""
        with self._cond:
            if keys is None:
                return not self._pending and not self._running
            return not any(k in self._pending or k in self._running for k in keys)

    def stale(self, key: str) -> bool:
        """True when the running request of ``key`` was superseded or cancelled (for code
        that knows its key but not its context)."""
        job = self._running.get(key)
        return job is None or not self.is_current(key, job.ticket)

    def wait(self, key: str | None = None, timeout: float | None = 10.0) -> bool:
        """Block until no request of ``key`` (of any key when None) is queued or running;
        False on timeout. Results are still delivered through the listener."""
        deadline = None if timeout is None else time.monotonic() + timeout
        keys = None if key is None else (key,)
        with self._cond:
            while not self._idle_locked(keys):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def is_running(self) -> bool:
        """True while any of the scheduler's threads is alive."""
        return any(t.is_alive() for t in self._threads) or any(
            h.is_running() for h in list(self._helpers.values()))

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Cancel everything, let the running jobs reach their next check, join every thread.
        Returns False if a thread is still running after ``timeout`` seconds."""
        with self._cond:
            self._stop = True
            self._pending.clear()
            self._deferred.clear()
            self._cancelled.update(self._latest)
            threads, self._threads = self._threads, []
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            helpers, self._helpers = list(self._helpers.values()), {}
        joined = all([h.shutdown(max(0.0, deadline - time.monotonic())) for h in helpers])
        return joined and not any(t.is_alive() for t in threads)

    def beside(self, fns: list[Callable[[], object]]) -> Callable[[], list]:
        """Run ``fns`` on the helper threads (see :meth:`JobContext.beside`) of the caller's
        priorities: made by a caller of that nice value they are born with it, and their
        engine shares run at the caller's share priority (a pane job's at the owner's, a
        view's niced)."""
        key = (thread_niceness(), share_niceness())
        with self._cond:
            helpers = self._helpers.get(key)
            if helpers is None:
                helpers = self._helpers[key] = _Helpers(f"{self.name}-helper", HELPERS,
                                                        key[1])
        return helpers.run(fns)

    # -- the threads ----------------------------------------------------------------------------
    def _enqueue_locked(self, job: _Job) -> int:
        self._ticket += 1
        job.ticket = self._ticket
        self._latest[job.key] = job.ticket
        self._cancelled.discard(job.key)
        self._pending[job.key] = job
        return job.ticket

    def _idle_locked(self, keys) -> bool:
        if keys is None:
            return not self._pending and not self._running
        return not any(k in self._pending or k in self._running for k in keys)

    def _start_threads_locked(self) -> None:
        """Every thread that is not running yet, made on the owner's thread, and the engine's
        pool of the owner's priority (started here, so its threads are born with it)."""
        start_pool()
        owner = thread_niceness()
        for i in range(self._size):
            if i < len(self._threads) and self._threads[i].is_alive():
                continue
            t = threading.Thread(target=self._loop,
                                 args=(LANES[min(i, len(LANES) - 1)], owner),
                                 daemon=True, name=f"{self.name}-{i}")
            if i < len(self._threads):
                self._threads[i] = t
            else:
                self._threads.append(t)
            t.start()

    def _next_locked(self, now: float, lane: str) -> tuple[_Job | None, float | None]:
        """The request a free thread of ``lane`` takes now, and else how long until a
        deferred one is due (None: nothing to wait for)."""
        wake = None
        for key, job in list(self._deferred.items()):
            if job.due <= now:
                del self._deferred[key]
                self._enqueue_locked(job)  # now the key's latest: a running one goes stale
            else:
                wake = job.due - now if wake is None else min(wake, job.due - now)
        views = lane == "views"  # pane work has one thread: one request at a time
        best = None
        for key, job in self._pending.items():
            if key in self._running:
                continue  # one request of a key at a time: the newer waits for the older
            if (job.priority >= VIEW) != views:
                continue
            if best is None or (job.priority, job.ticket) < (best.priority, best.ticket):
                best = job
        if best is not None:
            del self._pending[best.key]
            self._running[best.key] = best
        return best, wake

    def _loop(self, lane: str, owner: int) -> None:
        if lane == "panes":
            shares_at(owner)  # the compiled shares the user waits for: not niced
        lower_thread_priority()  # the window's own thread first
        while True:
            with self._cond:
                while True:
                    if self._stop:
                        return
                    job, wake = self._next_locked(time.monotonic(), lane)
                    if job is not None:
                        break
                    self._cond.wait(wake)
            try:
                self._execute(job)
            finally:
                with self._cond:
                    if self._running.get(job.key) is job:
                        del self._running[job.key]
                    self._cond.notify_all()  # the key's next request; wait() callers
                del job  # the request's references go now, not when the next one comes

    def _execute(self, job: _Job) -> None:
        ctx = JobContext(self, job.key, job.ticket)
        try:
            result = job.fn(ctx)
        except Cancelled:
            return
        except Exception as exc:  # delivered as a message; the thread lives on
            if self.is_current(job.key, job.ticket):
                self._tell(Event(job.key, job.ticket, "failed", job.describe(exc)))
            return
        if self.is_current(job.key, job.ticket):
            self._tell(Event(job.key, job.ticket, "done", result))

    def _tell(self, event: Event) -> None:
        listener = self.listener
        if listener is not None:
            listener(event)


class _Helpers:
    """A few threads that run parts of one job side by side (made on first use, joined by
    :meth:`Scheduler.shutdown`)."""

    def __init__(self, name: str, size: int, shares: int) -> None:
        self._shares = shares
        self._cond = threading.Condition()
        self._queue: list[tuple[Callable[[], object], list, int, threading.Event]] = []
        self._stop = False
        self._threads = [threading.Thread(target=self._loop, daemon=True, name=f"{name}-{i}")
                         for i in range(size)]
        for t in self._threads:
            t.start()

    def run(self, fns: list[Callable[[], object]]) -> Callable[[], list]:
        slots: list = [None] * len(fns)
        events = [threading.Event() for _ in fns]
        with self._cond:
            for i, fn in enumerate(fns):
                self._queue.append((fn, slots, i, events[i]))
            self._cond.notify_all()

        def wait() -> list:
            for e in events:
                e.wait()
            for outcome in slots:
                if isinstance(outcome, _Raised):
                    raise outcome.exc
            return list(slots)

        return wait

    def _loop(self) -> None:
        # at the priority of the job thread that made these, and its shares' (Scheduler.beside)
        shares_at(self._shares)
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if self._stop and not self._queue:
                    return
                fn, slots, i, done = self._queue.pop(0)
            try:
                slots[i] = fn()
            except BaseException as exc:  # handed to the waiting caller, raised there
                slots[i] = _Raised(exc)
            finally:
                del fn
                done.set()

    def is_running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def shutdown(self, timeout: float) -> bool:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not self.is_running()


@dataclass
class _Raised:
    exc: BaseException


__all__ = ["COMPUTE", "LOAD", "PREPARE", "VIEW", "Event", "JobContext", "Scheduler",
           "error_message", "plain_message"]
