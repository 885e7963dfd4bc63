"""The engine's worker threads: compiled loops that release the GIL, run on every core.

One small pool per priority, created on first use, shared by the sort, the prefix sums and the
direct passes. A job is split in shares (one per thread) and the caller waits for all of them, so
a caller must never be one of the pool's own threads.

Priorities. Linux keeps a nice value per thread, and a thread is born with its creator's: a
single pool took whatever nice value the thread that happened to use it first had -- a niced
background thread's, and then the reports a user waits for ran as nicely as a view's sweep,
starved by any busy process on the machine (a third slower beside one) -- and views' shares
queued with the panes'. So each nice value has its own pool. A caller's shares go to the pool
of its *share priority*: its own nice value, unless :func:`shares_at` gave it another (the
scheduler's pane threads are niced, so their Python yields the CPU to the window's thread,
while the compiled shares that release the GIL run at the window's priority). A pool's
threads are made by a thread of its nice value (:func:`start_pool`; a lowered thread can never
raise its priority again without privilege); a caller that asks for a priority above its own
whose pool nobody started gets its own.

The pool's threads never run the cyclic garbage collector: :func:`parallel` keeps automatic
collection paused while its jobs run (:func:`collector_paused`). A collection runs on whichever
thread's allocation trips it; one on a pool thread in a process with Qt would finalise PySide6
wrappers there, and shiboken hands their C++ deletion to the main thread as a pending call that
runs at a later GIL hand-off, when Qt may have deleted the object itself -- a segmentation
fault inside ``Shiboken::BindingManager::runDeletionInMainThread``, met in this very wait.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

#: Threads the engine uses: the cores this process may run on (at most 8).
THREADS = max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                     else (os.cpu_count() or 1), 8))
#: Below this many elements a pass runs on the calling thread alone (the hand-off costs more).
PARALLEL_MIN = 1 << 17

#: Name prefix of the pool's threads (they live as long as the process).
THREAD_NAME = "quantscope-engine"

#: The pools by the nice value of their threads (see the module docstring).
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()
#: Per thread: the nice value its shares run at when not its own (:func:`shares_at`).
_LOCAL = threading.local()
_PAUSE_LOCK = threading.Lock()
#: Callers inside :func:`collector_paused`, and whether automatic collection was on before them.
_pauses = 0
_was_enabled = False


#: Linux keeps a nice value per thread; elsewhere a thread id is not a process id to renice.
PER_THREAD_NICE = sys.platform.startswith("linux")


def thread_niceness() -> int:
    """The calling thread's nice value (Linux; 0 elsewhere)."""
    if not PER_THREAD_NICE:
        return 0
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    except OSError:
        return 0


def process_niceness() -> int:
    """The nice value of the process's main thread (Linux; 0 elsewhere): the priority the
    window's own thread runs at, from which background threads count."""
    if not PER_THREAD_NICE:
        return 0
    try:
        return os.getpriority(os.PRIO_PROCESS, os.getpid())  # the main thread's id is the pid
    except OSError:
        return 0


def set_thread_niceness(nice: int) -> int:
    """Give the calling thread the nice value ``nice`` (at most 19) where it can; returns the
    value it has afterwards. Raising one's nice value is always allowed; lowering it needs
    privilege (``RLIMIT_NICE`` or ``CAP_SYS_NICE``) and otherwise quietly does nothing."""
    nice = min(int(nice), 19)
    current = thread_niceness()
    if not PER_THREAD_NICE or nice == current:
        return current
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError:
        pass
    return thread_niceness()


def shares_at(nice: int | None) -> None:
    """The calling thread's shares run at nice value ``nice`` from now on (None: at the
    thread's own); for a thread about to lower itself, with ``nice`` what it had before."""
    _LOCAL.nice = nice


def share_niceness() -> int:
    """The nice value the calling thread's shares run at (:func:`shares_at`)."""
    nice = getattr(_LOCAL, "nice", None)
    return thread_niceness() if nice is None else nice


def start_pool() -> None:
    """Make the pool of the calling thread's nice value, all its threads started now, on this
    thread (so born at its priority), if it is not there yet. Cheap when it is."""
    _pool(thread_niceness())


def _pool(nice: int) -> ThreadPoolExecutor:
    pool = _POOLS.get(nice)
    if pool is not None:
        return pool
    own = thread_niceness()
    if nice < own:  # threads made here would be born nicer: the caller's own pool instead
        return _pool(own)
    with _POOLS_LOCK:
        pool = _POOLS.get(nice)
        if pool is None:
            name = THREAD_NAME if nice == process_niceness() else f"{THREAD_NAME}-nice{nice}"
            pool = ThreadPoolExecutor(THREADS, thread_name_prefix=name,
                                      initializer=set_thread_niceness, initargs=(nice,))
            # the pool makes a thread per submit while none is idle: THREADS tasks that wait
            # for each other make every thread now, on this thread, not on a later caller's
            gate = threading.Barrier(THREADS, timeout=10.0)
            for f in [pool.submit(gate.wait) for _ in range(THREADS)]:
                f.exception()  # a broken barrier (never seen) only leaves threads to make
            _POOLS[nice] = pool
    return pool


def submit(fn: Callable, *args) -> Future:
    """Run ``fn(*args)`` on the pool of the caller's share priority (module docstring)."""
    return _pool(share_niceness()).submit(fn, *args)


def parallel(fn: Callable, argsets: list[tuple]) -> list:
    """``fn(*args)`` for each argument set, on the pool's threads; their results in order.
    Automatic garbage collection stays paused until every share is done (module docstring)."""
    if len(argsets) == 1:
        return [fn(*argsets[0])]
    with collector_paused():
        futures = [submit(fn, *a) for a in argsets]
        return [f.result() for f in futures]


def parallel_behind(fn: Callable, argsets: list[tuple], lead: Callable[[int], None]) -> list:
    """``fn(*argsets[k])`` on the pool's threads, each submitted once ``lead(k)`` has run on
    the calling thread, which then runs ``lead(k + 1)`` while the pool works on ``k``; the
    results in order (collection paused as in :func:`parallel`).

    For work that must happen on one thread and can run ahead of the rest: faulting in a
    fresh output's pages, which two threads doing at once made some calls ten times as long
    (see :func:`quantscope.core.kernels.direct_kernel.dequantize_into`)."""
    with collector_paused():
        futures: list[Future] = []
        try:
            for k, args in enumerate(argsets):
                lead(k)
                futures.append(submit(fn, *args))
        finally:
            for f in futures:  # every share has written its part before anything returns
                f.exception()
        return [f.result() for f in futures]


def pause_collector() -> None:
    """Automatic cyclic collection off, on every thread (the collector is process-wide), until
    the matching :func:`resume_collector`. Pauses are counted (nested and concurrent callers,
    the GUI's windows too) and the last one out restores what was there before; explicit
    ``gc.collect()`` calls still run."""
    global _pauses, _was_enabled
    with _PAUSE_LOCK:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1


def resume_collector() -> None:
    """End one :func:`pause_collector`."""
    global _pauses
    with _PAUSE_LOCK:
        _pauses = max(0, _pauses - 1)
        if _pauses == 0 and _was_enabled:
            gc.enable()


@contextmanager
def collector_paused() -> Iterator[None]:
    """:func:`pause_collector` for the length of the block."""
    pause_collector()
    try:
        yield
    finally:
        resume_collector()


def shares(n: int, threads: int | None = None) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges splitting ``n`` positions between the threads (one range when ``n``
    is below :data:`PARALLEL_MIN`)."""
    t = 1 if n < PARALLEL_MIN else (threads or THREADS)
    return [(i * n // t, (i + 1) * n // t) for i in range(t)]


#: Pieces per thread of :func:`pieces`: a thread that loses its core for a while (another
#: process on a loaded machine) leaves its remaining pieces to the others instead of making
#: every thread wait for its one share.
PIECES_PER_THREAD = 4


def pieces(n_items: int, n_elements: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges of ``n_items`` rows or blocks holding ``n_elements`` elements in
    all, for work whose items are independent: :data:`PIECES_PER_THREAD` per thread, taken
    by whichever thread is free (one range when the elements are below
    :data:`PARALLEL_MIN`; never an empty one)."""
    k = 1 if n_elements < PARALLEL_MIN else THREADS * PIECES_PER_THREAD
    k = max(1, min(k, n_items))
    return [(j * n_items // k, (j + 1) * n_items // k) for j in range(k)]

