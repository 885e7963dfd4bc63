"""The integer MSE search of every sorted row: compiled loops. Walked rows are
:func:`quantscope.core.kernels.mse_bound.unit_optimum`'s; a long row (a tensor searched per
tensor, read through its block prefix sums) is searched here, from a ladder of the scales it
evaluated.

A long row's branch and bound (:func:`long_row_optimum`) takes the steps of
``unit_optimum``'s own long-row path -- the same grid, the same boxes in the same order, the
same bound of each -- so its result is the same to the bit (the NumPy twin
:mod:`quantscope.core.stats.mse_twin` follows those steps too). What differs is where a box's
runs come from. A box ``[s1, s2]`` is always between two scales the search evaluated, and its
runs start exactly where one of its ends' runs starts (codes are monotone in the sorted values
and in the scale, so the pair of codes changes where either code does). Each evaluated scale
therefore keeps its runs' starts, their codes and the row's prefix sums there (the *ladder*):
a box's runs are its two ends' starts merged, with no search of the row and no prefix sum
carried (four fifths of a box's cost when it searched: carrying a prefix from its block's
record, up to 127 double-double steps, was most of it). A scale evaluated inside a box finds
each run start between its ends' starts of the same code, a few elements apart on narrow
boxes, and carries its prefix from the nearer of them: a box and its midpoint took 90-150 µs
on a 4096x4096 weight at 8 bits, now ~15 µs.

The prefix sums are position for position the ones the search read before
(:func:`quantscope.core.kernels.block_sums.prefix_from`: carried from the same block's record
by the same steps, whatever the position carried from), so every bound is the same float.
The ladder holds at most :data:`LADDER_ENTRIES` run starts and :data:`LADDER_SCALES` scales;
scales evaluated beyond them are not kept, and a box with an end not kept searches the row for
its runs as before (:func:`quantscope.core.kernels.mse_bound.runs_search`).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.block_sums import prefix_at, prefix_from
from quantscope.core.kernels.box_heap import grow_int, heap_halves, heap_of
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.mse_bound import (
    _code,
    _dd,
    _evaluate,
    _first_not_below,
    _gap_bound,
    _ladder_insert,
    _run_end,
    box_zero_points,
    ladder_room,
    new_scratch,
    next_box,
    put_optimum,
    runs_search,
    search_grid,
    split_scale,
    unit_optimum,
    z_bounds,
)

_jit = njit(nogil=True, error_model="numpy")

#: Run starts a long row's ladder keeps (position, code and four prefix sums: 48 bytes each,
#: 12 MB): a 4096x4096 weight at 8 bits keeps ~250 scales of ~230 starts.
LADDER_ENTRIES = 1 << 18
#: Scales a long row's ladder keeps (inserting one shifts those above it).
LADDER_SCALES = 4096


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
    galloped to, as :func:`~quantscope.core.kernels.mse_bound.runs_search` does."""
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
    :func:`~quantscope.core.kernels.mse_bound.runs_search` gives them; returns their number."""
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
        if hi == lo + 1:
            bound, _ = _gap_bound(x, a, p, q, g, rec, k0, s1, s2, np.float64(lo),
                                  np.float64(hi))
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
def long_row_optimum(x, a, b, rec, k0, qmin, qmax, z_fixed, s_lo, s_hi, s_mm, eps, floor,
                     grid, max_boxes, out, scratch, ladder_entries, ladder_scales):
    """``unit_optimum`` of a long row (sorted ``x[a:b]``, block prefix sums from ``rec[k0]``):
    the same search, result and boxes, its runs from a ladder of at most ``ladder_entries``
    run starts and ``ladder_scales`` scales (module doc)."""
    k = qmax - qmin + 1
    rlo, rhi, rf, cum, lb, arg, h_key, h_s1, h_s2, h_za, h_zb = scratch[:11]
    if z_fixed >= qmin:
        z0, z1 = z_fixed, z_fixed
    else:
        z0, z1 = qmin, qmax
    best = np.inf
    best_s = s_mm
    best_z = z0
    g_end = prefix_at(x, a, b, rec, k0)
    per = min(b - a, 2 * k + 1)  # starts at one scale, at most
    pos = np.empty(4 * per, np.int64)
    code = np.empty(4 * per, np.int64)
    pre = np.empty((4 * per, 4))
    off = np.empty(65, np.int64)
    lad_s = np.empty(64)
    lad_id = np.empty(64, np.int64)
    off[0] = 0
    n_lad = 0
    # the grid, the min/max scale first: each scale's runs galloped to, and kept
    pts = search_grid(s_lo, s_hi, s_mm, grid)
    for u in range(-1, pts.size):
        if u >= 0 and pts[u] == s_mm:
            continue
        s = s_mm if u < 0 else pts[u]
        if pos.size < off[n_lad] + per:
            pos = grow_int(pos, 2 * pos.size + per)
            code = grow_int(code, 2 * code.size + per)
            pre = _grow_rows(pre, 2 * pre.shape[0] + per)
        off[n_lad + 1] = starts_at(x, a, b, rec, k0, s, k, pos, code, pre, off[n_lad], -1,
                                   -1, -1, -1)
        n_runs = point_runs(pos, code, pre, off[n_lad], off[n_lad + 1], b, g_end, rlo, rhi,
                            rf)
        best, best_s, best_z = _evaluate(rlo, rhi, rf, n_runs, s, qmin, qmax, z0, z1, best,
                                         best_s, best_z, cum, lb, arg)
        _ladder_insert(lad_s, lad_id, n_lad, _first_not_below(lad_s, 0, n_lad, s), s, n_lad)
        n_lad += 1
    # the heap of boxes, lowest bound first
    h_key, h_s1, h_s2, h_za, h_zb, size = heap_of(h_key, h_s1, h_s2, h_za, h_zb, pts, z0, z1)
    boxes = 0
    proven = 1.0
    while size > 0:
        go, s1, s2, za, zb, threshold, proven = next_box(h_key, h_s1, h_s2, h_za, h_zb, size,
                                                         best, eps, floor, boxes, max_boxes)
        size -= 1
        if not go:
            break
        boxes += 1
        mid = split_scale(s1, s2)
        at = _first_not_below(lad_s, 0, n_lad, s1)
        kept = at + 1 < n_lad and lad_s[at] == s1 and lad_s[at + 1] == s2
        if kept:
            i1, i2 = lad_id[at], lad_id[at + 1]
            o1, e1, o2, e2 = off[i1], off[i1 + 1], off[i2], off[i2 + 1]
            n_runs = box_runs(x, a, b, rec, k0, s1, s2, pos, code, pre, o1, e1, o2, e2,
                              g_end, rlo, rhi, rf)
        else:  # an end beyond the ladder's room: the row searched, as before the ladder
            o1, e1, o2, e2 = -1, -1, -1, -1
            n_runs = runs_search(x, a, b, rec, k0, s1, s2, k, rlo, rhi, rf)
        z_bounds(rlo, rhi, rf, n_runs, s1, s2, qmin, qmax, za, zb, cum, lb, arg)
        lo_z, hi_z, low = box_zero_points(rlo, rhi, n_runs, qmin, qmax, za, zb, lb, threshold)
        if hi_z < lo_z:
            continue
        # a box with no float32 scale strictly inside is done (its ends were evaluated)
        if not s1 < mid < s2:
            continue
        keep = kept and n_lad < ladder_scales and off[n_lad] + per <= ladder_entries
        o = off[n_lad]  # a scale not kept is written past the kept ones, and forgotten
        if pos.size < o + per:
            pos = grow_int(pos, 2 * pos.size + per)
            code = grow_int(code, 2 * code.size + per)
            pre = _grow_rows(pre, 2 * pre.shape[0] + per)
        e = starts_at(x, a, b, rec, k0, mid, k, pos, code, pre, o, o1, e1, o2, e2)
        n_runs = point_runs(pos, code, pre, o, e, b, g_end, rlo, rhi, rf)
        z_bounds(rlo, rhi, rf, n_runs, mid, mid, qmin, qmax, lo_z, hi_z, cum, lb, arg)
        for t in range(hi_z - lo_z + 1):
            if lb[t] < best:
                best, best_s, best_z = lb[t], mid, lo_z + t
        if keep:
            lad_s, lad_id, off = ladder_room(lad_s, lad_id, off, n_lad)
            off[n_lad + 1] = e
            _ladder_insert(lad_s, lad_id, n_lad, at + 1, mid, n_lad)
            n_lad += 1
        h_key, h_s1, h_s2, h_za, h_zb, size = heap_halves(h_key, h_s1, h_s2, h_za, h_zb, size,
                                                          low, s1, mid, s2, lo_z, hi_z)
    put_optimum(out, x, a, b, best, best_s, best_z, k, qmin, qmax, z0, proven, boxes)


@_jit
def _grow_rows(a, rows):
    """``a`` ([n, 4]) copied into a larger array of ``rows`` rows."""
    out = np.empty((rows, a.shape[1]))
    out[:a.shape[0]] = a
    return out


@_jit
def rows_optimum(values, starts, rec, rec_starts, search, rows, qmin, qmax, z_fixed, s_lo,
                 s_hi, s_mm, eps, floor, grid, max_boxes, sweep_crossings, out):
    """The MSE optimum of each sorted row ``rows[e]`` of ``values`` (rows at ``starts``) into
    ``out[e]``, with that row's ``s_lo[e]``, ``s_hi[e]``, ``s_mm[e]`` and ``floor[e]``:
    :func:`long_row_optimum` where ``search[e]`` (its block prefix sums ``rec`` from
    ``rec_starts``), else walked (``mse_bound.unit_optimum``)."""
    longest = 0
    for e in range(rows.size):
        if not search[e]:
            longest = max(longest, starts[rows[e] + 1] - starts[rows[e]])
    scratch = new_scratch(qmin, qmax, longest)
    for e in range(rows.size):
        r = rows[e]
        if search[e]:
            long_row_optimum(values, starts[r], starts[r + 1], rec, rec_starts[r], qmin, qmax,
                             z_fixed, s_lo[e], s_hi[e], s_mm[e], eps, floor[e], grid,
                             max_boxes, out[e], scratch, LADDER_ENTRIES, LADDER_SCALES)
        else:
            unit_optimum(values, starts[r], starts[r + 1], qmin, qmax, z_fixed, s_lo[e],
                         s_hi[e], s_mm[e], eps, floor[e], grid, max_boxes, sweep_crossings,
                         out[e], scratch)
