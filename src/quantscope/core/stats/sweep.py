"""The rounding-versus-clipping trade-off, and the exact MSE-optimal clip, from prepared data.

A clip window fixes the scale (and zero point). Narrow it and rounding error falls (finer
steps) while clipping error rises (more values beyond the window); :func:`clip_sweep_curve`
evaluates that exactly along a line of windows -- the one sweep, used by the library's
``quantscope.clip_sweep`` and by the window's Trade-off tab alike -- and
:func:`mse_optimal_params` finds the scale and zero point with the smallest total error over
the whole (scale, zero point) space, by exact evaluations (each one ``levels + 1`` binary
searches on the sorted data, or a walk of a short row, see
:mod:`quantscope.core.stats.sorted_stats`).

The x-axis of a sweep is the *clip threshold* ``t`` in ``(0, max|x|]``: the values with
``|x| > t`` are clipped, on whichever side they lie, and nothing else moves
(:func:`window_for_threshold`). A symmetric scheme's window is then ``[-t, t]``; an asymmetric
one keeps its real minimum (or maximum) until ``t`` reaches it. Both schemes thus share one
axis, and a threshold means the same thing in either plot and as the panes' manual clip.
``t = max|x|`` is the min/max choice (nothing clipped).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quantscope.core.kernels import compiled
from quantscope.core.schemes.qparams import QuantParams, code_range, params_from_range
from quantscope.core.stats.report import QuantReport, sqnr_db
from quantscope.core.stats.sorted_stats import SortedRows, evaluate
from quantscope.core.tensors.validate import (
    MAX_SWEEP_POINTS,
    ROUNDING_RULES,
    EngineValueError,
    check_choice,
    check_points,
)
from quantscope.errors import Cancelled

#: MSE-optimal search: coarse log grid of scales, local minima kept, then refinement rounds.
SEARCH_TENSOR = (160, 3, 17, 17, 17, 17)
SEARCH_UNITS = (32, 2, 9, 9, 9, 9)
#: Evaluation cells (windows x code boundaries) per batch in searches: ~100 MB of temporaries.
EVAL_CELLS = 1 << 21
#: Smallest and largest scale the MSE search tries, as multiples of the min/max scale.
F_MIN = 1e-4
S_MAX = 2.0
#: The exact sweep (:mod:`quantscope.core.kernels.scale_sweep`) after the search: around each
#: refined minimum, scales within this relative half-width and zero points within this many
#: codes of the minimum's (plus a share of the code range proportional to the width)...
POLISH_SPAN = 0.04
POLISH_ZERO_POINTS = 3
#: ...or the whole range of scales and zero points where a unit's sweep would visit at most
#: this many (breakpoint, zero point) pairs: then the minimum is the global one by
#: construction, not only the best of the search's basins.
POLISH_WHOLE = 3e7
#: At most this many (breakpoint, zero point) pairs for one search's sweeps together (a
#: fraction of a second): beyond, the windows of the largest units are left out -- with
#: hundreds of values per code the error's ripples between breakpoints are far below the
#: 10^-3 dB the search is held to, and the grid's refinement reaches its minimum.
POLISH_TOTAL = 1e8
_TINY32 = float(np.finfo(np.float32).tiny)

#: Mantissas of the ticks a log axis labels when its values span less than two decades.
TICK_MANTISSAS = (1, 2, 5)
#: log10 rounding slack when comparing a tick with the values' range (a value of exactly
#: 0.001 keeps its tick).
TICK_SLACK = 1e-9


def window_for_threshold(t: float, x_min: float, x_max: float) -> tuple[float, float]:
    """The manual clip window that a clip threshold ``t`` stands for: values with
    ``|x| > t`` are clipped, on whichever side they lie, and nothing else moves.

    That is ``[max(min(x_min, 0), -t), min(max(x_max, 0), t)]`` (the engine's range always
    holds 0): a symmetric pane clips at ``t`` as before, and an asymmetric pane keeps its real
    minimum until ``t`` reaches it. (Scaling both ends by ``t / max|x|`` instead cut into a
    skewed tensor's short side: 44% of the GELU demo's values clipped below at ``t = 9``.)
    """
    t = abs(float(t))
    lo = max(min(float(x_min), 0.0), -t)
    hi = min(max(float(x_max), 0.0), t)
    if not lo < hi:  # an all-zero tensor, or t == 0
        return -t, t
    return lo, hi


@dataclass(frozen=True, eq=False)
class ClipSweep:
    """Exact error split against the clip threshold for one scheme (see
    :func:`clip_sweep_curve` and the module docstring for the x-axis).

    All arrays have one entry per threshold, ascending: ``lower``/``upper`` the manual clip
    window it stands for (:func:`window_for_threshold`; a symmetric scheme's own window is
    ``[-t, t]``), ``scale``/``zero_point`` what the range rules make of it, then the exact
    rounding, clipping and total MSE, SQNR and the clipped share of the finite elements.

    ``best`` indexes the threshold with the least total MSE on the curve. ``optimum``, when
    given, is the MSE-optimal scale and zero point (``method="mse"``, the optimum over the
    whole (scale, zero point) space) and ``optimum_report`` its report: the ``best_*``
    properties then describe it, so "best" is the same optimum the panes show for
    ``method="mse"``. An asymmetric optimum need not lie on the curve (the curve moves both
    window ends together, the optimum places them freely): it is drawn at the larger of its
    window ends, with its own MSE, at or below the curve.
    """

    symmetric: bool
    thresholds: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    rounding_mse: np.ndarray
    clipping_mse: np.ndarray
    mse: np.ndarray
    sqnr_db: np.ndarray
    clipped_fraction: np.ndarray
    best: int
    x_min: float
    x_max: float
    optimum: QuantParams | None = None
    optimum_report: QuantReport | None = None

    @property
    def fraction(self) -> np.ndarray:
        """The thresholds as fractions of ``max|x|`` (1 is the min/max choice)."""
        amax = max(abs(self.x_min), abs(self.x_max))
        return self.thresholds / amax if amax > 0 else np.ones_like(self.thresholds)

    @property
    def best_threshold(self) -> float:
        if self.optimum is None:
            return float(self.thresholds[self.best])
        p = self.optimum
        s, z = float(p.scale), int(p.zero_point)
        if p.symmetric:  # the threshold whose window the range rules turn into this scale
            return s * ((1 << (p.bits - 1)) - 1)
        return max(abs(s * (p.qmin - z)), abs(s * (p.qmax - z)))

    @property
    def best_window(self) -> tuple[float, float]:
        """The manual clip window of the best threshold (see :attr:`best_threshold`)."""
        return self.window(self.best_threshold)

    @property
    def best_mse(self) -> float:
        """Total MSE at the best point (the optimum's when known)."""
        if self.optimum_report is None:
            return float(self.mse[self.best])
        return float(self.optimum_report.mse)

    @property
    def best_sqnr_db(self) -> float:
        if self.optimum_report is None:
            return float(self.sqnr_db[self.best])
        return float(self.optimum_report.sqnr_db)

    def mse_ticks(self) -> list[float]:
        """Where a log MSE axis labels its ticks, as powers of ten (log10 of the MSE): the
        decades inside the range of the positive MSE values, or, when fewer than two decades
        fall inside it, the 1-2-5 steps inside it. None lies outside the values' range: a
        label there sat in the lane kept empty above the curves, or in the padding below
        them, where no curve reaches."""
        values = np.concatenate([self.rounding_mse, self.clipping_mse, self.mse])
        values = values[np.isfinite(values) & (values > 0)]
        if values.size == 0:
            return []
        lo, hi = np.log10(values.min()), np.log10(values.max())
        decades = [float(d) for d in range(int(np.ceil(lo - TICK_SLACK)),
                                            int(np.floor(hi + TICK_SLACK)) + 1)]
        if len(decades) >= 2:
            return decades
        steps = [d + float(np.log10(m)) for d in range(int(np.floor(lo)), int(np.ceil(hi)) + 1)
                 for m in TICK_MANTISSAS]
        inside = [s for s in steps if lo - TICK_SLACK <= s <= hi + TICK_SLACK]
        return inside if len(inside) >= 2 else [float(lo), float(hi)]

    def window(self, t: float) -> tuple[float, float]:
        """The manual clip window for threshold ``t`` (see :func:`window_for_threshold`)."""
        return window_for_threshold(t, self.x_min, self.x_max)

    def to_dict(self) -> dict:
        return {"symmetric": self.symmetric, "threshold": self.thresholds.tolist(),
                "rounding_mse": self.rounding_mse.tolist(),
                "clipping_mse": self.clipping_mse.tolist(), "mse": self.mse.tolist(),
                "sqnr_db": self.sqnr_db.tolist(), "best_threshold": self.best_threshold}


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


#: ``analyze_params(params) -> QuantReport``: the prepared path or the direct pass.
Analyze = Callable[[QuantParams], QuantReport]


def clip_sweep_curve(
    analyze_params: Analyze | None = None,
    *,
    rows: SortedRows | None = None,
    x_min: float,
    x_max: float,
    symmetric: bool,
    bits: int = 8,
    narrow_range: bool | None = None,
    signed: bool = True,
    rounding: str = "half_even",
    arithmetic: str = "divide",
    points: int = 200,
    thresholds=None,
    refine: int = 24,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[float], None] | None = None,
    optimum: QuantParams | None = None,
) -> ClipSweep:
    """Exact rounding / clipping / total MSE and SQNR of one scheme along the clip threshold.

    The thresholds, and why they are these:

    * ``points`` thresholds evenly over ``(0, max|x|]``, ``t_k = max|x| · k / points``: the
      last is the min/max choice, so the curve always shows what min/max costs; ``t = 0``
      (scale 0) is left out; even in ``t`` because a tensor's features (the edge of its bulk,
      its outliers) sit at values, and the plot's axis is the value. ``thresholds`` (each in
      ``[0, max|x|]``) replaces that grid.
    * each threshold becomes the manual clip window of :func:`window_for_threshold` (values with
      ``|x| > t`` clip, nothing else moves), then the engine's range rules
      (:func:`~quantscope.core.schemes.qparams.params_from_range`, ``method="manual"``): every
      point is
      exactly what the panes show for that manual clip.
    * ``refine`` more thresholds evenly inside the two grid steps around the grid's best
      narrow the optimum to ``2 · step / (refine + 1)`` (24: about a twelfth of a step), where
      the curve bends most; the whole grid is computed first, so "best" is the best of all.

    The points are evaluated either one by one through ``analyze_params`` (the prepared path or
    the direct pass: exactly the panes' numbers; ``should_stop()`` is polled between points --
    raise :class:`~quantscope.errors.Cancelled` when true -- and ``progress(fraction)`` told how
    far the sweep is), or, given the tensor's sorted ``rows`` instead (per tensor,
    ``Prepared.layout(None, None)``), all at once in one batched exact evaluation: the same
    statistics per window without a report each. ``optimum`` (``choose_qparams(...,
    method="mse")`` under the same rules, evaluated through ``analyze_params``) becomes the
    sweep's "best" (see :class:`ClipSweep`).
    """
    if (analyze_params is None) == (rows is None):
        raise EngineValueError("a sweep evaluates through analyze_params or rows: give one")
    if optimum is not None and analyze_params is None:
        raise EngineValueError("an optimum is evaluated through analyze_params")
    check_choice(rounding, ROUNDING_RULES, "rounding")
    amax = max(abs(float(x_min)), abs(float(x_max)))
    if thresholds is None:
        points = check_points(points)
        ts = amax * np.arange(1, points + 1) / points if amax > 0 else np.zeros(1)
    else:
        if refine:
            raise EngineValueError("refine applies to the even grid of points, not to "
                                   "explicit thresholds")
        ts = np.sort(np.asarray(thresholds, np.float64).ravel())
        if ts.size > MAX_SWEEP_POINTS:
            raise EngineValueError(f"thresholds holds {ts.size} points; at most "
                                   f"{MAX_SWEEP_POINTS}")
        if ts.size == 0 or not np.isfinite(ts).all() or (ts < 0).any() or (ts > amax).any():
            raise EngineValueError(f"thresholds must lie in [0, max|x|] = [0, {amax}]")
        points = ts.size
    total = points + refine

    def params_at(lower, upper) -> QuantParams:
        """The range rules' parameters for windows ``[lower, upper]`` (scalars or arrays)."""
        return params_from_range(lower, upper, symmetric=symmetric, bits=bits,
                                 narrow_range=narrow_range, signed=signed, rounding=rounding,
                                 arithmetic=arithmetic, method="manual")

    def windows(ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ends = [window_for_threshold(float(t), x_min, x_max) for t in ts]
        return (np.array([e[0] for e in ends], np.float64),
                np.array([e[1] for e in ends], np.float64))

    def measure(ts: np.ndarray, done: int = 0) -> dict[str, np.ndarray]:
        lower, upper = windows(ts)
        if rows is not None:
            if should_stop is not None and should_stop():
                raise Cancelled
            if progress is not None:
                progress(done / total)
            return _measure_rows(rows, lower, upper, params_at(lower, upper))
        assert analyze_params is not None  # checked above: one way to evaluate is given
        reports = []
        for i, (lo, hi) in enumerate(zip(lower, upper, strict=True)):
            if should_stop is not None and should_stop():
                raise Cancelled
            if progress is not None and i % 8 == 0:
                progress((done + i) / total)
            reports.append(analyze_params(params_at(lo, hi)))
        return _columns(reports, lower, upper)

    cols = measure(ts)
    if refine and amax > 0:
        i = int(np.argmin(cols["mse"]))
        step = amax / points
        fine = ts[i] + step * np.linspace(-1, 1, refine + 2)[1:-1]
        fine = fine[(fine > 0) & (fine <= amax)]
        more = measure(fine, ts.size)
        ts = np.concatenate([ts, fine])
        order = np.argsort(ts, kind="stable")
        ts = ts[order]
        cols = {k: np.concatenate([v, more[k]])[order] for k, v in cols.items()}
    return ClipSweep(
        symmetric=symmetric, thresholds=ts.astype(np.float64), **cols,
        best=int(np.argmin(cols["mse"])), x_min=float(x_min), x_max=float(x_max),
        optimum=optimum,
        optimum_report=(None if optimum is None or analyze_params is None
                        else analyze_params(optimum)),
    )


def _columns(reports: list[QuantReport], lower: np.ndarray, upper: np.ndarray
             ) -> dict[str, np.ndarray]:
    """The sweep's per-point arrays from one report per window."""
    return {
        "lower": lower, "upper": upper,
        "scale": np.array([float(r.params.scale) for r in reports], np.float32),
        "zero_point": np.array([int(r.params.zero_point) for r in reports], np.int32),
        "rounding_mse": np.array([r.rounding_mse for r in reports], np.float64),
        "clipping_mse": np.array([r.clipping_mse for r in reports], np.float64),
        "mse": np.array([r.mse for r in reports], np.float64),
        "sqnr_db": np.array([r.sqnr_db for r in reports], np.float64),
        "clipped_fraction": np.array([r.clipped_fraction for r in reports], np.float64),
    }


def _measure_rows(rows: SortedRows, lower: np.ndarray, upper: np.ndarray, p: QuantParams
                  ) -> dict[str, np.ndarray]:
    """The same per-point arrays as :func:`_columns`, for every window in one batched exact
    evaluation of the per-tensor sorted ``rows`` (the sums a report's would be, per window);
    ``p`` holds one scale and zero point per window."""
    scale, zp = p.scale, p.zero_point
    rule = (p.qmin, p.qmax, p.rounding, p.arithmetic)
    st = evaluate(rows, np.zeros(lower.size, np.intp), scale, zp, rule, want_counts=False)
    n = int(rows.lengths[0])
    denom = max(n, 1)
    err = st.round_err + st.clip_err
    return {
        "lower": lower, "upper": upper, "scale": np.asarray(scale, np.float32),
        "zero_point": np.asarray(zp, np.int32), "rounding_mse": st.round_err / denom,
        "clipping_mse": st.clip_err / denom, "mse": err / denom,
        "sqnr_db": (np.asarray(sqnr_db(st.sig, err), np.float64) if n
                    else np.full(lower.size, np.nan)),
        "clipped_fraction": (st.below + st.above) / denom,
    }


def _best_zero_points(rows: SortedRows, row: np.ndarray, scale: np.ndarray, lo: np.ndarray,
                      hi: np.ndarray, rule: tuple, hint: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """For each evaluation (row ``row[e]``, float32 ``scale[e]``): the zero point with the least
    exact total squared error, and that error.

    With the scale fixed the grid ``s·j`` is fixed (0 is on it) and the zero point only slides
    the window of ``levels`` grid points along it: elements inside keep their code and error,
    so each element's error is a convex function of the zero point (flat while it is inside,
    its distance to the window's end squared beyond). Their sum is convex too, so a binary
    search on the sign of ``E(z + 1) − E(z)`` finds the minimum, searching only the zero points
    whose window ends lie within a step of the data (a window reaching further past an end is
    never better than the one shifted back). With ``hint`` (a nearby scale's best zero point)
    ``E`` is taken at ``hint`` and its two neighbours first: where the middle is the least,
    convexity makes it the minimum; elsewhere the whole range is searched. Every ``E`` is an
    exact evaluation."""
    qmin, qmax = rule[0], rule[1]
    s = scale.astype(np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        z_lo = np.floor(qmax - 1 - hi[row] / s) + 1
        z_hi = np.ceil(qmin + 1 - lo[row] / s) - 1
    z_lo = np.clip(np.nan_to_num(z_lo, nan=qmin), qmin, qmax).astype(np.int64)
    z_hi = np.clip(np.nan_to_num(z_hi, nan=qmax), qmin, qmax).astype(np.int64)
    z_hi = np.maximum(z_hi, z_lo)
    if hint is not None:  # E at hint - 1, hint, hint + 1: a middle minimum is the minimum
        z = np.clip(hint.astype(np.int64), z_lo, z_hi)
        trio = np.clip(z[:, None] + np.arange(-1, 2), z_lo[:, None], z_hi[:, None])
        e3 = _errors(rows, np.repeat(row, 3), np.repeat(scale, 3), trio.ravel(),
                     rule).reshape(-1, 3)
        err = e3[:, 1].copy()
        far = np.flatnonzero((e3[:, 1] > e3[:, 0]) | (e3[:, 1] > e3[:, 2]))
        if far.size:
            z[far] = _zero_point_search(rows, row[far], scale[far], z_lo[far], z_hi[far],
                                        rule)
            err[far] = _errors(rows, row[far], scale[far], z[far], rule)
        return z.astype(np.int32), err
    z_lo = _zero_point_search(rows, row, scale, z_lo, z_hi, rule)
    return z_lo.astype(np.int32), _errors(rows, row, scale, z_lo, rule)


def _zero_point_search(rows, row, scale, z_lo, z_hi, rule) -> np.ndarray:
    """Binary search of the least error's zero point in ``[z_lo, z_hi]`` (convex in it)."""
    while True:
        active = np.flatnonzero(z_lo < z_hi)
        if active.size == 0:
            break
        mid = (z_lo[active] + z_hi[active]) // 2
        e2 = _errors(rows, np.repeat(row[active], 2), np.repeat(scale[active], 2),
                     np.stack([mid, mid + 1], axis=1).ravel(), rule).reshape(-1, 2)
        up = e2[:, 1] < e2[:, 0]
        z_lo[active] = np.where(up, mid + 1, z_lo[active])
        z_hi[active] = np.where(up, z_hi[active], mid)
    return z_lo


def _errors(rows: SortedRows, row: np.ndarray, scale: np.ndarray, zp: np.ndarray,
            rule: tuple) -> np.ndarray:
    """Exact total squared error of each evaluation, in batches of about :data:`EVAL_CELLS`."""
    total = np.empty(row.size)
    step = max(1, EVAL_CELLS // (rule[1] - rule[0] + 4))
    for a in range(0, row.size, step):
        b = min(a + step, row.size)
        st = evaluate(rows, row[a:b], scale[a:b], zp[a:b], rule, want_counts=False,
                      redo_loose=False)
        total[a:b] = st.round_err + st.clip_err
    return total


def mse_optimal_params(rows: SortedRows, *, qmin: int, qmax: int, symmetric: bool,
                       rounding: str = "half_even", arithmetic: str = "divide",
                       grid: tuple[int, ...] | None = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the float32 scale and zero point with the least exact total squared error
    (rounding plus clipping) for codes ``[qmin, qmax]``, and that error.

    The search space is every float32 scale in ``[F_MIN · s0, S_MAX · s0]``, ``s0`` the
    min/max scale (a larger scale only coarsens a grid that already covers the data), and, for
    affine schemes, every zero point in ``[qmin, qmax]``; symmetric schemes keep the zero point
    at 0 (the middle code for unsigned codes). For each scale the best zero point is found
    exactly (:func:`_best_zero_points`, the error is convex in it); over the scale, a
    log-spaced grid, then rounds of refinement around each of the best few local minima of the
    grid (a tensor's error can have one basin that clips its outliers and one that keeps them).
    Every value compared is an exact evaluation of the prepared statistics, so the minimum is
    that of the true error, not of a histogram. The min/max scale is on the grid, so the
    result is never worse than min/max.
    """
    rule = (qmin, qmax, rounding, arithmetic)
    n_rows = rows.n_rows
    lo, hi = unit_ranges(rows, symmetric)
    if symmetric:
        z_sym = 0 if qmin < 0 else (qmin + qmax + 1) // 2
        s0 = np.maximum(-lo, hi) / max(qmax - z_sym, z_sym - qmin)
    else:
        s0 = (hi - lo) / (qmax - qmin)
    s0 = np.where(s0 >= _TINY32 / F_MIN, s0, 1.0)
    if grid is None:
        grid = SEARCH_TENSOR if n_rows == 1 else SEARCH_UNITS
    coarse, keep, *refine = grid

    def errors_at(row, factor, hint=None):
        scale = np.maximum(s0[row] * factor, _TINY32).astype(np.float32)
        if symmetric:
            zp = np.full(row.size, z_sym, np.int32)
            return scale, zp, _errors(rows, row, scale, zp, rule)
        zp, err = _best_zero_points(rows, row, scale, lo, hi, rule, hint)
        return scale, zp, err

    log_f = np.union1d(np.linspace(np.log(F_MIN), np.log(S_MAX), coarse), [0.0])
    coarse = log_f.size
    units = np.arange(n_rows)
    scale = np.empty((n_rows, coarse), np.float32)
    zp = np.empty((n_rows, coarse), np.int32)
    err = np.empty((n_rows, coarse))
    if n_rows == 1:  # one batch: a call per grid point would cost more than its work
        scale[0], zp[0], err[0] = errors_at(np.zeros(coarse, np.intp), np.exp(log_f))
    else:
        hint = None
        for j in range(coarse - 1, -1, -1):  # from wide to narrow: each scale hints the next
            scale[:, j], zp[:, j], err[:, j] = errors_at(
                units, np.full(n_rows, np.exp(log_f[j])), hint)
            hint = zp[:, j]
    best = np.argmin(err, axis=1)
    out_s = scale.reshape(n_rows, coarse)[np.arange(n_rows), best]
    out_z = zp.reshape(n_rows, coarse)[np.arange(n_rows), best]
    out_e = err[np.arange(n_rows), best]
    # the best few local minima of the grid, each refined on its own
    padded = np.pad(err, ((0, 0), (1, 1)), constant_values=np.inf)
    local = (err <= padded[:, :-2]) & (err <= padded[:, 2:])
    ranked = np.argsort(np.where(local, err, np.inf), axis=1, kind="stable")[:, :keep]
    centre = log_f[ranked].ravel()
    centre_z = zp.reshape(n_rows, coarse)[np.arange(n_rows)[:, None], ranked].ravel()
    row_k = np.repeat(np.arange(n_rows), ranked.shape[1])
    step = np.full(centre.size, (np.log(S_MAX) - np.log(F_MIN)) / (grid[0] - 1))
    for size in refine:
        offs = np.linspace(-1.0, 1.0, size)
        cand = np.minimum(centre[:, None] + offs[None, :] * step[:, None], np.log(S_MAX))
        r = np.repeat(row_k, size)
        sc, zc, ec = errors_at(r, np.exp(cand.ravel()), np.repeat(centre_z, size))
        ec = ec.reshape(-1, size)
        i = np.argmin(ec, axis=1)
        centre = cand[np.arange(centre.size), i]
        step = step * 2.0 / (size - 1)
        flat = np.arange(centre.size) * size + i
        centre_z = zc[flat]
        better = ec[np.arange(centre.size), i]
        for k in np.flatnonzero(better < out_e[row_k]):  # few: one per refined minimum
            u = row_k[k]
            if better[k] < out_e[u]:
                out_e[u], out_s[u], out_z[u] = better[k], sc[flat[k]], zc[flat[k]]
    if n_rows == 1:  # around each refined minimum
        _polish(rows, row_k, np.exp(centre), centre_z, s0, symmetric, rule, out_s, out_z,
                out_e)
    else:  # many units: around each one's best only (their sweeps add up)
        _polish(rows, units, out_s.astype(np.float64), out_z.astype(np.int64), s0, symmetric,
                rule, out_s, out_z, out_e)
    return out_s, out_z, out_e


def _polish(rows: SortedRows, row_k: np.ndarray, centre: np.ndarray, centre_z: np.ndarray,
            s0: np.ndarray, symmetric: bool, rule: tuple, out_s: np.ndarray,
            out_z: np.ndarray, out_e: np.ndarray) -> None:
    """Replace each unit's result by the exact least error of the scales around its refined
    minima (the whole range where that is affordable), found by the breakpoint sweep
    (:func:`quantscope.core.kernels.scale_sweep.window_minimum`): a log grid and its
    refinements sample a function that, at 8 bits and a few thousand values, ripples from one
    breakpoint to the next, and its best sample may sit in a ripple beside the lowest one.
    The sweep's scale is rounded to float32 (and its neighbours tried), each candidate's error
    evaluated exactly; a unit's result changes only where that is lower."""
    qmin, qmax = rule[0], rule[1]
    z_sym = 0 if qmin < 0 else (qmin + qmax + 1) // 2
    lengths = rows.lengths.astype(np.float64)
    levels = qmax - qmin + 1
    zcount = 1 if symmetric else levels
    whole_cost = lengths * levels * zcount
    whole = whole_cost <= POLISH_WHOLE
    whole &= np.cumsum(np.where(whole, whole_cost, 0.0)) <= POLISH_TOTAL / 2
    # windows: the whole range for the affordable units, else one per refined minimum
    w_row = np.concatenate([np.flatnonzero(whole), row_k[~whole[row_k]]])
    w_mid = np.concatenate([s0[whole], centre[~whole[row_k]]])
    span = np.concatenate([np.full(int(whole.sum()), np.nan),
                           np.full(int((~whole[row_k]).sum()), POLISH_SPAN)])
    w_z = np.concatenate([np.full(int(whole.sum()), z_sym), centre_z[~whole[row_k]]])
    s_lo = np.where(np.isnan(span), F_MIN * w_mid, w_mid / (1.0 + np.nan_to_num(span)))
    s_hi = np.where(np.isnan(span), S_MAX * w_mid, w_mid * (1.0 + np.nan_to_num(span)))
    s_lo = np.maximum(s_lo, _TINY32)
    if symmetric:
        z_lo = z_hi = np.full(w_row.size, z_sym, np.int64)
    else:
        reach = POLISH_ZERO_POINTS + int(np.ceil(POLISH_SPAN * levels))
        z_lo = np.where(np.isnan(span), qmin, np.clip(w_z - reach, qmin, qmax)).astype(np.int64)
        z_hi = np.where(np.isnan(span), qmax, np.clip(w_z + reach, qmin, qmax)).astype(np.int64)
    # the sweep's cost: each value crosses about (|x| / s) · (width / s) breakpoints
    rms = np.sqrt(rows.sumsq[w_row] / np.maximum(lengths[w_row], 1.0))
    width = np.where(np.isnan(span), levels, rms / w_mid * 2 * np.nan_to_num(span))
    cost = lengths[w_row] * (1.0 + np.minimum(width, levels) * (z_hi - z_lo + 1))
    keep = np.cumsum(cost) <= POLISH_TOTAL
    w_row, s_lo, s_hi, z_lo, z_hi = (w_row[keep], s_lo[keep], s_hi[keep], z_lo[keep],
                                     z_hi[keep])
    if w_row.size == 0:
        return
    err = np.empty(w_row.size)
    sc = np.empty(w_row.size)
    zp = np.empty(w_row.size, np.int64)
    compiled.rows_minimum(rows.values, rows.starts, w_row.astype(np.int64), s_lo, s_hi, z_lo, z_hi,
                 qmin, qmax, err, sc, zp)
    ok = np.isfinite(err)
    w_row, sc, zp = w_row[ok], sc[ok], zp[ok]
    s32 = sc.astype(np.float32)
    cand_s = np.stack([np.nextafter(s32, np.float32(0)), s32,
                       np.nextafter(s32, np.float32(np.inf))], axis=1).ravel()
    cand_s = np.maximum(cand_s, np.float32(_TINY32))
    cand_r = np.repeat(w_row, 3)
    cand_z = np.repeat(zp, 3).astype(np.int32)
    exact = _errors(rows, cand_r, cand_s, cand_z, rule)
    for k in np.flatnonzero(exact < out_e[cand_r]):  # few: the units the sweep improved
        u = cand_r[k]
        if exact[k] < out_e[u]:
            out_e[u], out_s[u], out_z[u] = exact[k], cand_s[k], cand_z[k]


def mse_optimal_windows(rows: SortedRows, *, symmetric: bool, bits: int = 8,
                        narrow_range: bool | None = None, signed: bool = True,
                        rounding: str = "half_even", arithmetic: str = "divide",
                        codes: tuple[int, int] | None = None, half_steps: float | None = None,
                        grid: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the window ``(lower, upper)`` of the MSE-optimal scale and zero point
    (:func:`mse_optimal_params`): ``[s·(qmin − z), s·(qmax − z)]``, or ``±s·half_steps`` when
    symmetric, so that the range rules (``params_from_range``, with ``half_steps`` its
    ``2^(bits-1) − 1``) give back exactly that scale and zero point. ``codes`` overrides the
    code range that ``bits``, ``narrow_range`` and ``signed`` give (runtime presets)."""
    if codes is None:
        codes = code_range(bits, symmetric=symmetric, narrow_range=narrow_range, signed=signed)
    qmin, qmax = codes
    scale, zp, _ = mse_optimal_params(rows, qmin=qmin, qmax=qmax, symmetric=symmetric,
                                      rounding=rounding, arithmetic=arithmetic, grid=grid)
    s = scale.astype(np.float64)
    if symmetric:
        half = (1 << (bits - 1)) - 1 if half_steps is None else half_steps
        return -s * half, s * half
    return s * (qmin - zp), s * (qmax - zp)
