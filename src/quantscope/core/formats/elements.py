"""Element types below int8: the small floating-point formats, their casts, and their grids.

An element type is a monotone grid of representable values: FP8 E4M3FN / E5M2 (OCP), the
E4M3FNUZ / E5M2FNUZ variants, FP6 E2M3 / E3M2 and FP4 E2M1 (OCP MX v1.0), MXINT8's 8-bit
fixed point (``k / 64``, ``|k| <= 127``) and QLoRA's 16 NF4 levels. A float32 ``v`` is cast by
rounding to the nearest representable value:

* floating point: round to nearest, ties to the even mantissa, with the exponent range
  unbounded above; subnormals below ``2^emin``. Written out as ``rint(|v| / q) * q`` with the
  quantum ``q = 2^(max(floor(log2|v|), emin) - mbits)``, exact in float64;
* MXINT8: ``rint(64 v) / 64`` (ties to even);
* NF4: the nearest level, ties to the lower one (bitsandbytes' decision tree compares with
  ``>`` at the midpoints).

An element is *clipped* when that rounded value lies beyond the largest finite value: the
saturating cast (the default, as torchao and the MX specification do it) maps it to
``±max_finite``; the non-saturating cast gives inf (E5M2) or NaN (E4M3FN and the FNUZ types),
as ``ml_dtypes`` does. FP6 and FP4 have no inf or NaN encoding, so both casts saturate (and
``ml_dtypes`` maps NaN to -0 there). The tests compare these casts with ``ml_dtypes`` bit for
bit, on constructed ties, subnormals, overflow and random bit patterns.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from quantscope.core.kernels.jit_cache import njit

#: Element kinds as the compiled loops see them.
KIND_FLOAT, KIND_INT, KIND_LUT = 0, 1, 2
#: What a non-saturating cast gives beyond the largest finite value.
OVERFLOW_SATURATE, OVERFLOW_INF, OVERFLOW_NAN = 0, 1, 2

#: QLoRA's NormalFloat4 levels (Dettmers et al. 2023, bitsandbytes ``NF4`` table).
NF4_LEVELS = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], np.float32)


#: What the compiled loops take for an element type: kind, mbits, emin, step, max_finite,
#: overflow, signed_zero, the lookup table's midpoints and values.
KernelElement = tuple[int, int, int, float, float, int, bool, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class ElementType:
    """One element type: its grid, its rounding and its overflow behaviour.

    ``mbits``/``emin`` describe a floating-point type (mantissa bits, exponent of the smallest
    normal); ``step`` a fixed-point one; ``levels`` a lookup table. ``dtype`` is the
    ``ml_dtypes`` type whose bits the codes are (None for MXINT8, stored as int8 codes, and NF4,
    stored as 4-bit indices), resolved on first use: importing ml_dtypes costs 2-5 s, which a
    window that never casts to these types should not pay at start-up."""

    name: str
    bits: int
    kind: int
    max_finite: float
    mbits: int = 0
    emin: int = 0
    step: float = 0.0
    overflow: int = OVERFLOW_SATURATE
    signed_zero: bool = True
    dtype_name: str | None = None

    @property
    def dtype(self) -> type | None:
        """The ``ml_dtypes`` type named ``dtype_name`` (imported here, at the first need)."""
        if self.dtype_name is None:
            return None
        import ml_dtypes

        return getattr(ml_dtypes, self.dtype_name)

    @property
    def emax(self) -> int:
        """Exponent of the largest power of two in the grid (the MX spec's ``emax_elem``)."""
        return math.floor(math.log2(self.max_finite))

    @functools.cached_property
    def values(self) -> np.ndarray:
        """Every finite representable value, ascending, ±0 counted once (float64)."""
        if self.kind == KIND_LUT:
            return NF4_LEVELS.astype(np.float64)
        if self.kind == KIND_INT:
            return np.arange(-127, 128) * self.step
        assert self.dtype is not None  # every floating-point kind names its ml_dtypes type
        patterns = np.arange(1 << self.bits, dtype=np.uint8)
        vals = patterns.view(self.dtype).astype(np.float64)
        return np.unique(vals[np.isfinite(vals)] + 0.0)  # + 0.0 turns -0 into 0

    @functools.cached_property
    def midpoints(self) -> np.ndarray:
        """Midpoints between consecutive values (exact in float64): the rounding boundaries."""
        v = self.values
        return (v[:-1] + v[1:]) / 2

    @property
    def levels(self) -> int:
        return int(self.values.size)

    def params(self) -> KernelElement:
        """The arguments the compiled loops take for this type."""
        return (self.kind, self.mbits, self.emin, self.step, self.max_finite, self.overflow,
                self.signed_zero, _lut_mid(self), _lut_val(self))


def _lut_val(et: ElementType) -> np.ndarray:
    return et.values if et.kind == KIND_LUT else np.zeros(1)


def _lut_mid(et: ElementType) -> np.ndarray:
    return et.midpoints if et.kind == KIND_LUT else np.zeros(1)


def _float(name, bits, mbits, bias, overflow, max_finite, signed_zero=True) -> ElementType:
    """A floating-point element type; ``max_finite`` is ``ml_dtypes.finfo(name).max`` (written
    out so that ml_dtypes loads only when a cast needs it; a test holds the two equal)."""
    return ElementType(name, bits, KIND_FLOAT, max_finite, mbits=mbits, emin=1 - bias,
                       overflow=overflow, signed_zero=signed_zero, dtype_name=name)


ELEMENTS: dict[str, ElementType] = {et.name: et for et in (
    _float("float8_e4m3fn", 8, 3, 7, OVERFLOW_NAN, 448.0),
    _float("float8_e5m2", 8, 2, 15, OVERFLOW_INF, 57344.0),
    _float("float8_e4m3fnuz", 8, 3, 8, OVERFLOW_NAN, 240.0, signed_zero=False),
    _float("float8_e5m2fnuz", 8, 2, 16, OVERFLOW_NAN, 57344.0, signed_zero=False),
    _float("float6_e2m3fn", 6, 3, 1, OVERFLOW_SATURATE, 7.5),
    _float("float6_e3m2fn", 6, 2, 3, OVERFLOW_SATURATE, 28.0),
    _float("float4_e2m1fn", 4, 1, 1, OVERFLOW_SATURATE, 6.0),
    ElementType("int8_mx", 8, KIND_INT, 127 / 64, step=1 / 64),
    ElementType("nf4", 4, KIND_LUT, 1.0),
)}

_jit = njit(nogil=True, error_model="numpy")


@intrinsic
def float32_bits(typingctx, x):
    """The IEEE bits of a float32 as a uint32 (an LLVM bitcast: Numba has no scalar view)."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def bits_float32(typingctx, u):
    """The float32 whose IEEE bits are the low 32 bits of the integer ``u``."""
    if not isinstance(u, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        low = args[0]
        if u.bitwidth > 32:  # type: ignore[attr-defined]  # Numba's stubs lack Integer.bitwidth
            low = builder.trunc(low, ir.IntType(32))
        return builder.bitcast(low, ir.FloatType())

    return types.float32(u), codegen


@njit(nogil=True, error_model="numpy", inline="always")
def pow2(k) -> float:
    """``2^k`` exactly for ``-126 <= k <= 127``, from its float32 bits: ``math.ldexp`` is a
    library call per element, a third of a pass over FP4's many subnormal values."""
    return np.float64(bits_float32(np.int64(k + 127) << 23))


@njit(nogil=True, error_model="numpy", inline="always")
def round_element(v, kind, mbits, emin, step, lut_mid, lut_val) -> float:
    """The nearest representable value of finite float32 ``v``, unbounded above (float64).

    Floating point: in the normal range the float32 bits are rounded (to nearest, ties to the
    even kept bit) at ``23 - mbits``, as ``ml_dtypes`` does; below ``2^emin`` the quantum is
    fixed and ``rint`` of the exactly scaled value rounds. A lookup table returns values
    beyond its outer levels unchanged (they are clipped: the caller saturates them)."""
    if kind == KIND_FLOAT:
        u = np.int64(float32_bits(np.float32(v)))
        mag = u & 0x7FFFFFFF
        if (mag >> 23) - 127 >= emin:
            d = 23 - mbits
            mag = (mag + (1 << (d - 1)) - 1 + ((mag >> d) & 1)) & ~((1 << d) - 1)
            return np.float64(bits_float32(mag | (u & 0x80000000)))
        q = pow2(emin - mbits)  # the quantum below 2^emin: dividing by it is exact
        return math.copysign(np.rint(np.float64(v) / q) * q, np.float64(v))
    if kind == KIND_INT:
        return np.rint(np.float64(v) / step) * step
    x = np.float64(v)
    if x > lut_val[lut_val.size - 1] or x < lut_val[0]:
        return x
    lo = 0
    hi = lut_mid.size
    while lo < hi:  # the first midpoint not below x: ties go to the lower level
        mid = (lo + hi) >> 1
        if lut_mid[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lut_val[lo]


@njit(nogil=True, error_model="numpy", inline="always")
def cast_one(v, kind, mbits, emin, step, max_finite, overflow, signed_zero, saturate,
             lut_mid, lut_val) -> float:
    """Float32 ``v`` cast to the element type (float64 holding the element's value, or
    inf/NaN)."""
    if v != v:
        if kind == KIND_FLOAT and overflow == OVERFLOW_SATURATE:
            # FP6/FP4 have no NaN: ml_dtypes gives a zero of the opposite sign bit
            neg = float32_bits(np.float32(v)) >> np.uint32(31)
            return 0.0 if neg else -0.0
        return np.nan
    if math.isinf(v):
        r = np.float64(v)
    else:
        r = round_element(v, kind, mbits, emin, step, lut_mid, lut_val)
    if abs(r) > max_finite:
        if saturate or overflow == OVERFLOW_SATURATE:
            r = math.copysign(max_finite, r)
        elif overflow == OVERFLOW_INF:
            r = math.copysign(np.inf, r)
        else:
            return np.nan
    if r == 0.0 and not signed_zero:
        return 0.0
    return r


@_jit
def cast_array(x, out, kind, mbits, emin, step, max_finite, overflow, signed_zero, saturate,
               lut_mid, lut_val) -> None:
    """``out[i] = cast(x[i])`` over flat float32 arrays (see :func:`cast_one`)."""
    for i in range(x.size):
        out[i] = cast_one(x[i], kind, mbits, emin, step, max_finite, overflow, signed_zero,
                          saturate, lut_mid, lut_val)


@_jit
def cast_e8m0_array(x, out) -> None:
    """float32 to E8M0 (``ml_dtypes.float8_e8m0fnu``): the power of two nearest in the
    mantissa, ties up (``1.5 * 2^e`` gives ``2^(e+1)``); exponents -127..127; zero, negative,
    inf and NaN give NaN, values below ``2^-127`` give ``2^-127``."""
    for i in range(x.size):
        v = np.float64(x[i])
        if not v > 0.0 or math.isinf(v):
            out[i] = np.nan
            continue
        m, e = math.frexp(v)  # v = m 2^e, 0.5 <= m < 1
        e -= 1
        if m >= 0.75:
            e += 1
        if e < -127:
            e = -127
        out[i] = np.nan if e > 127 else math.ldexp(1.0, e)


def cast(x, element: str | ElementType, *, saturate: bool = True) -> np.ndarray:
    """Cast float32 ``x`` to an element type; the values as float32 (see the module doc).

    ``saturate=False`` is the non-saturating cast (inf/NaN beyond the largest finite value
    where the type has them), which equals ``x.astype(ml_dtypes.<type>)``.
    """
    et = ELEMENTS[element] if isinstance(element, str) else element
    xf = np.ascontiguousarray(x, np.float32)
    out = np.empty(xf.shape, np.float32)
    kind, mbits, emin, step, mx, overflow, signed_zero, lut_mid, lut_val = et.params()
    cast_array(xf.reshape(-1), out.reshape(-1), kind, mbits, emin, step, mx, overflow,
               signed_zero, bool(saturate), lut_mid, lut_val)
    return out


def cast_e8m0(x) -> np.ndarray:
    """Cast float32 ``x`` to E8M0 as ``ml_dtypes.float8_e8m0fnu`` does (values as float32)."""
    xf = np.ascontiguousarray(x, np.float32)
    out = np.empty(xf.shape, np.float32)
    cast_e8m0_array(xf.reshape(-1), out.reshape(-1))
    return out
