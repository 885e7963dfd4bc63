"""Requantization, bit-exact with the kernels that run it: LiteRT's reference kernels,
gemmlowp's double rounding and XNNPACK's float32 path.

An integer kernel ends with an int32 accumulator that must be scaled by a real number
``M = s_in * s_w / s_out`` (almost always < 1) and rounded back to int8. Four rules are in use
(:data:`REQUANT_RULES`); which one a device runs decides a code on a few outputs in 10^3:

* ``"single"`` -- LiteRT 2.3's reference kernels (``BUILTIN_REF``): at prepare time
  ``QuantizeMultiplier`` writes ``M`` as a Q31 integer ``m`` in ``[2^30, 2^31)`` and a shift
  (``M ~= m * 2^(shift - 31)``); at run time ``MultiplyByQuantizedMultiplier`` rounds
  ``x * m * 2^(shift - 31)`` once, exactly, with ties away from zero (measured on constructed
  exact ties: -2.5 gives -3, where the ``+ 2^(total - 1) >> total`` of TFLite's
  ``TFLITE_SINGLE_ROUNDING`` source text gives -2; that half-up variant is
  ``single_rounding=True`` of :func:`multiply_by_quantized_multiplier`);
* ``"double"`` -- gemmlowp's ``SaturatingRoundingDoublingHighMul`` then
  ``RoundingDivideByPOT`` (TFLite's source default before single rounding, TFLite Micro, ARM
  NEON's ``VQRDMULH`` + rounding shift): two integer roundings, one code off the single
  rounding on ~0.2% of real outputs;
* ``"fp32"`` -- XNNPACK, which LiteRT's default interpreter delegates to: no Q31 multiplier at
  all, ``rint(float32(acc) * float32(float32(s_in * s_w) / s_out))`` half to even, then
  ``+ zp_out`` and the clamp.

* ``"ruy"`` -- LiteRT 2.3's optimized builtin kernels without a delegate
  (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``), whose int8 FULLY_CONNECTED runs ruy's x86 kernels
  (``ruy/kernel_avx512.cc``, ``kernel_avx2_fma.cc``): the same ``m`` and shift, then
  ``(x·m + 2^30) >> 31`` and a rounding right shift ``(r + 2^(e-1)) >> e`` -- two roundings,
  both with ties toward +inf (gemmlowp's second rounds them away from zero, so the two differ
  where the first rounding lands on a half: about 4 outputs in 10^4 of random operands);
  a sum that would pass INT32_MAX gives ``2^(31-e)``, as the kernel's overflow guard does.

Fixed-point rules are
integer arithmetic in int64 numpy arrays; emulating them in float would disagree on ties and on
the last bit of ``m``. tests/core/test_matmul.py compares every rule with the LiteRT interpreter
on a FULLY_CONNECTED model built in the test, on random operands and constructed ties.

Sources (tensorflow/lite/kernels/internal/quantization_util.cc, common.cc; gemmlowp
fixedpoint/fixedpoint.h; XNNPACK src/qs8-gemm fp32 requantization) were read, not paraphrased;
the tests re-derive each rule with Python ints from the C++ text.
"""

from __future__ import annotations

from typing import overload

import numpy as np

from quantscope.core.tensors.validate import EngineTypeError, EngineValueError

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
#: ``MultiplyByQuantizedMultiplier`` computes ``1 << left_shift`` in int32 and right-shifts by
#: at most 31, so the shifts it can execute without undefined behaviour are [-31, 30]
#: (TFLite's single-rounding path DCHECKs exactly this range).
MIN_SHIFT = -31
MAX_SHIFT = 30

#: Requantization rule -> where it runs (see the module docstring).
REQUANT_RULES = {
    "single": "LiteRT 2.3 reference kernels: one rounding, ties away from zero",
    "double": "gemmlowp / TFLite source default: SRDHM, then RoundingDivideByPOT",
    "fp32": "XNNPACK (LiteRT's default interpreter): rint(f32(acc) · f32(f32(sa·sw)/so))",
    "ruy": "LiteRT 2.3 optimized builtin kernels (ruy, x86): two roundings, ties up",
}

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "REQUANT_RULES",
    "multiply_by_quantized_multiplier",
    "quantize_multiplier",
    "requantize_fp32",
    "requantize_ruy",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul",
    "wrap_int32",
]


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Reduce integers modulo 2^32 into int32, as two's-complement int32 arithmetic does.

    TFLite marks the functions that rely on this with ``TFLITE_NO_SANITIZE_INTEGER_OVERFLOW``
    (the left shift inside ``MultiplyByQuantizedMultiplier``) and the int32 accumulator of every
    integer kernel wraps the same way, so reproducing a device means wrapping, not saturating.
    """
    return np.asarray(x, dtype=np.int64).astype(np.int32)


@overload
def quantize_multiplier(real_multiplier: float, *,
                        single_rounding: bool = False) -> tuple[int, int]: ...
@overload
def quantize_multiplier(real_multiplier: np.ndarray, *,
                        single_rounding: bool = False) -> tuple[np.ndarray, np.ndarray]: ...
def quantize_multiplier(
    real_multiplier: float | np.ndarray, *, single_rounding: bool = False
) -> tuple[int, int] | tuple[np.ndarray, np.ndarray]:
    """Split a real multiplier into TFLite's Q31 multiplier and power-of-two shift.

    Parameters
    ----------
    real_multiplier : float or array_like of float
        ``s_in * s_w / s_out`` computed in float64 (TFLite computes it in double). Must be
        finite and >= 0; an array gives per-channel multipliers.
    single_rounding : bool
        Mirror a ``TFLITE_SINGLE_ROUNDING`` build, which saturates shifts above 30 to
        ``(2^31 - 1, 30)`` because its multiply cannot execute them.

    Returns
    -------
    (multiplier_q31, shift)
        Python ints for a scalar input, int32 arrays of the input's shape otherwise, such that
        ``real ~= multiplier_q31 * 2^(shift - 31)``.

    Notes
    -----
    Step by step as in ``tflite::QuantizeMultiplier``: ``q, shift = frexp(real)`` with
    ``q`` in [0.5, 1); ``q_fixed = round_half_away(q * 2^31)``; ``q_fixed == 2^31`` (``q``
    within 2^-32 of 1) becomes ``2^30`` with ``shift + 1``; ``shift < -31`` (``real`` below
    about 2^-32) flushes to ``(0, 0)`` because every bit would be shifted out anyway; zero gives
    ``(0, 0)``. ``q * 2^31`` and the ``+ 0.5`` of the rounding are exact in float64 (``q`` has 53
    significant bits and the sum stays below 2^31 with spacing 2^-22), so ``floor(v + 0.5)`` is
    exactly ``std::round``.
    """
    arr = np.asarray(real_multiplier, dtype=np.float64)
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        value = arr.ravel()[int(np.argmax(bad.ravel()))]
        raise EngineValueError(
            f"real multiplier must be finite and >= 0 (a ratio of positive scales), got {value!r}"
        )
    q, exponent = np.frexp(arr)
    q_fixed = np.floor(q * 2.0**31 + 0.5).astype(np.int64)
    shift = exponent.astype(np.int64)
    at_one = q_fixed == 2**31
    q_fixed = np.where(at_one, 2**30, q_fixed)
    shift = np.where(at_one, shift + 1, shift)
    flush = shift < -31  # also covers real == 0, where frexp gives (0, 0) already
    q_fixed = np.where(flush, 0, q_fixed)
    shift = np.where(flush, 0, shift)
    if single_rounding:
        too_big = shift > MAX_SHIFT
        q_fixed = np.where(too_big, INT32_MAX, q_fixed)
        shift = np.where(too_big, MAX_SHIFT, shift)
    if arr.ndim == 0:
        return int(q_fixed), int(shift)
    return q_fixed.astype(np.int32), shift.astype(np.int32)


def _as_int_array(x: object, what: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise EngineTypeError(f"{what} must be an integer array, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _check_int32_values(x: np.ndarray, what: str) -> None:
    if x.size and (x.min() < INT32_MIN or x.max() > INT32_MAX):
        raise EngineValueError(
            f"{what} has values outside int32 [{INT32_MIN}, {INT32_MAX}] "
            f"(range [{int(x.min())}, {int(x.max())}]); wrap or saturate them first"
        )


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """gemmlowp's ``SaturatingRoundingDoublingHighMul`` on int32 values (ARM ``VQRDMULH``).

    Returns ``round(a * b / 2^31)`` with ties toward +infinity, as int64 values in int32 range;
    the only input that would leave int32, ``INT32_MIN * INT32_MIN``, saturates to INT32_MAX.

    The C++ adds a nudge of ``2^30`` (or ``1 - 2^30`` for negative products) and divides with
    truncation toward zero; for negative products that truncation turns the ``- 2^30 + 1`` into
    a floor of ``+ 2^30``, so both branches equal ``(a*b + 2^30) >> 31`` with an arithmetic
    shift. ``|a*b| <= 2^62`` keeps the int64 product exact.
    """
    a64 = _as_int_array(a, "a")
    b64 = _as_int_array(b, "b")
    _check_int32_values(a64, "a")
    _check_int32_values(b64, "b")
    return _srdhm(a64, b64)


def _srdhm(a64: np.ndarray, b64: np.ndarray) -> np.ndarray:
    high = (a64 * b64 + (1 << 30)) >> 31
    overflow = (a64 == INT32_MIN) & (b64 == INT32_MIN)
    if overflow.any():
        high = np.where(overflow, INT32_MAX, high)
    return high


def rounding_divide_by_pot(x: np.ndarray, exponent: int | np.ndarray) -> np.ndarray:
    """gemmlowp's ``RoundingDivideByPOT``: ``x / 2^exponent`` rounded half away from zero.

    ``exponent`` lies in [0, 31] (gemmlowp asserts it) and broadcasts against ``x``. The
    arithmetic mirrors the C++: ``mask = 2^e - 1``, ``remainder = x & mask``,
    ``threshold = (mask >> 1) + (x < 0)``, result ``(x >> e) + (remainder > threshold)``.
    """
    x64 = _as_int_array(x, "x")
    _check_int32_values(x64, "x")
    e = _as_int_array(exponent, "exponent")
    if e.size and (e.min() < 0 or e.max() > 31):
        raise EngineValueError(f"exponent must lie in [0, 31], got range [{e.min()}, {e.max()}]")
    return _rdbpot(x64, e)


def _rdbpot(x64: np.ndarray, e: np.ndarray) -> np.ndarray:
    mask = (np.int64(1) << e) - 1
    remainder = x64 & mask
    threshold = (mask >> 1) + (x64 < 0)
    return (x64 >> e) + (remainder > threshold)


def multiply_by_quantized_multiplier(
    acc: np.ndarray,
    multiplier_q31: int | np.ndarray,
    shift: int | np.ndarray,
    *,
    single_rounding: bool = False,
    ties: str = "up",
    return_shift_overflows: bool = False,
) -> np.ndarray | tuple[np.ndarray, int]:
    """TFLite's ``MultiplyByQuantizedMultiplier(int32 x, int32 m, int shift)``, vectorized.

    Parameters
    ----------
    acc : array_like of int
        int32 accumulator values (any integer dtype whose values fit int32).
    multiplier_q31, shift : int or array_like of int
        From :func:`quantize_multiplier`; broadcast against ``acc`` (a per-channel pair of
        shape ``[N]`` scales the last axis of an ``[M, N]`` accumulator). ``multiplier_q31``
        in [0, 2^31), ``shift`` in [-31, 30].
    single_rounding : bool
        ``False`` (TFLite's default build): ``RoundingDivideByPOT(SRDHM(x << left, m), right)``
        with ``left = max(shift, 0)``, ``right = max(-shift, 0)``; the left shift wraps in int32
        as the C++ does. ``True`` (``TFLITE_SINGLE_ROUNDING``): ``(x*m + 2^(30-shift)) >>
        (31-shift)`` in int64, cast (wrapping) to int32.
    ties : {"up", "away"}
        With ``single_rounding``: ``"up"`` is the ``+ 2^(total - 1)`` of the
        ``TFLITE_SINGLE_ROUNDING`` source, ``"away"`` rounds exact ties away from zero, as
        LiteRT 2.3's reference kernels were measured to (the two differ on exact ties only).
    return_shift_overflows : bool
        Also return how many ``x << left`` wrapped (the result is then garbage on a device too,
        which is worth showing rather than hiding).

    Returns
    -------
    numpy.ndarray of int32 (and the wrap count when asked).
    """
    x = _as_int_array(acc, "acc")
    _check_int32_values(x, "acc")
    m = _as_int_array(multiplier_q31, "multiplier_q31")
    s = _as_int_array(shift, "shift")
    if m.size and (m.min() < 0 or m.max() > INT32_MAX):
        raise EngineValueError("multiplier_q31 must lie in [0, 2^31 - 1]")
    if s.size and (s.min() < MIN_SHIFT or s.max() > MAX_SHIFT):
        raise EngineValueError(
            f"shift must lie in [{MIN_SHIFT}, {MAX_SHIFT}] (the shifts TFLite can execute), got "
            f"range [{int(s.min())}, {int(s.max())}]; a real multiplier >= 2^30 has no int32 form"
        )
    if ties not in ("up", "away"):
        raise EngineValueError(f"ties must be 'up' or 'away', got {ties!r}")
    if single_rounding:
        total = 31 - s
        half = np.int64(1) << (total - 1)
        if ties == "up":
            scaled = (x * m + half) >> total
        else:  # |x * m| < 2^62: the magnitude is exact in int64
            product = x * m
            scaled = np.sign(product) * ((np.abs(product) + half) >> total)
        result = wrap_int32(scaled)
        return (result, 0) if return_shift_overflows else result
    wraps = 0
    if s.size and s.max() > 0:  # rare: multipliers >= 1 shift left first, wrapping in int32
        shifted = x << np.maximum(s, 0)
        x = wrap_int32(shifted).astype(np.int64)
        wraps = int(np.count_nonzero(shifted != x))
    result = _rdbpot(_srdhm(x, m), np.maximum(-s, 0)).astype(np.int32)
    return (result, wraps) if return_shift_overflows else result


def requantize_ruy(acc: np.ndarray, multiplier_q31, shift) -> np.ndarray:
    """ruy's x86 requantization before the zero point (int64 values in int32 range): the
    accumulator shifted left by ``max(shift, 0)`` (wrapping in int32), ``(x·m + 2^30) >> 31``,
    then ``(r + 2^(e-1)) >> e`` with ``e = max(-shift, 0)``; where ``r + 2^(e-1)`` would pass
    INT32_MAX the kernel stores ``2^(31-e)``."""
    x = _as_int_array(acc, "acc")
    _check_int32_values(x, "acc")
    m = _as_int_array(multiplier_q31, "multiplier_q31")
    s = _as_int_array(shift, "shift")
    left = np.maximum(s, 0)
    if left.size and left.max() > 0:
        x = wrap_int32(x << left).astype(np.int64)
    r = (x * m + (np.int64(1) << 30)) >> 31
    e = np.maximum(-s, 0)
    nudge = np.where(e > 0, np.int64(1) << np.maximum(e - 1, 0), 0)
    out = (r + nudge) >> e
    return np.where(r > INT32_MAX - nudge, np.int64(1) << (31 - e), out)


def requantize_fp32(acc: np.ndarray, multiplier_f32: np.ndarray) -> np.ndarray:
    """XNNPACK's float32 requantization before the zero point: ``rint(float32(acc) *
    multiplier_f32)`` as int64 (half to even; ``float32(acc)`` itself rounds to nearest even
    above 2^24, as the C conversion does)."""
    x = _as_int_array(acc, "acc")
    _check_int32_values(x, "acc")
    product = x.astype(np.float32) * np.asarray(multiplier_f32, np.float32)
    return np.rint(product).astype(np.int64)
