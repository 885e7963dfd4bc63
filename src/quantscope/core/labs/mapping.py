"""The worked example behind the idea, as numbers: how each of a few values maps to its int8
code, symmetric and asymmetric, and what a cast without clamp does instead.

:func:`map_values` is the figure "real axis above, code cells below, an arrow from each value
to its code": per scheme the scale and zero point (the engine's min/max rules, from
:func:`quantscope.core.schemes.qparams.params_from_range`), each value's code ``round(x / s) + z``,
its
dequantized value and error, the largest error, and the codes no value in the range can reach
(symmetric over ``[-1, 3]`` never uses ``-128 … -43``).

:func:`cast_without_clamp` is the bug the clamp exists for: ``np.rint(x / s) + z`` cast with
``astype(np.int8)`` wraps around (200 becomes -56, the sign flipped) where the engine saturates
(127). Both are computed by the engine's own arithmetic (:mod:`quantscope.core.schemes.quantize`),
so
the figure shows exactly what the panes compute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantscope.core.schemes.qparams import QuantParams, params_from_range
from quantscope.core.schemes.quantize import quantize_codes_float
from quantscope.core.tensors.validate import EngineValueError

#: Most values the figure draws (an arrow each; more would be a histogram, the panes' job).
MAX_VALUES = 64
#: The example of the figures: a zero, a small positive value and a skewed range.
DEFAULT_VALUES = (-1.0, 0.0, 0.5, 3.0)
#: Every int8 code, drawn as the cells below the axis.
INT8 = (-128, 127)


@dataclass(frozen=True)
class SchemeMapping:
    """One scheme's mapping of the values (see the module docstring).

    ``unreachable`` lists the int8 code ranges ``(lo, hi)`` (inclusive) that no value inside the
    values' range maps to: codes the scheme wastes on this data.
    """

    symmetric: bool
    params: QuantParams
    values: np.ndarray
    codes: np.ndarray
    dequantized: np.ndarray
    errors: np.ndarray
    unreachable: tuple[tuple[int, int], ...]

    @property
    def scale(self) -> float:
        return float(np.asarray(self.params.scale).reshape(-1)[0])

    @property
    def zero_point(self) -> int:
        return int(np.asarray(self.params.zero_point).reshape(-1)[0])

    @property
    def max_error(self) -> float:
        return float(np.max(np.abs(self.errors))) if self.errors.size else 0.0

    @property
    def unreachable_count(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.unreachable)


def check_values(values) -> np.ndarray:
    """The values as float32, refused with a clear message when the figure cannot draw them."""
    try:
        x = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise EngineValueError("the values must be numbers") from None
    if x.size == 0:
        raise EngineValueError("give at least one value")
    if x.size > MAX_VALUES:
        raise EngineValueError(f"at most {MAX_VALUES} values (got {x.size}): the figure draws "
                               "an arrow for each; load a tensor for more")
    if not np.isfinite(x).all():
        raise EngineValueError("the values must be finite (no inf or NaN)")
    if np.abs(x).max() > 1e30:
        raise EngineValueError("values beyond ±1e30 do not fit float32 arithmetic")
    return x.astype(np.float32)


def parse_values(text: str) -> np.ndarray:
    """Values typed or pasted: numbers separated by commas, spaces, semicolons or new lines,
    optionally in brackets (``[-1, 0, 0.5, 3]``)."""
    cleaned = text.replace("[", " ").replace("]", " ").replace(";", " ").replace(",", " ")
    words = cleaned.split()
    try:
        numbers = [float(w.replace("−", "-")) for w in words]
    except ValueError:
        bad = next(w for w in words if not _is_number(w.replace("−", "-")))
        raise EngineValueError(f"{bad!r} is not a number") from None
    return check_values(numbers)


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def map_scheme(values, *, symmetric: bool, bits: int = 8, rounding: str = "half_even",
               narrow_range: bool | None = None) -> SchemeMapping:
    """How ``values`` map to codes under min/max parameters of one scheme."""
    x = check_values(values)
    lo, hi = float(x.min()), float(x.max())
    params = params_from_range(lo, hi, symmetric=symmetric, bits=bits, rounding=rounding,
                               narrow_range=narrow_range)
    codes = params.quantize(x).astype(np.int64)
    deq = params.dequantize(codes.astype(params.quantize(x).dtype)).astype(np.float64)
    errors = deq - x.astype(np.float64)
    # the codes of the range's ends: everything outside them is never used by this data
    ends = params.quantize(np.array([min(lo, 0.0), max(hi, 0.0)], np.float32)).astype(int)
    unreachable = []
    if ends[0] > INT8[0]:
        unreachable.append((INT8[0], int(ends[0]) - 1))
    if ends[1] < INT8[1]:
        unreachable.append((int(ends[1]) + 1, INT8[1]))
    return SchemeMapping(symmetric, params, x, codes, deq, errors, tuple(unreachable))


def map_values(values=DEFAULT_VALUES, **options) -> tuple[SchemeMapping, SchemeMapping]:
    """``(symmetric, asymmetric)`` mappings of the same values (the figure's two rows)."""
    return (map_scheme(values, symmetric=True, **options),
            map_scheme(values, symmetric=False, **options))


@dataclass(frozen=True)
class CastResult:
    """Clamp versus a bare ``astype`` for each value at one scale and zero point."""

    values: np.ndarray
    scale: float
    zero_point: int
    unclamped: np.ndarray  # round(x / s) + z, before any clamp (int64)
    clamped: np.ndarray  # what the engine stores: saturated to [qmin, qmax]
    wrapped: np.ndarray  # what astype(np.int8) stores: two's complement wraparound
    qmin: int = INT8[0]
    qmax: int = INT8[1]

    @property
    def clamped_back(self) -> np.ndarray:
        return self.scale * (self.clamped - self.zero_point)

    @property
    def wrapped_back(self) -> np.ndarray:
        return self.scale * (self.wrapped - self.zero_point)

    @property
    def wrap_count(self) -> int:
        """How many values a cast without clamp stores wrongly (out of the int8 range)."""
        return int(np.count_nonzero(self.wrapped != self.unclamped))

    @property
    def sign_flips(self) -> int:
        """How many of them come back with the opposite sign."""
        return int(np.count_nonzero(np.sign(self.wrapped_back) != np.sign(self.clamped_back)))


def cast_without_clamp(values, scale: float, zero_point: int = 0,
                       rounding: str = "half_even") -> CastResult:
    """The codes with the engine's clamp and with a bare int8 cast (see the module docstring).

    The wrap is computed as the cast does it, modulo 256 into ``[-128, 127]`` (NumPy's
    ``astype(np.int8)`` of an out-of-range integer), without relying on that cast's behaviour.
    """
    x = check_values(values)
    if not (np.isfinite(scale) and scale > 0):
        raise EngineValueError(f"the scale must be finite and > 0, got {scale!r}")
    s = np.float32(scale)
    v = quantize_codes_float(x, s, np.int32(zero_point), INT8[0], INT8[1], rounding,
                             "divide").astype(np.float64)
    if np.abs(v).max() > 2**52:
        raise EngineValueError("the codes are too large to count exactly at this scale")
    unclamped = v.astype(np.int64)
    clamped = np.clip(unclamped, *INT8)
    wrapped = (unclamped - INT8[0]) % 256 + INT8[0]
    return CastResult(x, float(s), int(zero_point), unclamped, clamped, wrapped)
