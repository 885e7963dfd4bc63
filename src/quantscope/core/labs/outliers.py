"""Outlier fixes for int8 matmuls: LLM.int8() decomposition and SmoothQuant smoothing.

Transformer activations carry a few feature columns whose magnitude is 10-100x the rest; one
per-tensor activation scale then wastes most of the 256 codes on them. Two published fixes:

* **LLM.int8()** (Dettmers et al. 2022): feature columns ``j`` of ``X`` with any
  ``|X[:, j]| >= threshold`` (6.0 in the paper) and the matching rows of ``W`` are multiplied in
  16-bit float; the rest goes through int8. Emulated here as bitsandbytes does on GPU: inputs
  rounded to float16, products summed in float32.
* **SmoothQuant** (Xiao et al. 2023): ``X W = (X diag(s)^-1)(diag(s) W)`` with
  ``s_j = max|X_j|^alpha / max|W_j|^(1-alpha)``, moving range from activations into weights.
  The clamps (``max|W_j| >= 1e-5``, ``s_j >= 1e-5``) are those of the reference
  ``smooth_ln_fcs``. In a model ``1/s`` folds into the preceding LayerNorm, so it costs nothing
  at run time; here it is applied to ``X`` in float64 and rounded once to float32.

:func:`quantized_matmul` runs the whole path for float ``A`` [M, K] and ``W`` [K, N] under
chosen schemes and returns one :class:`MatmulLabResult`, so a view can call it once per
control change (15-40 ms on the bundled MiniLM pair [197, 384] x [384, 1536] when the caller
passes the float reference, which does not change while ``alpha``/``threshold`` are dragged).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantscope.core.calibration.choose import choose_qparams
from quantscope.core.labs.matmul import ErrorStats, MatmulReport, error_stats, int8_matmul
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.tensors.validate import EngineValueError, as_float32, check_nonfinite

__all__ = [
    "DEFAULT_ACTIVATION_SCHEME",
    "DEFAULT_OUTPUT_SCHEME",
    "DEFAULT_WEIGHT_SCHEME",
    "OUTLIER_RATIO",
    "AxisOutliers",
    "MatmulLabResult",
    "axis_outliers",
    "axis_outliers_text",
    "outlier_columns",
    "quantized_matmul",
    "smooth",
    "smoothquant_scales",
]

#: TFLite's int8 conventions: asymmetric per-tensor activations and outputs, symmetric
#: narrow-range weights per output channel (axis 1 of W [K, N]), ``x / scale`` rounded half
#: away from zero (TFLite's ``TfLiteRound``), so the whole path is the one TFLite would run.
DEFAULT_ACTIVATION_SCHEME: Mapping[str, Any] = {"symmetric": False, "rounding": "half_away"}
DEFAULT_WEIGHT_SCHEME: Mapping[str, Any] = {
    "symmetric": True,
    "granularity": "channel",
    "axis": 1,
    "rounding": "half_away",
}
DEFAULT_OUTPUT_SCHEME: Mapping[str, Any] = {"symmetric": False, "rounding": "half_away"}

_CLAMP = 1e-5


def _pair(a, w) -> tuple[np.ndarray, np.ndarray]:
    a32 = as_float32(a, "A")
    w32 = as_float32(w, "W")
    if a32.ndim != 2 or w32.ndim != 2 or a32.shape[1] != w32.shape[0]:
        raise EngineValueError(
            f"A must be [M, K] and W [K, N] with the same K, got {a32.shape} and {w32.shape}"
        )
    check_nonfinite(a32, "raise", "A")
    check_nonfinite(w32, "raise", "W")
    return a32, w32


def outlier_columns(a, threshold: float = 6.0) -> np.ndarray:
    """Indices of the feature columns of ``a`` [M, K] with any ``|a| >= threshold`` (sorted)."""
    a32 = as_float32(a, "A")
    if a32.ndim != 2:
        raise EngineValueError(f"A must be 2-D [M, K], got shape {a32.shape}")
    if not np.isfinite(threshold) or threshold < 0:
        raise EngineValueError(f"threshold must be finite and >= 0, got {threshold!r}")
    if a32.shape[0] == 0:
        return np.zeros(0, np.intp)
    # compare in float64: against a float32 array NumPy would round the threshold to float32
    # (a threshold of 1e-40 would then select all-zero columns)
    return np.flatnonzero(np.abs(a32).max(axis=0).astype(np.float64) >= float(threshold))


#: A channel whose largest ``|x|`` is at least this many times the median of its axis's
#: channels' is an outlier channel, whatever the tensor's magnitude (LLM.int8()'s absolute
#: 6.0 fits activations; a weight's outlier input channel is 60x its neighbours at 1.2).
OUTLIER_RATIO = 6.0


@dataclass(frozen=True, eq=False)
class AxisOutliers:
    """The outlier channels along one axis: their ``indices``, out of ``channels``, and how
    far the largest stands out (``ratio``: its ``max|x|`` over the median channel's)."""

    axis: int
    channels: int
    indices: np.ndarray
    ratio: float

    @property
    def count(self) -> int:
        return int(self.indices.size)


def axis_outliers(abs_max: tuple[np.ndarray, ...], threshold: float = 6.0,
                  ratio: float = OUTLIER_RATIO) -> list[AxisOutliers]:
    """Per axis (from :func:`quantscope.core.tensors.channels.channel_abs_max`), the channels
    whose ``max|x|`` reaches ``threshold`` (absolute, LLM.int8()'s rule) or ``ratio`` times
    the median channel's."""
    if not np.isfinite(threshold) or threshold < 0:
        raise EngineValueError(f"threshold must be finite and >= 0, got {threshold!r}")
    if not np.isfinite(ratio) or ratio < 1:
        raise EngineValueError(f"ratio must be finite and >= 1, got {ratio!r}")
    out = []
    for axis, m in enumerate(abs_max):
        m = np.asarray(m, np.float64)
        median = float(np.median(m)) if m.size else 0.0
        big = m >= float(threshold)
        if median > 0:
            big |= m >= float(ratio) * median
        top = float(m.max()) / median if m.size and median > 0 else float("inf")
        out.append(AxisOutliers(axis, int(m.size), np.flatnonzero(big),
                                top if m.size else 0.0))
    return out


def axis_outliers_text(found: list[AxisOutliers]) -> str:
    """One line naming the outlier channels of each axis, e.g. ``outlier channels by axis:
    0: 0/1024, 1: 1/4096 (#17, 60x the median)``."""
    parts = []
    for a in found:
        part = f"{a.axis}: {a.count}/{a.channels}"
        if 0 < a.count <= 3:
            part += " (" + ", ".join(f"#{i}" for i in a.indices) + f", {a.ratio:.3g}x the median)"
        elif a.count:
            part += f" (up to {a.ratio:.3g}x the median)"
        parts.append(part)
    return "outlier channels by axis: " + ", ".join(parts)


def smoothquant_scales(a, w, alpha: float = 0.5) -> np.ndarray:
    """SmoothQuant's per-input-feature factors ``s_j = max|A_j|^alpha / max|W_j|^(1-alpha)``.

    ``A`` is [M, K] (features along axis 1), ``W`` is [K, N] (input features along axis 0).
    ``alpha = 0`` leaves all difficulty on the activations' side scaled by the weights,
    ``alpha = 1`` makes every activation column's max exactly 1; 0.5 is the paper's default.
    """
    a32, w32 = _pair(a, w)
    if not 0.0 <= float(alpha) <= 1.0:
        raise EngineValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    k = a32.shape[1]
    act = np.abs(a32).max(axis=0).astype(np.float64) if a32.shape[0] else np.zeros(k)
    wmax = np.abs(w32).max(axis=1).astype(np.float64) if w32.shape[1] else np.zeros(k)
    wmax = np.maximum(wmax, _CLAMP)
    return np.maximum(act**alpha / wmax ** (1.0 - alpha), _CLAMP)


def smooth(a, w, scales) -> tuple[np.ndarray, np.ndarray]:
    """``(A / s, s · W)`` rounded once to float32; the float product is unchanged up to that
    rounding."""
    a32, w32 = _pair(a, w)
    s = np.asarray(scales, np.float64)
    if s.shape != (a32.shape[1],) or not (np.isfinite(s).all() and (s > 0).all()):
        raise EngineValueError(f"scales must be {a32.shape[1]} finite positive numbers")
    return (a32 / s).astype(np.float32), (w32 * s[:, None]).astype(np.float32)


@dataclass(frozen=True, eq=False)
class MatmulLabResult:
    """One run of the quantized path, with everything a view displays.

    ``output`` is what the path produces, dequantized (float64 [M, N]); ``codes`` the int8
    output when it is requantized. ``vs_float`` compares ``output`` with the float matmul
    ``A @ W`` (float64). ``int8`` is the integer kernel's report on the columns it handled.
    """

    output: np.ndarray
    codes: np.ndarray | None
    vs_float: ErrorStats
    int8: MatmulReport
    a_params: QuantParams
    w_params: QuantParams
    out_params: QuantParams | None
    output_saturated: int
    smoothing_scales: np.ndarray | None
    outlier_columns: np.ndarray
    float_reference: np.ndarray

    @property
    def outlier_fraction(self) -> float:
        """Share of the multiply-accumulates done in 16-bit float instead of int8."""
        k = self.int8.k + self.outlier_columns.size
        return self.outlier_columns.size / k if k else 0.0


def _scheme(scheme: Mapping[str, Any] | None, default: Mapping[str, Any]) -> dict[str, Any]:
    return dict(default if scheme is None else scheme)


def _float16_part(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """LLM.int8()'s outlier product: float16 inputs, float32 accumulation (as on a GPU)."""
    a16 = a.astype(np.float16).astype(np.float32)
    w16 = w.astype(np.float16).astype(np.float32)
    return (a16 @ w16).astype(np.float64)


def quantized_matmul(
    a,
    w,
    *,
    a_scheme: Mapping[str, Any] | None = None,
    w_scheme: Mapping[str, Any] | None = None,
    out_scheme: Mapping[str, Any] | None = DEFAULT_OUTPUT_SCHEME,
    alpha: float | None = None,
    threshold: float | None = None,
    float_reference=None,
    requantization: str = "single",
) -> MatmulLabResult:
    """Quantize float ``A`` [M, K] and ``W`` [K, N], run the int8 kernel, measure the error.

    Parameters
    ----------
    a_scheme, w_scheme, out_scheme : mapping
        Keyword arguments for :func:`~quantscope.core.calibration.choose.choose_qparams` (defaults:
        the
        ``DEFAULT_*_SCHEME`` constants). Activations may be per tensor or per row
        (``granularity="channel", axis=0``, LLM.int8()'s vector-wise scheme); weights and
        outputs per tensor or per output column (``axis=1``); ``{}`` means choose_qparams'
        own defaults. ``out_scheme=None`` keeps the output in float:
        the int32 accumulator is dequantized, as LLM.int8() does. Output parameters are
        calibrated on the float result ``A @ W`` itself (min/max), the best a static
        calibration could do.
    alpha : float in [0, 1], optional
        Apply SmoothQuant with this migration strength first.
    threshold : float, optional
        Apply the LLM.int8() decomposition: columns of the (smoothed) activations with any
        ``|x| >= threshold`` go through float16.
    float_reference : array [M, N], optional
        ``A @ W`` in float64, if the caller already has it (it does not depend on ``alpha``
        or ``threshold``, so a view computes it once per tensor pair).
    requantization : {"single", "double", "fp32"}
        The integer kernel's requantization (:func:`~quantscope.core.labs.matmul.int8_matmul`).

    Returns
    -------
    MatmulLabResult
    """
    a32, w32 = _pair(a, w)
    if float_reference is None:
        y_float = a32.astype(np.float64) @ w32.astype(np.float64)
    else:
        y_float = np.asarray(float_reference, np.float64)
        if y_float.shape != (a32.shape[0], w32.shape[1]):
            raise EngineValueError(
                f"float_reference has shape {y_float.shape}, expected "
                f"{(a32.shape[0], w32.shape[1])}"
            )
    scales = None
    if alpha is not None:
        scales = smoothquant_scales(a32, w32, alpha)
        a32, w32 = smooth(a32, w32, scales)
    cols = np.zeros(0, np.intp) if threshold is None else outlier_columns(a32, threshold)
    keep = np.ones(a32.shape[1], bool)
    keep[cols] = False
    a_int, w_int = (a32, w32) if cols.size == 0 else (a32[:, keep], w32[keep])

    a_params = choose_qparams(a_int, **_scheme(a_scheme, DEFAULT_ACTIVATION_SCHEME))
    w_params = choose_qparams(w_int, **_scheme(w_scheme, DEFAULT_WEIGHT_SCHEME))
    a_q, w_q = a_params.quantize(a_int), w_params.quantize(w_int)
    out_params = None if out_scheme is None else choose_qparams(y_float, **dict(out_scheme))
    whole = cols.size == 0 and out_params is not None
    if out_params is not None:  # scalars, or [N] per output column (broadcast over rows)
        so = np.asarray(out_params.scale, np.float64)
        zo = np.asarray(out_params.zero_point, np.int64)
    out, report = int8_matmul(
        a_q,
        w_q,
        a_params=a_params,
        b_params=w_params,
        out_params=out_params if whole else None,
        float_reference=y_float if cols.size == 0 else None,
        requantization=requantization,
    )
    codes = None
    saturated = report.saturated
    if whole:  # the integer kernel requantized the whole product
        codes = out
        output = (codes.astype(np.float64) - zo) * so
    else:
        output = out if cols.size == 0 else out + _float16_part(a32[:, cols], w32[cols])
        if out_params is not None:  # the float sum is quantized to int8 for the next layer
            codes = out_params.quantize(output.astype(np.float32))
            low = (out_params.qmin - zo - 0.5) * so
            high = (out_params.qmax - zo + 0.5) * so
            saturated = int(np.count_nonzero((output < low) | (output > high)))
            output = (codes.astype(np.float64) - zo) * so
    return MatmulLabResult(
        output=output,
        codes=codes,
        vs_float=(report.vs_float if whole and report.vs_float is not None
                  else error_stats(output, y_float)),
        int8=report,
        a_params=a_params,
        w_params=w_params,
        out_params=out_params,
        output_saturated=saturated,
        smoothing_scales=scales,
        outlier_columns=cols,
        float_reference=y_float,
    )
