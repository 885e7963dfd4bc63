"""Reading validated tensor data into memory, block by block, from any binary stream.

Why not a memory map: a mapping reads the file again every time the array is touched, and if
the file is rewritten in place (``np.save`` to the same path truncates it first) the next touch
of a vanished page kills the process with SIGBUS -- the window and its session lost. Reading
through the file descriptor instead turns a file that shrinks under us into a short read, which
is an ordinary one-line error. Blocks keep every temporary small (a compressed member
decompresses straight into the final buffer, a bf16 tensor widens to float32 block by block),
and they give progress and cancel a place to happen.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import BinaryIO

import numpy as np

from quantscope.core.tensors.validate import beyond_float32, beyond_float32_message
from quantscope.io.checks import check_fits_in_memory, fail

#: Bytes read (and converted) per block: big enough for full disk speed, small beside a tensor.
BLOCK_BYTES = 1 << 22
#: Per block from a decompressing stream: zipfile's ``readinto`` builds the block as bytes
#: and joins decompressed pieces, about three block-sized temporaries; decompression sets
#: the speed, so a smaller block costs nothing.
STREAM_BLOCK_BYTES = 1 << 20

#: ``progress(fraction, text)``; it may raise to cancel (the window's jobs do).
Progress = Callable[[float, str], None]


def read_values(stream: BinaryIO, path: str | os.PathLike, where: str, *,
                shape: tuple[int, ...], dtype: np.dtype, fortran: bool = False,
                as_float32: bool = False, progress: Progress | None = None,
                block: int = BLOCK_BYTES) -> np.ndarray:
    """Read ``shape`` of ``dtype`` from ``stream`` (positioned at the data) into a new array.

    Parameters
    ----------
    stream : binary file object
        A plain file seeked to the data, or a zip member stream past its ``.npy`` header.
    path, where : str
        The file and the part of it, for errors.
    shape, dtype, fortran
        The validated header: what the bytes are.
    as_float32 : bool
        Convert to a C-contiguous float32 array (what the engine analyses), block by block, so
        no full-size copy in the stored dtype is ever made.
    progress : callable, optional
        Called with the fraction read after each block.
    block : int
        Bytes per read (:data:`STREAM_BLOCK_BYTES` for a decompressing stream).

    Raises
    ------
    TensorFileError
        The stream ends early (a truncated file, or one rewritten while being read), the data
        does not fit in memory, or the stream reports a read error.
    """
    out_dtype = np.dtype(np.float32) if as_float32 else dtype
    n = math.prod(shape)
    check_fits_in_memory(path, n * out_dtype.itemsize, where)
    try:
        out = np.empty(shape, dtype=out_dtype, order="F" if fortran else "C")
    except MemoryError:
        raise fail(path, f"{where}: not enough memory for {n} {out_dtype.name} values") from None
    flat = out.reshape(-1, order="A")  # a view in storage order
    total = n * dtype.itemsize
    if out_dtype == dtype:
        _fill(stream, memoryview(flat.view(np.uint8)), path, where, total, progress, block)
    else:
        beyond, first, value = _convert(stream, flat, dtype, path, where, total, progress,
                                        block)
        if beyond:
            index = tuple(int(i) for i in np.unravel_index(
                first, shape, order="F" if fortran else "C")) if shape else ()
            raise fail(path, f"{where}: " + beyond_float32_message(beyond, index, value))
    if fortran and out.ndim > 1 and as_float32:
        out = np.require(out, requirements="C")  # the engine reads rows in C order
    return out


def _fill(stream: BinaryIO, target: memoryview, path, where: str, total: int,
          progress: Progress | None, block: int) -> None:
    """Read exactly ``len(target)`` bytes into ``target``, a block at a time."""
    filled = 0
    while filled < total:
        stop = min(filled + block, total)
        got = _read_into(stream, target[filled:stop], path, where)
        if not got:
            raise _short(path, where, filled, total)
        filled += got
        if progress is not None and total > block:
            progress(filled / total, f"reading {where}")


def _convert(stream: BinaryIO, flat: np.ndarray, dtype: np.dtype, path, where: str,
             total: int, progress: Progress | None, block: int) -> tuple[int, int, float]:
    """Read blocks of ``dtype`` and widen/round each into ``flat`` (float32); returns how
    many finite values overflowed to inf (float64 beyond float32's range), the storage-order
    index of the first and its value."""
    beyond, first, value = 0, -1, 0.0
    per_block = max(1, block // dtype.itemsize)
    scratch = np.empty(min(per_block, flat.size), dtype=dtype)
    raw = memoryview(scratch.view(np.uint8))
    done = 0
    while done < flat.size:
        count = min(per_block, flat.size - done)
        nbytes = count * dtype.itemsize
        filled = 0
        while filled < nbytes:
            got = _read_into(stream, raw[filled:nbytes], path, where)
            if not got:
                raise _short(path, where, done * dtype.itemsize + filled, total)
            filled += got
        with np.errstate(over="ignore", invalid="ignore"):  # overflow counted just below
            flat[done:done + count] = scratch[:count]
        more, at = beyond_float32(scratch[:count], flat[done:done + count])
        if more and not beyond:
            first, value = done + at, float(scratch[at])
        beyond += more
        done += count
        if progress is not None and total > block:
            progress(done / flat.size, f"reading {where}")
    return beyond, first, value


def _read_into(stream: BinaryIO, view: memoryview, path, where: str) -> int:
    try:
        return stream.readinto(view) or 0
    except MemoryError:
        raise fail(path, f"{where}: not enough memory to read it") from None
    except OSError as exc:
        raise fail(path, f"{where} cannot be read ({exc.strerror or type(exc).__name__})"
                   ) from None
    except Exception as exc:  # zlib/lzma/bz2/zip errors (a CRC mismatch included)
        reason = str(exc).splitlines()[0][:120] if str(exc) else ""
        raise fail(path, f"{where} is corrupt ({type(exc).__name__}"
                         + (f": {reason})" if reason else ")")) from None


def _short(path, where: str, got: int, total: int):
    return fail(path, f"{where} ended after {got} of {total} data bytes (the file is "
                      "truncated, or changed while it was being read)")
