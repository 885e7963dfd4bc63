"""Input checks shared by the engine: one place that decides what a tensor, a scale and a zero
point may be, so every entry point refuses bad input with the same precise message."""

from __future__ import annotations

import numpy as np

from quantscope.core.frameworks import as_numpy  # torch, JAX, CuPy, DLPack, lists
from quantscope.errors import EngineTypeError, EngineValueError

ROUNDING_RULES = ("half_even", "half_away")
ARITHMETIC_RULES = ("divide", "multiply", "fma", "multiply_add")
NONFINITE_RULES = ("raise", "saturate")


def as_float32(x: object, what: str = "x") -> np.ndarray:
    """Return ``x`` as a float32 ndarray, refusing dtypes that are not real floating point.

    float64, float16 and bfloat16 (ml_dtypes) are converted to float32, because every runtime we
    reproduce quantizes from float32; integer, bool, complex and object arrays raise TypeError,
    since "quantizing" them is always a mistake upstream.
    """

    arr = as_numpy(x, what)
    kind = arr.dtype.kind
    name = arr.dtype.name
    is_ml_float = name == "bfloat16" or name.startswith("float8")
    if kind == "f" or is_ml_float:
        return arr if arr.dtype == np.float32 else arr.astype(np.float32)
    raise EngineTypeError(
        f"{what} has dtype {arr.dtype}; quantization needs a floating-point tensor "
        "(float32, float64, float16 or bfloat16)"
    )


def check_nonfinite(x: np.ndarray, nonfinite: str, what: str = "x") -> int:
    """Count NaN/inf entries of ``x``; raise unless ``nonfinite == "saturate"``.

    The message names the count and the first offending index, so the user can find it.
    """
    if nonfinite not in NONFINITE_RULES:
        raise EngineValueError(f"nonfinite must be one of {NONFINITE_RULES}, got {nonfinite!r}")
    if x.size == 0:
        return 0
    finite = np.isfinite(x)
    if finite.all():
        return 0
    bad = finite.size - int(np.count_nonzero(finite))
    if nonfinite == "raise":
        first = np.unravel_index(int(np.argmin(finite)), x.shape) if x.ndim else ()
        raise EngineValueError(
            f"{what} has {bad} non-finite value(s) (NaN or inf), the first at index "
            f"{tuple(int(i) for i in first)}; pass nonfinite='saturate' to map inf to the "
            "range ends and NaN to the zero point"
        )
    return bad


def check_scale(scale: object) -> np.ndarray:
    """Return the scale(s) as float32, refusing zero, negative, NaN and infinite values.

    A zero scale would divide by zero and a negative one would flip the code order; both are
    always bugs in whatever produced them, so they are errors rather than clamped.
    """
    s = np.asarray(scale, dtype=np.float64)
    if s.size == 0:
        raise EngineValueError("scale is empty")
    bad = ~np.isfinite(s) | (s <= 0)
    if bad.any():
        idx = int(np.argmax(bad.ravel()))
        value = s.ravel()[idx]
        where = "" if s.ndim == 0 else f" at index {idx}"
        raise EngineValueError(
            f"scale must be finite and > 0, got {value!r}{where}"
        )
    s32 = s.astype(np.float32)
    if (s32 == 0).any() or not np.isfinite(s32).all():
        raise EngineValueError("scale is outside float32's finite positive range")
    return s32


#: The smallest float32 scale whose float32 reciprocal is finite (the multiply and fma
#: arithmetics quantize with ``x * (1 / scale)``).
SMALLEST_INVERTIBLE_SCALE = np.nextafter(np.float32(1) / np.finfo(np.float32).max, np.float32(1))


def check_invertible(scale: np.ndarray, arithmetic: str, inv_scale: object = None) -> None:
    """Refuse a (checked, float32) scale whose reciprocal overflows when the arithmetic
    multiplies by it: ``x * inf`` is NaN at ``x = 0``, which has no code at all."""
    if arithmetic == "divide" or inv_scale is not None:
        return
    small = scale < SMALLEST_INVERTIBLE_SCALE
    if np.any(small):
        raise EngineValueError(
            f"scale {float(np.asarray(scale)[small].ravel()[0])!r} is too small for "
            f"{arithmetic!r} arithmetic: its float32 reciprocal overflows (the smallest usable "
            f"scale is {float(SMALLEST_INVERTIBLE_SCALE)!r})")


def check_zero_point(zero_point: object, qmin: int, qmax: int) -> np.ndarray:
    """Return the zero point(s) as int32, refusing non-integers and values outside [qmin, qmax]."""
    z = np.asarray(zero_point)
    if z.dtype.kind == "b" or z.dtype.kind not in "iuf":
        raise EngineValueError(f"zero_point must be an integer, got dtype {z.dtype}")
    if z.dtype.kind == "f":
        if not np.isfinite(z).all() or (z != np.round(z)).any():
            raise EngineValueError(f"zero_point must be an integer, got {z.ravel()[:4]}")
    if ((z < qmin) | (z > qmax)).any():
        raise EngineValueError(
            f"zero_point must lie in [qmin, qmax] = [{qmin}, {qmax}], "
            f"got {z.ravel()[((z < qmin) | (z > qmax)).ravel()][0]}"
        )
    return z.astype(np.int32)


def check_code_range(qmin: int, qmax: int) -> None:
    """Allow 2- to 8-bit signed or unsigned code ranges that fit int8 or uint8 storage."""
    if int(qmin) != qmin or int(qmax) != qmax:
        raise EngineValueError(f"qmin and qmax must be integers, got {qmin!r}, {qmax!r}")
    if qmin >= qmax:
        raise EngineValueError(f"qmin must be < qmax, got [{qmin}, {qmax}]")
    if not (-128 <= qmin and qmax <= 127) and not (0 <= qmin and qmax <= 255):
        raise EngineValueError(
            f"codes [{qmin}, {qmax}] fit neither int8 [-128, 127] nor uint8 [0, 255]"
        )


def check_choice(value: str, allowed: tuple[str, ...], what: str) -> None:
    """Refuse an unknown option string, listing the allowed ones."""
    if value not in allowed:
        raise EngineValueError(f"{what} must be one of {allowed}, got {value!r}")


def code_dtype(qmin: int) -> type[np.integer]:
    """int8 storage for signed code ranges, uint8 for unsigned ones."""
    return np.int8 if qmin < 0 else np.uint8
