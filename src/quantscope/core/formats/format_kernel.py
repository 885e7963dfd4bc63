"""The compiled loops behind a format's report (:mod:`quantscope.core.stats.format_stats`).

Two ways to the same numbers, both exact by the format's own cast
(:func:`quantscope.core.formats.elements.round_element`):

* :func:`direct_rows` walks rows that share one scale (a tensor, a channel, a block of an MX,
  NVFP4 or NF4 format) element by element: one compiled pass for a whole block format;
* :func:`sorted_rows` splits each sorted row of a prepared tensor at the format's boundaries,
  the midpoints of consecutive representable values (times the scale), by binary search,
  and takes each interval's squared error ``Σx² − 2·x̂·Σx + n·x̂²`` from the prefix sums
  (the row's block records, :mod:`quantscope.core.kernels.block_sums`):
  ``O(levels · log n)`` per row. Each searched position is corrected with the cast itself, so
  ties go where the format's tie rule sends them. Rows with few elements per level, and rows
  whose cancellation bound is too loose, are walked instead.

An interval index runs 0 (clipped below: rounded below ``-max_finite``), 1..levels (grid value
``k - 1``), levels + 1 (clipped above).
"""

from __future__ import annotations

import math

import numpy as np

from quantscope.core.formats.elements import (
    KIND_FLOAT,
    KIND_INT,
    KIND_LUT,
    OVERFLOW_SATURATE,
    bits_float32,
    cast_one,
    float32_bits,
    pow2,
    round_element,
)
from quantscope.core.kernels.block_sums import prefix_at, prefix_from
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.sorted_kernel import _gallop, _lower_bound, _upper_bound
from quantscope.core.kernels.unit_totals import store_unit

_jit = njit(nogil=True, error_model="numpy")
_EPS = float(np.finfo(np.float64).eps)
#: Fix-up moves per threshold before giving up on the search and walking the row.
_MAX_MOVES = 64


@njit(nogil=True, error_model="numpy", inline="always")
def _scaled(xv, s, inv, use_inv):
    return np.float32(xv * inv) if use_inv else np.float32(xv / s)


@_jit
def _grid_index(grid, r) -> int:
    """Index of ``r`` in the ascending grid (``r`` is one of its values; ±0 both find 0)."""
    return _lower_bound(grid, 0, grid.size, r)


@njit(nogil=True, error_model="numpy", inline="always")
def _index_of(r, kind, mbits, emin, step, grid) -> int:
    """:func:`_grid_index` without the search where the grid is every code of a sign and
    magnitude type (zero in the middle, once): a float's magnitude code from its bits (the
    binade above the subnormals, then the kept mantissa bits; below, the count of quanta),
    MXINT8's ``k`` itself. A search over 253 values took most of a pass's time."""
    z0 = grid.size >> 1
    if kind == KIND_FLOAT:
        a = abs(r)
        u = np.int64(float32_bits(np.float32(a)))
        e = (u >> 23) - 127
        if e >= emin:
            c = ((e - emin + 1) << mbits) + ((u >> (23 - mbits)) & ((1 << mbits) - 1))
        else:
            c = np.int64(a / pow2(emin - mbits))  # an exact count of quanta
        return z0 + c if r > 0 else z0 - c
    if kind == KIND_INT:
        return z0 + np.int64(np.rint(r / step))
    return _grid_index(grid, r)


@_jit
def interval_of(xv, s, inv, use_inv, kind, mbits, emin, step, max_finite, lut_mid, lut_val,
                grid) -> int:
    """The interval index of finite float32 ``xv`` (see the module docstring)."""
    r = round_element(_scaled(xv, s, inv, use_inv), kind, mbits, emin, step, lut_mid, lut_val)
    if r < -max_finite:
        return 0
    if r > max_finite:
        return grid.size + 1
    return _index_of(r, kind, mbits, emin, step, grid) + 1


@njit(nogil=True, error_model="numpy", inline="always")
def _walk(x, s, inv, use_inv, kind, mbits, emin, step, max_finite, overflow, signed_zero,
          saturate, lut_mid, lut_val, grid, hist, stamp, unit, out_f, out_i, e) -> None:
    """Every element of row ``x`` by the cast; totals into ``out_f[e]`` / ``out_i[e]``:
    (rounding error, clipping error, max |error|, Σx², min, max) and (n, below, above, codes
    used). Non-finite elements are skipped. ``stamp[k] == unit`` marks codes this unit used."""
    rnd = 0.0
    clip = 0.0
    worst = 0.0
    sig = 0.0
    lo = np.inf
    hi = -np.inf
    n = 0
    below = 0
    above = 0
    used = 0
    sf = np.float32(s)
    for k in range(x.size):
        xv = x[k]
        if not np.isfinite(xv):
            continue
        x64 = np.float64(xv)
        n += 1
        sig += x64 * x64
        lo = min(lo, x64)
        hi = max(hi, x64)
        r = round_element(_scaled(xv, s, inv, use_inv), kind, mbits, emin, step, lut_mid,
                          lut_val)
        clipped = abs(r) > max_finite
        if clipped:
            if r < 0:
                below += 1
            else:
                above += 1
            r = cast_one(np.float32(r), kind, mbits, emin, step, max_finite, overflow,
                         signed_zero, saturate, lut_mid, lut_val)
        if r != r or np.isinf(r):  # a non-saturating cast: inf or NaN stands for x
            d = np.inf
            idx = 0 if xv < 0 else grid.size - 1
        else:
            idx = _index_of(r, kind, mbits, emin, step, grid)
            d = x64 - np.float64(np.float32(np.float32(r) * sf))
        if clipped:
            clip += d * d
        else:
            rnd += d * d
        worst = max(worst, abs(d))
        hist[idx] += 1
        if stamp[idx] != unit:
            stamp[idx] = unit
            used += 1
    store_unit(out_f, out_i, e, rnd, clip, worst, sig, lo, hi, n, below, above, used)


@njit(nogil=True, error_model="numpy", inline="always")
def _round_flat(v, kind, mbits, emin, step, lut_mid, lut_val) -> float:
    """:func:`~quantscope.core.formats.elements.round_element`, the same value, without its branch
    between the normal and the subnormal range for floating-point types: both are formed and
    one is selected (in a block of MXFP4 a quarter of the elements are subnormal, at random: a
    mispredicted branch each). Dividing by the subnormal quantum is multiplying by its
    reciprocal, both exact powers of two."""
    if kind == KIND_LUT:  # the level after the midpoints below v, counted without a branch
        x = np.float64(v)
        c = 0
        for k in range(lut_mid.size):
            c += lut_mid[k] < x
        inside = x <= lut_val[lut_val.size - 1] and x >= lut_val[0]
        return lut_val[c] if inside else x
    if kind != KIND_FLOAT:
        return round_element(v, kind, mbits, emin, step, lut_mid, lut_val)
    u = np.int64(float32_bits(np.float32(v)))
    mag = u & 0x7FFFFFFF
    d = 23 - mbits
    rounded = (mag + (1 << (d - 1)) - 1 + ((mag >> d) & 1)) & ~((1 << d) - 1)
    normal = np.float64(bits_float32(rounded | (u & 0x80000000)))
    q = pow2(emin - mbits)
    sub = math.copysign(np.rint(np.float64(v) * pow2(mbits - emin)) * q, np.float64(v))
    return normal if (mag >> 23) - 127 >= emin else sub


@njit(nogil=True, error_model="numpy", inline="always")
def _index_flat(r, kind, mbits, emin, step, grid) -> int:
    """:func:`_index_of` (the same index) with the subnormal count of quanta selected rather
    than branched to, by a multiplication with the exact reciprocal of the quantum; a lookup
    table's level ``r`` (one of the grid's values) by counting the grid values below it."""
    if kind == KIND_LUT:
        c = 0
        for k in range(grid.size):
            c += grid[k] < r
        return c
    if kind != KIND_FLOAT:
        return _index_of(r, kind, mbits, emin, step, grid)
    z0 = grid.size >> 1
    a = abs(r)
    u = np.int64(float32_bits(np.float32(a)))
    e = (u >> 23) - 127
    normal = ((e - emin + 1) << mbits) + ((u >> (23 - mbits)) & ((1 << mbits) - 1))
    c = normal if e >= emin else np.int64(a * pow2(mbits - emin))
    return z0 + c if r > 0 else z0 - c


#: Elements of a row one loop of :func:`_walk_saturating` takes before the next (its scratch).
CHUNK = 1024


@njit(nogil=True, error_model="numpy", inline="always")
def _walk_saturating(x, s, inv, use_inv, kind, mbits, emin, step, max_finite, lut_mid,
                     lut_val, lut_is_grid, grid, hist, stamp, dbuf, slots, unit, out_f, out_i,
                     e) -> None:
    """:func:`_walk` for a saturating cast: the same totals bit for bit, in three short loops
    per :data:`CHUNK` of the row instead of one long one. In one loop an element's rounding,
    index and error formed a chain of some fifty cycles, and the loop body was too long for
    the processor to overlap more than two elements: a block format's pass took 25 ns per
    element. Here

    1. each element's error ``d`` (0 for a non-finite element) and histogram slot are formed,
       with no sum carried from one element to the next (the slot ``grid.size`` of ``hist``
       and ``stamp`` takes what non-finite elements would count; the clipped ones are
       marked by their slot's side, ``slots`` holding ``-1`` below and ``-2`` above for the
       sums, then the outer slot);
    2. the sums, in the row's order as in :func:`_walk`: a skipped (non-finite) element adds
       +0.0 to sums of non-negative terms that start at +0.0, which changes no bit, and its
       min and max candidates are ±inf;
    3. the counts and codes used, from the slots.

    ``lut_is_grid``: a lookup table whose levels are the grid, its ends ``±max_finite`` (NF4)."""
    rnd = 0.0
    clip = 0.0
    worst = 0.0
    sig = 0.0
    lo = np.inf
    hi = -np.inf
    n = 0
    below = 0
    above = 0
    used = 0
    sf = np.float32(s)
    spare = grid.size
    top = grid.size - 1
    for c0 in range(0, x.size, CHUNK):
        xc = x[c0:min(c0 + CHUNK, x.size)]
        m = xc.size
        for k in range(m):
            xv = xc[k]
            fin = xv - xv == 0
            xz = xv if fin else np.float32(0.0)
            q = _scaled(xz, s, inv, use_inv)
            if kind == KIND_LUT and lut_is_grid:
                # the level and its grid index from one count of the midpoints below: a value
                # beyond an end counts none or all of them, the index of the level it
                # saturates to (a second count, of the grid below the level, took half the
                # pass)
                q64 = np.float64(q)
                c = 0
                for j in range(lut_mid.size):
                    c += lut_mid[j] < q64
                r = lut_val[c]
                clipped = not (q64 <= lut_val[top] and q64 >= lut_val[0])
                idx = np.int64(c)
            else:
                r = _round_flat(q, kind, mbits, emin, step, lut_mid, lut_val)
                clipped = abs(r) > max_finite
                r = math.copysign(max_finite, r) if clipped else r
                idx = _index_flat(r, kind, mbits, emin, step, grid)
            dbuf[k] = np.float64(xz) - np.float64(np.float32(np.float32(r) * sf))
            slot = (-1 if r < 0 else -2) if clipped else idx
            slots[k] = slot if fin else spare
        for k in range(m):
            xv = xc[k]
            fin = xv - xv == 0
            x64 = np.float64(xv) if fin else 0.0
            d = dbuf[k]
            e2 = d * d
            slot = slots[k]
            clipped = slot < 0
            n += np.int64(fin)
            sig += x64 * x64
            lo = min(lo, x64 if fin else np.inf)
            hi = max(hi, x64 if fin else -np.inf)
            below += np.int64(slot == -1)
            above += np.int64(slot == -2)
            clip += e2 if clipped else 0.0
            rnd += 0.0 if clipped else e2
            worst = max(worst, abs(d))
        for k in range(m):
            slot = slots[k]
            slot = 0 if slot == -1 else (top if slot == -2 else slot)
            hist[slot] += 1
            used += np.int64(stamp[slot] != unit and slot != spare)
            stamp[slot] = unit
    store_unit(out_f, out_i, e, rnd, clip, worst, sig, lo, hi, n, below, above, used)


@njit(nogil=True, error_model="numpy", inline="always")
def _rows_saturating(x2d, scale, inv_scale, use_inv, kind, mbits, emin, step, max_finite,
                     lut_mid, lut_val, grid, hist, stamp, out_f, out_i) -> None:
    dbuf = np.empty(CHUNK, np.float64)
    slots = np.empty(CHUNK, np.int64)
    top = grid.size - 1
    lut_is_grid = kind == KIND_LUT and lut_val.size == grid.size and top >= 0
    if lut_is_grid:
        for k in range(grid.size):
            lut_is_grid = lut_is_grid and np.float64(grid[k]) == lut_val[k]
        lut_is_grid = lut_is_grid and lut_val[top] == max_finite and lut_val[0] == -max_finite
    for r in range(x2d.shape[0]):
        _walk_saturating(x2d[r], scale[r], inv_scale[r], use_inv, kind, mbits, emin, step,
                         max_finite, lut_mid, lut_val, lut_is_grid, grid, hist, stamp, dbuf,
                         slots, r, out_f, out_i, r)


@_jit
def direct_rows(x2d, scale, inv_scale, use_inv, kind, mbits, emin, step, max_finite, overflow,
                signed_zero, saturate, lut_mid, lut_val, grid, hist, out_f, out_i) -> None:
    """Row ``r`` of ``x2d`` quantized with ``scale[r]`` (``inv_scale[r]`` if ``use_inv``).
    ``hist`` has one slot past the grid (see :func:`_walk_saturating`), left for the caller
    to drop."""
    stamp = np.full(grid.size + 1, -1, np.int64)
    if saturate or overflow == OVERFLOW_SATURATE:
        # one copy of the loops per kind and multiplier: with both constants the loops hold
        # no branch on them (nor the lookup table's search), and the first one vectorises
        if kind == KIND_FLOAT:
            if use_inv:
                _rows_saturating(x2d, scale, inv_scale, True, KIND_FLOAT, mbits, emin, step,
                                 max_finite, lut_mid, lut_val, grid, hist, stamp, out_f, out_i)
            else:
                _rows_saturating(x2d, scale, inv_scale, False, KIND_FLOAT, mbits, emin, step,
                                 max_finite, lut_mid, lut_val, grid, hist, stamp, out_f, out_i)
            return
        if kind == KIND_INT:
            _rows_saturating(x2d, scale, inv_scale, use_inv, KIND_INT, mbits, emin, step,
                             max_finite, lut_mid, lut_val, grid, hist, stamp, out_f, out_i)
            return
        if kind == KIND_LUT:  # NF4: a branch-free count of midpoints instead of a search
            _rows_saturating(x2d, scale, inv_scale, use_inv, KIND_LUT, mbits, emin, step,
                             max_finite, lut_mid, lut_val, grid, hist, stamp, out_f, out_i)
            return
    # non-saturating casts: inf or NaN stand for the clipped elements
    for r in range(x2d.shape[0]):
        _walk(x2d[r], scale[r], inv_scale[r], use_inv, kind, mbits, emin, step, max_finite,
              overflow, signed_zero, saturate, lut_mid, lut_val, grid, hist, stamp, r, out_f,
              out_i, r)


@_jit
def edge_ties_up(edges, kind, mbits, emin, step, max_finite, lut_mid, lut_val, grid) -> np.ndarray:
    """For each boundary ``j`` of ``edges`` (in element units), whether a scaled value equal
    to it lies above it (its interval is ``> j``), by the cast itself; False where the
    boundary is no float32 (no scaled value equals it).

    A floating-point type's cast rounds to the nearest representable value (bits rounded to
    nearest, ties to even, or a fixed quantum below the normal range: an exact scaling), a
    monotone step function of the scaled value whose steps are exactly the midpoints between
    consecutive values, and the overflow thresholds. So an element lies above boundary ``j``
    exactly when its scaled value ``q`` does: ``q > edges[j]``, or ``q == edges[j]`` and the
    tie goes up -- one division and a compare per test instead of a whole cast."""
    up = np.zeros(edges.size, np.bool_)
    one = np.float32(1.0)
    for j in range(edges.size):
        f = np.float32(edges[j])
        if np.float64(f) == edges[j]:
            up[j] = interval_of(f, one, one, True, kind, mbits, emin, step, max_finite,
                                lut_mid, lut_val, grid) > j
    return up


@njit(nogil=True, error_model="numpy", inline="always")
def _above(xv, s, inv, use_inv, edge, up) -> bool:
    """Whether finite ``xv`` lies above a boundary of a floating-point type (see
    :func:`edge_ties_up`): its scaled value beyond the boundary, or on it with the tie up."""
    q = np.float64(_scaled(xv, s, inv, use_inv))
    return q > edge or (q == edge and up)


@_jit
def _search(values, a, b, rec, k0, b1, b2, s, inv, use_inv, kind, mbits, emin, step,
            max_finite, lut_mid, lut_val, grid, edges, ties_up, hist, e, out_f, out_i,
            rel_tol) -> bool:
    """Split sorted row ``values[a:b]`` at its interval thresholds; False if a threshold would
    not settle or the cancellation bound exceeds ``rel_tol`` (the caller walks the row). For
    a floating-point type the elements beside a threshold are placed by :func:`_above`, for
    others by their cast (:func:`interval_of`): the same answer."""
    levels = grid.size
    rnd = 0.0
    clip = 0.0
    rnd_b = 0.0
    clip_b = 0.0
    worst = 0.0
    below = 0
    above = 0
    used = 0
    sf = np.float32(s)
    step_x = np.float64(s) if not use_inv else 1.0 / np.float64(inv)
    lo_edge = a
    g = prefix_at(values, a, a, rec, k0)  # the prefix sums at lo_edge
    counts = np.zeros(levels + 2, np.int64)
    for j in range(levels + 2):
        if j <= levels:  # threshold j: the first element whose interval is > j
            p = _gallop(values, lo_edge, b, np.float32(edges[j] * step_x))
            moves = 0
            edge = edges[j]
            up = ties_up[j]
            while True:
                if kind == KIND_FLOAT:
                    left_above = p > a and _above(values[p - 1], s, inv, use_inv, edge, up)
                    right_below = p < b and not _above(values[p], s, inv, use_inv, edge, up)
                else:
                    left_above = p > a and interval_of(
                        values[p - 1], s, inv, use_inv, kind, mbits, emin, step, max_finite,
                        lut_mid, lut_val, grid) > j
                    right_below = p < b and interval_of(
                        values[p], s, inv, use_inv, kind, mbits, emin, step, max_finite,
                        lut_mid, lut_val, grid) <= j
                if left_above:
                    p = _lower_bound(values, a, p, values[p - 1])
                elif right_below:
                    p = _upper_bound(values, p, b, values[p])
                else:
                    break
                moves += 1
                if moves > _MAX_MOVES:
                    return False
            hi_edge = p
        else:
            hi_edge = b
        n = hi_edge - lo_edge
        if n > 0:
            if j == 0:
                val = -max_finite
            elif j == levels + 1:
                val = max_finite
            else:
                val = grid[j - 1]
            xhat = np.float64(np.float32(np.float32(val) * sf))
            h = prefix_from(values, a, lo_edge, g, hi_edge, rec, k0)
            s1 = (h[0] - g[0]) + (h[1] - g[1])
            s2 = (h[2] - g[2]) + (h[3] - g[3])
            cross = xhat * s1
            nx2 = n * (xhat * xhat)
            err = max(s2 - 2.0 * cross + nx2, 0.0)
            bound = _EPS * (2.5 * s2 + 6.0 * abs(cross) + nx2) + n * (b2 + 2.0 * abs(xhat) * b1)
            worst = max(worst, abs(np.float64(values[lo_edge]) - xhat),
                        abs(np.float64(values[hi_edge - 1]) - xhat))
            if j == 0 or j == levels + 1:
                clip += err
                clip_b += bound
                if j == 0:
                    below = n
                else:
                    above = n
            else:
                rnd += err
                rnd_b += bound
            counts[j] += n
            g = h
        lo_edge = hi_edge
    if rnd_b > rel_tol * rnd or clip_b > rel_tol * clip:
        return False
    counts[1] += counts[0]  # clipped elements are counted at the outer codes
    counts[levels] += counts[levels + 1]
    for k in range(levels):
        c = counts[k + 1]
        if c:
            used += 1
            hist[k] += c
    out_f[e, 0] = rnd
    out_f[e, 1] = clip
    out_f[e, 2] = worst
    h = prefix_from(values, a, lo_edge, g, b, rec, k0)  # lo_edge is b: g itself
    out_f[e, 3] = h[2] + h[3]  # the row's prefix sums start from zero
    out_f[e, 4] = values[a]
    out_f[e, 5] = values[b - 1]
    out_i[e, 0] = b - a
    out_i[e, 1] = below
    out_i[e, 2] = above
    out_i[e, 3] = used
    return True


@_jit
def sorted_rows(values, starts, rec, rec_starts, bound1, bound2, row, scale, inv_scale,
                use_inv, kind, mbits, emin, step, max_finite, overflow, signed_zero, saturate,
                lut_mid, lut_val, grid, edges, walk_below, rel_tol, hist, out_f, out_i) -> None:
    """Evaluation ``e``: sorted row ``row[e]`` with ``scale[e]`` (``inv_scale[e]``). Rows
    shorter than ``walk_below`` (and, when not saturating, rows with clipped elements) are
    walked; the others searched (see the module docstring)."""
    stamp = np.full(grid.size, -1, np.int64)
    ties_up = edge_ties_up(edges, kind, mbits, emin, step, max_finite, lut_mid, lut_val, grid)
    for e in range(row.size):
        r = row[e]
        a = starts[r]
        b = starts[r + 1]
        s = scale[e]
        inv = inv_scale[e]
        for c in range(6):
            out_f[e, c] = 0.0
        for c in range(4):
            out_i[e, c] = 0
        if b == a:
            continue
        ok = False
        if b - a >= walk_below and saturate:
            ok = _search(values, a, b, rec, rec_starts[r], bound1[r], bound2[r], s, inv,
                         use_inv, kind, mbits, emin, step, max_finite, lut_mid, lut_val, grid,
                         edges, ties_up, hist, e, out_f, out_i, rel_tol)
        if not ok:
            _walk(values[a:b], s, inv, use_inv, kind, mbits, emin, step, max_finite, overflow,
                  signed_zero, saturate, lut_mid, lut_val, grid, hist, stamp, e, out_f, out_i,
                  e)
