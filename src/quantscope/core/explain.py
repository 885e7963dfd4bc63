"""View data: the numbers the explanatory views draw, derived from reports and parameters.

The GUI does no arithmetic (every number on screen comes from the engine), so the small
derivations the trade-off, per-channel and bit-width views need live here, Qt-free and tested:
the clip window a pane's parameters imply, the per-channel table (ranges, scales, SQNR, worst
and outlier channels) and one channel's own histogram over its own code buckets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantscope.core.layout import normalize_axis, param_rows
from quantscope.core.qparams import QuantParams, params_from_range
from quantscope.core.quantize import quantize_codes_float
from quantscope.core.report import QuantReport
from quantscope.core.validate import EngineValueError, as_float32
from quantscope.errors import Cancelled

#: LLM.int8()'s outlier threshold: a feature with any |x| >= 6.0 is an outlier feature.
OUTLIER_THRESHOLD = 6.0


def clip_window(params: QuantParams) -> tuple[float, float]:
    """The value window ``[scale (qmin - zp), scale (qmax - zp)]`` of per-tensor parameters:
    values outside it are clipped. For symmetric narrow range it is ``[-t, t]``."""
    if params.granularity != "tensor":
        raise EngineValueError("clip_window needs per-tensor parameters")
    s = float(np.asarray(params.scale, np.float64))
    z = int(np.asarray(params.zero_point))
    return s * (params.qmin - z), s * (params.qmax - z)


def clip_threshold(params: QuantParams) -> float:
    """The symmetric clip threshold ``t`` (values with ``|x| > t`` clip): ``scale * qmax``."""
    return clip_window(params)[1] if params.symmetric else max(map(abs, clip_window(params)))


@dataclass(frozen=True, eq=False)
class ChannelTable:
    """One row per channel (or group) of a per-channel / per-group report.

    ``worst`` lists unit indices by ascending SQNR (worst first); ``outliers`` the units whose
    largest ``|x|`` reaches ``threshold`` (LLM.int8()'s outlier features).
    """

    kind: str
    unit: np.ndarray
    x_min: np.ndarray
    x_max: np.ndarray
    abs_max: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    sqnr_db: np.ndarray
    mse: np.ndarray
    codes_used: np.ndarray
    clipped: np.ndarray
    n: np.ndarray
    threshold: float
    worst: np.ndarray
    outliers: np.ndarray

    def __len__(self) -> int:
        return int(self.unit.size)

    def row(self, i: int) -> dict:
        """JSON-ready numbers of unit ``i`` (what the worst-channels list shows)."""
        return {"unit": int(self.unit[i]), "x_min": float(self.x_min[i]),
                "x_max": float(self.x_max[i]), "scale": float(self.scale[i]),
                "zero_point": int(self.zero_point[i]), "sqnr_db": float(self.sqnr_db[i]),
                "mse": float(self.mse[i]), "codes_used": int(self.codes_used[i]),
                "clipped": int(self.clipped[i]), "n": int(self.n[i]),
                "outlier": bool(self.abs_max[i] >= self.threshold)}


def channel_table(report: QuantReport, threshold: float = OUTLIER_THRESHOLD) -> ChannelTable:
    """Per-unit ranges, scales and errors of a per-channel or per-group report."""
    per = report.per_channel
    if per is None:
        raise EngineValueError("channel_table needs a per-channel or per-group report")
    if not np.isfinite(threshold) or threshold < 0:
        raise EngineValueError(f"outlier threshold must be finite and >= 0, got {threshold!r}")
    p = report.params
    scale = np.asarray(p.scale, np.float64).reshape(-1)
    zp = np.asarray(p.zero_point, np.int64).reshape(-1)
    abs_max = np.maximum(np.abs(per.x_min), np.abs(per.x_max))
    sq = np.asarray(per.sqnr_db, np.float64)
    # NaN (empty unit) sorts last; +inf (exact unit) after every finite one
    order = np.argsort(np.where(np.isnan(sq), np.inf, sq), kind="stable")
    return ChannelTable(
        kind=p.granularity, unit=np.arange(scale.size), x_min=np.asarray(per.x_min),
        x_max=np.asarray(per.x_max), abs_max=abs_max, scale=scale, zero_point=zp,
        sqnr_db=sq, mse=np.asarray(per.mse), codes_used=np.asarray(per.codes_used),
        clipped=np.asarray(per.clipped_below) + np.asarray(per.clipped_above),
        n=np.asarray(per.n), threshold=float(threshold), worst=order,
        outliers=np.flatnonzero(abs_max >= float(threshold)),
    )


def unit_values(x, params: QuantParams, unit: int) -> np.ndarray:
    """The elements of channel / group ``unit`` of ``x`` (a 1-D view or small copy)."""
    xf = as_float32(x)
    if params.granularity == "tensor":
        return xf.reshape(-1)
    n_units = int(np.asarray(params.scale).size)
    if not 0 <= int(unit) < n_units:
        raise EngineValueError(f"unit {unit} is out of range: there are {n_units}")
    if params.granularity == "channel":
        return np.take(xf, int(unit), axis=normalize_axis(params.axis, xf.ndim)).reshape(-1)
    sets, _ = param_rows(xf, params.scale, params.zero_point, params.axis, params.group_size)
    for rs in sets:
        hit = np.flatnonzero(rs.index == int(unit))
        if hit.size:
            return rs.x2d[int(hit[0])]
    raise EngineValueError(f"unit {unit} not found")  # unreachable for a valid layout


@dataclass(frozen=True, eq=False)
class UnitHistogram:
    """One unit's values counted per code of its own scale: bar ``k`` spans
    ``edges[k]..edges[k+1]`` (the values that round to code ``qmin + k``)."""

    unit: int
    codes: np.ndarray
    edges: np.ndarray
    counts: np.ndarray
    scale: float
    zero_point: int
    window: tuple[float, float]
    x_min: float
    x_max: float
    clipped_below: int
    clipped_above: int

    @property
    def codes_used(self) -> int:
        return int(np.count_nonzero(self.counts))

    @property
    def log_counts(self) -> np.ndarray:
        """``log10(1 + count)`` per code: a lone value stays visible beside a crowded code."""
        return np.log10(self.counts + 1.0)


def unit_histogram(x, params: QuantParams, unit: int = 0) -> UnitHistogram:
    """The exact code histogram of one unit, with the value edges of each code bucket.

    The codes are computed by the engine's own ``quantize`` with the unit's scale and zero
    point (same rounding and arithmetic as the pane), so the bars add up to the unit's
    element count and agree with the report's ``codes_used``.
    """
    vals = unit_values(x, params, unit)
    s = np.asarray(params.scale, np.float32).reshape(-1)[int(unit)]
    z = np.asarray(params.zero_point, np.int32).reshape(-1)[int(unit)]
    vals = vals[np.isfinite(vals)]
    # unclamped codes by the engine's own rule: out-of-range ones are the clipped elements
    v = quantize_codes_float(vals, s, z, params.qmin, params.qmax, params.rounding,
                             params.arithmetic)
    below = int(np.count_nonzero(v < params.qmin))
    above = int(np.count_nonzero(v > params.qmax))
    q = np.clip(v, params.qmin, params.qmax).astype(np.int64)
    counts = np.bincount(q - params.qmin, minlength=params.levels)
    codes = np.arange(params.qmin, params.qmax + 1)
    s64 = float(s)
    edges = s64 * (np.arange(params.qmin, params.qmax + 2) - 0.5 - int(z))
    lo, hi = s64 * (params.qmin - int(z)), s64 * (params.qmax - int(z))
    return UnitHistogram(
        unit=int(unit), codes=codes, edges=edges, counts=counts.astype(np.int64), scale=s64,
        zero_point=int(z), window=(lo, hi),
        x_min=float(vals.min()) if vals.size else 0.0,
        x_max=float(vals.max()) if vals.size else 0.0,
        clipped_below=below, clipped_above=above,
    )


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


def threshold_sides(x_min: float, x_max: float) -> str:
    """Which side(s) a clip threshold ``t`` cuts, for the trade-off's axis label."""
    lo, hi = float(x_min), float(x_max)
    if lo >= 0:
        return "clips x>t"
    if hi <= 0:
        return "clips x<−t"
    short = min(-lo, hi)
    side = "x<−t" if hi > -lo else "x>t"
    long_side = "x>t" if hi > -lo else "x<−t"
    return f"clips {long_side}, {side} if t<{short:.3g}"


@dataclass(frozen=True, eq=False)
class ClipSweep:
    """Error split against the clip threshold for one scheme (see :func:`clip_sweep_curve`).

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
    rounding_mse: np.ndarray
    clipping_mse: np.ndarray
    mse: np.ndarray
    sqnr_db: np.ndarray
    best: int
    x_min: float
    x_max: float
    optimum: QuantParams | None = None
    optimum_report: QuantReport | None = None

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

    def mse_decades(self) -> list[int]:
        """Powers of ten spanning the positive MSE values (ticks for a log axis)."""
        values = np.concatenate([self.rounding_mse, self.clipping_mse, self.mse])
        values = values[np.isfinite(values) & (values > 0)]
        if values.size == 0:
            return []
        lo = int(np.floor(np.log10(values.min())))
        hi = int(np.ceil(np.log10(values.max())))
        return list(range(lo, hi + 1))

    def window(self, t: float) -> tuple[float, float]:
        """The manual clip window for threshold ``t`` (see :func:`window_for_threshold`)."""
        return window_for_threshold(t, self.x_min, self.x_max)

    def to_dict(self) -> dict:
        return {"symmetric": self.symmetric, "threshold": self.thresholds.tolist(),
                "rounding_mse": self.rounding_mse.tolist(),
                "clipping_mse": self.clipping_mse.tolist(), "mse": self.mse.tolist(),
                "sqnr_db": self.sqnr_db.tolist(), "best_threshold": self.best_threshold}


def clip_sweep_curve(
    analyze_params,
    *,
    x_min: float,
    x_max: float,
    symmetric: bool,
    bits: int = 8,
    narrow_range: bool | None = None,
    rounding: str = "half_even",
    points: int = 200,
    refine: int = 24,
    should_stop=None,
    progress=None,
    optimum: QuantParams | None = None,
) -> ClipSweep:
    """Exact rounding / clipping / total MSE and SQNR at ``points`` clip thresholds.

    Thresholds run evenly over ``(0, max|x|]``; at each, the window of
    :func:`window_for_threshold` goes through the engine's range rules
    (:func:`~quantscope.core.qparams.params_from_range`) and ``analyze_params`` (the prepared
    path or the direct pass), so every point is what the panes show for that manual clip.
    ``refine`` more points around the grid's best narrow the optimum to a tenth of a step.
    ``should_stop()`` is polled between points (raise :class:`Cancelled` when true) and
    ``progress(fraction)`` told how far the grid is, so a caller can abandon or show long work.
    ``optimum`` (``choose_qparams(..., method="mse")`` under the same rules) becomes the
    sweep's "best" (see :class:`ClipSweep`).
    """
    if points < 2:
        raise EngineValueError(f"a sweep needs at least 2 points, got {points}")
    amax = max(abs(float(x_min)), abs(float(x_max)))

    total = points + refine

    def evaluate(ts: np.ndarray, done: int = 0) -> list[QuantReport]:
        out = []
        for i, t in enumerate(ts):
            if should_stop is not None and should_stop():
                raise Cancelled
            if progress is not None and i % 8 == 0:
                progress((done + i) / total)
            lo, hi = window_for_threshold(float(t), x_min, x_max)
            out.append(analyze_params(params_from_range(
                lo, hi, symmetric=symmetric, bits=bits, narrow_range=narrow_range,
                rounding=rounding, method="manual")))
        return out

    ts = amax * np.arange(1, points + 1) / points if amax > 0 else np.zeros(1)
    reports = evaluate(ts)
    mse = np.array([r.mse for r in reports])
    i = int(np.argmin(mse))
    if refine and amax > 0:
        step = amax / points
        fine = ts[i] + step * np.linspace(-1, 1, refine + 2)[1:-1]
        fine = fine[(fine > 0) & (fine <= amax)]
        ts = np.concatenate([ts, fine])
        reports += evaluate(fine, ts.size - fine.size)
        order = np.argsort(ts, kind="stable")
        ts = ts[order]
        reports = [reports[k] for k in order]
    mse = np.array([r.mse for r in reports])
    return ClipSweep(
        symmetric=symmetric, thresholds=ts.astype(np.float64),
        rounding_mse=np.array([r.rounding_mse for r in reports]),
        clipping_mse=np.array([r.clipping_mse for r in reports]), mse=mse,
        sqnr_db=np.array([r.sqnr_db for r in reports], np.float64),
        best=int(np.argmin(mse)), x_min=float(x_min), x_max=float(x_max), optimum=optimum,
        optimum_report=None if optimum is None else analyze_params(optimum),
    )


def range_segments(table: ChannelTable, units: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(xs, ys)`` of vertical segments ``unit: x_min..x_max`` for a pairs-connected line
    (one draw call for thousands of channels)."""
    idx = table.unit if units is None else np.asarray(units, np.intp)
    xs = np.repeat(idx.astype(np.float64), 2)
    ys = np.column_stack([table.x_min[idx], table.x_max[idx]]).reshape(-1).astype(np.float64)
    return xs, ys
