"""The MSE-optimal scale of a number format (FP8, FP6, FP4 per tensor or per channel): the
global minimum of the exact error over every float32 scale.

An element format quantizes ``x`` to ``s · v`` with ``v`` the grid value nearest
``float32(x / s)`` (ties to even, subnormals by their fixed quantum, beyond the largest
finite value saturated or -- for a non-saturating cast of a type with inf/NaN -- an infinite
error), ``s`` one float32 scale per unit. The error is piecewise quadratic in ``s`` between
the scales where an element crosses a midpoint of the grid: a rippled function with one basin
per way of treating the outliers, so a search that samples it and refines around the best
samples can stop in the wrong basin (the 96-point grid this replaced did, on real and
constructed tensors). Here the minimum is found by branch and bound over boxes of scales with
a valid lower bound of the error on each box (:mod:`quantscope.core.formats.grid_bound`),
settling narrow boxes by sweeping every breakpoint in them. What is searched, and why it is
everything:

* every float32 scale ``s <= 2 · amax / max_finite``: above, a scale ``s`` is never better
  than ``s / 2`` (for a floating-point grid, twice a representable value within range is
  representable, so the grid of ``s`` within the data's range is a subset of the grid of
  ``s / 2``, and the rounding of ``x / s`` halves exactly): the result is the optimum over
  every positive float32 scale;
* below, scales are dropped wholesale where clipping alone costs more than the best error
  found (:func:`~quantscope.core.formats.grid_bound.clip_floor`); for a saturating cast the
  scales between there and the min/max scale are searched only where the octave above the
  min/max scale, searched first, does not already bound them (the error at ``s`` is at least
  the error at ``2^k · s`` on that octave, less what its subnormals add: the grid repeats
  itself at twice the scale; :func:`~quantscope.core.formats.grid_bound.unit_optimum`);
  for a non-saturating cast
  of E4M3FN, E5M2 or the FNUZ types, scales at which the largest element overflows (an
  infinite error) are not candidates: the search starts at the smallest float32 scale that
  keeps it finite.

A box is dropped only when its bound is within :data:`EPS` (relative) of the best error, so
the search's error is within ``EPS`` of the least error of every float32 scale (4e-7 dB). The
search rounds ``x / s`` in float64 and leaves ``s · v`` unrounded, which the report rounds to
float32: that moves the error by parts in 10^7 from one float32 scale to the next, so the
float32 scales of the winner's piece (and the pieces beside it) are scanned by the report's
own arithmetic (:mod:`~quantscope.core.formats.float32_pick`). The winner, the scale that scan
rates best and the min/max scale are then evaluated by the engine's report (the reported
error is the report's), and the least is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantscope.core.formats.catalog import FormatParams, element_of
from quantscope.core.formats.elements import KIND_FLOAT, OVERFLOW_SATURATE, ElementType, cast
from quantscope.core.kernels.parallel import THREADS, parallel
from quantscope.core.stats.format_stats import element_edges, evaluate_sorted
from quantscope.core.stats.pick_bounds import rated_span, report_floor
from quantscope.core.stats.sorted_stats import SortedRows
from quantscope.core.tensors.layout import normalize_axis, param_shape

#: Relative slack of the search: the result is within it of the least error (4.3e-7 dB).
EPS = 1e-7
#: Absolute slack, as a share of the unit's Σx²: the float64 roundoff of the bounds' sums.
FLOOR = 1e-13
#: Scales evaluated before the boxes, as multiples of the min/max scale (with it, ``2`` and
#: the lowest scale not excluded): the first boxes lie between them.
GRID = np.array([0.25, 0.5, 0.7, 0.85, 1.2, 1.5])
#: :data:`GRID` where the scales below the min/max scale are folded onto the octave above: no
#: point, the octave is one box (for a short row, one sweep: a sweep costs its crossings
#: however the octave is cut, an evaluation and a box's runs cost a walk of the row each; FP8
#: per channel on a 4096x4096 weight, the search's processor time on one thread against
#: ``[1.4]``: 0.84, per tensor the same; ``[1.4]`` had been 0.89 of ``GRID``). Also the grid of
#: a saturating cast's walked rows, folded or not: there the boxes ``[s_lo, s_mm]`` and
#: ``[s_mm, s_top]`` are each one sweep, which bounds what the evaluations between would
#: (FP4 E2M1 and FP6 E2M3 per channel on a 1024x4096 weight, the search's processor time
#: against ``GRID``: 0.53, 0.54, the same scales; a long row's boxes are no sweep: there
#: ``GRID`` opens fewer).
FOLD_GRID = np.array([], np.float64)
#: A box with at most this many breakpoints is settled by sweeping them.
SWEEP_CELLS = 1 << 16
#: :data:`SWEEP_CELLS` for rows searched on their prefix sums (a tensor's one scale) in a grid
#: of more than :data:`WIDE_SWEEP_VALUES` values: there a box costs a search of the row's runs
#: (about two per value) and their two-value bounds while a sweep costs its crossings, a few
#: nanoseconds each, and stores only those of the buckets it keeps (per tensor on a 4096x4096
#: weight, the search's processor time against ``1 << 16``: FP8 E4M3 0.87 at ``1 << 18``,
#: 0.75-0.82 at ``1 << 19``, 0.77 at ``1 << 20``, FP8 E5M2 0.94; the same scales).
LONG_SWEEP_CELLS = 1 << 19
#: Grids of at most this many values keep :data:`SWEEP_CELLS` on long rows: their boxes have
#: few runs, and wider sweeps cost more than the boxes they save (FP6 E3M2 1.20, FP6 E2M3
#: 1.12, FP4 E2M1 1.5 at ``1 << 19``).
WIDE_SWEEP_VALUES = 128
#: Boxes opened per unit before the search gives up its proof (the result is then the best
#: found, and ``proven`` says so).
MAX_BOXES = 200_000
#: Rows at least this long take their run sums from the prefix sums instead of a walk.
SEARCH_ROWS = 1 << 15
#: Rows at least this long, when fewer than the threads (a tensor's one scale), have their
#: range searched in parts side by side (:func:`_search_in_parts`).
SPLIT_ROWS = 1 << 18
#: Parts of a split row's range per thread: the parts near the optimum take the longest.
PARTS_PER_THREAD = 4
#: The scales below the min/max scale are folded onto the octave above only for a grid whose
#: smallest normal value is at most this fraction of its largest: elsewhere (FP4 E2M1, FP6
#: E2M3: half the grid is subnormal) the fold's allowance for the subnormals lets few lower
#: boxes go and its images cost more than they save (4096x4096 per channel, processor time
#: against no fold: FP8 E4M3 0.75, FP6 E3M2 0.88, FP4 E2M1 1.18).
FOLD_RANGE = 1 / 64
_TINY32 = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True, eq=False)
class FormatOptimum:
    """Per unit: the float32 ``scale``, its exact total squared ``error`` (the engine's
    report), whether the search settled every box (``proven``), how many boxes it opened and
    the lowest scale it did not exclude wholesale (``s_lo``)."""

    scale: np.ndarray
    error: np.ndarray
    proven: np.ndarray
    boxes: np.ndarray
    s_lo: np.ndarray


def _row_amax(rows: SortedRows) -> np.ndarray:
    n = rows.lengths
    if rows.values.size == 0:
        return np.zeros(rows.n_rows)
    first = rows.values[np.minimum(rows.starts[:-1], rows.values.size - 1)].astype(np.float64)
    last = rows.values[np.maximum(rows.starts[1:] - 1, 0)].astype(np.float64)
    return np.where(n > 0, np.maximum(-first, last), 0.0)


def _next_up32(v: np.ndarray) -> np.ndarray:
    """The least float32 not below each float64 ``v``."""
    f = v.astype(np.float32)
    return np.where(f.astype(np.float64) < v, np.nextafter(f, np.float32(np.inf)), f)


def _overflows(amax: np.ndarray, s: np.ndarray, et: ElementType) -> np.ndarray:
    q = (amax.astype(np.float32) / s).astype(np.float32)
    return ~np.isfinite(cast(q, et, saturate=False))


def overflow_floor(amax: np.ndarray, et: ElementType) -> np.ndarray:
    """Per unit, the smallest float32 scale at which a non-saturating cast of ``amax`` (the
    unit's largest magnitude) stays finite."""
    over = float(element_edges(et)[-1])
    s = np.maximum(_next_up32(amax / over), np.float32(_TINY32))
    for _ in range(64):  # up while it overflows (a step or two)
        bad = _overflows(amax, s, et)
        if not bad.any():
            break
        s = np.where(bad, np.nextafter(s, np.float32(np.inf)), s)
    for _ in range(64):  # down while the scale below does not
        down = np.maximum(np.nextafter(s, np.float32(0)), np.float32(_TINY32))
        ok = (down < s) & ~_overflows(amax, down, et)
        if not ok.any():
            break
        s = np.where(ok, down, s)
    return s.astype(np.float64)


def grid_format(et: ElementType) -> np.ndarray:
    """What the search's loops take to find a code without a search
    (:func:`~quantscope.core.formats.grid_bound.code_of`): (mantissa bits, exponent of the
    smallest normal, index of zero, positive values) for a floating-point grid, -1s for any
    other."""
    if et.kind != KIND_FLOAT:
        return np.full(4, -1, np.int64)
    vals = et.values
    z0 = int(np.searchsorted(vals, 0.0))
    return np.array([et.mbits, et.emin, z0, vals.size - 1 - z0], np.int64)


def format_mse_search(rows: SortedRows, name: str, *, saturate: bool = True,
                      eps: float = EPS) -> FormatOptimum:
    """The MSE-optimal float32 scale of every sorted row of ``rows`` for element format
    ``name`` (module doc), each row's search on the engine's threads."""
    et = element_of(name)
    n_rows = rows.n_rows
    amax = _row_amax(rows)
    mx = float(et.max_finite)
    s_mm = (amax / mx).astype(np.float32)
    live = (s_mm >= np.float32(_TINY32)) & (rows.lengths > 0)
    s_mm = np.where(live, s_mm, np.float32(1.0))  # as the min/max rule: 1 for a zero unit
    s_top = np.where(live, _next_up32(2.0 * amax / mx), 1.0).astype(np.float64)
    saturating = saturate or et.overflow == OVERFLOW_SATURATE
    if not saturating:
        s_floor = np.where(live, overflow_floor(amax, et), 1.0)
        fold = False
    else:
        s_floor = np.full(n_rows, _TINY32)
        fold = et.kind == KIND_FLOAT and 2.0 ** et.emin <= FOLD_RANGE * et.max_finite
    if fold:  # the octave above the min/max scale, whole: its images cover the scales below
        s_top = np.maximum(s_top, 2.0 * s_mm.astype(np.float64))
    s_mm64 = np.clip(s_mm.astype(np.float64), s_floor, s_top)
    search = rows.lengths >= SEARCH_ROWS
    long_rows = _long_rows(rows, search)
    rec, rec_starts, smp, smp_starts = long_rows
    floor = FLOOR * rows.sumsq
    wide = search.any() and et.values.size > WIDE_SWEEP_VALUES
    sweep_cells = LONG_SWEEP_CELLS if wide else SWEEP_CELLS
    grid = FOLD_GRID if fold or (saturating and not search.any()) else GRID
    vals = np.ascontiguousarray(et.values, np.float64)
    mids = np.ascontiguousarray(et.midpoints, np.float64)
    fmt = grid_format(et)
    # the search's loops load Numba: imported where a search needs them
    from quantscope.core.formats.grid_bound import (
        OUT_COLUMNS,
        OUT_MM_ERR,
        OUT_MM_TERMS,
        grid_rows_optimum,
    )

    def run(row: np.ndarray, lo: np.ndarray, hi: np.ndarray, best0: np.ndarray,
            max_boxes: int, img_lo: np.ndarray | None = None) -> np.ndarray:
        """The kernel on entries (a row and a range of its scales each), on the threads."""
        res = np.zeros((row.size, OUT_COLUMNS))
        below = np.zeros(row.size) if img_lo is None else img_lo
        order = np.argsort(-rows.lengths[row], kind="stable")  # long rows first

        def share(sel: np.ndarray) -> None:
            part = np.zeros((sel.size, OUT_COLUMNS))
            r = row[sel]
            grid_rows_optimum(rows.values, rows.starts, rec, rec_starts, smp, smp_starts,
                              search[r], r, vals, mids, fmt, lo[sel], hi[sel], s_mm64[r], eps,
                              floor[r], grid, max_boxes, sweep_cells, best0[sel], fold,
                              below[sel], part)
            res[sel] = part

        n_shares = min(row.size, 4 * THREADS)
        if n_shares:
            parallel(share, [(order[i::n_shares],) for i in range(n_shares)])
        return res

    todo = np.flatnonzero(live)
    out = np.zeros((n_rows, OUT_COLUMNS))
    few = todo.size < THREADS
    split = todo[(rows.lengths[todo] >= SPLIT_ROWS) & few]
    whole = np.setdiff1d(todo, split)
    out[whole] = run(whole, s_floor[whole], s_top[whole], np.full(whole.size, np.inf),
                     MAX_BOXES)
    if split.size:
        out[split] = _search_in_parts(split, s_floor[split], s_top[split], run,
                                      s_mm64[split] if fold else None)
    found = np.where(live, out[:, 1], 1.0).astype(np.float32)
    # the search's error at the min/max scale, where it took it at that very scale
    mm_at = live & (s_mm64 == s_mm.astype(np.float64))
    scale, error = _engine_pick(rows, name, saturate, found, s_mm, s_floor,
                                np.where(mm_at, out[:, OUT_MM_ERR], np.inf),
                                out[:, OUT_MM_TERMS], long_rows)
    return FormatOptimum(scale, error, np.where(live, out[:, 2] > 0, True),
                         out[:, 3].astype(np.int64), np.where(live, out[:, 4], 1.0))


def _long_rows(rows: SortedRows, search: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What the search's loops take for the rows it searches on their prefix sums
    (``search``): the block records and where each row's start, and each such row's value at
    every :data:`~quantscope.core.formats.grid_bound.SAMPLE`-th position and where each
    row's start (stand-ins where no row is searched so)."""
    # the search's constants come with its loops: imported where a search needs them
    from quantscope.core.formats.grid_bound import SAMPLE

    n_rows = rows.n_rows
    if not search.any():
        return (np.zeros((1, 4)), np.zeros(n_rows + 1, np.intp), np.zeros(1, np.float32),
                np.zeros(n_rows + 1, np.intp))
    counts = np.where(search, -(-rows.lengths // SAMPLE), 0)
    smp_starts = np.zeros(n_rows + 1, np.intp)
    np.cumsum(counts, out=smp_starts[1:])
    smp = np.concatenate([rows.values[rows.starts[r]:rows.starts[r + 1]:SAMPLE]
                          for r in np.flatnonzero(search)]).astype(np.float32, copy=False)
    return rows.records, rows.rec_starts, smp, smp_starts


def _search_in_parts(row: np.ndarray, s_floor: np.ndarray, s_top: np.ndarray, run,
                     fold_at: np.ndarray | None) -> np.ndarray:
    """The search of a few long rows, each range cut into parts searched side by side (one
    row's boxes are one thread's work): first the row's own evaluations (no box), whose best
    error every part starts from and whose lowest scale not excluded is where the parts
    begin; then :data:`PARTS_PER_THREAD` parts per thread, in geometric steps. Returns the
    rows' results as the kernel gives them (the best of the parts, proven when every part
    is, their boxes summed). ``fold_at``: the min/max scales of a grid the search folds
    (:func:`~quantscope.core.formats.grid_bound.unit_optimum`): the parts cover the range
    from there up, each searching its own images below, down to the lowest scale not
    excluded."""
    first = run(row, s_floor, s_top, np.full(row.size, np.inf), 0)
    k = PARTS_PER_THREAD * THREADS
    lo = np.maximum(first[:, 4], s_floor)
    img_lo = None
    if fold_at is not None:
        img_lo = np.repeat(lo, k)
        lo = np.maximum(lo, fold_at)
    edges = np.geomspace(lo, np.maximum(s_top, lo), k + 1).T.astype(np.float32)  # [row, k+1]
    edges[:, 0] = lo.astype(np.float32)
    edges[:, -1] = s_top.astype(np.float32)
    entry = np.repeat(np.arange(row.size), k)
    parts = run(row[entry], edges[:, :-1].astype(np.float64).ravel(),
                edges[:, 1:].astype(np.float64).ravel(), first[entry, 0], MAX_BOXES, img_lo)
    res = first.copy()
    res[:, 2] = 1.0
    res[:, 3] = 0.0
    for i in range(row.size):
        mine = parts[i * k:(i + 1) * k]
        res[i, 2] = float((mine[:, 2] > 0).all())
        res[i, 3] = mine[:, 3].sum()
        hit = mine[:, 1] > 0
        if hit.any():
            j = int(np.argmin(np.where(hit, mine[:, 0], np.inf)))
            if mine[j, 0] < res[i, 0]:
                res[i, 0], res[i, 1] = mine[j, 0], mine[j, 1]
    return res


def mse_optimal_amax(xf: np.ndarray, name: str, *, axis: int | None, prepared,
                     saturate: bool = True) -> np.ndarray:
    """Per unit (tensor or channel), the ``amax`` whose scale ``amax / max_finite`` gives the
    least exact total squared error of every float32 scale: ``max_finite`` times the scale
    :func:`format_mse_search` proves optimal (exact in float64, so the scale rule gives that
    very float32 scale back)."""
    ax = None if axis is None else normalize_axis(axis, xf.ndim)
    found = format_mse_search(prepared.layout(ax, None), name, saturate=saturate)
    out = found.scale.astype(np.float64) * element_of(name).max_finite
    return out.reshape(()) if ax is None else out.reshape(param_shape(xf.shape, ax, None))


def exact_errors(rows: SortedRows, name: str, saturate: bool, scale: np.ndarray,
                 which: np.ndarray | None = None) -> np.ndarray:
    """Each row's exact total squared error at its float32 ``scale`` (the engine's report);
    with ``which``, row ``which[e]``'s at ``scale[e]``."""
    probe = FormatParams(name, np.ones((), np.float32), saturate=saturate)
    t = evaluate_sorted(rows, scale, None, probe, want_hist=False, which=which)
    return t.round_err + t.clip_err


def _engine_pick(rows: SortedRows, name: str, saturate: bool, s: np.ndarray, s_mm: np.ndarray,
                 s_floor: np.ndarray, mm_err: np.ndarray | None = None,
                 mm_depth: np.ndarray | None = None, long_rows: tuple | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The search's float32 scale, the float32 scale of its piece that the report's own
    arithmetic rates best (:mod:`~quantscope.core.formats.float32_pick`: the search rates
    scales by the unrounded reconstruction, the report rounds it to float32), the min/max
    scale and the search's two float32 neighbours, each evaluated by the engine's report: the
    least error (the search's own scale unless another is strictly better).

    A neighbour is evaluated only where the scan of the piece left it out (the steps next to
    a breakpoint, where the report's quotient may round across a midpoint): elsewhere the scan
    rated it, or proved it no better, by the report's own arithmetic, against the scale it
    picked. A candidate equal to one before it is not evaluated again (of equal errors the
    first is kept). On a floating-point grid, neither is the search's scale where the scan
    rated it above its pick by more than the two arithmetics' rounding, nor the min/max
    scale where the search's error there (``mm_err``, its sums through at most ``mm_depth``
    additions; inf where it took none) proves the report's above the pick's
    (:mod:`~quantscope.core.stats.pick_bounds`): neither can be strictly better, so the pick
    is the one all five would give. What is left goes to the engine in one pass.
    ``long_rows``: :func:`_long_rows` of ``rows``, where the search has them."""
    lo32 = np.float32(_TINY32)
    best, cover, rated = _float32_best(rows, name, s, s_floor, long_rows)
    below = np.maximum(np.nextafter(s, np.float32(0)), lo32)
    above = np.nextafter(s, np.float32(np.inf))
    scale = np.stack([s, best, s_mm, below, above])
    need = scale.astype(np.float64) >= s_floor
    for k in range(1, 5):
        need[k] &= (scale[:k] != scale[k]).all(axis=0)
    for k, c in ((3, below), (4, above)):
        need[k] &= ~((cover[:, 0] <= c) & (c <= cover[:, 1]))
    et = element_of(name)
    if et.kind == KIND_FLOAT and et.mbits >= 1:
        sig, n = rows.sumsq, rows.lengths
        q_sub = float(et.values[et.values > 0].min())
        runs = 2 * et.values.size + 8  # at most, on one scale: each value's and each gap's
        top = rated_span(rated[:, 0], runs, sig, n, best, q_sub)[1]  # the report's at best
        low_s = rated_span(rated[:, 1], runs, sig, n, s, q_sub)[0]
        need[0] &= ~((best != s) & (low_s > top))
        if mm_err is not None and mm_depth is not None:
            need[2] &= ~(report_floor(mm_err, mm_depth, sig, n, s_mm, q_sub) > top)
    k_at, row_at = np.nonzero(need)
    err = np.full(scale.shape, np.inf)
    err[k_at, row_at] = exact_errors(rows, name, saturate, scale[k_at, row_at], which=row_at)
    pick = np.argmin(np.where(np.isfinite(err), err, np.inf), axis=0)
    idx = np.arange(s.size)
    pick = np.where(err[pick, idx] < err[0], pick, 0)
    return scale[pick, idx].astype(np.float32), err[pick, idx]


def _float32_best(rows: SortedRows, name: str, s: np.ndarray, s_floor: np.ndarray,
                  long_rows: tuple | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the float32 scale of the piece around ``s`` with the least error by the
    report's arithmetic, the float32 scales around ``s`` its scan rated or proved no
    better (from column 0 to column 1; none for a grid that is no floating-point one), and
    the errors it rated that scale and ``s`` (inf where it did not), on the engine's
    threads. ``long_rows``: :func:`_long_rows` of ``rows``, where the caller has them."""
    # the loop loads Numba: imported where a search needs it
    from quantscope.core.formats.float32_pick import mantissa_table, refine_rows

    et = element_of(name)
    out = s.astype(np.float32).copy()
    cover = np.empty((rows.n_rows, 2))
    cover[:, 0], cover[:, 1] = np.inf, -np.inf
    rated = np.full((rows.n_rows, 2), np.inf)
    if et.kind != KIND_FLOAT or rows.n_rows == 0:
        return out, cover, rated
    search = rows.lengths >= SEARCH_ROWS
    rec, rec_starts, smp, smp_starts = long_rows or _long_rows(rows, search)
    vals = np.ascontiguousarray(et.values, np.float64)
    mids = np.ascontiguousarray(et.midpoints, np.float64)
    fmt = grid_format(et)
    code_m, code_w, mant = mantissa_table(vals)
    row = np.flatnonzero(rows.lengths > 0)
    s32 = np.ascontiguousarray(s, np.float32)
    floor = np.ascontiguousarray(s_floor, np.float64)

    def share(sel: np.ndarray) -> None:
        part = np.empty(sel.size, np.float32)
        part_cover = np.empty((sel.size, 2))
        part_rated = np.empty((sel.size, 2))
        r = row[sel]
        refine_rows(rows.values, rows.starts, rec, rec_starts, smp, smp_starts, search[r], r,
                    s32[r], floor[r], vals, mids, fmt, code_m, code_w, mant, part, part_cover,
                    part_rated)
        out[r] = part
        cover[r] = part_cover
        rated[r] = part_rated

    n_shares = min(row.size, 4 * THREADS)
    if n_shares:
        parallel(share, [(np.arange(i, row.size, n_shares),) for i in range(n_shares)])
    return out, cover, rated
