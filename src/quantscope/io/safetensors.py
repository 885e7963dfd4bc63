"""``.safetensors`` checkpoints, parsed here without the safetensors or torch packages.

Layout: an unsigned little-endian 64-bit header length N, N bytes of JSON
(``{"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
"__metadata__": {str: str}}``), then the data buffer; offsets are relative to the buffer.
Everything the format's reference implementation validates is validated here too — header
length within the file (and at most 100 MB), UTF-8 JSON object, known dtypes, offsets in
range, matching shape × itemsize, no overlap and no holes (the buffer must be indexed
exactly, which rules out polyglot files) — before one tensor is memory-mapped on request.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass

import numpy as np

from quantscope.io.checks import (
    check_numpy_size,
    check_regular_file,
    check_shape,
    data_nbytes,
    fail,
    pick_name,
)
from quantscope.io.dtypes import dtype_from_name
from quantscope.io.reading import Progress, read_values
from quantscope.io.tensor_info import TensorInfo, count

#: The reference implementation refuses headers above 100 MB; so do we.
MAX_HEADER_BYTES = 100_000_000
#: Tensors one file may describe. The largest real shards hold a few thousand; 1.5M empty
#: entries in an 86 MB header took 45 s and 1.8 GB to parse before any check could run.
MAX_TENSORS = 100_000

#: safetensors dtype name -> little-endian NumPy dtype (a name for the ml_dtypes ones, which
#: :func:`dtype_of` resolves: ml_dtypes is imported only for a checkpoint that holds them).
DTYPES: dict[str, np.dtype | str] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}

#: Known to the format but not analysable here, with the reason shown to the user.
_UNSUPPORTED = {
    "C64": "complex numbers are not supported",
    "C128": "complex numbers are not supported",
    "F8_E8M0": "scale-only E8M0 values are not supported",
    "F6_E2M3": "packed 6-bit floats are not supported",
    "F6_E3M2": "packed 6-bit floats are not supported",
    "F4": "packed 4-bit floats are not supported",
}

_LENGTH = struct.Struct("<Q")


def dtype_of(name: str) -> np.dtype:
    """The NumPy dtype of a safetensors dtype name from :data:`DTYPES`."""
    dtype = DTYPES[name]
    return dtype_from_name(dtype) if isinstance(dtype, str) else dtype


@dataclass(frozen=True)
class SafetensorsHeader:
    """A validated header: tensor entries (in file order), metadata and where data starts."""

    tensors: dict[str, tuple[TensorInfo, int]]  # name -> (info, absolute data offset)
    metadata: dict[str, str]
    data_start: int


def read_header(path: str | os.PathLike) -> SafetensorsHeader:
    """Read and validate the whole header of a safetensors file; no tensor data is read.

    Raises
    ------
    TensorFileError
        For any violation of the format, naming the offending tensor where there is one.
    """
    size = check_regular_file(path)
    if size < _LENGTH.size:
        raise fail(path, f"is truncated ({size} bytes): no safetensors header length")
    try:
        with open(path, "rb") as fh:
            (header_len,) = _LENGTH.unpack(fh.read(_LENGTH.size))
            if header_len > size - _LENGTH.size:
                raise fail(path, f"header length field says {header_len} bytes but the file "
                                 f"holds only {size - _LENGTH.size} after it (truncated or "
                                 "corrupt)")
            if header_len > MAX_HEADER_BYTES:
                raise fail(path, f"header of {header_len} bytes exceeds the "
                                 f"{MAX_HEADER_BYTES}-byte limit")
            _check_entry_count(path, fh, header_len)
            raw = fh.read(header_len)
    except OSError as exc:
        raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
    if len(raw) < header_len:
        raise fail(path, "is truncated inside its header")
    entries = _parse_json(path, raw)
    data_start = _LENGTH.size + header_len
    metadata = _check_metadata(path, entries.pop("__metadata__", None))
    tensors = {name: _check_entry(path, name, entry) for name, entry in entries.items()}
    _check_layout(path, tensors, size - data_start)
    return SafetensorsHeader(
        tensors={name: (info, data_start + begin) for name, (info, begin) in tensors.items()},
        metadata=metadata, data_start=data_start)


def _check_entry_count(path: str | os.PathLike, fh, header_len: int) -> None:
    """Refuse a header describing more than :data:`MAX_TENSORS` tensors, from a streamed count
    of its braces (every entry is a JSON object, and a brace cannot be escaped): the parser
    would build Python objects for each -- gigabytes -- before any check could run."""
    start, objects, left = fh.tell(), 0, header_len
    while left:
        chunk = fh.read(min(left, 1 << 20))
        if not chunk:
            break
        objects += chunk.count(b"{")
        left -= len(chunk)
    if objects > MAX_TENSORS + 2:
        raise fail(path, f"header holds {objects:,} JSON objects, more than the {MAX_TENSORS:,} "
                         "tensors a file may describe; refused")
    fh.seek(start)


def _parse_json(path: str | os.PathLike, raw: bytes) -> dict:
    if not raw.startswith(b"{"):
        raise fail(path, "header does not start with '{'")

    try:
        text = raw.decode("utf-8")
        entries = json.loads(text, object_pairs_hook=_refuse_duplicate_keys,
                             parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise fail(path, "header is not valid UTF-8") from None
    except (ValueError, RecursionError) as exc:
        detail = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise fail(path, f"header is not valid JSON ({detail})") from None
    if not isinstance(entries, dict):
        raise fail(path, "header is not a JSON object")
    return entries


def _refuse_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    result: dict = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key[:60]!r}")
        result[key] = value
    return result


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not allowed in a header")


def _check_metadata(path: str | os.PathLike, metadata: object) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise fail(path, "__metadata__ must map strings to strings")
    return metadata


def _check_entry(path: str | os.PathLike, name: str, entry: object) -> tuple[TensorInfo, int]:
    """Validate one tensor entry; returns its info and buffer-relative begin offset."""
    where = f"tensor {name[:80]!r}"
    if not isinstance(entry, dict):
        raise fail(path, f"{where}: entry must be an object with dtype, shape, data_offsets")
    missing = {"dtype", "shape", "data_offsets"} - set(entry)
    if missing:
        raise fail(path, f"{where}: entry lacks {', '.join(sorted(missing))}")
    dtype_name = entry["dtype"]
    if not isinstance(dtype_name, str) or dtype_name not in DTYPES:
        reason = _UNSUPPORTED.get(dtype_name) if isinstance(dtype_name, str) else None
        shown = repr(dtype_name)[:40]
        raise fail(path, f"{where} has unsupported dtype {shown}"
                         + (f": {reason}" if reason else ""))
    dtype = dtype_of(dtype_name)
    shape = check_shape(path, entry["shape"], where)
    check_numpy_size(path, shape, dtype, where)
    offsets = entry["data_offsets"]
    if (not isinstance(offsets, list) or len(offsets) != 2
            or any(isinstance(o, bool) or not isinstance(o, int) or o < 0 for o in offsets)):
        raise fail(path, f"{where}: data_offsets must be two non-negative integers")
    begin, end = offsets
    if end < begin:
        raise fail(path, f"{where}: data_offsets end {count(end)} is before begin "
                         f"{count(begin)}")
    nbytes = data_nbytes(shape, dtype)
    if end - begin != nbytes:
        raise fail(path, f"{where}: header lies — shape {count(list(shape))} of {dtype_name} "
                         f"needs {count(nbytes)} bytes but data_offsets span "
                         f"{count(end - begin)}")
    info = TensorInfo(name=name, shape=shape, dtype=dtype.name, file_dtype=dtype_name,
                      nbytes=nbytes, format="safetensors")
    return info, begin


def _check_layout(path: str | os.PathLike, tensors: dict[str, tuple[TensorInfo, int]],
                  buffer_size: int) -> None:
    """Offsets must tile the data buffer exactly: in range, no overlap, no hole, no tail."""
    spans = sorted((begin, begin + info.nbytes, name) for name, (info, begin) in tensors.items())
    cursor, previous = 0, None
    for begin, end, name in spans:
        if end > buffer_size:
            raise fail(path, f"tensor {name[:80]!r}: data_offsets [{count(begin)}, {count(end)}] "
                             f"run past the {buffer_size}-byte data buffer (truncated file or "
                             "lying header)")
        if begin < cursor:
            raise fail(path, f"tensor {name[:80]!r}: data overlaps tensor {previous[:80]!r}")
        if begin > cursor:
            raise fail(path, f"data buffer has a hole of {begin - cursor} bytes before tensor "
                             f"{name[:80]!r}; refused (possible polyglot file)")
        cursor, previous = end, name
    if cursor != buffer_size:
        raise fail(path, f"{buffer_size - cursor} bytes after the last tensor are not "
                         "described by the header; refused (possible polyglot file)")


def list_safetensors(path: str | os.PathLike) -> list[TensorInfo]:
    """Every tensor of a checkpoint, in header order, from the header alone."""
    return [info for info, _ in read_header(path).tensors.values()]


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The ``__metadata__`` entry (free-form string pairs), empty when absent."""
    return read_header(path).metadata


def load_safetensors(path: str | os.PathLike, name: str | None = None, *,
                     as_float32: bool = False,
                     progress: Progress | None = None) -> tuple[np.ndarray, TensorInfo]:
    """One tensor of a validated checkpoint: memory-mapped in its stored dtype (read-only), or
    with ``as_float32`` read into memory as float32 (see :mod:`quantscope.io.reading`)."""
    header = read_header(path)
    name = pick_name(path, list(header.tensors), name)
    info, offset = header.tensors[name]
    dtype = dtype_of(info.file_dtype)
    if as_float32:
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                values = read_values(fh, path, f"tensor {name[:80]!r}",
                                     shape=info.shape, dtype=dtype, as_float32=True,
                                     progress=progress)
        except OSError as exc:
            raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
        return values, info
    if info.nbytes == 0:
        return np.empty(info.shape, dtype=dtype), info
    try:
        array = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=info.shape)
    except (OSError, ValueError) as exc:
        raise fail(path, f"cannot map tensor {name!r} ({exc})") from None
    return array, info
