"""Timing helpers shared by the benchmark scripts (run them as ``python bench/NAME.py``)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeats: int = 5,
            clock: Callable[[], float] = time.perf_counter) -> float:
    """Smallest wall time (or ``clock``'s, e.g. ``time.process_time``) of ``repeats`` calls, in
    seconds: on a shared, noisy machine the least disturbed run is the best estimate of the
    code's own cost."""
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def _once(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def ratio(fn: Callable[[], object], baseline: Callable[[], object], pairs: int = 9
          ) -> tuple[float, float, float, float, float]:
    """``fn``'s time over ``baseline``'s, from interleaved pairs (baseline, fn), so both see the
    same load: (median ratio, lowest, highest, median fn seconds, median baseline seconds)."""
    fn()
    baseline()  # warm both up (compiled loops, page faults of first use)
    ratios, a, b = [], [], []
    for _ in range(pairs):
        tb = _once(baseline)
        ta = _once(fn)
        ratios.append(ta / tb)
        a.append(ta)
        b.append(tb)
    return (statistics.median(ratios), min(ratios), max(ratios), statistics.median(a),
            statistics.median(b))


def ratio_line(name: str, r: tuple[float, float, float, float, float], goal: float | None,
               baseline: str) -> str:
    """One printed row: the ratio's median and range, both medians, the goal and PASS/MISS."""
    med, lo, hi, ta, tb = r
    verdict = "" if goal is None else (f"goal <= {goal:g}: " + ("PASS" if med <= goal else
                                                              "MISS"))
    return (f"{name:<44} {med:6.2f}x [{lo:5.2f} - {hi:5.2f}]  ({ta * 1e3:7.1f} ms vs "
            f"{baseline} {tb * 1e3:7.1f} ms)  {verdict}")


def load() -> str:
    """The machine's load (1-minute average) and cores, for the record."""
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
