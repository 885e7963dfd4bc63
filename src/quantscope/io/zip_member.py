"""One compressed zip member, decompressed as a stream bounded by the bytes it produces.

Why not ``zipfile``'s own member stream: its bzip2 and LZMA readers decompress each chunk of
compressed input without an output limit, and a few kilobytes of bzip2 can expand to
gigabytes in that one call, before any caller could look at the size. A ratio cap on the
declared sizes guarded against that, and refused real tensors that compress well (a weight
full of zeros) while it was the wrong measure: what costs memory is the bytes produced.

Here every codec is asked for at most the bytes the caller can take, and the member's declared
size -- which the ``.npy`` header's shape and dtype must match exactly -- is the budget: the
stream delivers at most that many bytes, and :meth:`MemberStream.finish` asks for one byte
more. A member that produces more than it declares is refused at that byte; one that produces
less is a truncated file; the CRC of what was produced must match the directory's. Memory at
any moment is the caller's buffer plus one block of compressed input.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import struct
import zipfile
import zlib
from typing import BinaryIO

from quantscope.io.checks import fail

#: Compressed bytes read from the archive per step: small beside the output, and the codecs
#: keep no more than this of input.
INPUT_BLOCK = 1 << 16

#: Errors the codecs raise on corrupt data.
CODEC_ERRORS = (zlib.error, lzma.LZMAError, OSError, EOFError, ValueError, struct.error)


class _Inflate:
    """Raw deflate with the bz2/lzma decompressors' interface (``needs_input``, ``eof``):
    zlib keeps the input it could not use in ``unconsumed_tail`` instead of inside."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(-15)
        self._tail = b""
        self.needs_input = True

    @property
    def eof(self) -> bool:
        return self._z.eof

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = self._z.decompress(self._tail + data, max_length)
        self._tail = self._z.unconsumed_tail
        # starved: it stopped short of the limit with nothing left over
        self.needs_input = not self._tail and len(out) < max_length
        return out


class _ZipLzma:
    """LZMA as zip stores it: a 4-byte header (version, properties size), the LZMA1
    properties, then a raw stream.

    liblzma allocates the dictionary the properties name before decoding anything, and they
    may name 4 GiB; no match can reach further back than the member's declared size, so the
    dictionary is cut to that (the decoded bytes are the same)."""

    def __init__(self, budget: int) -> None:
        self._head = b""
        self._d: lzma.LZMADecompressor | None = None
        self._budget = budget

    @property
    def needs_input(self) -> bool:
        return self._d is None or self._d.needs_input

    @property
    def eof(self) -> bool:
        return self._d is not None and self._d.eof

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._d is None:
            self._head += data
            if len(self._head) < 4:
                return b""
            (size,) = struct.unpack("<H", self._head[2:4])
            if len(self._head) < 4 + size:
                return b""
            props = lzma._decode_filter_properties(  # what zipfile itself calls
                lzma.FILTER_LZMA1, self._head[4:4 + size])
            props["dict_size"] = min(props.get("dict_size", 1 << 23), max(4096, self._budget))
            filters = [props]
            self._d = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=filters)
            data, self._head = self._head[4 + size:], b""
        return self._d.decompress(data, max_length)


def _decompressor(compress_type: int, budget: int):
    if compress_type == zipfile.ZIP_DEFLATED:
        return _Inflate()
    if compress_type == zipfile.ZIP_BZIP2:
        return bz2.BZ2Decompressor()
    if compress_type == zipfile.ZIP_LZMA:
        return _ZipLzma(budget)
    raise ValueError(f"compression {compress_type}")


class MemberStream(io.RawIOBase):
    """A compressed member's bytes, at most its declared ``file_size`` of them.

    Parameters
    ----------
    fp : binary file
        The archive, read with absolute seeks (nothing else may move it meanwhile).
    start : int
        Offset of the member's compressed data (after its local header).
    member : zipfile.ZipInfo
        Sizes, codec and CRC as the central directory declares them.
    path, where : str
        The archive and the member, for errors.
    """

    def __init__(self, fp: BinaryIO, start: int, member: zipfile.ZipInfo,
                 path: str | os.PathLike, where: str) -> None:
        super().__init__()
        self._fp, self._at, self._left_in = fp, start, member.compress_size
        self._budget, self._crc = member.file_size, member.CRC
        self._produced, self._running_crc = 0, 0
        self._dec = _decompressor(member.compress_type, member.file_size)
        self._path, self._where = path, where

    def readable(self) -> bool:
        return True

    @property
    def produced(self) -> int:
        return self._produced

    def readinto(self, buffer) -> int:  # type: ignore[override]
        """Fill ``buffer`` (up to the declared size); fewer bytes only at the end."""
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view) and self._produced < self._budget:
            want = min(len(view) - filled, self._budget - self._produced)
            out = self._next(want)
            if not out:
                break
            view[filled:filled + len(out)] = out
            filled += len(out)
            self._produced += len(out)
            self._running_crc = zlib.crc32(out, self._running_crc)
        return filled

    def finish(self) -> None:
        """After the declared bytes: the member must end there and its CRC must match."""
        if self._produced < self._budget:
            raise fail(self._path, f"{self._where} ended after {self._produced} of its "
                                   f"{self._budget} declared bytes (truncated or corrupt)")
        if self._next(1):
            raise fail(self._path, f"{self._where} decompresses to more than the "
                                   f"{self._budget} bytes it declares; refused at that byte "
                                   "(a zip bomb or a corrupt archive)")
        if self._running_crc != self._crc:
            raise fail(self._path, f"{self._where} is corrupt (CRC mismatch)")

    def _next(self, limit: int) -> bytes:
        """Up to ``limit`` more decompressed bytes; b"" at the end of the member's data."""
        stalled = False  # nothing fed and nothing came out: input is needed after all
        try:
            while True:
                if self._dec.eof:
                    return b""
                data = b""
                if self._dec.needs_input or stalled:
                    if self._left_in == 0:
                        return b""
                    data = self._read_compressed()
                out = self._dec.decompress(data, limit)
                if out:
                    return out
                stalled = not data
        except CODEC_ERRORS as exc:
            reason = str(exc).splitlines()[0][:120] if str(exc) else ""
            raise fail(self._path, f"{self._where} is corrupt ({type(exc).__name__}"
                                   + (f": {reason})" if reason else ")")) from None

    def _read_compressed(self) -> bytes:
        self._fp.seek(self._at)
        data = self._fp.read(min(INPUT_BLOCK, self._left_in))
        if not data:
            raise fail(self._path, f"{self._where}'s compressed data ends early (the archive "
                                   "is truncated)")
        self._at += len(data)
        self._left_in -= len(data)
        return data
