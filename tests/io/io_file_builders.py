"""Writers for test files, so the tests do not depend on the safetensors or torch packages.

The safetensors format is small enough to write by hand, which also lets the hostile-file
tests build headers that lie in precise ways.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

#: NumPy dtype -> safetensors dtype name.
ST_NAMES = {
    np.dtype("<f8"): "F64",
    np.dtype("<f4"): "F32",
    np.dtype("<f2"): "F16",
    np.dtype(ml_dtypes.bfloat16): "BF16",
    np.dtype(ml_dtypes.float8_e4m3fn): "F8_E4M3",
    np.dtype(ml_dtypes.float8_e5m2): "F8_E5M2",
    np.dtype("<i8"): "I64",
    np.dtype("<i4"): "I32",
    np.dtype("<i2"): "I16",
    np.dtype("i1"): "I8",
    np.dtype("u1"): "U8",
    np.dtype("?"): "BOOL",
}


def safetensors_bytes(tensors: dict[str, np.ndarray], metadata: dict | None = None,
                      pad_to: int = 8) -> bytes:
    """A valid safetensors file (header padded with spaces, as the reference writer does)."""
    header: dict = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    chunks, offset = [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": ST_NAMES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    return raw_safetensors(header, b"".join(chunks), pad_to)


def raw_safetensors(header: object, data: bytes, pad_to: int = 8) -> bytes:
    """Any header object (valid or not) followed by ``data``."""
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % pad_to)
    return struct.pack("<Q", len(text)) + text + data


def write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def npy_bytes(array: np.ndarray) -> bytes:
    """What ``np.save`` writes for ``array``."""
    import io

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def npy_with_header(header: str, data: bytes, version: tuple[int, int] = (1, 0)) -> bytes:
    """A ``.npy`` stream with a hand-written header dict literal (for lying headers)."""
    text = header.encode("latin1")
    length_format = "<H" if version == (1, 0) else "<I"
    prefix_len = 6 + 2 + struct.calcsize(length_format)
    text += b" " * (-(prefix_len + len(text) + 1) % 64) + b"\n"
    return (b"\x93NUMPY" + bytes(version) + struct.pack(length_format, len(text)) + text
            + data)
