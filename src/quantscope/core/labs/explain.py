"""View data: the numbers the explanatory views draw, derived from reports and parameters.

The GUI does no arithmetic (every number on screen comes from the engine), so the small
derivations the trade-off, per-channel and bit-width views need live here, Qt-free and tested:
the clip window a pane's parameters imply, which side(s) a clip threshold cuts, the per-channel
table (ranges, scales, SQNR, worst and outlier channels) and one channel's own histogram over
its own code buckets. The trade-off's curve itself is :mod:`quantscope.core.stats.sweep`'s (the one
the library's ``clip_sweep`` gives).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.schemes.quantize import quantize_codes_float
from quantscope.core.stats.report import QuantReport
from quantscope.core.tensors.layout import normalize_axis, param_rows
from quantscope.core.tensors.validate import EngineValueError, as_float32

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
    if params.axis is not None and params.group_size is None:  # per channel
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


def range_segments(table: ChannelTable, units: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(xs, ys)`` of vertical segments ``unit: x_min..x_max`` for a pairs-connected line
    (one draw call for thousands of channels)."""
    idx = table.unit if units is None else np.asarray(units, np.intp)
    xs = np.repeat(idx.astype(np.float64), 2)
    ys = np.column_stack([table.x_min[idx], table.x_max[idx]]).reshape(-1).astype(np.float64)
    return xs, ys
