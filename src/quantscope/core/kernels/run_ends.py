"""A sorted row's codes at a scale and where each run of equal codes ends: the integer MSE
search's steps over the sorted values of a unit (:mod:`quantscope.core.kernels.mse_bound`,
:mod:`quantscope.core.kernels.long_runs`, and the number formats' search).

Codes are ``rint(x · (1/s))`` in float64, clamped to ``[-k, k]``: monotone in the sorted
values (and in the scale), so a run's end is the first value whose code differs, found by
galloping and binary search instead of a code per element.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit

_jit = njit(nogil=True, error_model="numpy")


@_jit
def _code(x, inv, k):
    """``rint(x · inv)`` (``inv = 1 / s``) clamped to ``[-k, k]`` (beyond, every zero point
    clamps it alike). A product is three times as fast as a quotient and differs from it only
    beside a rounding tie, where both codes' errors are equal to within an ulp."""
    r = np.rint(x * inv)
    if r > k:
        return k
    if r < -k:
        return -k
    return int(r)


@_jit
def _below_half(y, c):
    """Whether the product ``y = x · inv`` rounds to ``c`` or below: below ``c + 1/2``, or at
    it when round half to even keeps ``c``."""
    t = c + 0.5
    return y < t or (y == t and c % 2 == 0)


@_jit
def _same(xv, inv1, inv2, k, lo, hi):
    """Whether the codes of ``xv`` at the two scales (reciprocals ``inv1``, ``inv2``) are
    ``lo .. hi``, for an element after one whose codes they are (codes are monotone in the
    sorted values). At one scale that is its code not above ``lo`` (``k``: every larger
    value clamps to it): one product and a comparison (:func:`_below_half`) instead of two
    codes, two roundings and their clamps."""
    if inv1 == inv2:
        return lo >= k or _below_half(xv * inv1, lo)
    c1 = _code(xv, inv1, k)
    c2 = _code(xv, inv2, k)
    return min(c1, c2) == lo and max(c1, c2) == hi


@_jit
def _run_end(x, p, b, inv1, inv2, k, lo, hi):
    """First position after ``p`` (at most ``b``) whose codes are not ``(lo, hi)``: galloping
    from ``p``, then a binary search (codes are monotone in the sorted values)."""
    last = p
    step = 1
    end = b
    while True:
        t = last + step
        if t >= b:
            break
        if _same(np.float64(x[t]), inv1, inv2, k, lo, hi):
            last = t
            step *= 2
        else:
            end = t
            break
    left, right = last + 1, end
    while left < right:
        mid = (left + right) >> 1
        if _same(np.float64(x[mid]), inv1, inv2, k, lo, hi):
            left = mid + 1
        else:
            right = mid
    return left


@njit(nogil=True, error_model="numpy", inline="always")
def next_run(x, p, b, inv1, inv2, k):
    """The run of sorted ``x`` that starts at ``p`` (before ``b``) for the box whose ends'
    reciprocals are ``inv1`` and ``inv2``: its codes' pair (ascending) and its end,
    :func:`_run_end`."""
    xv = np.float64(x[p])
    c1 = _code(xv, inv1, k)
    c2 = _code(xv, inv2, k)
    lo, hi = min(c1, c2), max(c1, c2)
    return lo, hi, _run_end(x, p, b, inv1, inv2, k, lo, hi)


@_jit
def _first_not_below(x, lo, hi, t):
    """First position in ``[lo, hi)`` of sorted ``x`` with ``x >= t`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if x[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo
