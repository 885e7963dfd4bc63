"""Quantization parameters: how scale and zero point follow from a range.

The value type and the rules, at the bottom of the engine: calibration, runtime presets and
reports import them and this module imports none of those (the choice of a range from a
tensor, :func:`quantscope.core.calibration.choose.choose_qparams`, sits above them).

Rules (the engine's defaults; runtime presets in :mod:`quantscope.core.calibration.runtimes`
override them):

* symmetric: zero point 0, ``scale = max|x| / (2^(bits-1) - 1)``; codes in the narrow range
  ``[-(2^(bits-1) - 1), 2^(bits-1) - 1]`` by default (ONNX Runtime and TFLite weights), the full
  range ``[-2^(bits-1), 2^(bits-1) - 1]`` with ``narrow_range=False``;
* asymmetric: the range is widened to include 0 (``lo = min(x_min, 0)``, ``hi = max(x_max, 0)``),
  ``scale = (hi - lo) / (qmax - qmin)``, ``zero_point = clamp(round(qmin - lo / scale))``, so that
  0.0 quantizes to the zero point and dequantizes to exactly 0.0 (padding and ReLU zeros stay
  exact);
* degenerate ranges (all zeros, empty, or a scale below float32's smallest normal number, where
  division would lose precision) give scale 1.0 and zero point 0.

Scales are computed in float64 and rounded once to float32, the precision every runtime stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from quantscope.core.kernels import compiled
from quantscope.core.schemes.overflow import check_overflow_rule
from quantscope.core.schemes.quantize import dequantize, quantize
from quantscope.core.tensors.layout import (
    granularity_of,
    normalize_axis,
    param_rows,
    param_shape,
)
from quantscope.core.tensors.validate import (
    ARITHMETIC_RULES,
    ROUNDING_RULES,
    EngineValueError,
    check_choice,
    check_code_range,
    check_int,
    check_invertible,
    check_param_shapes,
    check_scale,
    check_zero_point,
    finite_grid_scale,
)

GRANULARITIES = ("tensor", "channel", "group")
_TINY = float(np.finfo(np.float32).tiny)
#: Elements from which groups along the last axis take their minimum and maximum from one
#: compiled pass (:func:`quantscope.core.kernels.block_max.block_min_max`) rather than NumPy
#: (10 ns per element there; below, NumPy needs no compiled loop, which a window whose loops
#: are still being compiled elsewhere would wait for).
GROUP_MIN_MAX_COMPILED = 1 << 22



@dataclass(frozen=True, eq=False)
class QuantParams:
    """Everything needed to reproduce one quantization: the parameters and the arithmetic.

    ``scale`` (float32) and ``zero_point`` (int32) are scalars per tensor, 1-D per channel
    (along ``axis``) or per-group arrays (see :mod:`quantscope.core.tensors.layout`). ``rounding``
    and
    ``arithmetic`` record how the runtime forms and rounds ``x / scale``, so ``quantize`` gives
    that runtime's exact codes. ``runtime`` and ``method`` are labels for display.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    qmin: int = -128
    qmax: int = 127
    axis: int | None = None
    group_size: int | None = None
    symmetric: bool = True
    rounding: str = "half_even"
    arithmetic: str = "divide"
    runtime: str | None = None
    method: str = "minmax"
    extra: dict = field(default_factory=dict)
    #: The runtime's own float32 multiplier for "multiply"/"fma" (shaped like ``scale``), when it
    #: is not ``float32(1) / scale`` -- e.g. TensorRT's ``float32(127 / amax)``. None otherwise.
    inv_scale: np.ndarray | None = None
    #: What the runtime does with NaN, ±inf and values beyond its integer conversion (a rule of
    #: :mod:`quantscope.core.schemes.overflow`), used by ``quantize(x, nonfinite="runtime")``;
    #: None where no runtime was measured on them.
    overflow: str | None = None

    def __post_init__(self) -> None:
        check_code_range(self.qmin, self.qmax)
        check_choice(self.rounding, ROUNDING_RULES, "rounding")
        check_choice(self.arithmetic, ARITHMETIC_RULES, "arithmetic")
        granularity_of(self.axis, self.group_size)
        object.__setattr__(self, "scale", check_scale(self.scale))
        object.__setattr__(self, "zero_point",
                           check_zero_point(self.zero_point, self.qmin, self.qmax))
        check_param_shapes(self.scale, self.zero_point, self.axis, self.group_size)
        if self.inv_scale is not None:
            inv = check_scale(self.inv_scale)
            if inv.shape != self.scale.shape:
                raise EngineValueError(f"inv_scale has shape {inv.shape}, scale {self.scale.shape}")
            object.__setattr__(self, "inv_scale", inv)
        check_invertible(self.scale, self.arithmetic, self.inv_scale)
        check_overflow_rule(self.overflow)

    @property
    def bits(self) -> int:
        """Bit width implied by the code range (a narrow range still needs all its bits)."""
        return int(np.ceil(np.log2(self.qmax - self.qmin + 1)))

    @property
    def levels(self) -> int:
        """Number of codes in ``[qmin, qmax]``."""
        return self.qmax - self.qmin + 1

    @property
    def granularity(self) -> str:
        """``"tensor"``, ``"channel"`` or ``"group"``."""
        return granularity_of(self.axis, self.group_size)

    def quantize(self, x, *, nonfinite: str = "raise") -> np.ndarray:
        """Codes of ``x`` under these parameters (see
        :func:`quantscope.core.schemes.quantize.quantize`); ``nonfinite="runtime"`` gives NaN,
        ±inf and values beyond the runtime's integer conversion the preset runtime's codes."""
        return quantize(x, self.scale, self.zero_point, qmin=self.qmin, qmax=self.qmax,
                        axis=self.axis, group_size=self.group_size, rounding=self.rounding,
                        nonfinite=nonfinite, arithmetic=self.arithmetic,
                        inv_scale=self.inv_scale, overflow=self.overflow)

    def dequantize(self, q, *, out: np.ndarray | None = None) -> np.ndarray:
        """Float32 values that the codes ``q`` stand for (into ``out`` if given)."""
        return dequantize(q, self.scale, self.zero_point, axis=self.axis,
                          group_size=self.group_size, out=out)

    def with_(self, **changes) -> QuantParams:
        """A copy with some fields changed (the dataclass is frozen)."""
        return replace(self, **changes)


def code_range(bits: int, *, symmetric: bool, narrow_range: bool | None = None,
               signed: bool = True) -> tuple[int, int]:
    """``(qmin, qmax)`` for a bit width. Narrow range (drop the most negative code) is the
    default for symmetric schemes, so that -x and x get opposite codes."""
    bits = check_int(bits, "bits", low=2, high=8)
    narrow = symmetric if narrow_range is None else bool(narrow_range)
    if signed:
        qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        qmin, qmax = 0, (1 << bits) - 1
    if narrow:
        qmin += 1
    return qmin, qmax


def params_from_range(
    x_min,
    x_max,
    *,
    symmetric: bool,
    bits: int = 8,
    narrow_range: bool | None = None,
    signed: bool = True,
    axis: int | None = None,
    group_size: int | None = None,
    rounding: str = "half_even",
    arithmetic: str = "divide",
    method: str = "minmax",
) -> QuantParams:
    """Derive scale and zero point from a range (scalars, or arrays for channels/groups).

    See the module docstring for the rules. For symmetric schemes only ``max(|x_min|, |x_max|)``
    matters; an unsigned symmetric scheme is refused, since it cannot hold negative values.
    """
    lo = np.minimum(np.asarray(x_min, np.float64), 0.0)
    hi = np.maximum(np.asarray(x_max, np.float64), 0.0)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise EngineValueError("the range must be finite")
    if symmetric and not signed:
        raise EngineValueError("a symmetric scheme needs signed codes (zero point 0)")
    qmin, qmax = code_range(bits, symmetric=symmetric, narrow_range=narrow_range, signed=signed)
    if symmetric:
        amax = np.maximum(-lo, hi)
        scale = amax / ((1 << (bits - 1)) - 1)
        zero_point = np.zeros(scale.shape, np.int32)
    else:
        scale = (hi - lo) / (qmax - qmin)
        with np.errstate(divide="ignore", invalid="ignore"):
            zero_point = np.clip(np.rint(qmin - lo / scale), qmin, qmax)
    scale32 = finite_grid_scale(scale.astype(np.float32), zero_point, qmin, qmax)
    degenerate = ~(scale32 >= _TINY)
    scale32 = np.where(degenerate, np.float32(1.0), scale32)
    zero_point = np.where(degenerate, 0 if qmin <= 0 <= qmax else qmin, zero_point)
    return QuantParams(scale32, zero_point.astype(np.int32), qmin, qmax, axis=axis,
                       group_size=group_size, symmetric=symmetric, rounding=rounding,
                       arithmetic=arithmetic, method=method)


def unit_min_max(x: np.ndarray, axis: int | None, group_size: int | None
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    """Finite min and max of each unit (tensor, channel or group), and the non-finite count.

    NaN and inf are left out of the range (as PyTorch's HistogramObserver drops inf), so one
    corrupt value cannot stretch the scale; empty units give (0, 0).
    """
    shape = param_shape(x.shape, axis, group_size)
    if (group_size is not None and axis is not None and x.ndim
            and x.size >= GROUP_MIN_MAX_COMPILED
            and normalize_axis(axis, x.ndim) == x.ndim - 1 and x.dtype == np.float32):
        lo, hi, n_bad = compiled.block_min_max(x.reshape(-1, x.shape[-1]), group_size)
        return lo.reshape(shape), hi.reshape(shape), n_bad
    ones = np.ones(shape, np.float32)
    sets, n_units = param_rows(x, ones, np.zeros(shape, np.int32), axis, group_size)
    lo = np.zeros(n_units)
    hi = np.zeros(n_units)
    n_bad = 0
    for rs in sets:
        rows = rs.x2d
        if rows.shape[1] == 0:
            continue
        finite = np.isfinite(rows)
        if finite.all():
            lo[rs.index] = rows.min(axis=1)
            hi[rs.index] = rows.max(axis=1)
        else:
            n_bad += int(finite.size - np.count_nonzero(finite))
            lo_r = np.min(rows, axis=1, where=finite, initial=np.inf)
            hi_r = np.max(rows, axis=1, where=finite, initial=-np.inf)
            empty = ~finite.any(axis=1)
            lo[rs.index] = np.where(empty, 0.0, lo_r)
            hi[rs.index] = np.where(empty, 0.0, hi_r)
    return lo.reshape(shape), hi.reshape(shape), n_bad


def resolve_axis(granularity: str, axis: int | None, group_size: int | None
                 ) -> tuple[int | None, int | None]:
    """Map the user-facing granularity name to the (axis, group_size) pair the engine uses."""
    check_choice(granularity, GRANULARITIES, "granularity")
    if granularity == "tensor":
        return None, None
    if granularity == "channel":
        return axis, None
    if group_size is None:
        raise EngineValueError("granularity='group' needs group_size >= 1")
    return axis, check_int(group_size, "group_size", low=1)
