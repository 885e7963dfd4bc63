"""``.npy`` files: header parsed here, data read (or memory-mapped) after it, nothing ever
unpickled.

NumPy's own reader would do, but it reads a version-2 header of any declared length (up to
4 GiB) before checking it, and its errors talk about ``allow_pickle``. This parser bounds
every read and validates the header completely before any data is touched. Data for analysis
is read into memory block by block (:mod:`quantscope.io.reading`: a mapping would crash the
process if the file were rewritten while in use); ``load_tensor`` alone still maps it, so a file
larger than RAM can be inspected. The header parser is shared with ``.npz`` members, which are
``.npy`` streams.
"""

from __future__ import annotations

import ast
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from quantscope.io.checks import (
    check_array_dtype,
    check_numpy_size,
    check_regular_file,
    check_shape,
    data_nbytes,
    fail,
    pick_name,
)
from quantscope.io.reading import Progress, read_values
from quantscope.io.tensor_info import TensorInfo, count

MAGIC = b"\x93NUMPY"

#: Longest header accepted, in bytes. NumPy writes ~128; its own reader stops at 10000.
MAX_HEADER_BYTES = 10_000

#: Version -> (struct format of the header length, text encoding), as in NEP 1.
_VERSIONS = {(1, 0): ("<H", "latin1"), (2, 0): ("<I", "latin1"), (3, 0): ("<I", "utf8")}


@dataclass(frozen=True)
class NpyHeader:
    """A validated ``.npy`` header and where its data starts in the stream."""

    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype
    data_offset: int

    @property
    def nbytes(self) -> int:
        return data_nbytes(self.shape, self.dtype)


def read_npy_header(fh: BinaryIO, path: str | os.PathLike, where: str) -> NpyHeader:
    """Parse and validate the header of the ``.npy`` stream ``fh`` is positioned at.

    Parameters
    ----------
    fh : binary file object
        Positioned at the magic string; a plain file or a zip member stream.
    path : path-like
        The file named in errors.
    where : str
        What the stream is, for errors (``"array"``, ``"member 'w.npy'"``).

    Raises
    ------
    TensorFileError
        Bad magic, unknown version, oversized or unparsable header, bad shape, unsupported
        dtype. The data size is *not* checked here: the caller knows how many bytes exist.
    """
    prefix = fh.read(len(MAGIC) + 2)
    if len(prefix) < len(MAGIC) + 2 or not prefix.startswith(MAGIC):
        raise fail(path, f"{where} is not a .npy stream (bad magic or truncated)")
    version = (prefix[-2], prefix[-1])
    if version not in _VERSIONS:
        raise fail(path, f"{where} has unknown .npy format version {version[0]}.{version[1]}")
    length_format, encoding = _VERSIONS[version]
    length_bytes = fh.read(struct.calcsize(length_format))
    if len(length_bytes) < struct.calcsize(length_format):
        raise fail(path, f"{where} is truncated inside its header")
    (header_len,) = struct.unpack(length_format, length_bytes)
    if header_len > MAX_HEADER_BYTES:
        raise fail(path, f"{where} declares a {header_len}-byte header (limit "
                         f"{MAX_HEADER_BYTES}); refused as unsafe")
    raw = fh.read(header_len)
    if len(raw) < header_len:
        raise fail(path, f"{where} is truncated inside its header")
    header = _parse_header_dict(raw, encoding, path, where)
    shape = check_shape(path, header["shape"], where)
    dtype = _descr_to_dtype(header["descr"], path, where)
    check_array_dtype(path, dtype, where)
    check_numpy_size(path, shape, dtype, where)
    data_offset = len(prefix) + len(length_bytes) + header_len
    return NpyHeader(shape, header["fortran_order"], dtype, data_offset)


def _parse_header_dict(raw: bytes, encoding: str, path: str | os.PathLike, where: str) -> dict:
    """The header is a Python dict literal; ``ast.literal_eval`` evaluates literals only."""
    try:
        text = raw.decode(encoding)
        header = ast.literal_eval(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, TypeError, MemoryError,
            RecursionError):
        raise fail(path, f"{where} has an unparsable header") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise fail(path, f"{where} header must be a dict with exactly the keys "
                         "'descr', 'fortran_order' and 'shape'")
    if not isinstance(header["fortran_order"], bool):
        raise fail(path, f"{where} header: fortran_order must be True or False")
    if not isinstance(header["shape"], tuple):
        raise fail(path, f"{where} header: shape must be a tuple of integers")
    return header


def _descr_to_dtype(descr: object, path: str | os.PathLike, where: str) -> np.dtype:
    """A dtype from a plain type string; structured (list) and sub-array (tuple) refused.

    ``descr`` comes from the file, so it is passed to ``np.dtype`` only once known to be a
    short string; a list would describe a structured dtype, which quantscope cannot analyse.
    """
    if isinstance(descr, list):
        raise fail(path, f"{where} has a structured dtype; only plain numeric arrays are "
                         "supported")
    if isinstance(descr, tuple):
        raise fail(path, f"{where} has a sub-array dtype; only plain numeric arrays are "
                         "supported")
    if not isinstance(descr, str) or len(descr) > 32:
        raise fail(path, f"{where} header: descr is not a dtype string")
    try:
        return np.dtype(descr)
    except (TypeError, ValueError, SyntaxError, OverflowError):
        raise fail(path, f"{where} has an unknown dtype {descr!r}") from None


def check_data_present(path: str | os.PathLike, header: NpyHeader, available: int,
                       where: str) -> None:
    """Refuse a header whose shape needs more bytes than the stream holds (truncated/lying)."""
    present = available - header.data_offset
    if header.nbytes > present:
        raise fail(path, f"{where} is truncated or its header lies: shape "
                         f"{count(header.shape)} of {header.dtype.name} needs "
                         f"{count(header.nbytes)} data bytes, only {max(present, 0)} present")


def info_from_header(name: str, header: NpyHeader, fmt: str) -> TensorInfo:
    """TensorInfo for a validated header."""
    return TensorInfo(name=name, shape=header.shape, dtype=header.dtype.name,
                      file_dtype=header.dtype.str, nbytes=header.nbytes, format=fmt)


def map_data(path: str | os.PathLike, header: NpyHeader, offset: int) -> np.ndarray:
    """Memory-map validated data read-only (an empty array needs no mapping)."""
    if header.nbytes == 0:
        return np.empty(header.shape, dtype=header.dtype, order="F" if header.fortran_order
                        else "C")
    try:
        return np.memmap(path, dtype=header.dtype, mode="r", offset=offset, shape=header.shape,
                         order="F" if header.fortran_order else "C")
    except (OSError, ValueError) as exc:
        raise fail(path, f"cannot map the data ({exc})") from None


def _read_validated_header(path: str | os.PathLike) -> NpyHeader:
    size = check_regular_file(path)
    try:
        with open(path, "rb") as fh:
            header = read_npy_header(fh, path, "array")
    except OSError as exc:
        raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
    check_data_present(path, header, size, "array")
    return header


def npy_name(path: str | os.PathLike) -> str:
    """A ``.npy`` file holds one unnamed array; its stem names it in listings."""
    return Path(path).stem


def list_npy(path: str | os.PathLike) -> list[TensorInfo]:
    """The single array of a ``.npy`` file, from its header alone."""
    return [info_from_header(npy_name(path), _read_validated_header(path), "npy")]


def load_npy(path: str | os.PathLike, name: str | None = None, *, as_float32: bool = False,
             progress: Progress | None = None) -> tuple[np.ndarray, TensorInfo]:
    """The array of a ``.npy`` file; ``name``, if given, must be the file's stem.

    Memory-mapped in its stored dtype, or with ``as_float32`` read into memory as C-contiguous
    float32 (see :func:`quantscope.io.reading.read_values`) from the same open file whose header
    was validated."""
    if not as_float32:
        header = _read_validated_header(path)
        pick_name(path, [npy_name(path)], name)
        return map_data(path, header, header.data_offset), info_from_header(
            npy_name(path), header, "npy")
    size = check_regular_file(path)
    pick_name(path, [npy_name(path)], name)
    try:
        with open(path, "rb") as fh:
            header = read_npy_header(fh, path, "array")
            check_data_present(path, header, size, "array")
            values = read_values(fh, path, "array", shape=header.shape, dtype=header.dtype,
                                 fortran=header.fortran_order, as_float32=True,
                                 progress=progress)
    except OSError as exc:
        raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
    return values, info_from_header(npy_name(path), header, "npy")
