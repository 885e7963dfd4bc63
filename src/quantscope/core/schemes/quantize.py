"""Quantize and dequantize: q = clamp(round(x / scale) + zero_point, qmin, qmax) and
x̂ = scale · (q − zero_point), with saturation (never wraparound) and stated arithmetic.

The arithmetic is part of the result. Runtimes disagree on a few elements per million near
.5 ties depending on how they form x / scale, so the rule is a parameter:

* ``"divide"`` (default): float32 ``x / scale`` (ONNX QuantizeLinear, TFLite reference);
* ``"multiply"``: float32 ``x * float32(1 / scale)`` (TensorRT-style multiply by the reciprocal);
* ``"fma"``: ``float32(x * float32(1 / scale) + zero_point)`` rounded once, as PyTorch's CPU
  ``quantize_per_tensor`` does in one fused step; emulated exactly in float64, where
  ``x * inv`` has at most 48 significant bits and so is exact;
* ``"multiply_add"``: ``float32(float32(x * float32(1 / scale)) + zero_point)``, two float32
  roundings before the integer one, as PyTorch's CPU ``quantize_per_channel`` does;
* ``"divide64"``: ``x / scale`` in float64, rounded to an integer there, as PyTorch's CUDA
  ``quantize_per_tensor`` / ``quantize_per_channel`` do (their scale is a C ``double``). The
  float64 quotient of two float32 values is never a false tie: ``x - (k + 0.5) * scale`` is a
  multiple of 2^-48 of ``x`` or exactly 0, far above float64's rounding, so this rounds the
  exact quotient -- where the float32 quotient can round onto (or off) a half-way point.

Rounding is half to even (``np.rint``, as ONNX and PyTorch) or half away from zero (TFLite,
C ``round``). Everything runs on float32 blocks of ~64K elements, so a 16M-element tensor never
needs a full-size temporary; a large tensor under one scale goes through compiled one-pass
loops on every core instead (:mod:`quantscope.core.kernels.direct_kernel`, the same codes bit for
bit).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels import compiled
from quantscope.core.schemes.overflow import check_overflow_rule, concerned, runtime_codes
from quantscope.core.tensors.layout import expand_params, granularity_of
from quantscope.core.tensors.validate import (
    ARITHMETIC_RULES,
    ROUNDING_RULES,
    as_float32,
    check_choice,
    check_code_difference,
    check_code_range,
    check_codes,
    check_integer_zero_point,
    check_invertible,
    check_nonfinite,
    check_output,
    check_scale,
    check_zero_point,
    code_dtype,
)
from quantscope.errors import EngineValueError

#: Elements per block: 256 KiB of float32, small enough to stay in L2 cache.
BLOCK = 1 << 16
#: Tensors above this many elements under one scale take the compiled one-pass loops. Below,
#: the blocked NumPy passes take at most a few milliseconds (2.6 ms to analyze 2^18 elements,
#: 1.0 ms compiled), while the first compiled loop of a process costs about 0.6 s to import
#: Numba and load from its cache: a one-shot call on a small tensor stays NumPy alone.
COMPILED_MIN = 4 * BLOCK


def scale_to_float(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, arithmetic: str,
                   out: np.ndarray | None = None, inv_scale=None) -> tuple[np.ndarray, bool]:
    """Return ``x / scale`` by the chosen arithmetic (float32) and whether the zero point is in.

    ``"fma"`` (one fused step) and ``"multiply_add"`` (a float32 product, then a float32 sum)
    add the zero point before rounding; the other two leave it to be added after rounding, as
    their runtimes do. ``inv_scale`` (float32), when given, is the
    multiplier the runtime stores itself -- TensorRT/ModelOpt and TFLite weights multiply by
    ``float32(127 / amax)``, which can differ from ``float32(1 / float32(amax / 127))``.
    """
    if arithmetic == "divide":
        return np.divide(x, scale, out=out), False
    inv = np.float32(1.0) / scale if inv_scale is None else inv_scale
    if arithmetic == "multiply":
        return np.multiply(x, inv, out=out), False
    if arithmetic == "multiply_add":
        v = np.multiply(x, inv, out=out)
        v = np.add(v, np.asarray(zero_point, np.float32), out=v if np.ndim(v) else None)
        return v, True
    fused = x.astype(np.float64) * inv.astype(np.float64) + zero_point
    if out is None:
        return fused.astype(np.float32), True
    out[...] = fused
    return out, True


def round_inplace(v: np.ndarray, rounding: str) -> np.ndarray:
    """Round float32 ``v`` to integers in place, half to even or half away from zero.

    Half-away is done as trunc plus a step where the dropped fraction is >= 0.5; the fraction
    ``v - trunc(v)`` is exact in floating point, unlike the ``trunc(v + 0.5)`` shortcut, which
    rounds 0.49999997 up.
    """
    if rounding == "half_even":
        return np.rint(v, out=v)
    t = np.trunc(v)
    step = np.abs(v - t) >= 0.5
    np.copysign(step, v, out=v, dtype=np.float32)
    v += t
    return v


def quantize_codes_float(x: np.ndarray, scale, zero_point, qmin: int, qmax: int, rounding: str,
                         arithmetic: str, out: np.ndarray | None = None,
                         inv_scale=None) -> np.ndarray:
    """Unclamped codes ``round(x / scale) + zero_point`` as float32 (NaN stays NaN).

    Kept separate from the clamp so the statistics can tell clipped elements from the others by
    the same arithmetic the codes come from.
    """
    if arithmetic == "divide64":
        return _codes_divide64(x, scale, zero_point, rounding, out)
    v, has_zp = scale_to_float(x, scale, zero_point, arithmetic, out=out, inv_scale=inv_scale)
    v = np.asarray(v)  # a 0-d input gives a NumPy scalar, which cannot be rounded in place
    round_inplace(v, rounding)
    if not has_zp and np.any(zero_point):
        v += np.asarray(zero_point, np.float32)  # exact: |zero_point| <= 255
    return v


def _codes_divide64(x: np.ndarray, scale, zero_point, rounding: str,
                    out: np.ndarray | None) -> np.ndarray:
    """Unclamped codes by ``"divide64"``: the float64 quotient rounded in float64, then the zero
    point added and the result stored as float32 (an integer; beyond float32's range, ±inf)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        q = np.asarray(x, np.float64) / np.asarray(scale, np.float64)
        if rounding == "half_even":
            np.rint(q, out=q)
        else:
            t = np.trunc(q)
            q = t + np.copysign((np.abs(q - t) >= 0.5).astype(np.float64), q)
        q += np.asarray(zero_point, np.float64)
        if out is None:
            return np.asarray(q.astype(np.float32))
        out[...] = q
    return out


def quantize(
    x,
    scale,
    zero_point=0,
    *,
    qmin: int = -128,
    qmax: int = 127,
    axis: int | None = None,
    group_size: int | None = None,
    rounding: str = "half_even",
    nonfinite: str = "raise",
    arithmetic: str = "divide",
    inv_scale=None,
    overflow: str | None = None,
) -> np.ndarray:
    """Quantize ``x`` to integer codes with saturation.

    Parameters
    ----------
    x : array_like
        Floating-point tensor; float64/float16/bfloat16 are converted to float32 first (every
        runtime quantizes from float32). Integer, bool, complex and object arrays raise TypeError.
    scale, zero_point
        Scalars (per tensor), 1-D along ``axis`` (per channel), or per-group arrays (see
        :mod:`quantscope.core.tensors.layout`). Scales must be finite and > 0; zero points integers
        in
        ``[qmin, qmax]``.
    qmin, qmax : int
        Code range, 2 to 8 bits, signed (stored as int8) or unsigned (stored as uint8).
    rounding : {"half_even", "half_away"}
    nonfinite : {"raise", "saturate", "runtime"}
        ``"raise"``: NaN/inf raise ValueError with their count and first index. ``"saturate"``:
        ±inf go to qmax/qmin and NaN to the zero point. ``"runtime"``: NaN, ±inf and the finite
        values beyond the runtime's integer conversion get the codes the runtime gives them,
        by the rule ``overflow`` names (:mod:`quantscope.core.schemes.overflow`; a preset's
        parameters carry theirs).
    arithmetic : {"divide", "multiply", "fma", "multiply_add", "divide64"}
        How ``x / scale`` is formed (see the module docstring).
    inv_scale : array_like, optional
        For the multiplying arithmetics: the runtime's own float32 multiplier, shaped like
        ``scale`` (default ``float32(1) / scale``).
    overflow : str, optional
        The runtime's rule for ``nonfinite="runtime"``.

    Returns
    -------
    numpy.ndarray
        Codes of ``x``'s shape, int8 (signed range) or uint8 (unsigned range). Values outside the
        range saturate: 200.0 at scale 1 gives 127, never -56.
    """
    check_code_range(qmin, qmax)
    check_choice(rounding, ROUNDING_RULES, "rounding")
    check_choice(arithmetic, ARITHMETIC_RULES, "arithmetic")
    granularity_of(axis, group_size)
    xf = as_float32(x)
    check_choice(nonfinite, ("raise", "saturate", "runtime"), "nonfinite")
    check_overflow_rule(overflow)
    if nonfinite == "runtime":
        if overflow is None:
            raise EngineValueError(
                "nonfinite='runtime' needs the runtime's rule for NaN and inf (overflow=...): "
                "these parameters name none -- no preset, or one whose runtime was not "
                "measured on them; pass nonfinite='raise' or 'saturate'")
        out = quantize(xf, scale, zero_point, qmin=qmin, qmax=qmax, axis=axis,
                       group_size=group_size, rounding=rounding, nonfinite="saturate",
                       arithmetic=arithmetic, inv_scale=inv_scale)
        _apply_overflow(xf, out, scale, zero_point, axis, group_size, qmin, qmax, rounding,
                        arithmetic, inv_scale, overflow)
        return out
    checked = check_scale(scale)
    check_invertible(checked, arithmetic, inv_scale)
    s = expand_params(xf.shape, checked, axis, group_size, "scale")
    z = expand_params(xf.shape, check_zero_point(zero_point, qmin, qmax), axis, group_size,
                      "zero_point")
    if inv_scale is not None:
        inv_scale = expand_params(xf.shape, check_scale(inv_scale), axis, group_size,
                                  "inv_scale")
    out = np.empty(xf.shape, dtype=code_dtype(qmin))
    if s.ndim == 0 and use_compiled(xf, arithmetic):
        bad = compiled.quantize_flat(xf, s, z, qmin, qmax, rounding, arithmetic, inv_scale, out)
        if bad and nonfinite == "raise":
            check_nonfinite(xf, nonfinite)  # raises with the count and first index
        return out
    if s.ndim == 0 and xf.size > BLOCK:
        flat_x = np.ascontiguousarray(xf).reshape(-1)
        flat_out = out.reshape(-1)
        buf = np.empty(BLOCK, np.float32)
        for start in range(0, flat_x.size, BLOCK):
            stop = min(start + BLOCK, flat_x.size)
            _quantize_block(flat_x[start:stop], s, z, qmin, qmax, rounding, arithmetic,
                            flat_out[start:stop], nonfinite, buf[: stop - start], xf, inv_scale)
    else:
        _quantize_block(xf, s, z, qmin, qmax, rounding, arithmetic, out, nonfinite, None, xf,
                        inv_scale)
    return out


def _apply_overflow(xf, out, scale, zero_point, axis, group_size, qmin, qmax, rounding,
                    arithmetic, inv_scale, rule) -> None:
    """Overwrite, in ``out``, the codes of the elements ``rule`` concerns (few: NaN, inf and
    values beyond 2^30 scales) with the runtime's own."""
    s = np.broadcast_to(expand_params(xf.shape, check_scale(scale), axis, group_size, "scale"),
                        xf.shape)
    mask = concerned(xf, s, rule)
    if not mask.any():
        return
    z = np.broadcast_to(expand_params(xf.shape, check_zero_point(zero_point, qmin, qmax), axis,
                                      group_size, "zero_point"), xf.shape)[mask]
    xs, ss = xf[mask], s[mask]
    inv = None
    if inv_scale is not None:
        inv = np.broadcast_to(expand_params(xf.shape, check_scale(inv_scale), axis,
                                            group_size, "inv_scale"), xf.shape)[mask]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if rule == "int32_capped_wrap":  # rounds after its cap: the product itself
            rounded = xs * (np.float32(1) / ss if inv is None else inv)
        elif arithmetic == "divide64":
            rounded = _codes_divide64(xs, ss, 0, rounding, None)
        else:
            v, has_zp = scale_to_float(xs, ss, z, arithmetic, inv_scale=inv)
            rounded = round_inplace(np.array(v, np.float32), rounding)
            if has_zp:
                rounded -= z.astype(np.float32)
    out[mask] = runtime_codes(rule, xs, rounded, z, qmin, qmax)


def _quantize_block(x, s, z, qmin, qmax, rounding, arithmetic, out, nonfinite, buf,
                    whole, inv=None) -> None:
    with np.errstate(over="ignore", invalid="ignore"):  # huge and infinite values saturate
        v = quantize_codes_float(x, s, z, qmin, qmax, rounding, arithmetic, out=buf,
                                 inv_scale=inv)
    np.clip(v, qmin, qmax, out=v)
    # NaN is the only value the clip leaves non-finite (inf saturates), so this one cheap test
    # on the block in cache finds NaN; inf is found by the range test that follows.
    if np.isnan(v).any() or (nonfinite == "raise" and not np.isfinite(x).all()):
        check_nonfinite(whole, nonfinite)  # raises with the count and first index
        nan = np.isnan(v)
        v[nan] = np.broadcast_to(z, v.shape)[nan]
    np.copyto(out, v, casting="unsafe")


def dequantize(q, scale, zero_point=0, *, axis: int | None = None,
               group_size: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """Return ``scale · (q − zero_point)`` as float32.

    The codes are widened to int32 before the zero point is subtracted (q = 127 with
    zero_point = -128 is 255, not a wrapped int8), the difference is exact in float32, and the
    product is one correctly rounded float32 multiplication, as in ONNX DequantizeLinear.

    ``out``, a writeable C-contiguous float32 array of ``q``'s shape that does not overlap it,
    receives the values and is returned. Reusing one buffer across many tensors skips what a
    fresh output costs on every call: the kernel zeroing each new page on its first touch,
    longer than the dequantization itself at 16M elements.
    """
    q = check_codes(q)
    granularity_of(axis, group_size)
    s = expand_params(q.shape, check_scale(scale), axis, group_size, "scale")
    zp = check_integer_zero_point(zero_point)
    check_code_difference(q, zp)
    z = expand_params(q.shape, zp.astype(np.int32), axis, group_size, "zero_point")
    dst = np.empty(q.shape, np.float32) if out is None else check_output(out, q)
    if s.ndim == 0 and q.itemsize <= 4 and use_compiled(q, "divide"):
        return compiled.dequantize_into(q, s, z, dst, fresh=out is None)
    with np.errstate(over="ignore"):  # a code beyond float32's range is ±inf, as in a runtime
        return np.multiply((q.astype(np.int32) - z).astype(np.float32), s, out=dst)


def use_compiled(x: np.ndarray, arithmetic: str) -> bool:
    """Whether a pass over ``x`` under one scale takes the compiled one-pass loops
    (:mod:`quantscope.core.kernels.direct_kernel`, the same codes bit for bit): a large contiguous
    tensor, and an arithmetic those loops know (the import of Numba is not worth it below).
    ``"divide64"`` is not among them: its float64 lanes would halve the vector width of the
    16-lane loop, and the blocked NumPy pass gives the same codes."""
    if x.size <= COMPILED_MIN or not x.flags.c_contiguous:
        return False
    return arithmetic in compiled.LINE_ARITHMETIC


def quantize_fp32_to_int8(x, scale) -> np.ndarray:
    """The classic kernel: ``clamp(round_half_even(x / scale), -128, 127)`` as int8.

    The clamp happens before the cast, so out-of-range values saturate instead of wrapping;
    0-d and empty arrays keep their shape.
    """
    return quantize(x, scale, 0, qmin=-128, qmax=127)
