"""``.npz`` archives: a zip of ``.npy`` members, listed from their headers alone.

Listing opens each member just far enough to read its ``.npy`` header (for a compressed
member that decompresses only the first block). Before that the archive itself is checked: a
bounded number of members, and members that do not overlap one another (Python 3.11's
``zipfile`` does not check: overlapping members let a small file claim any total size).
``load_tensor`` memory-maps a stored member straight out of the archive; for analysis, and for
every compressed member, the data is read into memory block by block -- decompressed straight
into the final buffer -- after its declared size matched its header's shape and dtype and fits
in the memory there is (:func:`~quantscope.io.checks.memory_cap_bytes`, refused up front with
the figures). A compressed member is decompressed by :class:`~quantscope.io.zip_member.
MemberStream`, bounded by the bytes it produces: never more than it declares (one byte more is
refused as a zip bomb), so a member of any compression ratio costs what it honestly holds, and
the CRC of what it produced is checked at its end.
"""

from __future__ import annotations

import lzma
import os
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

import numpy as np

from quantscope.io.checks import (
    check_regular_file,
    fail,
    memory_cap_bytes,
    pick_name,
)
from quantscope.io.npy import NpyHeader, info_from_header, map_data, read_npy_header
from quantscope.io.reading import STREAM_BLOCK_BYTES, Progress, read_values
from quantscope.io.tensor_info import TensorFileError, TensorInfo, count
from quantscope.io.zip_member import MemberStream

#: Members an archive may hold (real ``.npz`` files hold a handful; listing a million would
#: take seconds and gigabytes before any check could run).
MAX_MEMBERS = 100_000

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
        with open(path, "rb") as fh:
            _check_member_count(path, fh)
        archive = zipfile.ZipFile(path)
    except TensorFileError:
        raise
    except _ZIP_ERRORS as exc:
        raise fail(path, f"is not a readable .npz/zip archive ({_reason(exc)})") from None
    with archive:
        _check_no_overlap(path, archive)
        yield archive


def _check_member_count(path: str | os.PathLike, fh) -> None:
    """Refuse archives with more than :data:`MAX_MEMBERS` entries from the end-of-central-
    directory record alone, before ``zipfile`` builds an object per entry."""
    end_record = getattr(zipfile, "_EndRecData", None)  # stable since Python 2; checked anyway
    if end_record is None:
        return
    record = end_record(fh)
    if record is None:
        return  # zipfile itself reports the archive as unreadable
    entries = record[zipfile._ECD_ENTRIES_TOTAL]
    if entries > MAX_MEMBERS:
        raise fail(path, f"holds {entries:,} zip members (at most {MAX_MEMBERS:,}); "
                         "refused")


def _check_no_overlap(path: str | os.PathLike, archive: zipfile.ZipFile) -> None:
    """Every member's local header and data must end before the next member (and the central
    directory) begins, as in any archive a real writer produced."""
    members = sorted(archive.infolist(), key=lambda m: m.header_offset)
    limit = archive.start_dir
    for member, following in zip(members, [*members[1:], None], strict=True):
        end = _data_start(path, archive, member) + member.compress_size
        stop = limit if following is None else following.header_offset
        if end > stop:
            other = "the central directory" if following is None else \
                f"member {following.filename[:80]!r}"
            raise fail(path, f"member {member.filename[:80]!r} overlaps {other}; refused "
                             "(overlapping members are a zip-bomb technique)")


def _data_start(path: str | os.PathLike, archive: zipfile.ZipFile,
                member: zipfile.ZipInfo) -> int:
    """Offset of a member's (compressed) data, from its local header."""
    where = f"member {member.filename[:80]!r}"
    try:
        archive.fp.seek(member.header_offset)
        raw = archive.fp.read(_LOCAL_HEADER.size)
        signature, name_len, extra_len = _LOCAL_HEADER.unpack(raw)
    except _ZIP_ERRORS as exc:
        raise fail(path, f"{where} has a corrupt local header ({_reason(exc)})") from None
    if signature != _LOCAL_SIGNATURE:
        raise fail(path, f"{where} has a corrupt local header (bad signature)")
    return member.header_offset + _LOCAL_HEADER.size + name_len + extra_len


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
            raise fail(path, "is a zip holding pickles but not a PyTorch checkpoint's "
                             "data.pkl, nor an .npz; quantscope never unpickles")
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
        if member.compress_type == zipfile.ZIP_STORED:
            with archive.open(member) as stream:
                header = read_npy_header(stream, path, where)
        else:  # never zipfile's reader: it decompresses bzip2/lzma input without a limit
            stream = MemberStream(archive.fp, _data_start(path, archive, member), member,
                                  path, where)
            header = read_npy_header(stream, path, where)
    except _ZIP_ERRORS as exc:
        raise fail(path, f"{where} is corrupt ({_reason(exc)})") from None
    expected = header.data_offset + header.nbytes
    if member.file_size != expected:
        raise fail(path, f"{where} declares {member.file_size} uncompressed bytes but its "
                         f"header (shape {header.shape}, {header.dtype.name}) needs {expected}")
    return header


def member_stream(path: str | os.PathLike, archive: zipfile.ZipFile,
                  member: zipfile.ZipInfo) -> BinaryIO:
    """A member's bytes as a stream: ``zipfile``'s own for a stored member, a
    :class:`MemberStream` (bounded by the bytes it produces; call its ``finish`` after the
    last byte) for a compressed one. Every loader of zip archives reads through this."""
    if member.compress_type == zipfile.ZIP_STORED:
        return archive.open(member)
    if member.compress_type not in _SUPPORTED_COMPRESSION:
        raise fail(path, f"member {member.filename[:80]!r} uses unsupported zip compression "
                         f"{member.compress_type}")
    return MemberStream(archive.fp, _data_start(path, archive, member), member, path,
                        f"member {member.filename[:80]!r}")


def list_npz(path: str | os.PathLike) -> list[TensorInfo]:
    """Every array of an ``.npz`` with its shape, dtype and size, without reading the data."""
    with _open_archive(path) as archive:
        members = _array_members(path, archive)
        return [info_from_header(name, _member_header(path, archive, member), "npz")
                for name, member in members.items()]


def load_npz(path: str | os.PathLike, name: str | None = None, *, as_float32: bool = False,
             progress: Progress | None = None) -> tuple[np.ndarray, TensorInfo]:
    """One array of an ``.npz``: a stored member memory-mapped, a compressed one decompressed
    (bounded); with ``as_float32`` either is read into memory as float32 instead."""
    with _open_archive(path) as archive:
        members = _array_members(path, archive)
        name = pick_name(path, list(members), name)
        member = members[name]
        header = _member_header(path, archive, member)
        info = info_from_header(name, header, "npz")
        if member.compress_type == zipfile.ZIP_STORED:
            start = _stored_start(path, archive, member)
            if not as_float32:
                return map_data(path, header, start + header.data_offset), info
            return _read_stored(path, archive, member, header, start, progress), info
        return _read_compressed(path, archive, member, header, as_float32, progress), info


def _stored_start(path: str | os.PathLike, archive: zipfile.ZipFile,
                  member: zipfile.ZipInfo) -> int:
    """Where an uncompressed member's bytes start, after checking they lie in the archive."""
    where = f"member {member.filename[:80]!r}"
    if member.compress_size != member.file_size:
        raise fail(path, f"{where} is stored uncompressed but its sizes disagree")
    start = _data_start(path, archive, member)
    if start + member.file_size > os.fstat(archive.fp.fileno()).st_size:
        raise fail(path, f"{where} extends past the end of the archive (truncated file)")
    return start


def _read_stored(path: str | os.PathLike, archive: zipfile.ZipFile, member: zipfile.ZipInfo,
                 header: NpyHeader, start: int, progress: Progress | None) -> np.ndarray:
    try:
        archive.fp.seek(start + header.data_offset)
    except OSError as exc:
        raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
    return read_values(archive.fp, path, f"member {member.filename[:80]!r}",
                       shape=header.shape, dtype=header.dtype, fortran=header.fortran_order,
                       as_float32=True, progress=progress)


def _read_compressed(path: str | os.PathLike, archive: zipfile.ZipFile,
                     member: zipfile.ZipInfo, header: NpyHeader, as_float32: bool,
                     progress: Progress | None) -> np.ndarray:
    """Decompress one member straight into an array of exactly the size its header declares,
    producing no byte beyond it (:class:`MemberStream`)."""
    where = f"member {member.filename[:80]!r}"
    archive_size = os.fstat(archive.fp.fileno()).st_size
    if member.compress_size > archive_size:
        raise fail(path, f"{where} claims {member.compress_size} compressed bytes, more than "
                         f"the whole {archive_size}-byte archive (truncated or corrupt)")
    out_bytes = header.nbytes // max(1, header.dtype.itemsize) * (
        4 if as_float32 else header.dtype.itemsize)
    cap = memory_cap_bytes()
    if cap is not None and out_bytes > cap:
        raise fail(path, f"{where} decompresses to {count(out_bytes)} bytes in memory, more "
                         f"than the {count(cap)} bytes available; refused before decompressing")
    try:
        stream = MemberStream(archive.fp, _data_start(path, archive, member), member, path,
                              where)
        stream.read(header.data_offset)
        array = read_values(stream, path, where, shape=header.shape, dtype=header.dtype,
                            fortran=header.fortran_order, as_float32=as_float32,
                            progress=progress, block=STREAM_BLOCK_BYTES)
        stream.finish()  # the member ends at its declared size, and its CRC matches
    except _ZIP_ERRORS as exc:
        raise fail(path, f"{where} is corrupt ({_reason(exc)})") from None
    except MemoryError:
        raise fail(path, f"{where}: not enough memory to decompress {header.nbytes} "
                         "bytes") from None
    array.flags.writeable = False  # same contract as the memory-mapped loaders
    return array


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
