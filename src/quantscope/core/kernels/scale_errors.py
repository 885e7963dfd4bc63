"""The exact errors of a sorted unit at one scale for a few zero points, element by element:
compiled loops for :mod:`quantscope.core.kernels.mse_bound`'s incumbents.

The branch and bound weighs a scale through its runs of equal codes (a gallop per run, then
each run's sums from the prefix sums), which a box needs. The incumbents need only the
scale's errors, and on an LLM weight's channel of 4096 the runs cost about 6 µs a scale,
mostly branches no predictor can learn (each run's end lies somewhere else). Here the values
whose code no zero point of the few weighed clamps -- all but a few at the two ends of the
sorted unit -- err by ``(x − s·rint(x/s))²`` whatever the zero point, added up in one pass
the compiler vectorises; the few at the ends are clamped by each zero point its own way and
are added per zero point.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit

_jit = njit(nogil=True, error_model="numpy")

#: Most values at the two ends, times zero points, weighed one by one; beyond, the caller
#: takes the runs (a scale far below the unit's range clamps most of it).
TAIL_WORK = 256


@_jit
def _code_of(v, inv, k):
    """``rint(v · inv)`` clamped to ``[-k, k]``: the code the runs give ``v``."""
    r = np.rint(np.float64(v) * inv)
    return min(max(r, -k), k)


@_jit
def _first_code_above(x, lo, hi, inv, k, c):
    """First position in ``[lo, hi)`` of sorted ``x`` whose code is above ``c``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if _code_of(x[mid], inv, k) <= c:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(nogil=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _rounding_error(x, u, v, s, inv):
    """``Σ (x − s·rint(x · inv))²`` over ``x[u:v]``: the sum may be taken in any order, so
    the loop runs four lanes wide, and each product may fuse with its sum (rounding once).
    It walks a slice from 0: an index the compiler cannot prove non-negative is checked for
    wrapping around on every load, which keeps the loop one lane wide (4x the time)."""
    y = x[u:v]
    total = 0.0
    for i in range(y.size):
        xv = np.float64(y[i])
        d = xv - s * np.rint(xv * inv)
        total += d * d
    return total


@_jit
def errors_at(x, a, b, s, k, qmin, qmax, za, zb, out):
    """The error of sorted ``x[a:b]`` at scale ``s`` for each zero point ``z`` of ``[za, zb]``
    into ``out[z − za]`` (codes ``clamp(rint(x / s) + z, qmin, qmax)``, the product with
    ``1 / s`` rounded half to even, as the runs' codes); False, with ``out`` untouched, when
    more than :data:`TAIL_WORK` values times zero points are clamped differently."""
    inv = 1.0 / s
    lo_all = qmin - za  # codes from here to hi_all: no zero point of [za, zb] clamps them
    hi_all = qmax - zb
    if lo_all > hi_all:
        return False
    u = _first_code_above(x, a, b, inv, k, lo_all - 1)
    v = _first_code_above(x, u, b, inv, k, hi_all)
    m = zb - za + 1
    if (u - a + b - v) * m > TAIL_WORK:
        return False
    core = _rounding_error(x, u, v, s, inv)
    for t in range(m):
        lo_z = qmin - (za + t)
        hi_z = qmax - (za + t)
        e = core
        for i in range(a, u):
            xv = np.float64(x[i])
            d = xv - s * max(_code_of(xv, inv, k), lo_z)
            e += d * d
        for i in range(v, b):
            xv = np.float64(x[i])
            d = xv - s * min(_code_of(xv, inv, k), hi_z)
            e += d * d
        out[t] = e
    return True
