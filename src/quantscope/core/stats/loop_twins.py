"""NumPy twins of the compiled loops a prepared report runs: the same outputs, bit for bit.

On a machine's first run Numba compiles the engine's loops (a minute on two busy cores) before
they can serve a single report. The loops a prepared report of the window's panes needs --
the prefix-sum records (:mod:`quantscope.core.kernels.block_sums`), the rows' sums of squares
and the per-row evaluation (:mod:`quantscope.core.kernels.sorted_kernel`) -- are written here a
second time in NumPy, with the very same signatures and outputs, so that the window can paint
its first numbers at once while the compiled loops are built in another process, and take them
when they are ready without a single number changing (:func:`install` puts the twins behind
:mod:`quantscope.core.kernels.compiled`, :func:`remove` takes them away).

Why they agree to the last bit, loop by loop:

* running sums are sequential in both: ``np.cumsum`` adds strictly left to right (it is an
  accumulation, never regrouped), and each step's exact rounding error (TwoSum) is formed by
  the same four operations on the same operands;
* the codes are :func:`quantscope.core.schemes.quantize.quantize_codes_float`, the rule the
  compiled ``code_of`` is tested against on every tie and on random bit patterns;
* the walked rows' squared errors are summed in the fixed order of
  :mod:`quantscope.core.kernels.lane_order` per chunk of ``WALK_CHUNK`` elements, the chunks
  added in order, as the compiled walk does;
* a searched row's thresholds are where its (monotone) codes first reach each code, which is
  where the compiled search's corrections stop; each interval's error is the same expression on
  the same prefix sums, accumulated interval by interval in Python floats (IEEE float64, as
  Numba's).

They are slower (a per-channel report of the demo tensor takes about 30 ms instead of 1), which
is why they are a stand-in, not the engine.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from quantscope.core.kernels import compiled
from quantscope.core.kernels.lane_order import lane_sum
from quantscope.core.kernels.sorted_kernel import _START, _close
from quantscope.core.schemes.quantize import quantize_codes_float
from quantscope.core.stats.format_twins import TWINS as FORMAT_TWINS
from quantscope.core.stats.gguf_twins import TWINS as GGUF_TWINS
from quantscope.core.stats.mse_twin import rows_optimum
from quantscope.core.stats.torchao_twins import TWINS as TORCHAO_TWINS
from quantscope.core.stats.twin_sums import forget_prefixes, row_prefixes, running_sums

#: Elements per prefix-sum record (``block_sums.BLOCK``; a test holds the two equal).
BLOCK = 128
#: Walked rows are summed in chunks of this many elements (``sorted_kernel.WALK_CHUNK``).
WALK_CHUNK = 1024
#: ``arithmetic`` names as the compiled loops' integer codes (``sorted_kernel``'s own table).
ARITHMETIC_CODES = {"divide": 0, "multiply": 1, "fma": 2, "multiply_add": 3, "divide64": 4}
#: The arithmetics of the compiled one-pass loops (``sorted_kernel.LINE_ARITHMETIC``).
LINE_ARITHMETIC = ("divide", "multiply", "fma", "multiply_add")
_ARITHMETIC_NAMES = {v: k for k, v in ARITHMETIC_CODES.items()}
_EPS = float(np.finfo(np.float64).eps)


def n_records(lengths: np.ndarray) -> np.ndarray:
    """Records per row (``block_sums.n_records``)."""
    return np.asarray(lengths, np.int64) // BLOCK + 1


def build_range(values, a, lo, hi, rec, k0, state) -> None:
    """``block_sums.build_range`` in NumPy."""
    v = values[a + lo:a + hi].astype(np.float64)
    if lo == 0:
        rec[k0, :] = 0.0
    h1, l1 = running_sums(state[0], state[1], v[None, :])
    h2, l2 = running_sums(state[2], state[3], (v * v)[None, :])
    h1, l1, h2, l2 = h1[0], l1[0], h2[0], l2[0]
    if v.size:
        state[4] = max(state[4], float(np.max(np.abs(l1))))
        state[5] = max(state[5], float(np.max(np.abs(l2))))
        state[0], state[1], state[2], state[3] = h1[-1], l1[-1], h2[-1], l2[-1]
    at = np.arange(BLOCK - 1, v.size, BLOCK)  # the steps that complete a block
    k = k0 + lo // BLOCK + 1 + np.arange(at.size)
    rec[k, 0], rec[k, 1], rec[k, 2], rec[k, 3] = h1[at], l1[at], h2[at], l2[at]


def build_rows(values, starts, r0, r1, rec, rec_starts, bounds) -> None:
    """``block_sums.build_rows`` in NumPy: rows of one length at a time, as a 2-D cumsum."""
    rows = np.arange(r0, r1)
    lengths = starts[rows + 1] - starts[rows]
    for n in np.unique(lengths):
        same = rows[lengths == n]
        v = values[starts[same][:, None] + np.arange(n)].astype(np.float64)
        zero = np.zeros(same.size)
        h1, l1 = running_sums(zero, zero, v)
        h2, l2 = running_sums(zero, zero, v * v)
        rec[rec_starts[same], :] = 0.0
        if n == 0:
            bounds[same] = 0.0
            continue
        bounds[same, 0] = np.max(np.abs(l1), axis=1)
        bounds[same, 1] = np.max(np.abs(l2), axis=1)
        at = np.arange(BLOCK - 1, n, BLOCK)
        k = rec_starts[same][:, None] + 1 + np.arange(at.size)
        rec[k, 0], rec[k, 1] = h1[:, at], l1[:, at]
        rec[k, 2], rec[k, 3] = h2[:, at], l2[:, at]


def row_sums_of_squares(values, starts, out) -> None:
    """``sorted_kernel.row_sums_of_squares`` in NumPy (each row's running sum of squares)."""
    lengths = np.diff(starts)
    for n in np.unique(lengths):
        same = np.flatnonzero(lengths == n)
        if n == 0:
            out[same] = 0.0
            continue
        v = values[starts[same][:, None] + np.arange(n)].astype(np.float64)
        out[same] = np.cumsum(v * v, axis=1)[:, -1]


def bin_counts(values, a, b, edges, out) -> None:
    """``block_sums.bin_counts`` in NumPy: the same searches (in float64, as the loop compares
    float32 values with float64 edges), each bin's end never before its start."""
    v = values[a:b].astype(np.float64)
    e = np.asarray(edges, np.float64)
    first = np.searchsorted(v, e[0], "left")
    ends = np.append(np.searchsorted(v, e[1:-1], "left"), np.searchsorted(v, e[-1], "right"))
    ends = np.maximum.accumulate(np.maximum(ends, first))
    out[:] = np.diff(np.concatenate([[first], ends]))


def _codes(x, s, inv, z, arithmetic: int, half_away: bool, has_inv: bool) -> np.ndarray:
    """Unclamped float32 codes of ``x`` (rows) by the direct rule: ``code_of`` element-wise."""
    rounding = "half_away" if half_away else "half_even"
    with np.errstate(all="ignore"):
        return quantize_codes_float(x, s, z, -(1 << 30), 1 << 30, rounding,
                                    _ARITHMETIC_NAMES[arithmetic],
                                    inv_scale=inv if has_inv else None)


def evaluate_rows(values, starts, sumsq, rec, rec_starts, bound1, bound2, row, scale,
                  inv_scale, zero_point, qmin: int, qmax: int, arithmetic: int,
                  half_away: bool, has_inv: bool, walk_below: int, want_counts: bool, hist,
                  out_f, out_i) -> None:
    """``sorted_kernel.evaluate_rows`` in NumPy: walked rows of one length at a time, searched
    rows one by one."""
    lengths = starts[row + 1] - starts[row]
    out_f[:, :] = 0.0
    out_i[:, 0] = lengths
    out_i[:, 1:4] = 0
    out_i[:, 4] = 1
    walked = (lengths > 0) & (lengths < walk_below)
    for n in np.unique(lengths[walked]):
        es = np.flatnonzero(walked & (lengths == n))
        _walk(values, starts, sumsq, row[es], scale[es], inv_scale[es], zero_point[es], int(n),
              qmin, qmax, arithmetic, half_away, has_inv, want_counts, hist, es, out_f, out_i)
    for e in np.flatnonzero(lengths >= walk_below):
        r = int(row[e])
        _search(values, int(starts[r]), int(starts[r + 1]), rec, int(rec_starts[r]),
                float(bound1[r]), float(bound2[r]), scale[e], inv_scale[e], zero_point[e],
                qmin, qmax, arithmetic, half_away, has_inv, want_counts, hist, int(e), out_f,
                out_i)
    done = lengths > 0
    out_f[done, 6] = values[starts[row[done]]]
    out_f[done, 7] = values[starts[row[done] + 1] - 1]


def _walk(values, starts, sumsq, rows, s, inv, z, n: int, qmin: int, qmax: int,
          arithmetic: int, half_away: bool, has_inv: bool, want_counts: bool, hist, es, out_f,
          out_i) -> None:
    """Walked rows ``rows``, all ``n`` long (``sorted_kernel._walk_row``, a row per line)."""
    x = values[starts[rows][:, None] + np.arange(n)]
    s2, z2 = s[:, None], z[:, None]
    v = _codes(x, s2, inv[:, None], z2, arithmetic, half_away, has_inv)
    lo, hi = np.float32(qmin), np.float32(qmax)
    below_m, above_m = v < lo, v > hi
    c = np.clip(v, lo, hi)
    xhat = ((c - z2.astype(np.float32)).astype(np.float32) * s2).astype(np.float32)
    d = x.astype(np.float64) - xhat.astype(np.float64)
    sq = d * d
    clipped = below_m | above_m
    rnd = np.zeros(rows.size)
    clip = np.zeros(rows.size)
    for c0 in range(0, n, WALK_CHUNK):
        part = slice(c0, min(c0 + WALK_CHUNK, n))
        rnd += lane_sum(np.where(clipped[:, part], 0.0, sq[:, part]))
        clip += lane_sum(np.where(clipped[:, part], sq[:, part], 0.0))  # + 0.0 where none
    below = np.count_nonzero(below_m, axis=1)
    above = np.count_nonzero(above_m, axis=1)
    used = 1 + np.count_nonzero(c[:, 1:] != c[:, :-1], axis=1)
    if want_counts:
        hist += np.bincount((c.astype(np.int64) - qmin).ravel(), minlength=hist.size)
    out_f[es, 0] = rnd
    out_f[es, 1] = clip
    out_f[es, 2] = n * _EPS * rnd
    out_f[es, 3] = n * _EPS * clip
    out_f[es, 4] = np.sqrt(np.max(sq, axis=1))
    out_f[es, 5] = sumsq[rows]
    out_i[es, 1] = below
    out_i[es, 2] = above
    out_i[es, 3] = used


def _search(values, a: int, b: int, rec, k0: int, b1: float, b2: float, s, inv, z, qmin: int,
            qmax: int, arithmetic: int, half_away: bool, has_inv: bool, want_counts: bool,
            hist, e: int, out_f, out_i) -> None:
    """One long row split at its code thresholds (``sorted_kernel._search_row``), its interval
    sums from the row's full running sums (the records' prefixes are those, bit for bit)."""
    x = values[a:b]
    v = _codes(x, s, inv, z, arithmetic, half_away, has_inv)
    levels = qmax - qmin + 1
    cuts = np.searchsorted(v, np.arange(qmin, qmax + 2, dtype=np.float32), "left")
    edges = [0, *(int(p) for p in cuts), b - a]
    x64 = x.astype(np.float64)
    pre = row_prefixes(x, x64)
    sf = float(np.float32(s))
    zi = int(z)
    totals = _START
    for j in range(levels + 2):
        lo_edge, hi_edge = edges[j], edges[j + 1]
        n = hi_edge - lo_edge
        if n <= 0:
            continue
        code = qmin if j == 0 else (qmax if j == levels + 1 else qmin + j - 1)
        xhat = float(np.float32(np.float32(code - zi) * np.float32(sf)))
        s1 = (pre[0][hi_edge] - pre[0][lo_edge]) + (pre[1][hi_edge] - pre[1][lo_edge])
        sq = (pre[2][hi_edge] - pre[2][lo_edge]) + (pre[3][hi_edge] - pre[3][lo_edge])
        s1, sq = float(s1), float(sq)
        cross = xhat * s1
        nx2 = n * (xhat * xhat)
        err = max(sq - 2.0 * cross + nx2, 0.0)
        bound = _EPS * (2.5 * sq + 6.0 * abs(cross) + nx2)
        bound += n * (b2 + 2.0 * abs(xhat) * b1)
        worst = max(abs(float(x64[lo_edge]) - xhat), abs(float(x64[hi_edge - 1]) - xhat))
        # the compiled walk's own bookkeeping, run as Python
        totals = _close.py_func(j, n, err, bound, worst, levels, want_counts, hist, totals)
    rnd, clip, rnd_b, clip_b, max_abs, below, above, used, _ = totals
    out_f[e, 0], out_f[e, 1], out_f[e, 2], out_f[e, 3] = rnd, clip, rnd_b, clip_b
    out_f[e, 4] = max_abs
    out_f[e, 5] = float(pre[2][-1]) + float(pre[3][-1])
    out_i[e, 1], out_i[e, 2], out_i[e, 3] = below, above, used
    if math.isnan(max_abs):  # pragma: no cover - finite values only reach a layout
        out_i[e, 4] = 0


#: Elements of a share the twin of ``analyze_flat`` computes at once (whole sum blocks): its
#: float64 temporaries stay near 50 MB whatever the tensor's size.
ANALYZE_CHUNK = 1 << 20


def analyze_flat(x, s, z, qmin: int, qmax: int, rounding: str, arithmetic: str,
                 inv) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``direct_kernel.analyze_flat`` in NumPy: the same shares of the tensor (one per
    engine thread), each summed block by block of ``SUM_BLOCK`` elements in the fixed lane
    order, the blocks' sums added in order, the shares combined as the compiled pass does."""
    from quantscope.core.kernels.direct_kernel import SUM_BLOCK, _rule
    from quantscope.core.kernels.parallel import shares

    s32, inv32, code = _rule(s, inv, arithmetic)
    flat = x.reshape(-1)
    parts = shares(flat.size)
    hist = np.zeros((len(parts), qmax - qmin + 1), np.int64)
    out_f = np.zeros((len(parts), 4))
    out_i = np.zeros((len(parts), 3), np.int64)
    for k, (lo, hi) in enumerate(parts):
        _analyze_share(flat[lo:hi], s32, inv32, np.int32(z), qmin, qmax, code,
                       rounding == "half_away", SUM_BLOCK, hist[k], out_f[k], out_i[k])
    sums = np.array([out_f[:, 0].sum(), out_f[:, 1].sum(), out_f[:, 2].sum(),
                     out_f[:, 3].max()])
    return hist.sum(axis=0), sums, out_i.sum(axis=0)


def _analyze_share(x, s, inv, z, qmin: int, qmax: int, arithmetic: int, half_away: bool,
                   block: int, hist, out_f, out_i) -> None:
    """One share (``direct_kernel.analyze_range``): its totals into ``out_f`` (rounding
    error, clipping error, Σx², max |error|) and ``out_i`` (finite, clipped below, above)."""
    cmin, cmax, zf = np.float32(qmin), np.float32(qmax), np.float32(z)
    rnd = clip = sig = worst = 0.0
    n = below = above = 0
    for c0 in range(0, x.size, ANALYZE_CHUNK):
        xb = x[c0:c0 + ANALYZE_CHUNK]
        fin = np.isfinite(xb)  # the loop's x - x == 0
        v = _codes(xb, s, inv, z, arithmetic, half_away, True)
        lo_c, hi_c = v < cmin, v > cmax
        c = np.where(fin, np.where(lo_c, cmin, np.where(hi_c, cmax, v)), cmin)
        x64 = np.where(fin, xb.astype(np.float64), 0.0)
        xhat = ((c - zf).astype(np.float32) * s).astype(np.float32)
        d = np.where(fin, x64 - xhat.astype(np.float64), 0.0)
        e2 = d * d
        clipped = lo_c | hi_c
        n += int(np.count_nonzero(fin))
        below += int(np.count_nonzero(lo_c & fin))
        above += int(np.count_nonzero(hi_c & fin))
        hist += np.bincount(c[fin].astype(np.int64) - qmin, minlength=hist.size)
        rnd = _blocks_in_order(rnd, np.where(clipped, 0.0, e2), block)
        clip = _blocks_in_order(clip, np.where(clipped, e2, 0.0), block)
        sig = _blocks_in_order(sig, x64 * x64, block)
        if e2.size:  # max |d| = sqrt(max d²), as the loop takes it
            worst = max(worst, float(np.sqrt(np.max(e2))))
    out_f[0], out_f[1], out_f[2], out_f[3] = rnd, clip, sig, worst
    out_i[0], out_i[1], out_i[2] = n, below, above


def _blocks_in_order(total: float, terms: np.ndarray, block: int) -> float:
    """``total`` plus the lane sum of each ``block`` of ``terms``, one block after another (a
    cumulative sum adds strictly in order)."""
    full = terms.size - terms.size % block
    sums = lane_sum(terms[:full].reshape(-1, block))
    if full < terms.size:
        sums = np.append(sums, lane_sum(terms[full:]))
    return float(np.cumsum(np.concatenate([[total], sums]))[-1])


#: Elements :func:`abs_order_stats` takes at once (rows of one length together).
ORDER_ELEMENTS = 1 << 20


def abs_order_stats(values, starts, k, out) -> None:
    """``sorted_kernel.abs_order_stats`` in NumPy: ``out[r]``, the ``k[r]``-th smallest
    ``|x|`` of sorted row ``r`` (0.0 for an empty row), by a partition of the row's ``|x|`` in
    float64 (exact: the loop's merge of the negative and non-negative halves gives the same
    value), rows of one length a few at a time."""
    lengths = np.diff(starts)
    out[lengths == 0] = 0.0
    for n in np.unique(lengths[lengths > 0]):
        same = np.flatnonzero(lengths == n)
        per = max(1, ORDER_ELEMENTS // int(n))
        for r0 in range(0, same.size, per):
            rows = same[r0:r0 + per]
            a = np.abs(values[starts[rows][:, None] + np.arange(n)].astype(np.float64))
            kr = np.asarray(k[rows], np.intp)
            a.partition(np.unique(kr), axis=1)
            out[rows] = a[np.arange(rows.size), kr]


#: What :func:`install` puts behind :mod:`quantscope.core.kernels.compiled`, by name.
TWINS = {
    "BLOCK": BLOCK,
    "ARITHMETIC_CODES": ARITHMETIC_CODES,
    "LINE_ARITHMETIC": LINE_ARITHMETIC,
    "n_records": n_records,
    "build_range": build_range,
    "build_rows": build_rows,
    "row_sums_of_squares": row_sums_of_squares,
    "bin_counts": bin_counts,
    "evaluate_rows": evaluate_rows,
    "analyze_flat": analyze_flat,
    "abs_order_stats": abs_order_stats,
    "rows_optimum": rows_optimum,
}


def install(until: Callable[[], object] | None = None) -> None:
    """Serve the loops of :data:`TWINS` and of the format reports' twins
    (:mod:`quantscope.core.stats.format_twins`, :mod:`quantscope.core.stats.gguf_twins`,
    :mod:`quantscope.core.stats.torchao_twins`) from here until :func:`remove` (reports are
    the same); ``until`` as for :func:`quantscope.core.kernels.compiled.stand_in`."""
    compiled.stand_in({**TWINS, **FORMAT_TWINS, **GGUF_TWINS, **TORCHAO_TWINS}, until)


def remove() -> None:
    """Serve the compiled loops again (each loaded from Numba's cache on its next use)."""
    compiled.stand_in({})
    forget_prefixes()
