"""Choosing a format's parameters: the scale rules of :mod:`quantscope.core.formats.catalog`.

Element formats take ``amax / max_finite`` with ``amax`` from the calibration methods
integers use (:mod:`quantscope.core.calibration.methods`; the exact MSE search on the sorted rows,
:func:`quantscope.core.stats.format_mse.mse_optimal_amax`); MX, NVFP4 and NF4 take their block
scales from each block's amax as their specifications define them (with ``method="mse"``, MX
the E8M0 exponent of least error, :mod:`quantscope.core.formats.mx_mse`, NVFP4 the E4M3 block
scale of least error given its tensor scale, :mod:`quantscope.core.formats.nvfp4_mse`, NF4
the float32 scale of least error, :mod:`quantscope.core.formats.nf4_mse`); INT4 groups are integer
parameters with float16 scales. Kept apart from the format definitions so that the reports
(which need those definitions) and the calibration (which needs the reports) never import
each other in a circle.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from quantscope.core.formats.catalog import (
    _E2M1_MAX,
    _E4M3_MAX,
    _E4M3_SUBNORMAL,
    _E4M3_TINY,
    _TINY,
    BLOCK_MSE_KINDS,
    FORMAT_TABLE,
    FormatParams,
    block_amax,
    element_of,
    format_kind,
    mx_exponents,
)
from quantscope.core.formats.int4_tools import TOOL_INT4, tool_int4_params
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.tensors.layout import param_shape
from quantscope.core.tensors.validate import EngineValueError


def _degenerate_to_one(scale: np.ndarray) -> np.ndarray:
    return np.where(scale >= _TINY, scale, np.float32(1.0)).astype(np.float32)


def element_params(xf: np.ndarray, name: str, *, axis: int | None, method: str,
                   saturate: bool, prepared=None, **options) -> FormatParams:
    """Per-tensor (``axis=None``) or per-channel scale ``amax / max_finite`` for an element
    format, ``amax`` by ``method`` (see :mod:`quantscope.core.calibration.methods`)."""
    et = element_of(name)
    if method == "mse":
        from quantscope.core.stats.format_mse import mse_optimal_amax
        from quantscope.core.stats.prepared import prepare

        if options:
            raise EngineValueError(f"method 'mse' takes no options, got {sorted(options)}")
        amax = mse_optimal_amax(xf, name, axis=axis, saturate=saturate,
                                prepared=prepared if prepared is not None else prepare(xf))
    else:
        from quantscope.core.calibration.methods import method_range

        if prepared is not None:
            options["prepared"] = prepared
        if method == "entropy":
            options.setdefault("num_bins", 2048)
        lo, hi = method_range(xf, method=method, symmetric=True, axis=axis, group_size=None,
                              bits=et.bits, **options)
        return element_params_from_range(name, lo, hi, axis=axis, saturate=saturate,
                                         method=method)
    scale = _degenerate_to_one((np.asarray(amax, np.float64) / et.max_finite).astype(np.float32))
    return FormatParams(name, scale, axis=axis, saturate=saturate, method=method)


def element_params_from_range(name: str, lo, hi, *, axis: int | None, saturate: bool = True,
                              method: str = "minmax") -> FormatParams:
    """:func:`element_params` of a tensor whose units' ranges are ``lo`` and ``hi`` (by
    ``method``): a caller that holds the min/max of the units already (several formats of one
    tensor) passes them instead of a pass over the tensor per format."""
    amax = np.maximum(-np.asarray(lo, np.float64), np.asarray(hi, np.float64))
    scale = _degenerate_to_one((amax / element_of(name).max_finite).astype(np.float32))
    return FormatParams(name, scale, axis=axis, saturate=saturate, method=method)


def block_params(xf: np.ndarray, name: str, *, axis: int, saturate: bool = True,
                 method: str = "minmax") -> FormatParams:
    """The block scales of an MX, NVFP4 or NF4 format (their rules: see the module doc);
    ``method="mse"``: each block's stored scale with the least error
    (:mod:`quantscope.core.formats.mx_mse`, :mod:`quantscope.core.formats.nvfp4_mse`,
    :mod:`quantscope.core.formats.nf4_mse`)."""
    kind, _, block, _ = FORMAT_TABLE[name]
    et = element_of(name)
    if block is None:
        raise EngineValueError(f"format {name!r} has no blocks")
    if xf.ndim == 0:
        raise EngineValueError(f"format {name!r} needs at least one axis for its blocks")
    amax = block_amax(xf, axis, block)
    if kind == "mx":
        e = mx_exponents(amax, et)
        if method == "mse":
            from quantscope.core.formats.mx_mse import mx_mse_exponents

            e, _ = mx_mse_exponents(xf, et, block, e, saturate)
        scale = np.ldexp(np.float32(1.0), e).astype(np.float32)  # 2^e, exact (2^-127 too)
        stored = scale.astype(ml_dtypes.float8_e8m0fnu)
        return FormatParams(name, scale, axis=axis, group_size=block, block_scales=stored,
                            saturate=saturate, method=method)
    if kind == "nvfp4":
        modelopt = name == "nvfp4_modelopt"
        ts, bs8 = nvfp4_modelopt_scales(amax) if modelopt else nvfp4_torchao_scales(amax)
        if method == "mse":
            from quantscope.core.formats.nvfp4_mse import nvfp4_mse_scales

            bs8 = nvfp4_mse_scales(xf, ts, bs8, modelopt=modelopt)
        return nvfp4_params(name, ts, bs8, axis, saturate, method)
    absmax = _degenerate_to_one(amax)
    if method == "mse":
        from quantscope.core.formats.nf4_mse import nf4_mse_scales

        # a block of zeros or subnormals keeps the scale 1 it was given
        absmax = np.where(amax >= _TINY, nf4_mse_scales(xf, absmax, block), absmax)
    return FormatParams(name, absmax, axis=axis, group_size=block,
                        inv_scale=np.float32(1.0) / absmax, block_scales=absmax,
                        saturate=saturate, method=method)


def nvfp4_torchao_scales(amax: np.ndarray) -> tuple[np.float32, np.ndarray]:
    """NVFP4's tensor scale and E4M3 block scales as torchao's ``nvfp4_quantize`` computes
    them from each block's amax: tensor scale ``amax / (448 · 6)`` in float32 (1 for a tensor
    of zeros), block scale ``e4m3(clamp((block_amax / 6) / tensor_scale, 2^-6, 448))``."""
    t_amax = np.float32(amax.max()) if amax.size else np.float32(0.0)
    ts = np.float32(t_amax / np.float32(_E4M3_MAX * _E2M1_MAX))
    if not ts >= _TINY:
        ts = np.float32(1.0)
    bs = amax / np.float32(_E2M1_MAX)
    bs8 = np.clip(bs / ts, np.float32(_E4M3_TINY), np.float32(_E4M3_MAX)).astype(
        np.float32).astype(ml_dtypes.float8_e4m3fn)
    return ts, bs8


def nvfp4_modelopt_scales(amax: np.ndarray) -> tuple[np.float32, np.ndarray]:
    """NVFP4's tensor scale and E4M3 block scales as ModelOpt's ``NVFP4QTensor.quantize``
    computes them from each block's amax (modelopt/torch/quantization/qtensor/nvfp4_tensor.py,
    0.47): tensor scale ``amax / (6 · 448)`` in float32, block scale ``block_amax /
    float32(6 · tensor_scale)``, zeros set to 1.0, clamped to ``[2^-9, 448]`` and cast to E4M3.
    A tensor of zeros, whose tensor scale would be 0 (and every block scale NaN in ModelOpt),
    takes tensor scale 1."""
    t_amax = np.float32(amax.max()) if amax.size else np.float32(0.0)
    ts = np.float32(t_amax / np.float32(_E2M1_MAX * _E4M3_MAX))
    if not ts >= _TINY:
        ts = np.float32(1.0)
    bs = (amax / np.float32(np.float32(_E2M1_MAX) * ts)).astype(np.float32)
    bs = np.where(bs == 0, np.float32(1.0), bs)
    bs8 = np.clip(bs, np.float32(_E4M3_SUBNORMAL), np.float32(_E4M3_MAX)).astype(
        np.float32).astype(ml_dtypes.float8_e4m3fn)
    return ts, bs8


def nvfp4_params(name: str, ts: np.float32, bs8: np.ndarray, axis: int, saturate: bool,
                 method: str) -> FormatParams:
    """NVFP4's parameters from its tensor scale and E4M3 block scales: dequantized by
    ``float32(block_scale) · tensor_scale``; torchao multiplies the elements by
    ``(1 / tensor_scale) / block_scale``, ModelOpt divides them by the dequantizing scale."""
    bs32 = bs8.astype(np.float32)
    scale = (ts * bs32).astype(np.float32)
    inv = None if name == "nvfp4_modelopt" else (np.float32(1.0) / ts) / bs32
    return FormatParams(name, scale, axis=axis, group_size=16, inv_scale=inv,
                        block_scales=bs8, tensor_scale=float(ts), saturate=saturate,
                        method=method)


def int_group_params(xf: np.ndarray, name: str, *, symmetric: bool, axis: int, method: str,
                     prepared=None, **options):
    """INT4 per group of 32/64/128 along ``axis`` (GPTQ/AWQ layout), the scale stored in
    float16: the scale is rounded to float16 first and the zero point follows from it."""
    from quantscope.core.calibration.methods import method_range
    from quantscope.core.schemes.qparams import code_range, params_from_range

    _, _, group, _ = FORMAT_TABLE[name]
    if prepared is not None:
        options["prepared"] = prepared
    lo, hi = method_range(xf, method=method, symmetric=symmetric, axis=axis, group_size=group,
                          bits=4, **options)
    # symmetric: int4 codes -7..7 (zero point 0); asymmetric: uint4 0..15 with a zero point,
    # as AWQ stores them
    p = params_from_range(lo, hi, symmetric=symmetric, bits=4, axis=axis, group_size=group,
                          method=method, signed=symmetric)
    s16 = np.clip(p.scale, 0.0, np.finfo(np.float16).max).astype(np.float16).astype(np.float32)
    s16 = _degenerate_to_one(s16)
    zp = p.zero_point
    if not symmetric:
        qmin, qmax = code_range(4, symmetric=False, signed=False)
        lo64 = np.minimum(np.asarray(lo, np.float64), 0.0)
        zp = np.clip(np.rint(qmin - lo64 / s16), qmin, qmax).astype(np.int32)
    return p.with_(scale=s16, zero_point=zp, extra={"format": name})


def _same_tensor(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays are views of the same memory with the same layout (the tensor a
    prepared object holds, handed in again)."""
    return a is b or (a.dtype == b.dtype and a.shape == b.shape and a.strides == b.strides
                      and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def choose_format_params(xf: np.ndarray, name: str, *, symmetric: bool, granularity: str,
                         axis: int | None, method: str, saturate: bool = True, prepared=None,
                         **options) -> QuantParams | FormatParams:
    """Parameters for format ``name`` (not ``int8``, which stays in ``choose_qparams``).

    Element formats take ``granularity`` "tensor" or "channel" (along ``axis``); block and group
    formats always run along the last axis (the input dimension of an ``[out, in]`` weight, the
    features of ``[tokens, features]`` activations), whatever ``granularity`` says.
    """
    kind = format_kind(name)
    if kind != "element" and xf.size == 0:
        raise EngineValueError(f"format {name!r}: the tensor is empty (shape {xf.shape}), "
                               "so it has no blocks")
    if kind == "gguf":  # llama.cpp's reference quantizer decides every scale
        from quantscope.core.formats.gguf import gguf_params

        if options:
            raise EngineValueError(f"format {name!r} takes no options, got {sorted(options)}")
        if prepared is not None and method == "minmax" and _same_tensor(xf, prepared.x):
            from quantscope.core.stats.gguf_stats import kept_gguf_params

            return kept_gguf_params(prepared, name)  # the report measured while encoding
        return gguf_params(xf, name, method=method)
    if kind == "torchao":  # torchao's own bfloat16 rule decides every scale and zero
        from quantscope.core.formats.torchao_int4 import torchao_params

        if options:
            raise EngineValueError(f"format {name!r} takes no options, got {sorted(options)}")
        return torchao_params(xf, name, method=method)
    if kind in ("mx", "nvfp4", "nf4"):
        if kind in BLOCK_MSE_KINDS and method == "mse" and not options:  # each block's best
            return block_params(xf, name, axis=-1, saturate=saturate, method="mse")
        if method != "minmax" or options:
            mse = ", or mse" if kind in BLOCK_MSE_KINDS else ""
            raise EngineValueError(f"format {name!r} takes its scales from each block's "
                                   f"amax (method 'minmax'{mse}), got method {method!r}")
        return block_params(xf, name, axis=-1, saturate=saturate)
    if name in TOOL_INT4:
        if options:
            raise EngineValueError(f"format {name!r} takes no options, got {sorted(options)}")
        return tool_int4_params(xf, name, method=method, prepared=prepared)
    if kind == "int":
        if xf.ndim == 0:
            raise EngineValueError(f"format {name!r} needs an axis for its groups")
        return int_group_params(xf, name, symmetric=symmetric, axis=-1, method=method,
                                prepared=prepared, **options)
    if granularity not in ("tensor", "channel"):
        raise EngineValueError(f"format {name!r} is per tensor or per channel, "
                               f"not {granularity!r}")
    if not symmetric:
        raise EngineValueError(f"format {name!r} is symmetric (a float grid has no zero point)")
    ax = None if granularity == "tensor" else axis
    if ax is not None:
        param_shape(xf.shape, ax, None)  # a clear error for a bad axis
    return element_params(xf, name, axis=ax, method=method, saturate=saturate,
                          prepared=prepared, **options)
