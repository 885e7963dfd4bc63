"""bitsandbytes checkpoints, as transformers saves them: NF4 / FP4 and LLM.int8().

4-bit: ``weight`` holds two codes per byte (first element in the high nibble), and beside it
``weight.absmax`` (one per ``blocksize`` elements of the flattened weight), ``weight.quant_map``
(the 16 values a code stands for), and ``weight.quant_state.bitsandbytes__nf4`` (or ``__fp4``):
the JSON of the remaining state (blocksize, dtype, shape...) as bytes. With nested ("double")
quantization the absmax values are themselves 8-bit codes into ``weight.nested_quant_map``,
scaled per ``nested_blocksize`` by ``weight.nested_absmax``, plus ``nested_offset``.
Decoding follows ``bitsandbytes.functional.dequantize_4bit``: ``quant_map[code] * absmax`` in
float32, then the stored dtype (FP4 with the sign bit of the code, so code 8 is -0.0).

8-bit: ``weight`` (int8) and ``SCB``, one absmax per output row: ``code * SCB / 127``,
computed as bitsandbytes does, ``code * SCB * 7.874015718698502e-3`` in float32.
"""

from __future__ import annotations

import json
import math

import numpy as np

from quantscope.io.stored.bits import nibbles
from quantscope.io.stored.model import StoredFormat, StoredTensor
from quantscope.io.stored.parts import Parts, check_elements, scaled

#: The packed state is a few hundred bytes of JSON; anything larger is not bitsandbytes'.
MAX_STATE_BYTES = 65_536
_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}
INT8_RECIPROCAL = np.float32(7.874015718698502e-3)


def state_role(parts: Parts) -> str | None:
    for role in parts.tensors:
        if role.startswith("weight.quant_state.bitsandbytes__"):
            return role
    return None


def decode(name: str, parts: Parts) -> StoredTensor:
    if parts.has("SCB"):
        return _int8(name, parts)
    role = state_role(parts)
    if role is None:
        raise parts.missing("weight.quant_state.bitsandbytes__nf4", "bitsandbytes 4-bit")
    return _four_bit(name, parts, role)


def _int8(name: str, parts: Parts) -> StoredTensor:
    shape = parts.shape("weight")
    if len(shape) != 2:
        raise parts.error("weight", "is not an (out, in) matrix")
    check_elements(parts, "weight", shape)
    codes = parts.read("weight", "i", dtypes=("int8",))
    scb = parts.read("SCB", "f", shape=(shape[0],)).astype(np.float32)
    product = np.multiply(codes, scb[:, None], dtype=np.float32)
    values = np.multiply(product, INT8_RECIPROCAL, dtype=np.float32)
    fmt = StoredFormat("bitsandbytes", "int8", "channel", scale_dtype=parts.dtype("SCB"),
                       notes=("LLM.int8() row absmax",))
    def window():
        top = np.multiply(np.float32(127) * scb[:, None], INT8_RECIPROCAL, dtype=np.float32)
        return -top, top
    return StoredTensor(name, values, fmt, codes, scb, None, parts.nbytes(), "float32", window)


def _state(parts: Parts, role: str) -> dict:
    raw = parts.read(role, "u", dtypes=("uint8",))
    if raw.ndim != 1 or raw.size > MAX_STATE_BYTES:
        raise parts.error(role, "is not the few bytes of JSON bitsandbytes stores there")
    try:
        state = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise parts.error(role, "is not valid JSON") from None
    if not isinstance(state, dict):
        raise parts.error(role, "is not a JSON object")
    return state


def _int_field(parts: Parts, role: str, state: dict, key: str, lo: int, hi: int) -> int:
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise parts.error(role, f"says {key} is {json.dumps(value)[:40]}; expected an integer "
                                f"from {lo} to {hi}")
    return value


def _four_bit(name: str, parts: Parts, role: str) -> StoredTensor:
    state = _state(parts, role)
    quant_type = role.rsplit("__", 1)[1]
    if quant_type not in ("nf4", "fp4") or state.get("quant_type", quant_type) != quant_type:
        raise parts.error(role, f"names quant type {str(state.get('quant_type'))[:20]!r}; "
                                "expected nf4 or fp4")
    blocksize = _int_field(parts, role, state, "blocksize", 1, 1 << 20)
    dtype = _DTYPES.get(state.get("dtype"))  # type: ignore[arg-type]
    if dtype is None:
        raise parts.error(role, f"says dtype is {str(state.get('dtype'))[:20]!r}; expected "
                                "float32, float16 or bfloat16")
    shape = state.get("shape")
    if not (isinstance(shape, list) and 1 <= len(shape) <= 8 and all(
            isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= 1 << 40 for d in shape)):
        raise parts.error(role, f"says shape is {json.dumps(shape)[:40]}; expected a list of "
                                "positive dimensions")
    n = math.prod(shape)
    blocks = -(-n // blocksize)
    if parts.shape("weight")[0] * max(1, math.prod(parts.shape("weight")[1:])) != -(-n // 2):
        raise parts.error("weight", f"holds {math.prod(parts.shape('weight'))} bytes, but "
                                    f"shape {shape} packs into {-(-n // 2)}")
    if parts.dtype("weight") != "uint8":
        raise parts.error("weight", f"is {parts.dtype('weight')}; 4-bit codes are packed in "
                                    "uint8")
    check_elements(parts, "weight", (n,))
    quant_map = parts.read("weight.quant_map", "f", shape=(16,)).astype(np.float32)
    absmax = _absmax(parts, role, state, blocks)
    codes = nibbles(parts.read("weight", "u"), low_first=False)[:n]
    elements = quant_map[codes]
    per_block = np.repeat(absmax, blocksize)[:n]
    values = scaled(elements, per_block, dtype)
    if quant_type == "fp4":  # bitsandbytes applies the code's sign bit: code 8 is -0.0
        values = np.copysign(values, np.where(codes & 8, np.float32(-1), np.float32(1)))
    values = values.reshape(shape)
    nested = parts.has("weight.nested_absmax")
    fmt = StoredFormat("bitsandbytes", quant_type, "group", group_size=blocksize,
                       scale_dtype="uint8" if nested else "float32",
                       notes=(("nested absmax: 8-bit codes, float32 per "
                               f"{state.get('nested_blocksize')}",) if nested else ()))
    def window():
        lo, hi = (scaled(np.full(n, edge, np.float32), per_block, dtype).reshape(shape)
                  for edge in (quant_map.min(), quant_map.max()))
        return lo, hi
    return StoredTensor(name, values, fmt, codes.reshape(shape), absmax, None,
                        parts.nbytes(), dtype, window)


def _absmax(parts: Parts, role: str, state: dict, blocks: int) -> np.ndarray:
    if not parts.has("weight.nested_absmax"):
        return parts.read("weight.absmax", "f", shape=(blocks,)).astype(np.float32)
    nested_block = _int_field(parts, role, state, "nested_blocksize", 1, 1 << 20)
    offset = state.get("nested_offset")
    if isinstance(offset, bool) or not isinstance(offset, int | float) or not math.isfinite(
            offset):
        raise parts.error(role, f"says nested_offset is {json.dumps(offset)[:40]}; expected a "
                                "number")
    codes = parts.read("weight.absmax", "u", shape=(blocks,), dtypes=("uint8",))
    code_map = parts.read("weight.nested_quant_map", "f", shape=(256,)).astype(np.float32)
    outer = parts.read("weight.nested_absmax", "f",
                       shape=(-(-blocks // nested_block),)).astype(np.float32)
    absmax = np.multiply(code_map[codes], np.repeat(outer, nested_block)[:blocks],
                         dtype=np.float32)
    return np.add(absmax, np.float32(offset), dtype=np.float32)
