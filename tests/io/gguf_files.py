"""GGUF test files written with gguf-py's GGUFWriter (the real writer), and raw headers for
the hostile corpus."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from quantscope.core.formats.gguf import GGUF_TYPES, encode


def write_gguf(path: Path, tensors: dict[str, tuple[np.ndarray, str]], *,
               metadata: dict | None = None) -> Path:
    """``tensors``: name -> (float32 values, "F32" / "F16" / "BF16" / an engine GGUF format);
    quantized tensors are written as our bytes, which the tests prove equal llama.cpp's."""
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    for k, v in (metadata or {}).items():
        w.add_string(k, v) if isinstance(v, str) else w.add_uint32(k, v)
    for name, (x, kind) in tensors.items():
        if kind == "F32":
            w.add_tensor(name, np.ascontiguousarray(x, np.float32))
        elif kind == "F16":
            w.add_tensor(name, np.ascontiguousarray(x, np.float16))
        elif kind == "BF16":
            import ml_dtypes

            raw = np.ascontiguousarray(x, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
            w.add_tensor(name, raw, raw_shape=x.shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            t = GGUF_TYPES[kind]
            b = encode(x, kind)
            w.add_tensor(name, b, raw_shape=b.shape,
                         raw_dtype=getattr(gguf.GGMLQuantizationType, t.ggml_name))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _s(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def raw_gguf(tensors: list[tuple[bytes, list[int], int, int]], *, version: int = 3,
             n_tensors: int | None = None, n_kv: int = 0, kv: bytes = b"",
             data: bytes = b"", align: int = 32) -> bytes:
    """A GGUF file byte by byte: ``tensors`` as (name, dims innermost first, type, offset);
    counts may lie."""
    head = b"GGUF" + struct.pack("<IQQ", version,
                                 len(tensors) if n_tensors is None else n_tensors, n_kv) + kv
    for name, dims, t, offset in tensors:
        head += _s(name) + struct.pack("<I", len(dims)) + b"".join(
            struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", t, offset)
    head += b"\0" * (-len(head) % align)
    return head + data
