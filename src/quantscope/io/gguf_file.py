"""GGUF files (llama.cpp's model format, versions 2 and 3), read without trusting the header.

Layout: ``GGUF``, a uint32 version, uint64 tensor and metadata counts, the metadata (key string,
uint32 value type, value; strings are a uint64 length and bytes, arrays a uint32 item type, a
uint64 count and the items), the tensor table (name, uint32 ``n_dims``, uint64 dims innermost
first, uint32 ggml type, uint64 offset), then the data section at the next multiple of
``general.alignment`` (32 when absent), each tensor at an aligned offset within it.

Every count, length and offset is checked against the bytes the file really has before anything
is read or allocated for it: a count larger than the remaining bytes could hold, a string
longer than the rest of the file, a tensor past the end, two tensors sharing bytes, an offset
off the alignment, an unknown type id, more than 4 dimensions or an element count beyond int64
each give one :class:`~quantscope.io.tensor_info.TensorFileError`. Metadata arrays are walked
item by item; only their first items are kept.

Tensors: F32, F16 and BF16 as stored (memory-mapped) or as float32; the quantized types of
:mod:`quantscope.core.formats.gguf` decoded as llama.cpp (and gguf-py) dequantize them, the
stored format named by ``TensorInfo.file_dtype`` (``Q4_K``) and :func:`stored_format`.
"""

from __future__ import annotations

import itertools
import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from quantscope.core.formats.gguf_types import BY_GGML_ID, GgufType
from quantscope.io.checks import check_regular_file, fail, pick_name
from quantscope.io.reading import Progress, read_values
from quantscope.io.tensor_info import TensorInfo, count

MAGIC = b"GGUF"
VERSIONS = (2, 3)
#: Dense types read as they are: ggml id -> (name, dtype).
DENSE = {0: ("F32", np.dtype("<f4")), 1: ("F16", np.dtype("<f2")), 30: ("BF16", None)}
MAX_DIMS = 4
#: Longest key or tensor name accepted (llama.cpp's own limit for keys is 65535 bytes).
MAX_NAME = 65535
#: Metadata array items kept in memory per array (the rest are read past).
KEPT_ITEMS = 16
#: Scalar metadata types: id -> struct format.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
#: Fewest bytes one metadata entry / one tensor entry can take (for bounding the counts).
_MIN_KV, _MIN_TENSOR = 8 + 4 + 1, 8 + 4 + 8 + 4 + 8


@dataclass
class GgufHeader:
    """A validated header: version, metadata, tensors by name with their data offsets."""

    version: int
    metadata: dict[str, object] = field(default_factory=dict)
    tensors: dict[str, tuple[TensorInfo, int, int]] = field(default_factory=dict)
    alignment: int = 32


class _Reader:
    """Sequential reads of the header, each one refused if it would pass the file's end."""

    def __init__(self, path: Path, fh, size: int) -> None:
        self.path, self.fh, self.size, self.pos = path, fh, size, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.size:
            raise fail(self.path, f"header is truncated or lies: {what} needs {count(n)} bytes "
                                  f"at offset {self.pos}, the file has {self.size}")
        data = self.fh.read(n)
        if len(data) != n:
            raise fail(self.path, f"file shrank while reading {what}")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise fail(self.path, f"header is truncated or lies: {what} needs {count(n)} bytes "
                                  f"at offset {self.pos}, the file has {self.size}")
        self.fh.seek(n, os.SEEK_CUR)
        self.pos += n

    def unpack(self, fmt: str, what: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what: str, keep: bool = True) -> str:
        n = self.unpack("<Q", f"{what} length")
        if n > self.size - self.pos:
            raise fail(self.path, f"{what} claims {count(n)} bytes, more than the "
                                  f"{self.size - self.pos} left in the file")
        if not keep:
            self.skip(n, what)
            return ""
        if n > MAX_NAME and what != "metadata string":
            raise fail(self.path, f"{what} is {count(n)} bytes long (at most {MAX_NAME})")
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise fail(self.path, f"{what} at offset {self.pos - n} is not UTF-8") from None

    def left(self) -> int:
        return self.size - self.pos


def _value(r: _Reader, vtype: int, key: str, depth: int = 0):
    """One metadata value (arrays: their first :data:`KEPT_ITEMS` items and their length)."""
    if vtype in _SCALARS:
        return r.unpack(_SCALARS[vtype], f"metadata {key!r}")
    if vtype == _STRING:
        return r.string("metadata string", keep=True)
    if vtype == _ARRAY:
        if depth > 2:
            raise fail(r.path, f"metadata {key!r} nests arrays more than 3 deep")
        itype = r.unpack("<I", f"metadata {key!r} item type")
        n = r.unpack("<Q", f"metadata {key!r} item count")
        least = struct.calcsize(_SCALARS[itype]) if itype in _SCALARS else (
            8 if itype in (_STRING, _ARRAY) else None)
        if least is None:
            raise fail(r.path, f"metadata {key!r} has items of unknown type {itype}")
        if n * least > r.left():
            raise fail(r.path, f"metadata {key!r} claims {count(n)} items, more than the "
                               f"{r.left()} bytes left could hold")
        items = []
        if itype in _SCALARS and n > KEPT_ITEMS:
            size = struct.calcsize(_SCALARS[itype])
            items = [_value(r, itype, key, depth + 1) for _ in range(KEPT_ITEMS)]
            r.skip((n - KEPT_ITEMS) * size, f"metadata {key!r}")
        else:
            for k in range(n):
                v = _value(r, itype, key, depth + 1)
                if k < KEPT_ITEMS:
                    items.append(v)
        return items if n <= KEPT_ITEMS else {"length": n, "first": items}
    raise fail(r.path, f"metadata {key!r} has unknown value type {vtype}")


def _type_of(path: Path, t: int, name: str) -> tuple[str, int, int, GgufType | None]:
    """(file dtype, block elements, bytes per block, quantized type) of ggml type ``t``."""
    if t in DENSE:
        label, dt = DENSE[t]
        return label, 1, 2 if dt is None else dt.itemsize, None
    if t in BY_GGML_ID:
        g = BY_GGML_ID[t]
        return g.ggml_name, g.block, g.type_size, g
    raise fail(path, f"tensor {name[:80]!r} has ggml type {count(t)}, which quantscope does "
                     "not read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K)")


def read_header(path: str | os.PathLike) -> GgufHeader:
    """The validated header of the GGUF file at ``path`` (see the module docstring)."""
    p = Path(path)
    size = check_regular_file(p)
    try:
        with open(p, "rb") as fh:
            return _parse(_Reader(p, fh, size))
    except OSError as exc:
        raise fail(p, f"cannot read file ({exc.strerror or exc})") from None


def _parse(r: _Reader) -> GgufHeader:
    p = r.path
    if r.take(4, "magic") != MAGIC:
        raise fail(p, "is not a GGUF file (missing the GGUF magic)")
    version = r.unpack("<I", "version")
    if version not in VERSIONS:
        raise fail(p, f"GGUF version {count(version)} is not supported (2 and 3 are)")
    n_tensors = r.unpack("<Q", "tensor count")
    n_kv = r.unpack("<Q", "metadata count")
    if n_kv * _MIN_KV > r.left() or n_tensors * _MIN_TENSOR > r.left():
        raise fail(p, f"header claims {count(n_tensors)} tensors and {count(n_kv)} metadata "
                      f"entries, more than the file's {r.size} bytes could hold")
    head = GgufHeader(version)
    for _ in range(n_kv):
        key = r.string("metadata key")
        vtype = r.unpack("<I", f"metadata {key!r} type")
        if key in head.metadata:
            raise fail(p, f"metadata key {key[:80]!r} appears twice")
        head.metadata[key] = _value(r, vtype, key)
    align = head.metadata.get("general.alignment", 32)
    if not isinstance(align, int) or isinstance(align, bool) or align < 1 or align > 1 << 16 \
            or align & (align - 1):
        raise fail(p, f"general.alignment {count(align)} is not a power of two up to 65536")
    head.alignment = align
    entries = []
    for _ in range(n_tensors):
        name = r.string("tensor name")
        n_dims = r.unpack("<I", f"tensor {name[:80]!r} dimension count")
        if not 1 <= n_dims <= MAX_DIMS:
            raise fail(p, f"tensor {name[:80]!r} has {count(n_dims)} dimensions (1 to "
                          f"{MAX_DIMS})")
        dims = [r.unpack("<Q", f"tensor {name[:80]!r} dimension") for _ in range(n_dims)]
        t = r.unpack("<I", f"tensor {name[:80]!r} type")
        offset = r.unpack("<Q", f"tensor {name[:80]!r} offset")
        if name in {e[0] for e in entries}:
            raise fail(p, f"tensor name {name[:80]!r} appears twice")
        entries.append((name, dims, t, offset))
    data_start = -(-r.pos // align) * align
    spans = []
    for name, dims, t, offset in entries:
        label, block, type_size, _ = _type_of(p, t, name)
        n = math.prod(dims)
        if n >= 1 << 62 or any(d == 0 for d in dims):
            raise fail(p, f"tensor {name[:80]!r} has shape {count(tuple(dims))}: empty or "
                          "beyond int64 elements")
        if dims[0] % block:
            raise fail(p, f"tensor {name[:80]!r} ({label}) has {count(dims[0])} elements per "
                          f"row, not a multiple of its block of {block}")
        nbytes = n // block * type_size
        if offset % align:
            raise fail(p, f"tensor {name[:80]!r} offset {count(offset)} is not a multiple of "
                          f"the alignment {align}")
        if data_start + offset + nbytes > r.size:
            raise fail(p, f"tensor {name[:80]!r} ({count(nbytes)} bytes at data offset "
                          f"{count(offset)}) runs past the end of the file ({r.size} bytes)")
        shape = tuple(int(d) for d in reversed(dims))  # GGUF lists the innermost first
        dtype = "bfloat16" if t == 30 else ("float16" if t == 1 else "float32")
        info = TensorInfo(name, shape, dtype, label, nbytes, "gguf")
        head.tensors[name] = (info, data_start + offset, t)
        spans.append((offset, offset + nbytes, name))
    spans.sort()
    for (_, a1, an), (b0, _, bn) in itertools.pairwise(spans):
        if b0 < a1:
            raise fail(p, f"tensors {an[:80]!r} and {bn[:80]!r} overlap in the data section")
    return head


def list_gguf(path: str | os.PathLike) -> list[TensorInfo]:
    """Every tensor of a validated GGUF file (quantized ones as their decoded float32)."""
    return [info for info, _, _ in read_header(path).tensors.values()]


def stored_format(info: TensorInfo) -> str | None:
    """The engine format a GGUF tensor is stored in (``"gguf_q4_k"``), None for F32/F16/BF16
    (:attr:`TensorInfo.stored`)."""
    return info.stored


def load_gguf_blocks(path: str | os.PathLike, name: str | None = None
                     ) -> tuple[np.ndarray, str, tuple[int, ...]]:
    """A quantized tensor's stored bytes (uint8, llama.cpp's layout), its engine format and
    its shape: what :func:`quantscope.core.formats.gguf.from_blocks` takes."""
    head = read_header(path)
    name = pick_name(path, list(head.tensors), name)
    info, offset, t = head.tensors[name]
    if t not in BY_GGML_ID:
        raise fail(path, f"tensor {name[:80]!r} is {info.file_dtype}, not a quantized type")
    return _read_bytes(path, offset, info, name), BY_GGML_ID[t].name, info.shape


def _read_bytes(path, offset: int, info: TensorInfo, name: str,
                progress: Progress | None = None) -> np.ndarray:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return read_values(fh, path, f"tensor {name[:80]!r}", shape=(info.nbytes,),
                               dtype=np.dtype(np.uint8), as_float32=False, progress=progress)
    except OSError as exc:
        raise fail(path, f"cannot read file ({exc.strerror or exc})") from None


def load_gguf(path: str | os.PathLike, name: str | None = None, *, as_float32: bool = False,
              progress: Progress | None = None) -> tuple[np.ndarray, TensorInfo]:
    """One tensor: F32/F16/BF16 as stored (memory-mapped) or as float32; a quantized type
    decoded to float32 as llama.cpp dequantizes it (either way)."""
    head = read_header(path)
    name = pick_name(path, list(head.tensors), name)
    info, offset, t = head.tensors[name]
    if t in BY_GGML_ID:
        from quantscope.core.formats.gguf import decode

        blocks = _read_bytes(path, offset, info, name, progress)
        return decode(blocks, BY_GGML_ID[t].name, info.shape), info
    dtype = info.numpy_dtype
    if as_float32:
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                return read_values(fh, path, f"tensor {name[:80]!r}", shape=info.shape,
                                   dtype=dtype, as_float32=True, progress=progress), info
        except OSError as exc:
            raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
    try:
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=info.shape), info
    except (OSError, ValueError) as exc:
        raise fail(path, f"cannot map tensor {name[:80]!r} ({exc})") from None
