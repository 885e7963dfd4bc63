"""FP8 checkpoints outside compressed-tensors: ``quant_method`` ``fp8`` and ``fbgemm_fp8``.

* ``fp8`` (transformers' fine-grained FP8, DeepSeek-V3 and the releases that copy it):
  ``weight`` in E4M3 and ``weight_scale_inv`` holding one float32 multiplier per
  ``weight_block_size`` block (128 x 128), the grid rounded up so the last row and column of
  blocks may be partial; without a block size, one multiplier for the whole tensor.
* ``fbgemm_fp8``: ``weight`` in E4M3 and ``weight_scale``, one per output channel.

Decoding is ``float32(code) * scale``, rounded once in float32 and then to the scale's dtype,
as transformers' ``_dequantize_fp8_weight`` computes it.
"""

from __future__ import annotations

import json

import numpy as np

from quantscope.io.checks import fail
from quantscope.io.stored.config import QuantConfig
from quantscope.io.stored.model import StoredFormat, StoredTensor
from quantscope.io.stored.parts import Parts, check_elements, code_window, scaled


def block_size(config: QuantConfig) -> tuple[int, int] | None:
    block = config.settings.get("weight_block_size")
    if block is None:
        return None
    if not (isinstance(block, list) and len(block) == 2 and all(
            isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= 1 << 20
            for b in block)):
        raise fail(config.source, f"quantization_config weight_block_size is "
                                  f"{json.dumps(block)[:40]}; expected [rows, columns]")
    return block[0], block[1]


def decode(name: str, parts: Parts, config: QuantConfig) -> StoredTensor:
    if not parts.has("weight"):
        raise parts.missing("weight", config.method)
    shape = parts.shape("weight")
    stored = parts.dtype("weight")
    if stored not in ("float8_e4m3fn", "float8_e5m2"):
        raise parts.error("weight", f"is {stored}; an FP8 checkpoint stores float8 weights")
    if len(shape) != 2:
        raise parts.error("weight", f"has {len(shape)} dimensions; expected (out, in)")
    rows, cols = shape
    role = "weight_scale_inv" if parts.has("weight_scale_inv") else "weight_scale"
    if not parts.has(role):
        raise parts.missing("weight_scale_inv", config.method)
    block = block_size(config) if config.method == "fp8" else None
    if block is not None:
        bh, bw = block
        grid = (-(-rows // bh), -(-cols // bw))
        scale = parts.read(role, "f", shape=grid).astype(np.float32)
        spread = np.repeat(np.repeat(scale, bh, axis=0), bw, axis=1)[:rows, :cols]
        granularity = "block"
        scale = scale.astype(np.float32)
    elif config.method == "fbgemm_fp8" or parts.shape(role) in ((rows, 1), (rows,)):
        scale = parts.read(role, "f")
        if scale.size != rows:
            raise parts.error(role, f"has shape {list(scale.shape)}; per-channel scales of "
                                    f"a ({rows}, {cols}) weight are ({rows}, 1)")
        spread = scale.astype(np.float32).reshape(rows, 1)
        granularity = "channel"
    else:
        scale = parts.read(role, "f")
        if scale.size != 1:
            raise parts.error(role, f"has shape {list(scale.shape)}; without "
                                    "weight_block_size the config implies one scale")
        spread = scale.astype(np.float32).reshape(1, 1)
        granularity = "tensor"
    check_elements(parts, "weight", shape)
    raw = parts.read("weight", "f")
    scale_dtype = parts.dtype(role)
    values = scaled(raw.astype(np.float32), spread, scale_dtype)
    element = "fp8_e4m3" if stored == "float8_e4m3fn" else "fp8_e5m2"
    fmt = StoredFormat(config.method, element, granularity, block=block,
                       scale_dtype=scale_dtype)
    top = 448.0 if element == "fp8_e4m3" else 57344.0

    def window():
        full = (np.repeat(np.repeat(scale, block[0], axis=0), block[1], axis=1)[:rows, :cols]
                if block is not None else spread)
        return code_window(-top, top, 0, full, scale_dtype)
    return StoredTensor(name, values, fmt, raw.view(np.uint8), scale.astype(np.float32), None,
                        parts.nbytes(), scale_dtype, window)
