"""Exact prefix sums of sorted rows in a quarter of a byte per element: one record per block.

A report needs ``Σx`` and ``Σx²`` over intervals of a sorted row. Storing the double-double
prefix sums of every position costs 32 bytes per element (40 GB for 10^9 elements). Here only
every :data:`BLOCK`-th position's record is kept; the prefix at any other position is the
record at the start of its block carried on over the at most ``BLOCK - 1`` elements before it
(:func:`prefix_at`), by the very same operations in the very same order as the full running
sum: the value is bit for bit the one a full table would hold, so reports do not change at all
-- at the cost of a walk of a few dozen elements per code boundary.

The running sum is taken strictly left to right along the row, in float64 (squares of float32
values are exact there): ``hi`` is the rounded running sum, every step's rounding error is
recovered exactly by Knuth's TwoSum and summed on its own in ``lo``. The largest ``|lo|`` of a
row, times the unit roundoff, bounds per element how far a difference of two ``lo`` entries can
be off (see :mod:`quantscope.core.stats.sorted_stats`).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.run_ends import _first_not_below

#: Elements per block: a record (32 bytes) per 128 elements is 0.25 bytes per element, and a
#: prefix is at most 127 steps of a running sum away (about 0.2 µs).
BLOCK = 128

_jit = njit(nogil=True, error_model="numpy")


@njit(nogil=True, error_model="numpy", inline="always")
def _step(hi, lo, v):
    """One step of the double-double running sum: ``hi + v`` rounded, its exact rounding error
    (TwoSum) added to ``lo``."""
    cur = hi + v
    bv = cur - hi
    av = cur - bv
    av = hi - av
    bv = v - bv
    return cur, lo + (av + bv)


def n_records(lengths: np.ndarray) -> np.ndarray:
    """Records per row: one at each multiple of :data:`BLOCK` from 0 to the row's length."""
    return np.asarray(lengths, np.int64) // BLOCK + 1


@_jit
def build_range(values, a, lo, hi, rec, k0, state) -> None:
    """Carry row ``values[a:]``'s running sums from position ``a + lo`` to ``a + hi`` (``lo`` a
    multiple of :data:`BLOCK`), writing the record of each block start reached to
    ``rec[k0 + position // BLOCK]``. ``state`` holds the sums at ``a + lo`` on entry and at
    ``a + hi`` on exit, then the largest ``|lo|`` of ``x`` and of ``x²`` so far."""
    h1, l1, h2, l2, m1, m2 = state[0], state[1], state[2], state[3], state[4], state[5]
    if lo == 0:
        for c in range(4):
            rec[k0, c] = 0.0
    k = k0 + lo // BLOCK
    left = BLOCK
    for i in range(a + lo, a + hi):
        v = np.float64(values[i])
        h1, l1 = _step(h1, l1, v)
        h2, l2 = _step(h2, l2, v * v)
        a1 = abs(l1)
        a2 = abs(l2)
        m1 = a1 if a1 > m1 else m1  # no NaN here: a plain compare, no NaN check
        m2 = a2 if a2 > m2 else m2
        left -= 1
        if left == 0:
            k += 1
            rec[k, 0] = h1
            rec[k, 1] = l1
            rec[k, 2] = h2
            rec[k, 3] = l2
            left = BLOCK
    state[0], state[1], state[2], state[3], state[4], state[5] = h1, l1, h2, l2, m1, m2


@_jit
def build_rows(values, starts, r0, r1, rec, rec_starts, bounds) -> None:
    """The records of rows ``r0 .. r1 - 1`` whole; ``bounds[r]`` = their largest ``|lo|``."""
    state = np.zeros(6)
    for r in range(r0, r1):
        state[:] = 0.0
        build_range(values, starts[r], 0, starts[r + 1] - starts[r], rec, rec_starts[r], state)
        bounds[r, 0] = state[4]
        bounds[r, 1] = state[5]


@_jit
def prefix_at(values, a, p, rec, k0):
    """``(Σx hi, Σx lo, Σx² hi, Σx² lo)`` of the row starting at ``a`` up to (excluding) global
    position ``p``: its block's record carried on to ``p``, bit for bit the full running sum."""
    q = (p - a) // BLOCK
    j = k0 + q
    h1, l1, h2, l2 = rec[j, 0], rec[j, 1], rec[j, 2], rec[j, 3]
    for i in range(a + q * BLOCK, p):
        v = np.float64(values[i])
        h1, l1 = _step(h1, l1, v)
        h2, l2 = _step(h2, l2, v * v)
    return h1, l1, h2, l2


@_jit
def prefix_from(values, a, p0, g, p, rec, k0):
    """:func:`prefix_at` of position ``p`` given ``g``, the prefix at ``p0 <= p`` of the same
    row: ``g`` carried on from ``p0`` when ``p0`` lies in ``p``'s block (the record of that
    block carried to ``p0`` is ``g`` itself, so the steps from ``p0`` are the last steps
    :func:`prefix_at` would take: the same value bit for bit, in fewer steps), else
    :func:`prefix_at` itself. Consecutive code thresholds a few elements apart (a channel at 8
    bits, an FP8 grid) then cost their distance, not half a block each."""
    if p0 < a + (p - a) // BLOCK * BLOCK:
        return prefix_at(values, a, p, rec, k0)
    h1, l1, h2, l2 = g
    for i in range(p0, p):
        v = np.float64(values[i])
        h1, l1 = _step(h1, l1, v)
        h2, l2 = _step(h2, l2, v * v)
    return h1, l1, h2, l2


@_jit
def interval_sums(values, starts, rec, rec_starts, lo, hi, row, out) -> None:
    """``out[e] = (Σx, Σx²)`` over sorted positions ``[lo[e], hi[e])`` (global) of row
    ``row[e]``, from the prefix sums as the reports take them."""
    for e in range(row.size):
        r = row[e]
        a = starts[r]
        g = prefix_at(values, a, lo[e], rec, rec_starts[r])
        h = prefix_at(values, a, hi[e], rec, rec_starts[r])
        out[e, 0] = (h[0] - g[0]) + (h[1] - g[1])
        out[e, 1] = (h[2] - g[2]) + (h[3] - g[3])


@_jit
def bin_counts(values, a, b, edges, out) -> None:
    """``np.histogram``'s counts of sorted ``values[a:b]`` in bins ``edges`` (ascending):
    bin ``i`` holds ``edges[i] <= x < edges[i + 1]``, the last one its right edge too.
    Values outside the edges are not counted. O(bins · log n)."""
    nb = edges.size - 1
    p = _first_not_below(values, a, b, edges[0])
    for i in range(nb):
        if i < nb - 1:
            q = _first_not_below(values, p, b, edges[i + 1])
        else:  # the last bin is closed: everything up to and including its right edge
            lo, hi = p, b
            while lo < hi:
                mid = (lo + hi) >> 1
                if values[mid] <= edges[nb]:
                    lo = mid + 1
                else:
                    hi = mid
            q = lo
        out[i] = q - p
        p = q
