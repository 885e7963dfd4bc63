"""What runtimes do with NaN, ±inf and values too large for their integer conversion.

Finite values of sane size get the same codes everywhere a preset is exact; the rest fall
through each runtime's own conversion from float to integer, and the runtimes disagree
(measured on each one, see the presets in :mod:`quantscope.core.calibration.runtimes`):

* ``"nan_to_qmax"``: NaN gives ``qmax``; ±inf and huge values saturate. A float clamp
  ``min(max(v, lo), hi)`` whose max keeps its first operand when the other is NaN
  (PyTorch 2.13's CPU ``quantize_per_tensor``; XNNPACK's QUANTIZE);
* ``"nan_to_qmin"``: NaN gives ``qmin`` (ONNX Runtime: the type's minimum even under
  narrow-range parameters); ±inf and huge values saturate (PyTorch on CUDA, PyTorch's CPU
  ``fake_quantize_per_tensor_affine``);
* ``"nan_to_zero"``: NaN gives code 0 (clamped into the range); ±inf and huge values saturate
  (PyTorch's CPU ``quantize_per_channel``);
* ``"int64_indefinite"``: ``v = rint(x · inv) + zp`` in float32, cast to int64 by x86's
  conversion, which gives INT64_MIN for NaN and for ``v >= 2^63``: all of them end at ``qmin``
  (PyTorch's CPU ``fake_quantize_per_channel_affine``: NaN, +inf and -inf alike);
* ``"int64_wrap"``: ``rint(x · inv)`` cast to int64 by CUDA's saturating conversion (NaN gives
  INT64_MIN, +inf INT64_MAX), then the zero point added in int64 with wraparound: with a
  negative zero point NaN and -inf end at ``qmax``, with a positive one +inf ends at ``qmin``
  (PyTorch's CUDA ``fake_quantize_per_channel_affine``);
* ``"int32_capped_wrap"``: ``x · inv`` capped at 2147483520 (the largest float32 below 2^31;
  NaN becomes the cap, as ``_mm256_min_ps`` returns its second operand), converted to int32
  (below -2^31: INT32_MIN), the zero point added in int32 with wraparound (PyTorch 2.11's CPU
  ``quantize_per_tensor``: NaN and +inf give ``qmin`` once the zero point is 128 or more);
* ``"int32_indefinite_wrap"``: ``round(x / scale)`` converted to int32 by x86's conversion
  (NaN and ``|v| >= 2^31`` give INT32_MIN), the zero point added with wraparound: NaN, ±inf
  and huge values all give ``qmax`` under a negative zero point and ``qmin`` otherwise
  (LiteRT's QUANTIZE, reference and optimized builtin kernels).

:func:`runtime_codes` applies a rule to the elements it concerns; every other element keeps the
code of the ordinary rule.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.tensors.validate import EngineValueError

OVERFLOW_RULES = ("nan_to_qmax", "nan_to_qmin", "nan_to_zero", "int64_indefinite",
                  "int64_wrap", "int32_capped_wrap", "int32_indefinite_wrap")
_F32 = np.float32
_I64_MIN, _I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
_I32_MIN = np.iinfo(np.int32).min
#: The largest float32 below 2^31, PyTorch's cap before its int32 conversion.
_INT32_CAP = _F32(2147483520.0)
#: Elements whose |x| reaches this many scales are handed to the rule (below 2^30 every rule
#: agrees with saturation).
_HUGE = 2.0**30


def check_overflow_rule(rule: str | None) -> None:
    if rule is not None and rule not in OVERFLOW_RULES:
        raise EngineValueError(f"overflow must be one of {OVERFLOW_RULES} or None, got {rule!r}")


def concerned(x: np.ndarray, scale: np.ndarray, rule: str) -> np.ndarray:
    """Boolean mask of the elements ``rule`` may give another code than saturation: NaN for the
    NaN rules; NaN, ±inf and ``|x| >= 2^30 · scale`` for the integer-conversion rules."""
    if rule.startswith("nan_"):
        return np.isnan(x)
    with np.errstate(over="ignore", invalid="ignore"):  # 2^30 · scale is exact (or inf)
        return ~np.isfinite(x) | (np.abs(x) >= _F32(_HUGE) * np.asarray(scale, _F32))


def runtime_codes(rule: str, x: np.ndarray, rounded: np.ndarray, zp: np.ndarray, qmin: int,
                  qmax: int) -> np.ndarray:
    """Codes (int64, in ``[qmin, qmax]``) of the concerned elements ``x`` under ``rule``.

    ``rounded`` is the runtime's rounded value before the zero point (float32: ``rint(x · inv)``
    or ``round(x / scale)`` by the preset's own arithmetic and rounding), except for
    ``"int32_capped_wrap"``, which rounds after its cap and takes the unrounded ``x · inv``.
    """
    zp = zp.astype(np.int64)
    if rule == "nan_to_qmax":
        return np.full(x.shape, qmax, np.int64)
    if rule == "nan_to_qmin":
        return np.full(x.shape, qmin, np.int64)
    if rule == "nan_to_zero":
        return np.full(x.shape, min(max(0, qmin), qmax), np.int64)
    with np.errstate(invalid="ignore", over="ignore"):
        if rule == "int64_indefinite":
            v = (rounded + zp.astype(_F32)).astype(_F32).astype(np.float64)
            bad = np.isnan(v) | (v >= 2.0**63)
            return np.where(bad, qmin, np.clip(np.nan_to_num(v), qmin, qmax)).astype(np.int64)
        if rule == "int64_wrap":
            r = rounded.astype(np.float64)
            big = r >= 2.0**63
            small = np.isnan(r) | (r < -(2.0**63))
            i = np.where(big | small, 0.0, r).astype(np.int64)
            i = np.where(big, _I64_MAX, np.where(small, _I64_MIN, i))
            return np.clip(i + zp, qmin, qmax)  # int64 addition wraps around, as on the device
        if rule == "int32_capped_wrap":
            v = np.where(np.isnan(rounded) | (rounded > _INT32_CAP), _INT32_CAP, rounded)
            r = np.rint(v.astype(np.float64))
            i = np.where(r < -(2.0**31), _I32_MIN, r).astype(np.int64)
            return np.clip(_wrap32(i + zp), qmin, qmax)
        if rule == "int32_indefinite_wrap":
            r = rounded.astype(np.float64)
            bad = np.isnan(r) | (r >= 2.0**31) | (r < -(2.0**31))
            i = np.where(bad, float(_I32_MIN), r).astype(np.int64)
            return np.clip(_wrap32(i + zp), qmin, qmax)
    raise EngineValueError(f"overflow must be one of {OVERFLOW_RULES}, got {rule!r}")


def _wrap32(v: np.ndarray) -> np.ndarray:
    """int64 values reduced to int32 with two's-complement wraparound."""
    return ((v + 2**31) % 2**32) - 2**31
