"""The MSE-optimal scale and zero point of every unit: the global minimum of the exact error.

``method="mse"`` asks for the float32 scale and the zero point with the least total squared
error (rounding plus clipping). The error is a rippled function of the scale with one basin
per way of treating a tensor's outliers, and a search that samples it and refines around its
best samples can settle in the wrong basin or in a ripple beside the lowest one (0.083 dB short
on one MiniLM activation). Here the minimum is found by branch and bound over boxes of scales
with a valid lower bound of the error on each box for every zero point
(:mod:`quantscope.core.kernels.mse_bound`): no box is dropped unless it provably holds nothing
better, so the result is within :data:`EPS` (relative) of the least error of every float32
scale of the range and every zero point -- by construction, on every tensor, not only on those
a test checked. The search space is every float32 scale in ``[F_MIN · s0, S_MAX · s0]``
(``s0`` the min/max scale: below, the window is a ten-thousandth of the data's range; above,
a grid twice as coarse as one already covering the data) and, for affine schemes, every zero
point of the code range; symmetric schemes keep theirs (0, or the middle code for unsigned
codes).

The winner of each unit and its two float32 neighbours are ranked by the engine's own rule and
arithmetic (the search rounds in float64, half to even, and dequantizes in float64; the engine
may divide in float32 or multiply by a reciprocal, round half away, and dequantizes in
float32): where the search's runs prove the engine's ranking
(:mod:`quantscope.core.kernels.neighbour_pick`) it is taken as proven, elsewhere all three
are evaluated; the reported error is the exact report's, evaluated when first asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quantscope.core.kernels import compiled
from quantscope.core.kernels.parallel import (
    THREADS,
    collector_paused,
    parallel,
    share_niceness,
    submit,
    thread_niceness,
)
from quantscope.core.stats.sorted_stats import WALK_PER_LEVEL, SortedRows, evaluate

#: Relative slack of the search: a box is dropped when its lower bound is within this of the
#: best error found, so the result is within it of the optimum (4.3e-7 dB).
EPS = 1e-7
#: Absolute slack, as a share of the unit's Σx²: the float64 roundoff of the bounds' sums
#: (a unit quantized to within this has an SQNR above 130 dB).
FLOOR = 1e-13
#: Smallest and largest scale searched, as multiples of the min/max scale.
F_MIN = 1e-4
S_MAX = 2.0
#: Scales evaluated before the boxes, as multiples of the min/max scale (with it and the
#: ends of the range, or the cuts that rule out the scales beyond them:
#: :mod:`quantscope.core.kernels.scale_cuts`): the first boxes lie between them. Dense where
#: the optimum of a tensor's unit usually lies (a little below the min/max scale), sparse
#: towards the range's ends, whose boxes a clipping or rounding error far above the optimum
#: drops at once (every scale evaluated and every first box costs a walk of the unit: a group
#: of 128 took 31 µs with eight of them, 25 µs with five, on the bench's weight).
GRID = np.array([0.1, 0.5, 0.7, 0.85, 1.2])
#: A box of a walked row with at most this many crossings is settled by sweeping its
#: breakpoints (:mod:`quantscope.core.kernels.mse_sweep`) instead of split further. A sweep
#: passes most of its crossings by buckets, so splitting a box only pays when the halves'
#: bounds drop whole boxes of more crossings than this: on the bench's 4096x4096 weight at 8
#: bits (channels of 4096), 4096 took 1.49 s / 1.17 s of CPU (asymmetric / symmetric), 16384
#: 1.41 s / 1.05 s with the same results (groups of 128 never reach either).
SWEEP_CROSSINGS = 16384
#: Boxes opened per unit before the search gives up its proof (never reached on the bundled
#: tensors or the tests' constructed ones; the result is then the best found).
MAX_BOXES = 200_000
#: Rows at least this long find their runs by binary search on prefix sums instead of a walk.
SEARCH_ROWS = 1 << 15
#: Evaluation cells (units x code boundaries) per batch of exact reports: ~100 MB.
EVAL_CELLS = 1 << 21
#: The column of the search's output holding the engine's pick (``mse_bound.OUT_PICK``; a
#: test holds the two equal: importing the loop's module here would import Numba).
OUT_PICK = 5
_TINY32 = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True, eq=False)
class MseOptimum:
    """Per unit: the float32 ``scale``, the ``zero_point``, whether the search settled every
    box (``proven``), how many boxes it opened, and (:attr:`error`) the exact total squared
    error, the engine's report."""

    scale: np.ndarray
    zero_point: np.ndarray
    proven: np.ndarray
    boxes: np.ndarray
    #: The errors the pick evaluated (NaN where it proved its choice without them), the rows
    #: and the engine's rule that give the others.
    known: np.ndarray = field(repr=False)
    rows: SortedRows = field(repr=False)
    rule: tuple = field(repr=False)

    @property
    def error(self) -> np.ndarray:
        """The exact total squared error of each unit (the engine's report), evaluated on
        first use where the pick did not need it: the window asks for the scale alone."""
        todo = np.flatnonzero(np.isnan(self.known))
        if todo.size:
            self.known[todo] = errors(self.rows, todo, self.scale[todo],
                                      self.zero_point[todo], self.rule)
        return self.known


def unit_ranges(rows: SortedRows, symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """The min/max window of each row (widened to include 0; symmetric about 0 if asked)."""
    n = rows.lengths
    if rows.values.size == 0:
        return np.zeros(rows.n_rows), np.zeros(rows.n_rows)
    first = rows.values[np.minimum(rows.starts[:-1], rows.values.size - 1)].astype(np.float64)
    last = rows.values[np.maximum(rows.starts[1:] - 1, 0)].astype(np.float64)
    lo = np.where(n > 0, np.minimum(first, 0.0), 0.0)
    hi = np.where(n > 0, np.maximum(last, 0.0), 0.0)
    if symmetric:
        amax = np.maximum(-lo, hi)
        return -amax, amax
    return lo, hi


def symmetric_zero_point(qmin: int, qmax: int) -> int:
    """The zero point of a symmetric scheme: 0 for signed codes, the middle one for unsigned."""
    return 0 if qmin < 0 else (qmin + qmax + 1) // 2


def minmax_scales(rows: SortedRows, qmin: int, qmax: int, symmetric: bool) -> np.ndarray:
    """Each row's min/max scale (1 where it would be below the smallest searched scale's
    float32 reach: an all-zero row, whose error is 0 at any scale)."""
    lo, hi = unit_ranges(rows, symmetric)
    if symmetric:
        z = symmetric_zero_point(qmin, qmax)
        s0 = np.maximum(-lo, hi) / max(qmax - z, z - qmin)
    else:
        s0 = (hi - lo) / (qmax - qmin)
    return np.where(s0 >= _TINY32 / F_MIN, s0, 1.0)


def mse_search(rows: SortedRows, *, qmin: int, qmax: int, symmetric: bool,
               rounding: str = "half_even", arithmetic: str = "divide",
               eps: float = EPS) -> MseOptimum:
    """The MSE-optimal float32 scale and zero point of every row of ``rows`` for codes
    ``[qmin, qmax]`` (module doc), each row's search on the engine's threads."""
    n_rows = rows.n_rows
    s0 = minmax_scales(rows, qmin, qmax, symmetric)
    s_lo = np.maximum(F_MIN * s0, _TINY32)
    s_hi = S_MAX * s0
    s_mm = s0.astype(np.float32).astype(np.float64)
    z_fixed = symmetric_zero_point(qmin, qmax) if symmetric else qmin - 1
    search = rows.lengths >= SEARCH_ROWS
    if search.any():
        rec, rec_starts = rows.records, rows.rec_starts
    else:
        rec, rec_starts = np.zeros((1, 4)), np.zeros(n_rows + 1, np.intp)
    floor = FLOOR * rows.sumsq
    out = result_rows(n_rows)
    order = np.argsort(-rows.lengths, kind="stable")  # long rows first: shares even out

    def share(sel: np.ndarray) -> None:
        part = result_rows(sel.size)
        compiled.rows_optimum(rows.values, rows.starts, rec, rec_starts, search[sel], sel,
                              qmin, qmax, z_fixed, s_lo[sel], s_hi[sel], s_mm[sel], eps,
                              floor[sel], GRID, MAX_BOXES, SWEEP_CROSSINGS, part)
        out[sel] = part

    # many small shares, taken by whichever thread is free: a thread the machine holds back
    # (a busy neighbour) leaves a small tail, not a quarter of the search, to the other
    n_shares = min(n_rows, 16 * THREADS)
    if n_shares == 1 and share_niceness() < thread_niceness():
        # one row (a per-tensor pane's search, tens of ms): on the pool of the caller's share
        # priority, not inline on a niced job thread, which two busy pool threads starve
        # (the pool's threads never collect: see quantscope.core.kernels.parallel)
        with collector_paused():
            submit(share, order).result()
    else:
        # contiguous shares: the one layout of the row index the loop is compiled for
        parallel(share, [(np.ascontiguousarray(order[i::n_shares]),) for i in range(n_shares)])
    rule = (qmin, qmax, rounding, arithmetic)
    scale, zp, known = _engine_pick(rows, out[:, 1], out[:, 2].astype(np.int64),
                                    out[:, OUT_PICK], rule)
    return MseOptimum(scale, zp, out[:, 3] > 0, out[:, 4].astype(np.int64), known, rows, rule)


def result_rows(n: int) -> np.ndarray:
    """The search's output for ``n`` units (``mse_bound.OUT_*`` columns), the pick NaN:
    unproven until a walked row's search proves it (a searched row's stays so)."""
    out = np.zeros((n, OUT_PICK + 1))
    out[:, OUT_PICK] = np.nan
    return out


def _engine_pick(rows: SortedRows, s: np.ndarray, z: np.ndarray, proven_pick: np.ndarray,
                 rule: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The search's float32 scale and its two float32 neighbours, each under the engine's
    rule: the one with the least exact error (the search's own unless a neighbour is strictly
    less), its zero point and that error (the report's; NaN where not evaluated).

    The neighbours differ where an element sits on a rounding tie of the search's scale and
    by the rounding of the engine's float32 dequantized values. Where the search proved which
    the engine ranks least (``proven_pick``: -1, 0 or 1, NaN if not proven; see
    :mod:`quantscope.core.kernels.neighbour_pick`), on rows the engine walks, that one is
    taken without evaluating; the others are evaluated, all three."""
    qmin, qmax = rule[0], rule[1]
    s32 = np.maximum(s.astype(np.float32), np.float32(_TINY32))
    cand = np.stack([np.nextafter(s32, np.float32(0)), s32,
                     np.nextafter(s32, np.float32(np.inf))], axis=1)
    cand = np.maximum(cand, np.float32(_TINY32))
    n = rows.n_rows
    walked = rows.lengths < WALK_PER_LEVEL * (qmax - qmin + 2)  # as evaluate walks them
    known = walked & np.isfinite(proven_pick)
    pick = np.ones(n, np.intp)
    pick[known] = proven_pick[known].astype(np.intp) + 1
    error = np.full(n, np.nan)
    left = np.flatnonzero(~known)
    if left.size:
        err = errors(rows, np.repeat(left, 3), cand[left].ravel(),
                     np.repeat(z[left], 3).astype(np.int32), rule).reshape(-1, 3)
        least = np.argmin(np.where(np.isfinite(err), err, np.inf), axis=1)
        at = np.arange(left.size)
        # the search's own scale unless a neighbour is strictly better
        least = np.where(err[at, least] < err[:, 1], least, 1)
        pick[left] = least
        error[left] = err[at, least]
    return cand[np.arange(n), pick], z.astype(np.int32), error


def errors(rows: SortedRows, row: np.ndarray, scale: np.ndarray, zp: np.ndarray,
           rule: tuple) -> np.ndarray:
    """Exact total squared error of each evaluation (row ``row[e]`` at ``scale[e]``,
    ``zp[e]``), in batches of about :data:`EVAL_CELLS`."""
    total = np.empty(row.size)
    step = max(1, EVAL_CELLS // (rule[1] - rule[0] + 4))
    for a in range(0, row.size, step):
        b = min(a + step, row.size)
        st = evaluate(rows, row[a:b], scale[a:b], zp[a:b], rule, want_counts=False,
                      redo_loose=False)
        total[a:b] = st.round_err + st.clip_err
    return total


def mse_optimal_params(rows: SortedRows, *, qmin: int, qmax: int, symmetric: bool,
                       rounding: str = "half_even", arithmetic: str = "divide"
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the MSE-optimal float32 scale, zero point and their exact total squared
    error (:func:`mse_search`)."""
    found = mse_search(rows, qmin=qmin, qmax=qmax, symmetric=symmetric, rounding=rounding,
                       arithmetic=arithmetic)
    return found.scale, found.zero_point, found.error
