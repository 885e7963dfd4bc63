"""NumPy twins of a format report's compiled loops: the same outputs, bit for bit.

``quantscope report --format NAME`` on a machine's first run compiled the loops of
:mod:`quantscope.core.formats.format_kernel` (about 30 s on two idle cores, a minute when they
are shared) before it printed a line. :func:`sorted_rows` (an element format per tensor or
per channel, on a prepared tensor) and :func:`direct_rows` (a block format's one pass: MX,
NVFP4, NF4) are written here a second time in NumPy, with the very same signatures and
outputs, and serve behind :mod:`quantscope.core.kernels.compiled` while the loops are compiled
in another process (:mod:`quantscope.core.stats.loop_twins` installs them with the panes'
twins). :func:`sort_finite` stands in for the radix sort of a prepared tensor,
:func:`block_abs_max` for the block formats' scales.

Why they agree to the last bit:

* the cast is the compiled one's integer arithmetic on the float32 bits (floating-point
  types), ``rint`` of an exact scaling (subnormals, MXINT8) or a count of midpoints (NF4),
  element-wise;
* a walked row's sums run strictly in the row's order (``np.cumsum`` accumulates left to
  right, never regrouped); a skipped non-finite element adds ``+0.0`` to a sum of non-negative
  terms that starts at ``+0.0``, which changes no bit;
* a searched row's thresholds are the first elements beyond each boundary by the very test the
  loop settles on (monotone in the sorted row, so the loop's fix-ups end there); how many
  fix-ups the loop needs (it walks the row beyond ``_MAX_MOVES``) is the number of distinct
  values between its galloping guess and the threshold; each interval's error is the same
  expression on the same prefix sums (the row's full running sums, which the records' prefixes
  equal), added interval by interval in order.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.elements import ELEMENTS, KIND_FLOAT, KIND_INT, OVERFLOW_SATURATE
from quantscope.core.formats.format_kernel import _MAX_MOVES
from quantscope.core.stats.twin_sums import row_prefixes

_EPS = float(np.finfo(np.float64).eps)
#: Elements a walk takes at once (rows of one length together): bounds its temporaries.
WALK_ELEMENTS = 1 << 20


def _scaled(x: np.ndarray, s, inv, use_inv: bool) -> np.ndarray:
    """``format_kernel._scaled``: float32 ``x · inv`` or ``x / s``."""
    with np.errstate(all="ignore"):
        return (x * np.float32(inv) if np.ndim(inv) == 0 else x * inv) if use_inv else (
            x / np.float32(s) if np.ndim(s) == 0 else x / s)


def round_values(q: np.ndarray, kind: int, mbits: int, emin: int, step: float,
                 lut_mid: np.ndarray, lut_val: np.ndarray) -> np.ndarray:
    """``elements.round_element`` of each finite float32 of ``q`` (float64)."""
    v = q.astype(np.float64)
    if kind == KIND_FLOAT:
        u = q.view(np.uint32).astype(np.int64)
        mag = u & 0x7FFFFFFF
        d = 23 - mbits
        up = (mag + (1 << (d - 1)) - 1 + ((mag >> d) & 1)) & ~((1 << d) - 1)
        normal = ((up | (u & 0x80000000)) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
        quantum = 2.0 ** (emin - mbits)
        with np.errstate(all="ignore"):
            sub = np.copysign(np.rint(v / quantum) * quantum, v)
        return np.where((mag >> 23) - 127 >= emin, normal.astype(np.float64), sub)
    if kind == KIND_INT:
        return np.rint(v / step) * step
    inside = (v <= lut_val[-1]) & (v >= lut_val[0])
    level = lut_val[np.minimum(np.searchsorted(lut_mid, v, "left"), lut_val.size - 1)]
    return np.where(inside, level, v)


def index_of(r: np.ndarray, kind: int, mbits: int, emin: int, step: float,
             grid: np.ndarray) -> np.ndarray:
    """``format_kernel._index_of``: the grid index of each representable value of ``r``."""
    z0 = grid.size >> 1
    if kind == KIND_FLOAT:
        a = np.abs(r)
        u = a.astype(np.float32).view(np.uint32).astype(np.int64)
        e = (u >> 23) - 127
        normal = ((e - emin + 1) << mbits) + ((u >> (23 - mbits)) & ((1 << mbits) - 1))
        c = np.where(e >= emin, normal, (a / 2.0 ** (emin - mbits)).astype(np.int64))
        return np.where(r > 0, z0 + c, z0 - c)
    if kind == KIND_INT:
        return z0 + np.rint(r / step).astype(np.int64)
    return np.searchsorted(grid, r, "left").astype(np.int64)


def _in_order(terms: np.ndarray) -> np.ndarray:
    """Each row's sum of ``terms`` added left to right from ``+0.0`` (the loops' ``+=``)."""
    if terms.shape[-1] == 0:
        return np.zeros(terms.shape[:-1])
    return np.cumsum(terms, axis=-1)[..., -1]


def _walk(x, s, inv, use_inv: bool, kind, mbits, emin, step, max_finite, overflow, saturate,
          lut_mid, lut_val, grid):
    """``format_kernel._walk`` of each row of ``x`` (2-D, rows of one length, each with its
    scale): per row (rnd, clip, worst, sig, lo, hi) floats, (n, below, above, used) counts,
    and the grid indices of the finite elements (for the histogram)."""
    fin = np.isfinite(x)
    xz = np.where(fin, x, np.float32(0.0))
    r = round_values(_scaled(xz, s, inv, use_inv), kind, mbits, emin, step, lut_mid, lut_val)
    clipped = (np.abs(r) > max_finite) & fin
    r = np.where(clipped, np.copysign(max_finite, r), r)
    idx = index_of(r, kind, mbits, emin, step, grid)
    sf = np.asarray(s, np.float32)
    with np.errstate(all="ignore"):
        xhat = (r.astype(np.float32) * sf).astype(np.float64)
    x64 = xz.astype(np.float64)
    d = x64 - xhat
    if not (saturate or overflow == OVERFLOW_SATURATE):  # inf or NaN stands for x
        d = np.where(clipped, np.inf, d)
        idx = np.where(clipped, np.where(x < 0, 0, grid.size - 1), idx)
    e2 = np.where(fin, d * d, 0.0)
    floats = (_in_order(np.where(clipped, 0.0, e2)), _in_order(np.where(clipped, e2, 0.0)),
              np.max(np.where(fin, np.abs(d), 0.0), axis=-1, initial=0.0),
              _in_order(np.where(fin, x64 * x64, 0.0)),
              _first_extreme(x64, fin, np.min, np.inf),
              _first_extreme(x64, fin, np.max, -np.inf))
    marked = np.sort(np.where(fin, idx, -1), axis=-1)
    used = np.count_nonzero((marked[..., 1:] != marked[..., :-1]) & (marked[..., 1:] >= 0),
                            axis=-1) + (marked[..., :1] >= 0).sum(axis=-1)
    below = np.count_nonzero(clipped & (r < 0), axis=-1)
    counts = (np.count_nonzero(fin, axis=-1), below,
              np.count_nonzero(clipped, axis=-1) - below, used)
    return floats, counts, idx[fin]


def _first_extreme(x64, fin, extreme, none: float) -> np.ndarray:
    """Each row's least (``np.min``) or greatest (``np.max``) finite value as the loop's
    ``min``/``max`` keeps it: the first of the values equal to it, so a row whose extreme is
    zero has the sign of its first zero (NumPy's reduction may give either of -0.0 and +0.0)."""
    out = extreme(np.where(fin, x64, none), axis=-1, initial=none)
    zero = out == 0
    if zero.any():
        rows = x64[zero]
        first = np.argmax((rows == 0) & fin[zero], axis=-1)
        out[zero] = rows[np.arange(rows.shape[0]), first]
    return out


def _store(out_f, out_i, at, floats, counts) -> None:
    for c, column in enumerate(floats):
        out_f[at, c] = column
    for c, column in enumerate(counts):
        out_i[at, c] = column


def _row_groups(n_rows: int, n: int) -> list[slice]:
    """Consecutive rows of ``n`` elements in groups of about :data:`WALK_ELEMENTS`."""
    per = max(1, WALK_ELEMENTS // max(n, 1))
    return [slice(r0, min(r0 + per, n_rows)) for r0 in range(0, n_rows, per)]


def direct_rows(x2d, scale, inv_scale, use_inv, kind, mbits, emin, step, max_finite,
                overflow, signed_zero, saturate, lut_mid, lut_val, grid, hist, out_f,
                out_i) -> None:
    """``format_kernel.direct_rows`` in NumPy, a few rows at a time."""
    x2d = np.asarray(x2d)
    n_rows, n = x2d.shape
    et = (kind, mbits, emin, step, max_finite, overflow, saturate, lut_mid, lut_val, grid)
    for rows in _row_groups(n_rows, n):
        x = x2d[rows]
        floats, counts, idx = _walk(x, scale[rows, None], inv_scale[rows, None], use_inv,
                                    *et)
        _store(out_f, out_i, rows, floats, counts)
        hist[:grid.size] += np.bincount(idx, minlength=grid.size)
        if saturate or overflow == OVERFLOW_SATURATE:  # the slot past the grid: non-finite
            hist[grid.size] += x.size - int(np.count_nonzero(np.isfinite(x)))


def float_block_rows(x2d, scale, inv_scale, use_inv, mbits, emin, emax, max_finite, levels,
                     hist, out_f, out_i) -> None:
    """``float_blocks.float_block_rows``: its totals are ``direct_rows``'s on the saturating
    cast of the floating-point grid it names, so they are this module's :func:`direct_rows`
    of that grid's element type."""
    et = next(e for e in ELEMENTS.values() if e.kind == KIND_FLOAT and e.mbits == mbits
              and e.emin == emin and e.max_finite == max_finite and e.levels == levels)
    kind, mb, em, step, mf, overflow, signed_zero, lut_mid, lut_val = et.params()
    direct_rows(x2d, scale, inv_scale, use_inv, kind, mb, em, step, mf, overflow, signed_zero,
                True, lut_mid, lut_val, et.values, hist, out_f, out_i)


def edge_ties_up(edges, kind, mbits, emin, step, max_finite, lut_mid, lut_val,
                 grid) -> np.ndarray:
    """``format_kernel.edge_ties_up``: whether a scaled value equal to each boundary lies
    above it (False where the boundary is no float32)."""
    f = np.asarray(edges, np.float64).astype(np.float32)
    r = round_values(f, kind, mbits, emin, step, lut_mid, lut_val)
    return (f.astype(np.float64) == edges) & (
        _intervals(r, kind, mbits, emin, step, max_finite, grid) > np.arange(edges.size))


def _intervals(r, kind, mbits, emin, step, max_finite, grid) -> np.ndarray:
    """``format_kernel.interval_of`` from the rounded values ``r``."""
    inner = np.clip(r, -max_finite, max_finite)
    return np.where(r < -max_finite, 0, np.where(
        r > max_finite, grid.size + 1, index_of(inner, kind, mbits, emin, step, grid) + 1))


def _cuts(x, s, inv, use_inv, kind, mbits, emin, step, max_finite, lut_mid, lut_val, grid,
          edges, ties_up) -> np.ndarray:
    """Threshold ``j`` of sorted row ``x`` for each boundary: the first element above it by
    the test ``format_kernel._search`` settles on (``_above`` for a floating-point type, the
    element's interval for the others)."""
    q = _scaled(x, s, inv, use_inv)
    if kind == KIND_FLOAT:
        q64 = q.astype(np.float64)
        return np.where(ties_up, np.searchsorted(q64, edges, "left"),
                        np.searchsorted(q64, edges, "right"))
    r = round_values(q, kind, mbits, emin, step, lut_mid, lut_val)
    iv = _intervals(r, kind, mbits, emin, step, max_finite, grid)
    return np.searchsorted(iv, np.arange(edges.size), "right")


def _settles(x: np.ndarray, cuts: np.ndarray, edges: np.ndarray, step_x: float) -> bool:
    """Whether ``format_kernel._search`` finds every threshold within ``_MAX_MOVES`` moves:
    from its galloping guess (the first element not below the boundary times the step, never
    before the last threshold) each move crosses one run of equal values."""
    with np.errstate(all="ignore"):
        needles = (edges * step_x).astype(np.float32)
    lo_edges = np.concatenate([[0], cuts[:-1]])
    guess = np.maximum(np.searchsorted(x, needles, "left"), lo_edges)
    runs = np.concatenate([[0], np.flatnonzero(x[1:] != x[:-1]) + 1, [x.size]])
    moves = np.abs(np.searchsorted(runs, cuts) - np.searchsorted(runs, guess))
    return bool(moves.max(initial=0) <= _MAX_MOVES)


def _search(x, s, inv, use_inv, kind, mbits, emin, step, max_finite, lut_mid, lut_val, grid,
            edges, ties_up, b1: float, b2: float, rel_tol: float):
    """``format_kernel._search`` of sorted row ``x``: (floats, counts, the count per grid
    index) as :func:`_walk` gives them, or None where the loop gives up and walks."""
    cuts = _cuts(x, s, inv, use_inv, kind, mbits, emin, step, max_finite, lut_mid, lut_val,
                 grid, edges, ties_up)
    step_x = float(np.float32(s)) if not use_inv else 1.0 / float(np.float32(inv))
    if not _settles(x, cuts, edges, step_x):
        return None
    levels = grid.size
    lo = np.concatenate([[0], cuts])
    hi = np.append(cuts, x.size)
    n = hi - lo
    x64 = x.astype(np.float64)
    pre = row_prefixes(x, x64)
    val = np.concatenate([[-max_finite], grid, [max_finite]])
    xhat = (val.astype(np.float32) * np.float32(s)).astype(np.float64)
    s1 = (pre[0][hi] - pre[0][lo]) + (pre[1][hi] - pre[1][lo])
    s2 = (pre[2][hi] - pre[2][lo]) + (pre[3][hi] - pre[3][lo])
    cross = xhat * s1
    nx2 = n * (xhat * xhat)
    err = np.maximum(s2 - 2.0 * cross + nx2, 0.0)
    bound = _EPS * (2.5 * s2 + 6.0 * np.abs(cross) + nx2) + n * (b2 + 2.0 * np.abs(xhat) * b1)
    some = n > 0
    inner = some.copy()
    inner[[0, levels + 1]] = False
    outer = some & ~inner
    rnd, rnd_b = _in_order(err[inner]), _in_order(bound[inner])
    clip, clip_b = _in_order(err[outer]), _in_order(bound[outer])
    if rnd_b > rel_tol * rnd or clip_b > rel_tol * clip:
        return None
    first, last = x64[lo[some]], x64[hi[some] - 1]
    worst = max(0.0, float(np.max(np.abs(first - xhat[some]), initial=0.0)),
                float(np.max(np.abs(last - xhat[some]), initial=0.0)))
    counts = n[1:levels + 1].copy()
    counts[0] += n[0]  # clipped elements are counted at the outer codes
    counts[-1] += n[levels + 1]
    floats = (rnd, clip, worst, float(pre[2][-1]) + float(pre[3][-1]), x64[0], x64[-1])
    return floats, (x.size, n[0], n[levels + 1], int(np.count_nonzero(counts))), counts


def sorted_rows(values, starts, rec, rec_starts, bound1, bound2, row, scale, inv_scale,
                use_inv, kind, mbits, emin, step, max_finite, overflow, signed_zero, saturate,
                lut_mid, lut_val, grid, edges, walk_below, rel_tol, hist, out_f,
                out_i) -> None:
    """``format_kernel.sorted_rows`` in NumPy: searched rows one by one, walked rows (the
    short ones, and those whose search gives up) of one length at a time."""
    out_f[:row.size, :6] = 0.0
    out_i[:row.size, :4] = 0
    lengths = starts[row + 1] - starts[row]
    et = (kind, mbits, emin, step, max_finite, lut_mid, lut_val, grid)
    walked = (lengths > 0) & ((lengths < walk_below) | (not saturate))
    if saturate:
        ties_up = edge_ties_up(edges, kind, mbits, emin, step, max_finite, lut_mid, lut_val,
                               grid)
        for e in np.flatnonzero(lengths >= walk_below):
            r = int(row[e])
            found = _search(values[starts[r]:starts[r + 1]], scale[e], inv_scale[e], use_inv,
                            *et, edges, ties_up, float(bound1[r]), float(bound2[r]), rel_tol)
            if found is None:
                walked[e] = True
                continue
            floats, counts, per_index = found
            _store(out_f, out_i, e, floats, counts)
            hist += per_index
    for n in np.unique(lengths[walked]):
        same = np.flatnonzero(walked & (lengths == n))
        for group in _row_groups(same.size, int(n)):
            es = same[group]
            x = values[starts[row[es]][:, None] + np.arange(n)]
            floats, counts, idx = _walk(x, scale[es, None], inv_scale[es, None], use_inv,
                                        kind, mbits, emin, step, max_finite, overflow,
                                        saturate, lut_mid, lut_val, grid)
            _store(out_f, out_i, es, floats, counts)
            hist += np.bincount(idx, minlength=grid.size)


def sort_finite(x: np.ndarray, progress=None) -> tuple[np.ndarray, int]:
    """``radix_sort.sort_finite``: the finite values of float32 ``x`` in the order of their
    keys (``-0.0`` before ``+0.0``, as the radix buckets leave them), and how many were not
    finite."""
    bits = np.ascontiguousarray(x, np.float32).reshape(-1).view(np.uint32)
    keys = bits[(bits & 0x7F800000) != 0x7F800000]  # a copy: the finite ones
    n_bad = int(bits.size - keys.size)
    keys ^= np.where(keys >> 31 == 1, np.uint32(0xFFFFFFFF), np.uint32(0x80000000))
    keys.sort()
    keys ^= np.where(keys >> 31 == 1, np.uint32(0x80000000), np.uint32(0xFFFFFFFF))
    if progress:
        progress(1.0)
    return keys.view(np.float32), n_bad


def block_abs_max(x2d: np.ndarray, block: int) -> np.ndarray:
    """``block_max.block_abs_max``: each block's largest finite ``|x|`` (0 for none), float32
    (a maximum of non-negative values: exact, in any order)."""
    rows, n = x2d.shape
    n_blocks = -(-n // block)
    a = np.abs(np.asarray(x2d, np.float32))
    padded = np.zeros((rows, n_blocks * block), np.float32)
    padded[:, :n] = np.where(np.isfinite(a), a, np.float32(0.0))
    return padded.reshape(rows, n_blocks, block).max(axis=2, initial=np.float32(0.0))


#: What :func:`quantscope.core.stats.loop_twins.install` adds behind ``compiled``, by name.
TWINS = {"direct_rows": direct_rows, "sorted_rows": sorted_rows, "sort_finite": sort_finite,
         "block_abs_max": block_abs_max, "float_block_rows": float_block_rows}
