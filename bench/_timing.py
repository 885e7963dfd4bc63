"""Timing helper shared by the benchmark scripts (run them as ``python bench/NAME.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeats: int = 5) -> float:
    """Smallest wall time of ``repeats`` calls, in seconds: on a shared, noisy machine the least
    disturbed run is the best estimate of the code's own cost."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
