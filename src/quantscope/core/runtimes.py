"""Runtime presets: each runtime's own scale and zero-point formulas and its own arithmetic, so
``params.quantize(x)`` gives that runtime's codes bit for bit.

Every formula is evaluated in the precision the runtime uses (float32 tensors in PyTorch and
TFLite, float64 in ONNX Runtime's Python tool), and the returned :class:`QuantParams` records
the rounding rule and how ``x / scale`` is formed. The range itself comes from ``method``
(min/max by default; :mod:`quantscope.core.calibration` for the others, whose searches use the
engine's own rules -- the runtime's formulas then turn the range found into its parameters).
Rules, with sources:

PyTorch (``torch/ao/quantization/observer.py``, ``_calculate_qparams`` of MinMaxObserver /
PerChannelMinMaxObserver; CPU ``quantize_per_tensor`` via fbgemm ``Quantize``):
    ``min_neg = min(min, 0)``, ``max_pos = max(max, 0)``; symmetric (qint8, [-128, 127]):
    ``scale = max(-min_neg, max_pos) / ((qmax − qmin) / 2)`` (= absmax/127.5), zero point 0;
    affine (quint8, [0, 255]): ``scale = (max_pos − min_neg) / (qmax − qmin)``,
    ``zp = clamp(qmin − round(min_neg / scale))``; both ``scale = max(scale, eps)`` with
    ``eps = finfo(float32).eps``; all in float32. Codes: ``nearbyint(fma(x, 1/scale, zp))``,
    half to even, the zero point added inside the fused step (``arithmetic="fma"``).
ONNX Runtime (``onnxruntime/python/tools/quantization/quant_utils.py``, ``compute_scale_zp`` and
``get_qmin_qmax_for_qType``; ``QuantizeLinear`` = ONNX spec, MLAS kernels):
    range widened to include 0; symmetric uses int8 [-127, 127] and ``±max(|rmin|, |rmax|)``;
    asymmetric uses uint8 [0, 255]. ``scale = float64(float32(rmax − rmin)) / (qmax − qmin)``;
    if it is below float32's tiny: ``scale = 1, zp = 0``; else ``zp = round(qmin − rmin / scale)``
    (float64, half to even; ``round((qmin + qmax) / 2)`` = 0 when symmetric) and the scale is
    rounded to float32. Codes: ``x / scale`` in float32, half to even (``arithmetic="divide"``).
TFLite (``tensorflow/lite/tools/optimize/quantization_utils.cc``; reference ``AffineQuantize``):
    weights, symmetric: [-127, 127], ``half_range = max(|min|, |max|)``,
    ``scale = half_range / 127.0f`` and the multiplier ``127.0f / half_range`` (both float32),
    codes ``TfLiteRound(x * inv)`` -- multiply by TFLite's own inverse, half *away* from zero
    (``SymmetricPerChannelQuantizeValues``). Activations, asymmetric: int8 [-128, 127],
    ``GetAsymmetricQuantizationParams``: range widened to include 0,
    ``scale = (max − min) / 255.0f``, ``zp_from_min = qmin − min / scale`` (float32), nudged to
    qmin below, qmax above, else ``std::round`` (half away); codes
    ``TfLiteRound(x / scale) + zp`` (``reference_ops::AffineQuantize``: divide, half away).
TensorRT / ModelOpt (``modelopt/torch/quantization/tensor_quant.py``, ``_tensor_quant``):
    symmetric only; ``amax`` per tensor (or per channel), narrow range [-127, 127];
    ``scale = 127 / amax`` in float32 and codes ``round(x * scale)`` half to even, so the
    multiplier is recorded as ``inv_scale = float32(127 / amax)`` next to the stored
    ``scale = float32(amax / 127)`` (the Q/DQ scale ModelOpt exports); ``amax <= 2^-24``
    quantizes everything to 0 (stored as scale 1).

Degenerate ranges never give a zero or NaN scale: where a runtime would store 0 (all-zero
TFLite/TensorRT units), the stored scale is 1.0 with the same codes (all values are 0).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.qparams import QuantParams, code_range
from quantscope.core.validate import EngineValueError

RUNTIMES = ("pytorch", "onnxruntime", "tflite", "tensorrt")
_F32 = np.float32
_EPS32 = _F32(np.finfo(np.float32).eps)
_TINY32 = float(np.finfo(np.float32).tiny)


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """C ``round``/``std::round``: halves go away from zero."""
    t = np.trunc(v)
    return t + np.copysign((np.abs(v - t) >= 0.5).astype(v.dtype), v)


def runtime_qparams(xf: np.ndarray, runtime: str, *, symmetric: bool, axis: int | None,
                    group_size: int | None, bits: int = 8, narrow_range: bool | None = None,
                    method: str = "minmax", **method_options) -> QuantParams:
    """Parameters by ``runtime``'s rules for the range that ``method`` finds (see module doc)."""
    from quantscope.core.calibration import method_range

    if runtime not in RUNTIMES:
        raise EngineValueError(f"runtime must be one of {RUNTIMES}, got {runtime!r}")
    if runtime == "tensorrt" and not symmetric:
        raise EngineValueError("TensorRT int8 quantization is symmetric only (no zero point)")
    lo, hi = method_range(xf, method=method, symmetric=symmetric, axis=axis,
                          group_size=group_size, bits=bits, **method_options)
    lo = np.asarray(lo, np.float64).astype(_F32)
    hi = np.asarray(hi, np.float64).astype(_F32)
    rule = {"pytorch": _pytorch, "onnxruntime": _onnxruntime, "tflite": _tflite,
            "tensorrt": _tensorrt}[runtime]
    fields = rule(lo, hi, symmetric, bits, narrow_range)
    return QuantParams(axis=axis, group_size=group_size, symmetric=symmetric, runtime=runtime,
                       method=method, **fields)


def _pytorch(lo, hi, symmetric, bits, narrow_range) -> dict:
    if symmetric:  # qint8: full signed range unless narrowed on purpose
        qmin, qmax = code_range(bits, symmetric=True, narrow_range=bool(narrow_range))
    else:  # quint8
        qmin, qmax = code_range(bits, symmetric=False, narrow_range=False, signed=False)
    min_neg = np.minimum(lo, _F32(0))
    max_pos = np.maximum(hi, _F32(0))
    if symmetric:
        amax = np.maximum(-min_neg, max_pos)
        scale = np.maximum(amax / _F32((qmax - qmin) / 2), _EPS32)
        zp = np.zeros(scale.shape, np.int32)
    else:
        scale = np.maximum((max_pos - min_neg) / _F32(qmax - qmin), _EPS32)
        zp = np.clip(qmin - np.rint(min_neg / scale), qmin, qmax).astype(np.int32)
    return dict(scale=scale.astype(_F32), zero_point=zp, qmin=qmin, qmax=qmax,
                rounding="half_even", arithmetic="fma")


def _onnxruntime(lo, hi, symmetric, bits, narrow_range) -> dict:
    if symmetric:  # QInt8 symmetric: [-127, 127]
        qmin, qmax = code_range(bits, symmetric=True, narrow_range=True)
    else:  # QUInt8 activations: [0, 255]
        qmin, qmax = code_range(bits, symmetric=False, narrow_range=False, signed=False)
    rmin = np.minimum(lo, _F32(0))
    rmax = np.maximum(hi, _F32(0))
    if symmetric:
        absmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -absmax, absmax
    scale64 = (rmax - rmin).astype(np.float64) / (float(qmax) - float(qmin))
    tiny = scale64 < _TINY32
    safe = np.where(tiny, 1.0, scale64)
    if symmetric:
        zp = np.full(scale64.shape, np.rint((qmin + qmax) / 2.0))
    else:
        zp = np.rint(qmin - rmin.astype(np.float64) / safe)
    zp = np.where(tiny, 0, zp).astype(np.int32)
    scale = np.where(tiny, _F32(1.0), scale64.astype(_F32))
    return dict(scale=scale, zero_point=zp, qmin=qmin, qmax=qmax, rounding="half_even",
                arithmetic="divide")


def _tflite(lo, hi, symmetric, bits, narrow_range) -> dict:
    if symmetric:  # weights: kMinQuantizedValue = -127, kMaxQuantizedValue = 127
        qmin, qmax = code_range(bits, symmetric=True, narrow_range=True)
        half_range = np.maximum(np.abs(lo), np.abs(hi))
        zero = half_range == 0
        safe = np.where(zero, _F32(1.0), half_range)
        scale = np.where(zero, _F32(1.0), safe / _F32(qmax))
        inv = np.where(zero, _F32(1.0), _F32(qmax) / safe)
        return dict(scale=scale.astype(_F32), zero_point=np.zeros(scale.shape, np.int32),
                    qmin=qmin, qmax=qmax, rounding="half_away", arithmetic="multiply",
                    inv_scale=inv.astype(_F32))
    qmin, qmax = code_range(bits, symmetric=False, narrow_range=False)  # int8 activations
    mn = np.minimum(lo, _F32(0))
    mx = np.maximum(hi, _F32(0))
    scale = (mx - mn) / _F32(qmax - qmin)
    zero = scale == 0
    safe = np.where(zero, _F32(1.0), scale)
    zp_from_min = np.where(zero, _F32(qmin), _F32(qmin) - mn / safe)
    zp = np.where(zp_from_min < qmin, qmin,
                  np.where(zp_from_min > qmax, qmax, _round_half_away(zp_from_min)))
    return dict(scale=safe.astype(_F32), zero_point=zp.astype(np.int32), qmin=qmin, qmax=qmax,
                rounding="half_away", arithmetic="divide")


def _tensorrt(lo, hi, symmetric, bits, narrow_range) -> dict:
    narrow = True if narrow_range is None else bool(narrow_range)
    qmin, qmax = code_range(bits, symmetric=True, narrow_range=narrow)
    amax = np.maximum(np.abs(lo), np.abs(hi))
    max_bound = _F32((1 << (bits - 1)) - 1)
    zero = amax <= _F32(1.0 / (1 << 24))  # ModelOpt: amax below fp16's smallest -> all zeros
    safe = np.where(zero, _F32(1.0), amax)
    inv = np.where(zero, _F32(1.0), max_bound / safe)
    scale = np.where(zero, _F32(1.0), safe / max_bound)
    return dict(scale=scale.astype(_F32), zero_point=np.zeros(scale.shape, np.int32), qmin=qmin,
                qmax=qmax, rounding="half_even", arithmetic="multiply",
                inv_scale=inv.astype(_F32))
