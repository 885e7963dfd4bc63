"""The engine's worker threads: compiled loops that release the GIL, run on every core.

One small pool, created on first use, shared by the sort, the prefix sums and the direct passes.
A job is split in shares (one per thread) and the caller waits for all of them, so a caller
must never be one of the pool's own threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

#: Threads the engine uses: the cores this process may run on (at most 8).
THREADS = max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                     else (os.cpu_count() or 1), 8))
#: Below this many elements a pass runs on the calling thread alone (the hand-off costs more).
PARALLEL_MIN = 1 << 17

#: Name prefix of the pool's threads (they live as long as the process).
THREAD_NAME = "quantscope-engine"

_POOL: ThreadPoolExecutor | None = None


def submit(fn: Callable, *args) -> Future:
    """Run ``fn(*args)`` on the pool."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(THREADS, thread_name_prefix=THREAD_NAME)
    return _POOL.submit(fn, *args)


def parallel(fn: Callable, argsets: list[tuple]) -> list:
    """``fn(*args)`` for each argument set, on the pool's threads; their results in order."""
    if len(argsets) == 1:
        return [fn(*argsets[0])]
    return [f.result() for f in [submit(fn, *a) for a in argsets]]


def shares(n: int, threads: int | None = None) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges splitting ``n`` positions between the threads (one range when ``n``
    is below :data:`PARALLEL_MIN`)."""
    t = 1 if n < PARALLEL_MIN else (threads or THREADS)
    return [(i * n // t, (i + 1) * n // t) for i in range(t)]
