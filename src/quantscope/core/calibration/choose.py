"""Choosing a tensor's quantization parameters: one entry point over the range methods.

:func:`choose_qparams` finds each unit's range by a method (min/max here; percentile, MSE and
entropy in :mod:`quantscope.core.calibration.methods`) or hands the whole choice to a runtime preset
(:mod:`quantscope.core.calibration.runtimes`), then applies the rules of
:mod:`quantscope.core.schemes.qparams`.
It sits above all three, so none of them imports back up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

from quantscope.core.calibration.methods import calibrated_qparams
from quantscope.core.calibration.runtimes import runtime_qparams
from quantscope.core.schemes.qparams import (
    QuantParams,
    params_from_range,
    resolve_axis,
    unit_min_max,
)
from quantscope.core.tensors.validate import EngineValueError, as_float32

if TYPE_CHECKING:  # for the annotations only: formats loads Numba, `import quantscope` must not
    from quantscope.core.formats.catalog import FormatParams
    from quantscope.core.stats.prepared import Prepared


@overload
def choose_qparams(
    x,
    *,
    symmetric: bool = ...,
    granularity: str = ...,
    axis: int | None = ...,
    group_size: int | None = ...,
    bits: int = ...,
    narrow_range: bool | None = ...,
    signed: bool | None = ...,
    method: str = ...,
    rounding: str | None = ...,
    arithmetic: str | None = ...,
    runtime: str | None = ...,
    prepared: Prepared | None = ...,
    format: Literal["int8"] = ...,
    **method_options: Any,
) -> QuantParams: ...
@overload
def choose_qparams(
    x,
    *,
    symmetric: bool = ...,
    granularity: str = ...,
    axis: int | None = ...,
    group_size: int | None = ...,
    bits: int = ...,
    narrow_range: bool | None = ...,
    signed: bool | None = ...,
    method: str = ...,
    rounding: str | None = ...,
    arithmetic: str | None = ...,
    runtime: str | None = ...,
    prepared: Prepared | None = ...,
    format: str,
    **method_options: Any,
) -> QuantParams | FormatParams: ...
def choose_qparams(
    x,
    *,
    symmetric: bool = True,
    granularity: str = "tensor",
    axis: int | None = 0,
    group_size: int | None = None,
    bits: int = 8,
    narrow_range: bool | None = None,
    signed: bool | None = None,
    method: str = "minmax",
    rounding: str | None = None,
    arithmetic: str | None = None,
    runtime: str | None = None,
    prepared: Prepared | None = None,
    format: str = "int8",
    **method_options: Any,
) -> QuantParams | FormatParams:
    """Choose parameters for ``x``: find each unit's range by ``method``, then apply the rules.

    Parameters
    ----------
    x : array_like
        The tensor (converted to float32; NaN/inf are excluded from the range).
    granularity : {"tensor", "channel", "group"}
        One range for the tensor, one per index along ``axis`` (axis 0 = output channels of a
        [out, in] weight; activations [tokens, features] use axis -1), or one per block of
        ``group_size`` elements along ``axis``.
    method : str
        ``"minmax"`` here; ``"percentile"``, ``"mse"`` and ``"entropy"`` (with their options,
        e.g. ``percentile=99.99``) come from :mod:`quantscope.core.calibration.methods`.
    signed, narrow_range, rounding, arithmetic : optional
        None: the engine's default (signed codes, narrow range when symmetric, half to even,
        division) or, with ``runtime``, the runtime's. With a runtime, an explicit value must
        be one the runtime uses (e.g. ``signed=True`` for PyTorch's qint8 affine); a value that
        contradicts it raises EngineValueError rather than being ignored.
    runtime : str, optional
        Reproduce that runtime's parameter rules and arithmetic bit for bit: one of
        :data:`quantscope.core.calibration.runtimes.RUNTIMES` (``"pytorch"``, ``"pytorch-fake"``,
        ``"onnxruntime"``, ``"tflite"``, ``"tflite-xnnpack"``, ``"tensorrt"``).
    prepared : quantscope.core.stats.prepared.Prepared, optional
        ``prepare(x)``, reused by the percentile and MSE searches: without it each call sorts
        the tensor again, which costs seconds at 10^7 elements on every slider move.
    format : str
        ``"int8"`` (the integer rules above, with ``bits``), or a format of
        :mod:`quantscope.core.formats.catalog` (``"fp8_e4m3"``, ``"mxfp4"``, ``"int4_g128"``...),
        which
        returns that format's parameters (``saturate=False`` names the non-saturating cast).
    """
    xf = as_float32(x)
    if format != "int8":
        from quantscope.core.calibration.format_choose import choose_format_params

        return choose_format_params(xf, format, symmetric=symmetric, granularity=granularity,
                                    axis=axis, method=method, prepared=prepared,
                                    **method_options)
    if prepared is not None:
        if prepared.shape != xf.shape:
            raise EngineValueError(f"prepared is of a tensor of shape {prepared.shape}, "
                                   f"not of x {xf.shape}")
        method_options["prepared"] = prepared
    if xf.ndim == 0 and granularity != "tensor":
        raise EngineValueError(f"a 0-d tensor has no axis for granularity={granularity!r}")
    ax, gs = resolve_axis(granularity, axis, group_size)
    if runtime is not None:
        return runtime_qparams(xf, runtime, symmetric=symmetric, axis=ax, group_size=gs,
                               bits=bits, narrow_range=narrow_range, signed=signed,
                               rounding=rounding, arithmetic=arithmetic, method=method,
                               **method_options)
    signed = True if signed is None else signed
    rounding = "half_even" if rounding is None else rounding
    arithmetic = "divide" if arithmetic is None else arithmetic
    common: dict[str, Any] = dict(
        symmetric=symmetric, bits=bits, narrow_range=narrow_range, signed=signed, axis=ax,
        group_size=gs, rounding=rounding, arithmetic=arithmetic, method=method)
    if method == "minmax":
        method_options.pop("prepared", None)
        if method_options:
            raise EngineValueError(
                f"method 'minmax' takes no options, got {sorted(method_options)}")
        lo, hi, _ = unit_min_max(xf, ax, gs)
        return params_from_range(lo, hi, **common)
    return calibrated_qparams(xf, **common, **method_options)  # common holds method
