"""Reports a prepared tensor keeps for the exact parameters they were computed for.

A block format's scales, and an integer layout with too many groups to sort each one
(:data:`quantscope.core.stats.prepared.LAYOUT_MAX_UNITS`), follow from the data by one pass
over the tensor; the report of that pass is kept beside private copies of the parameter arrays
it was computed for, so asking again costs a comparison of their bytes. A caller that changes
a parameter array in place gets a new report, never a stale one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from quantscope.core.stats.report import QuantReport

#: Reports a prepared tensor keeps (oldest dropped first).
KEPT_REPORTS = 16
#: Besides the newest report (always kept), units the kept reports may hold together, per
#: element of the tensor: a unit's statistics take ~140 bytes, so 1/16 of a unit per element
#: is under 9 bytes per element -- one NVFP4 report of an LLM weight, four of INT4 g64.
KEPT_UNITS_PER_ELEMENT = 1 / 16


#: Bytes compared at a time by :func:`same_bits`: its temporaries stay in the cache.
SAME_PIECE = 1 << 20


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one dtype and shape hold the same bits: their bytes compared
    eight at a time as unsigned integers, a piece of :data:`SAME_PIECE` bytes after another
    (a blake2b digest of the 512K scales of a 16M-element block format took milliseconds, a
    memoryview comparison, item by item in Python's struct unpacking, 20 ms; one comparison
    item by item over the 48 MB of an LLM weight's GGUF blocks, with a boolean per byte, was
    most of a re-report's 50 ms)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    ua = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    ub = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    whole = ua.size - ua.size % 8
    wa, wb = ua[:whole].view(np.uint64), ub[:whole].view(np.uint64)
    step = SAME_PIECE // 8
    for i in range(0, wa.size, step):
        if not np.array_equal(wa[i:i + step], wb[i:i + step]):
            return False
    return bool(np.array_equal(ua[whole:], ub[whole:]))


def kept_report(prepared, key: tuple, arrays: tuple[np.ndarray | None, ...],
                compute: Callable[[], QuantReport]) -> QuantReport:
    """The report ``compute()`` gives for parameters described by ``key`` (hashable settings)
    and ``arrays`` (their scales, zero points...), computed once per prepared tensor."""
    cache = prepared.__dict__.setdefault("_kept_reports", {})
    mine = tuple(None if a is None else np.ascontiguousarray(a) for a in arrays)
    shapes = tuple(None if a is None else (a.dtype.str, a.shape) for a in mine)
    full_key = (key, shapes)
    for k, (kept, report) in cache.items():
        if k[0] == full_key and all(
                (a is None and b is None) or (a is not None and b is not None
                                              and same_bits(a, b))
                for a, b in zip(kept, mine, strict=True)):
            return report
    report = compute()
    budget = int(prepared.size * KEPT_UNITS_PER_ELEMENT)
    units = _units(report)
    held = sum(_units(r) for _, r in cache.values())
    while cache and (len(cache) >= KEPT_REPORTS or held + units > budget):
        held -= _units(cache.pop(next(iter(cache)))[1])
    cache[(full_key, len(cache), id(report))] = (
        tuple(None if a is None else a.copy() for a in mine), report)
    return report


def _units(report: QuantReport) -> int:
    return 1 if report.per_channel is None else int(report.per_channel.n.size)
