"""The rounding-versus-clipping trade-off, and the exact MSE-optimal clip, from prepared data.

A clip window fixes the scale (and zero point). Narrow it and rounding error falls (finer
steps) while clipping error rises (more values beyond the window); :func:`clip_sweep_curve`
evaluates that exactly along a line of windows -- the one sweep, used by the library's
``quantscope.clip_sweep`` and by the window's Trade-off tab alike -- and
:func:`mse_optimal_windows` turns the scale and zero point with the smallest total error over
the whole (scale, zero point) space (:mod:`quantscope.core.stats.mse_search`, a branch and
bound that proves its minimum global) into the window the range rules take.

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

from quantscope.core.schemes.qparams import QuantParams, code_range, params_from_range
from quantscope.core.stats.mse_search import mse_search
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
    window ends, each capped at the data's end on its side (:attr:`best_threshold`), with its
    own MSE, at or below the curve.
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
        """Where "best" sits on the threshold axis: the largest ``|x|`` of the data that the
        optimum's window keeps. A window end reaching past the data on its side clips nothing
        there, so it counts as the data's own end (an affine optimum often places its grid
        past the minimum, and the marker then floated beyond the curve, where no threshold
        of the axis lies); the result is at most ``max|x|``, the min/max point."""
        if self.optimum is None:
            return float(self.thresholds[self.best])
        p = self.optimum
        s, z = float(p.scale), int(p.zero_point)
        if p.symmetric:  # the threshold whose window the range rules turn into this scale
            half = s * ((1 << (p.bits - 1)) - 1)
            lower, upper = -half, half
        else:
            lower, upper = s * (p.qmin - z), s * (p.qmax - z)
        below = min(-lower, max(-self.x_min, 0.0))
        above = min(upper, max(self.x_max, 0.0))
        return max(below, above, 0.0)

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


def mse_optimal_windows(rows: SortedRows, *, symmetric: bool, bits: int = 8,
                        narrow_range: bool | None = None, signed: bool = True,
                        rounding: str = "half_even", arithmetic: str = "divide",
                        codes: tuple[int, int] | None = None, half_steps: float | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the window ``(lower, upper)`` of the MSE-optimal scale and zero point
    (:func:`~quantscope.core.stats.mse_search.mse_search`): ``[s·(qmin − z), s·(qmax − z)]``,
    or ``±s·half_steps`` when symmetric, so that the range rules (``params_from_range``, with
    ``half_steps`` its ``2^(bits-1) − 1``) give back exactly that scale and zero point.
    ``codes`` overrides the code range that ``bits``, ``narrow_range`` and ``signed`` give
    (runtime presets)."""
    if codes is None:
        codes = code_range(bits, symmetric=symmetric, narrow_range=narrow_range, signed=signed)
    qmin, qmax = codes
    found = mse_search(rows, qmin=qmin, qmax=qmax, symmetric=symmetric, rounding=rounding,
                       arithmetic=arithmetic)  # its error is not asked for: not evaluated
    s, zp = found.scale.astype(np.float64), found.zero_point
    if symmetric:
        half = (1 << (bits - 1)) - 1 if half_steps is None else half_steps
        return -s * half, s * half
    return s * (qmin - zp), s * (qmax - zp)
