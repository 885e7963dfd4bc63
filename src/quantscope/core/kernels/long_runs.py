"""A long row's runs at a scale or over a box of scales, read through its block prefix sums
(:mod:`quantscope.core.kernels.block_sums`): what the integer MSE search of a long row
(:func:`quantscope.core.kernels.mse_bound.long_row_optimum`, a tensor searched per tensor)
bounds its boxes with.

:func:`runs_search` finds a box's runs in the row itself: each run's end galloped to, its sums
carried from the block records. Inside the search a box is always between two scales it
evaluated, and its runs start exactly where one of its ends' runs starts (codes are monotone
in the sorted values and in the scale, so the pair of codes changes where either code does).
So each evaluated scale keeps its runs' starts, their codes and the row's prefix sums there
(:func:`starts_at`: the search's *ladder*): a box's runs are its two ends' starts merged
(:func:`box_runs`), with no search of the row and no prefix carried -- carrying a prefix from
its block's record, up to 127 double-double steps, was most of a box's cost. A scale evaluated
inside a box finds each run start between its ends' starts of the same code, a few elements
apart on narrow boxes, and carries its prefix from the nearer of them: a box and its midpoint
took 90-150 µs on a 4096x4096 weight at 8 bits, then ~15-40 µs.

The prefix sums are position for position the ones :func:`runs_search` reads
(:func:`quantscope.core.kernels.block_sums.prefix_from`: carried from the same block's record
by the same steps, whatever the position carried from), so every run's sums and bound are the
same floats either way.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.block_sums import prefix_from
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.run_ends import _code, _first_not_below, _run_end, next_run
from quantscope.core.kernels.sorted_kernel import _upper_bound

_jit = njit(nogil=True, error_model="numpy")

#: Run starts a long row's ladder keeps (position, code and four prefix sums: 48 bytes each,
#: 12 MB): a 4096x4096 weight at 8 bits keeps ~150 scales of ~230 starts.
LADDER_ENTRIES = 1 << 18
#: Scales a long row's ladder keeps (inserting one shifts those above it).
LADDER_SCALES = 4096


@_jit
def _dd(g, h):
    """``(Σx, Σx²)`` between two double-double prefixes ``g`` (start) and ``h`` (end)."""
    return (h[0] - g[0]) + (h[1] - g[1]), (h[2] - g[2]) + (h[3] - g[3])


@_jit
def _gap_bound(x, a, p, q, g, rec, k0, s1, s2, vl, vh):
    """A long row's two-value run bound: every element between the intervals
    ``s1·vl..s2·vl`` and ``s1·vh..s2·vh`` is at least its distance to the nearer away from
    any value it can take; from the prefix sums (``g`` the prefix at ``p``). Returns
    (bound, prefix at ``q``)."""
    bound, p2, g2 = gap_sums(x, a, p, q, g, rec, k0, s1, s2, vl, vh)
    return bound, prefix_from(x, a, p2, g2, q, rec, k0)


@_jit
def gap_sums(x, a, p, q, g, rec, k0, s1, s2, vl, vh):
    """:func:`_gap_bound`'s bound of the run ``p .. q``, and the last position whose prefix
    it carried with that prefix (``p`` and ``g`` when the intervals leave no gap): a caller
    that knows the prefix at ``q`` carries it no further."""
    bound = 0.0
    hi_lo = max(s1 * vl, s2 * vl)
    lo_hi = min(s1 * vh, s2 * vh)
    if hi_lo < lo_hi:
        centre = 0.5 * (hi_lo + lo_hi)
        p1 = _upper_bound(x, p, q, hi_lo)
        pm = _upper_bound(x, p1, q, centre)
        p2 = _first_not_below(x, pm, q, lo_hi)
        g1 = prefix_from(x, a, p, g, p1, rec, k0)
        gm = prefix_from(x, a, p1, g1, pm, rec, k0)
        g2 = prefix_from(x, a, pm, gm, p2, rec, k0)
        sx, sxx = _dd(g1, gm)
        bound += sxx - 2.0 * hi_lo * sx + hi_lo * hi_lo * (pm - p1)
        sx, sxx = _dd(gm, g2)
        bound += sxx - 2.0 * lo_hi * sx + lo_hi * lo_hi * (p2 - pm)
        return max(bound, 0.0), p2, g2
    return max(bound, 0.0), p, g


@_jit
def runs_search(x, a, b, rec, k0, s1, s2, k, rlo, rhi, rf):
    """``mse_bound.runs_walk`` for a long row: each run's end found by galloping and binary
    search on its codes, its sums from the row's block prefix sums
    (:mod:`quantscope.core.kernels.block_sums`), so a box costs about ``runs · log n``."""
    inv1, inv2 = 1.0 / s1, 1.0 / s2
    r = 0
    p = a
    g = (0.0, 0.0, 0.0, 0.0)
    while p < b:
        lo, hi, q = next_run(x, p, b, inv1, inv2, k)
        rlo[r] = lo
        rhi[r] = hi
        bound = 0.0
        if hi == lo + 1:  # the squared distance to the nearer interval, split where it flips
            bound, gq = _gap_bound(x, a, p, q, g, rec, k0, s1, s2, np.float64(lo),
                                   np.float64(hi))
        else:
            gq = prefix_from(x, a, p, g, q, rec, k0)
        sx, sxx = _dd(g, gq)
        rf[r, 0] = q - p
        rf[r, 1] = sx
        rf[r, 2] = sxx
        rf[r, 3] = max(bound, 0.0)
        r += 1
        g = gq
        p = q
    return r


@_jit
def _first_code_at_least(x, lo, hi, inv, k, m):
    """First position in ``[lo, hi)`` of sorted ``x`` whose code ``_code(x, inv, k)`` is at
    least ``m`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if _code(np.float64(x[mid]), inv, k) < m:
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def _bracket(pos, code, j, e, b, m):
    """In one scale's run starts ``j .. e`` (ascending; ``j`` not past the answer): the
    first entry whose code is at least ``m``, and where its run starts (``b`` if none)."""
    while j < e and code[j] < m:
        j += 1
    return j, (pos[j] if j < e else b)


@_jit
def starts_at(x, a, b, rec, k0, s, k, pos, code, pre, n, o1, e1, o2, e2):
    """The runs of sorted ``x[a:b]`` at scale ``s``: where each starts, its code and the
    row's prefix sums there, into ``pos``, ``code`` and ``pre`` from entry ``n`` on; returns
    the entry after the last. With ``o1 >= 0``, entries ``o1 .. e1`` and ``o2 .. e2`` are the
    starts of two scales either side of ``s``: a code's first element at ``s`` lies between
    its first elements at those two (codes are monotone in the scale), so it is looked for
    there and its prefix carried from the nearer one before it; else each run's end is
    galloped to, as :func:`runs_search` does."""
    inv = 1.0 / s
    c = _code(np.float64(x[a]), inv, k)
    c_last = _code(np.float64(x[b - 1]), inv, k)
    pos[n] = a
    code[n] = c
    pre[n, :] = 0.0
    j1, j2 = o1, o2
    while c < c_last:
        p = pos[n]
        g = (pre[n, 0], pre[n, 1], pre[n, 2], pre[n, 3])
        if o1 >= 0:
            j1, q1 = _bracket(pos, code, j1, e1, b, c + 1)
            j2, q2 = _bracket(pos, code, j2, e2, b, c + 1)
            lo, hi = min(q1, q2), max(q1, q2)
            if lo > p:  # a kept start nearer than this run's: its prefix is carried on
                p = lo
                j = j1 if q1 == lo else j2
                g = (pre[j, 0], pre[j, 1], pre[j, 2], pre[j, 3])
            q = _first_code_at_least(x, max(lo, pos[n] + 1), hi, inv, k, c + 1)
        else:
            q = _run_end(x, pos[n], b, inv, inv, k, c, c)
        n += 1
        pos[n] = q
        c = _code(np.float64(x[q]), inv, k)
        code[n] = c
        h = prefix_from(x, a, p, g, q, rec, k0)
        pre[n, 0], pre[n, 1], pre[n, 2], pre[n, 3] = h[0], h[1], h[2], h[3]
    return n + 1


@_jit
def point_runs(pos, code, pre, o, e, b, g_end, rlo, rhi, rf):
    """The runs of one scale from its starts ``o .. e`` (:func:`starts_at`; ``g_end`` the
    prefix sums at the row's end ``b``) into ``rlo``, ``rhi``, ``rf``, as
    :func:`runs_search` gives them; returns their number."""
    for t in range(o, e):
        r = t - o
        g = (pre[t, 0], pre[t, 1], pre[t, 2], pre[t, 3])
        if t + 1 < e:
            q = pos[t + 1]
            gq = (pre[t + 1, 0], pre[t + 1, 1], pre[t + 1, 2], pre[t + 1, 3])
        else:
            q = b
            gq = g_end
        sx, sxx = _dd(g, gq)
        rlo[r] = code[t]
        rhi[r] = code[t]
        rf[r, 0] = q - pos[t]
        rf[r, 1] = sx
        rf[r, 2] = sxx
        rf[r, 3] = 0.0
    return e - o


@_jit
def box_runs(x, a, b, rec, k0, s1, s2, pos, code, pre, o1, e1, o2, e2, g_end, rlo, rhi, rf):
    """The runs of the box ``[s1, s2]`` from its ends' starts ``o1 .. e1`` (at ``s1``) and
    ``o2 .. e2`` (at ``s2``), merged: ``runs_search(s1, s2)``'s runs, counts, sums and
    two-code bounds, bit for bit; returns their number."""
    i, j = o1 + 1, o2 + 1
    c1, c2 = code[o1], code[o2]
    p = a
    g = (0.0, 0.0, 0.0, 0.0)
    r = 0
    while True:
        n1 = pos[i] if i < e1 else b
        n2 = pos[j] if j < e2 else b
        q = min(n1, n2)
        if q == b:
            gq = g_end
        elif n1 == q:
            gq = (pre[i, 0], pre[i, 1], pre[i, 2], pre[i, 3])
        else:
            gq = (pre[j, 0], pre[j, 1], pre[j, 2], pre[j, 3])
        lo, hi = min(c1, c2), max(c1, c2)
        bound = 0.0
        if hi == lo + 1:  # its bound; the prefix at q is known
            bound = gap_sums(x, a, p, q, g, rec, k0, s1, s2, np.float64(lo), np.float64(hi))[0]
        sx, sxx = _dd(g, gq)
        rlo[r] = lo
        rhi[r] = hi
        rf[r, 0] = q - p
        rf[r, 1] = sx
        rf[r, 2] = sxx
        rf[r, 3] = max(bound, 0.0)
        r += 1
        if q == b:
            return r
        if n1 == q:
            c1 = code[i]
            i += 1
        if n2 == q:
            c2 = code[j]
            j += 1
        p = q
        g = gq


@_jit
def grow_rows(a, rows):
    """``a`` ([n, 4]) copied into a larger array of ``rows`` rows."""
    out = np.empty((rows, a.shape[1]))
    out[:a.shape[0]] = a
    return out
