"""``.npz`` archives: a zip of ``.npy`` members, listed from their headers alone.

Listing opens each member just far enough to read its ``.npy`` header (for a compressed
member that decompresses only the first block). Loading memory-maps a stored member straight
out of the archive; a compressed member has to be decompressed into memory, and before that
happens its declared uncompressed size must match its header, the header must be plausible
for the compressed size (a zip bomb cannot lie its way to a huge allocation) and the result
must fit in physical memory. Zip CRCs are checked by ``zipfile`` as the member is read.
"""

from __future__ import annotations

import lzma
import os
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from quantscope.io.checks import (
    check_fits_in_memory,
    check_regular_file,
    fail,
    pick_name,
)
from quantscope.io.npy import NpyHeader, info_from_header, map_data, read_npy_header
from quantscope.io.tensor_info import TensorInfo

#: Deflate cannot expand data by more than about 1032:1; allow a little header slack.
_DEFLATE_MAX_RATIO = 1032
_DEFLATE_SLACK = 4096

_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature ... file name length, extra length
_LOCAL_SIGNATURE = b"PK\x03\x04"

#: Exceptions the zip machinery raises on corrupt archives; all mean "this file is broken".
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, struct.error,
               NotImplementedError, RuntimeError, OverflowError, UnicodeDecodeError,
               ValueError, OSError)

_SUPPORTED_COMPRESSION = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2,
                          zipfile.ZIP_LZMA}


@contextmanager
def _open_archive(path: str | os.PathLike) -> Iterator[zipfile.ZipFile]:
    check_regular_file(path)
    try:
        archive = zipfile.ZipFile(path)
    except _ZIP_ERRORS as exc:
        raise fail(path, f"is not a readable .npz/zip archive ({_reason(exc)})") from None
    with archive:
        yield archive


def _array_members(path: str | os.PathLike, archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """Map array name -> member for every ``*.npy`` member, refusing ambiguity."""
    members: dict[str, zipfile.ZipInfo] = {}
    for member in archive.infolist():
        if member.is_dir() or not member.filename.endswith(".npy"):
            continue
        name = member.filename[: -len(".npy")]
        if name in members:
            raise fail(path, f"has two members named {member.filename!r}; refused as ambiguous")
        members[name] = member
    if not members:
        others = archive.namelist()
        if any(n.endswith((".pkl", "data.pkl")) for n in others):
            raise fail(path, "is a zip holding pickles (a PyTorch checkpoint?), not an .npz; "
                             "quantscope never unpickles — convert it to safetensors")
        raise fail(path, "holds no .npy arrays")
    return members


def _member_header(path: str | os.PathLike, archive: zipfile.ZipFile,
                   member: zipfile.ZipInfo) -> NpyHeader:
    """Read and check one member's header against the member's declared size."""
    where = f"member {member.filename!r}"
    if member.flag_bits & 0x1:
        raise fail(path, f"{where} is encrypted")
    if member.compress_type not in _SUPPORTED_COMPRESSION:
        raise fail(path, f"{where} uses unsupported zip compression {member.compress_type}")
    try:
        with archive.open(member) as stream:
            header = read_npy_header(stream, path, where)
    except _ZIP_ERRORS as exc:
        raise fail(path, f"{where} is corrupt ({_reason(exc)})") from None
    expected = header.data_offset + header.nbytes
    if member.file_size != expected:
        raise fail(path, f"{where} declares {member.file_size} uncompressed bytes but its "
                         f"header (shape {header.shape}, {header.dtype.name}) needs {expected}")
    return header


def list_npz(path: str | os.PathLike) -> list[TensorInfo]:
    """Every array of an ``.npz`` with its shape, dtype and size, without reading the data."""
    with _open_archive(path) as archive:
        members = _array_members(path, archive)
        return [info_from_header(name, _member_header(path, archive, member), "npz")
                for name, member in members.items()]


def load_npz(path: str | os.PathLike, name: str | None = None) -> tuple[np.ndarray, TensorInfo]:
    """One array of an ``.npz``: memory-mapped if stored, decompressed (bounded) otherwise."""
    with _open_archive(path) as archive:
        members = _array_members(path, archive)
        name = pick_name(path, list(members), name)
        member = members[name]
        header = _member_header(path, archive, member)
        info = info_from_header(name, header, "npz")
        if member.compress_type == zipfile.ZIP_STORED:
            return _map_stored(path, archive, member, header), info
        return _read_compressed(path, archive, member, header), info


def _map_stored(path: str | os.PathLike, archive: zipfile.ZipFile, member: zipfile.ZipInfo,
                header: NpyHeader) -> np.ndarray:
    """Memory-map an uncompressed member in place, after locating it via its local header."""
    where = f"member {member.filename!r}"
    if member.compress_size != member.file_size:
        raise fail(path, f"{where} is stored uncompressed but its sizes disagree")
    try:
        archive.fp.seek(member.header_offset)
        raw = archive.fp.read(_LOCAL_HEADER.size)
        signature, name_len, extra_len = _LOCAL_HEADER.unpack(raw)
        archive_size = archive.fp.seek(0, os.SEEK_END)
    except _ZIP_ERRORS as exc:
        raise fail(path, f"{where} has a corrupt local header ({_reason(exc)})") from None
    if signature != _LOCAL_SIGNATURE:
        raise fail(path, f"{where} has a corrupt local header (bad signature)")
    start = member.header_offset + _LOCAL_HEADER.size + name_len + extra_len
    if start + member.file_size > archive_size:
        raise fail(path, f"{where} extends past the end of the archive (truncated file)")
    return map_data(path, header, start + header.data_offset)


def _read_compressed(path: str | os.PathLike, archive: zipfile.ZipFile,
                     member: zipfile.ZipInfo, header: NpyHeader) -> np.ndarray:
    """Decompress one member into a buffer of exactly the size its header declares."""
    where = f"member {member.filename!r}"
    archive_size = os.fstat(archive.fp.fileno()).st_size
    if member.compress_size > archive_size:
        raise fail(path, f"{where} claims {member.compress_size} compressed bytes, more than "
                         f"the whole {archive_size}-byte archive (truncated or corrupt)")
    if (member.compress_type == zipfile.ZIP_DEFLATED
            and member.file_size > member.compress_size * _DEFLATE_MAX_RATIO + _DEFLATE_SLACK):
        raise fail(path, f"{where} claims {member.file_size} bytes from only "
                         f"{member.compress_size} compressed bytes, impossible for deflate")
    check_fits_in_memory(path, header.nbytes, where)
    buffer = bytearray(header.nbytes)
    view = memoryview(buffer)
    try:
        with archive.open(member) as stream:
            stream.read(header.data_offset)
            filled = 0
            while filled < header.nbytes:
                got = stream.readinto(view[filled:])
                if not got:
                    break
                filled += got
            stream.read(1)  # reach the end so zipfile verifies the CRC
    except _ZIP_ERRORS as exc:
        raise fail(path, f"{where} is corrupt ({_reason(exc)})") from None
    except MemoryError:
        raise fail(path, f"{where}: not enough memory to decompress {header.nbytes} "
                         "bytes") from None
    if filled < header.nbytes:
        raise fail(path, f"{where} is truncated: {filled} of {header.nbytes} data bytes")
    array = np.frombuffer(buffer, dtype=header.dtype).reshape(
        header.shape, order="F" if header.fortran_order else "C")
    array.flags.writeable = False  # same contract as the memory-mapped loaders
    return array


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
