"""What ``quantscope export --format NAME`` writes for a format beyond the integers.

Plain arrays only (``np.load(OUT, allow_pickle=False)`` reads them all):

* ``codes``: the element codes -- for FP8/FP6/FP4 the element's bits as uint8 (view them as
  ``ml_dtypes.<element_dtype>`` named in the metadata), for MXINT8 int8 ``k`` (value ``k/64``),
  for NF4 uint8 level indices;
* ``values``: float32 value of each code index of the format's grid (NF4's 16 levels...);
* ``scale``: float32 multiplier per tensor / channel / block (what dequantization uses);
* ``block_scales``: the stored block scales -- E8M0 / E4M3 bits as uint8 (MX / NVFP4), float32
  (NF4: each block's absmax, or with ``--method mse`` its searched scale, which bitsandbytes
  stores in the same ``absmax`` slot and dequantizes the same way, ``level · absmax``);
  ``tensor_scale``: NVFP4's float32 tensor scale;
* ``metadata``: JSON with the format, element type, block layout and the error figures;
* for torchao's int4 (``torchao_int4_g*``): ``codes`` (uint8 0..15), ``scale`` and ``zero``
  (each group's bfloat16 value as float32);
* for llama.cpp's GGUF types: ``blocks`` (uint8, the bytes a GGUF file stores, one row of bytes
  per row of the tensor), ``codes``, ``scale`` (each block's ``|d|``), ``block_scales``.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.catalog import FormatParams, bits_per_element


def format_members(params: FormatParams, codes: np.ndarray) -> dict[str, np.ndarray]:
    """The archive's arrays (see the module docstring), none needing pickle."""
    if params.kind in ("gguf", "torchao"):  # llama.cpp's bytes; torchao's float zeros
        return params.archive_members(codes)  # type: ignore[attr-defined]
    raw = codes.view(np.uint8) if codes.dtype.kind not in "iu" else codes
    out = {"codes": raw, "values": params.values.astype(np.float32),
           "scale": np.asarray(params.scale, np.float32),
           "zero_point": np.asarray(params.zero_point, np.int32)}
    if params.block_scales is not None:
        bs = np.asarray(params.block_scales)
        out["block_scales"] = bs.view(np.uint8) if bs.dtype.kind not in "iuf" else bs
    if params.tensor_scale is not None:
        out["tensor_scale"] = np.asarray(params.tensor_scale, np.float32)
    return out


def format_scheme(params: FormatParams, n: int) -> dict:
    """The metadata's ``scheme`` entry for a format."""
    if params.kind in ("gguf", "torchao"):
        return params.scheme(n)  # type: ignore[attr-defined]
    et = params.element
    scale_dtype = None
    if params.block_scales is not None:
        scale_dtype = str(np.asarray(params.block_scales).dtype)
    return {
        "format": params.format, "element": et.name,
        "element_dtype": et.dtype.__name__ if et.dtype is not None else None,
        "bits": params.bits, "granularity": params.granularity, "axis": params.axis,
        "block_size": params.group_size, "block_scale_dtype": scale_dtype,
        "saturate": params.saturate, "method": params.method,
        "bits_per_element": bits_per_element(params, n),
        "dequantize": "x = element_value(codes) * scale, scale broadcast per tensor, per "
                      "index along axis, or per block of block_size along axis; "
                      "element_value: codes viewed as element_dtype (FP8/FP6/FP4), codes / 64 "
                      "(MXINT8), values[codes] (NF4)",
    }
