"""Input checks shared by the engine: one place that decides what a tensor, a scale and a zero
point may be, so every entry point refuses bad input with the same precise message."""

from __future__ import annotations

import mmap

import numpy as np

from quantscope.core.tensors.frameworks import as_numpy  # torch, JAX, CuPy, DLPack, lists
from quantscope.errors import EngineTypeError, EngineValueError

ROUNDING_RULES = ("half_even", "half_away")
ARITHMETIC_RULES = ("divide", "multiply", "fma", "multiply_add", "divide64")
NONFINITE_RULES = ("raise", "saturate")


#: Channels one per-channel quantization may have. Each channel's statistics cost ~350 bytes
#: and ~13 µs, so 2^20 channels stay near 350 MB and 15 s; the largest real per-channel layouts
#: (a 250k-token embedding) fit, while a 1-D tensor of 10^7 values "per channel" -- one scale
#: per element -- does not. Groups have no such cap: a group holds ``group_size`` elements, so
#: their count is bounded by the tensor's size, and the reports of layouts with many groups
#: stream the tensor (:data:`quantscope.core.stats.prepared.LAYOUT_MAX_UNITS`).
MAX_UNITS = 1 << 20
#: Windows one clip sweep may evaluate: each costs ``levels`` searches and a few arrays of
#: ``levels`` entries, so 10^4 windows stay near 100 MB; a plot has far fewer pixels.
MAX_SWEEP_POINTS = 10_000
_FLT_MAX = float(np.finfo(np.float32).max)


def check_int(value: object, what: str, *, low: int | None = None,
              high: int | None = None) -> int:
    """``value`` as a Python int, refusing bools, floats, strings and None by name.

    ``int("8")`` and ``int(2.5)`` would quietly accept what is almost always a mistake
    upstream; NumPy integers are fine.
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise EngineTypeError(f"{what} must be an integer, got {_shown(value)} "
                              f"({type(value).__name__})")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        bounds = (f"between {low} and {high}" if low is not None and high is not None
                  else f">= {low}" if low is not None else f"<= {high}")
        raise EngineValueError(f"{what} must be {bounds}, got {_shown(v)}")
    return v


def check_unit_count(shape: tuple[int, ...], kind: str, ndim: int) -> tuple[int, ...]:
    """Return the per-unit parameter ``shape``; per channel it must hold at most
    :data:`MAX_UNITS` channels (groups are bounded by the tensor's size, see there)."""
    units = int(np.prod(shape, dtype=np.float64))
    if kind == "channel" and units > MAX_UNITS:
        per = "one per element of a 1-D tensor" if ndim == 1 else "one per channel"
        raise EngineValueError(
            f"channel quantization here needs {units:,} scales ({per}); at most {MAX_UNITS:,} "
            "are analysed: use per-tensor, another axis or groups")
    return shape


def check_axis_group(axis: object, group_size: object) -> None:
    """``axis`` None or an integer; ``group_size`` None or an integer >= 1."""
    if axis is not None:
        check_int(axis, "axis")
    if group_size is not None:
        check_int(group_size, "group_size", low=1)


def check_param_shapes(scale: np.ndarray, zero_point: np.ndarray, axis: int | None,
                       group_size: int | None) -> None:
    """Scale and zero point describe the same units: equal shapes (or one zero point for all),
    and a 1-D array per channel. (Without an axis an array is a batch of per-tensor
    parameters, which the sweeps evaluate at once.)"""
    if zero_point.ndim and zero_point.shape != scale.shape:
        raise EngineValueError(f"zero_point has shape {zero_point.shape} but scale has "
                               f"{scale.shape}; they must describe the same units")
    if axis is not None and group_size is None and scale.ndim > 1:
        raise EngineValueError(f"scale must be 1-D per channel, got shape {scale.shape}")


def check_params_fit(params, want: tuple[int, ...], x_shape: tuple[int, ...]) -> None:
    """The parameters (a QuantParams) were made for a tensor of this shape and granularity."""
    for what in ("scale", "zero_point", "inv_scale"):
        p = getattr(params, what)
        if p is not None and np.ndim(p) and np.shape(p) != tuple(want):
            raise EngineValueError(
                f"params.{what} has shape {np.shape(p)}, but a tensor of shape {x_shape} "
                f"needs {tuple(want)} for {params.granularity} quantization: the parameters "
                "were chosen for another tensor")


def check_codes(q: object) -> np.ndarray:
    """Integer codes that int32 arithmetic holds exactly (dequantize widens to int32)."""
    arr = np.asarray(q)
    if arr.dtype.kind not in "iu":
        raise EngineTypeError(f"codes must be an integer array, got dtype {arr.dtype}")
    if arr.dtype.itemsize >= 4 and arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -(2**31) + 256 or hi > 2**31 - 1 - 256:
            raise EngineValueError(f"codes must lie within int32 (minus the zero point's room), "
                                   f"got values in [{lo}, {hi}]: they would wrap")
    return arr


def check_integer_zero_point(zero_point: object) -> np.ndarray:
    """A zero point for dequantize: integer valued (integral floats accepted), finite."""
    zp = np.asarray(zero_point)
    if zp.dtype.kind in "iu":
        return zp
    if zp.dtype.kind == "f" and np.isfinite(zp).all() and (zp == np.round(zp)).all() and (
            np.abs(zp) <= 2**31 - 1).all():
        return zp
    raise EngineTypeError(f"zero_point must be an integer, got dtype {zp.dtype}")


def check_output(out: object, q: np.ndarray) -> np.ndarray:
    """An ``out`` buffer for dequantize: float32, ``q``'s shape, C-contiguous, writeable, and
    not overlapping the codes (the compiled pass reads each code after writing other values)."""
    if not isinstance(out, np.ndarray):
        raise EngineTypeError(f"out must be a NumPy array, got {type(out).__name__}")
    if out.dtype != np.float32:
        raise EngineTypeError(f"out must be float32, got dtype {out.dtype}")
    if out.shape != q.shape:
        raise EngineValueError(f"out has shape {out.shape}, the codes {q.shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise EngineValueError("out must be a writeable C-contiguous array")
    if np.shares_memory(out, q):
        raise EngineValueError("out overlaps the codes")
    return out


def check_code_difference(q: np.ndarray, zero_point: np.ndarray) -> None:
    """Refuse codes and zero points whose difference leaves int32 (dequantize subtracts in
    int32): it would wrap to a value of the other sign. The dtypes' ranges settle it
    without a pass over the codes in every ordinary case."""
    if not q.size or not zero_point.size:
        return
    zlo, zhi = int(zero_point.min()), int(zero_point.max())
    info = np.iinfo(q.dtype)
    if info.min - zhi >= -(2**31) and info.max - zlo <= 2**31 - 1:
        return
    lo, hi = int(q.min()) - zhi, int(q.max()) - zlo
    if lo < -(2**31) or hi > 2**31 - 1:
        raise EngineValueError(f"codes minus zero_point must lie within int32, got values in "
                               f"[{lo}, {hi}]: they would wrap")


def check_points(points: object) -> int:
    """The number of windows a clip sweep evaluates, at most :data:`MAX_SWEEP_POINTS`."""
    return check_int(points, "points", low=1, high=MAX_SWEEP_POINTS)


def finite_grid_scale(scale: np.ndarray, zero_point: np.ndarray, qmin: int,
                      qmax: int) -> np.ndarray:
    """Lower any float32 scale whose end codes would dequantize to ±inf.

    Near ±FLT_MAX the scale rule's float32 rounding can put ``(qmin - zp) · scale`` or
    ``(qmax - zp) · scale`` just beyond float32's range: every element at that code then
    "dequantizes" to infinity and the report shows -inf dB. The largest float32 scale that
    keeps both ends finite differs from the rule's by an ulp or so and gives the honest error.
    """
    s = np.asarray(scale, np.float32)
    zp = np.nan_to_num(np.asarray(zero_point, np.float64))  # NaN: a degenerate range
    ends = np.maximum(np.abs(qmin - zp), np.abs(qmax - zp))
    too_big = ends * s.astype(np.float64) > _FLT_MAX
    if not np.any(too_big):
        return s
    fit = (_FLT_MAX / np.maximum(ends, 1.0)).astype(np.float32)
    fit = np.where(fit.astype(np.float64) * ends > _FLT_MAX,
                   np.nextafter(fit, np.float32(0)), fit)
    return np.where(too_big, np.minimum(s, fit), s).astype(np.float32)


def _as_array(value: object, what: str, dtype=None) -> np.ndarray:
    """``np.asarray`` with its refusals (ragged lists, strings for numbers) named."""
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        reason = str(exc).splitlines()[0][:100] if str(exc) else type(exc).__name__
        raise EngineTypeError(f"{what} is not a numeric array ({reason})") from None


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int beyond Python's 4300-digit str limit
        return "<a number too long to print>"
    return text if len(text) <= 60 else text[:57] + "..."


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
        if arr.dtype == np.float32:
            return arr
        with np.errstate(over="ignore"):
            out = arr.astype(np.float32)
        check_narrowed(arr, out, what)
        return out
    raise EngineTypeError(
        f"{what} has dtype {arr.dtype}; quantization needs a floating-point tensor "
        "(float32, float64, float16 or bfloat16)"
    )


def beyond_float32(wide: np.ndarray, narrow: np.ndarray) -> tuple[int, int]:
    """How many values of ``wide`` (float64 or wider) are finite but became ±inf in its
    float32 copy ``narrow`` (same shape), and the flat index of the first (-1: none)."""
    if wide.dtype.itemsize <= 4 or narrow.size == 0:
        return 0, -1
    inf = np.isinf(narrow)
    if not inf.any():
        return 0, -1
    inf &= np.isfinite(wide)
    count = int(np.count_nonzero(inf))
    return count, int(np.argmax(inf.reshape(-1))) if count else -1


def beyond_float32_message(count: int, index: tuple[int, ...], value: float) -> str:
    """The refusal for :func:`beyond_float32`'s values: count, where, and why."""
    return (f"{count:,} float64 value(s) beyond float32's range (±{_FLT_MAX:.4g}), the first "
            f"at index {index} ({value:.6g}): quantscope analyses float32 as every runtime "
            "does, where they would become inf; scale or clip them first")


def check_narrowed(wide: np.ndarray, narrow: np.ndarray, what: str = "x") -> None:
    """Refuse a float32 copy that turned finite float64 values into inf: they would be
    counted as non-finite and dropped while every number looked fine."""
    count, first = beyond_float32(wide, narrow)
    if count:
        index = tuple(int(i) for i in np.unravel_index(first, wide.shape)) if wide.ndim else ()
        raise EngineValueError(f"{what} has " + beyond_float32_message(
            count, index, float(wide.reshape(-1)[first])))


def in_memory(x: np.ndarray) -> np.ndarray:
    """``x`` itself, or a copy in memory when it reads a memory-mapped file.

    For whatever keeps an array to read it again later (a prepared tensor, the explorer's
    state): a mapped file that is rewritten in place loses its pages, and the next read kills
    the process with SIGBUS. A copy costs one pass; the crash costs the session.
    """
    base: object = x  # an array, a memory map, or whatever object an array views
    while base is not None:
        if isinstance(base, np.memmap | mmap.mmap):
            return np.array(x, copy=True)
        base = getattr(base, "base", None)
    return x


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
    raw = _as_array(scale, "scale")
    if raw.dtype.kind == "b":  # True would pass as 1.0
        raise EngineTypeError("scale must be a number, got a bool")
    s = _as_array(raw, "scale", np.float64)
    if s.size == 0:
        raise EngineValueError("scale is empty")
    bad = ~np.isfinite(s) | (s <= 0)
    if bad.any():
        idx = int(np.argmax(bad.ravel()))
        value = s.ravel()[idx]
        where = "" if s.ndim == 0 else f" at index {idx}"
        raise EngineValueError(
            f"scale must be finite and > 0, got {float(value)!r}{where}"
        )
    with np.errstate(over="ignore"):  # a value past FLT_MAX becomes inf: refused just below
        s32 = s.astype(np.float32)
    out = (s32 == 0) | ~np.isfinite(s32)
    if out.any():
        value = s.ravel()[int(np.argmax(out.ravel()))]
        raise EngineValueError(
            f"scale {float(value)!r} is outside float32's finite positive range")
    return s32


#: The smallest float32 scale whose float32 reciprocal is finite (the multiply and fma
#: arithmetics quantize with ``x * (1 / scale)``).
SMALLEST_INVERTIBLE_SCALE = np.nextafter(np.float32(1) / np.finfo(np.float32).max, np.float32(1))


def check_invertible(scale: np.ndarray, arithmetic: str, inv_scale: object = None) -> None:
    """Refuse a (checked, float32) scale whose reciprocal overflows when the arithmetic
    multiplies by it: ``x * inf`` is NaN at ``x = 0``, which has no code at all."""
    if arithmetic in ("divide", "divide64") or inv_scale is not None:
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
    qmin, qmax = check_int(qmin, "qmin"), check_int(qmax, "qmax")
    if qmin >= qmax:
        raise EngineValueError(f"qmin must be < qmax, got [{qmin}, {qmax}]")
    if not (-128 <= qmin and qmax <= 127) and not (0 <= qmin and qmax <= 255):
        raise EngineValueError(
            f"codes [{qmin}, {qmax}] fit neither int8 [-128, 127] nor uint8 [0, 255]"
        )


def check_choice(value: str, allowed: tuple[str, ...], what: str) -> None:
    """Refuse an unknown option string, listing the allowed ones."""
    if not isinstance(value, str) or value not in allowed:
        raise EngineValueError(f"{what} must be one of {allowed}, got {value!r}")


def code_dtype(qmin: int) -> type[np.integer]:
    """int8 storage for signed code ranges, uint8 for unsigned ones."""
    return np.int8 if qmin < 0 else np.uint8
