"""Checks shared by every loader: the path, the format, dtypes, shapes and memory.

A tensor file may come from a stranger. Everything here runs before any data is mapped or
allocated, so a hostile header can only ever produce a ``TensorFileError`` — never a pickle
load, a giant allocation, a blocking read from a FIFO or a crash.
"""

from __future__ import annotations

import math
import os
import stat
import sys

import numpy as np

from quantscope.io.dtypes import is_ml_float
from quantscope.io.tensor_info import TensorFileError, count, printable

#: NumPy allows at most this many dimensions (numpy 2.x); a header asking for more is lying.
MAX_NDIM = 64

#: A file shorter than this is too short to be any tensor file of the kind its name says.
SNIFF_BYTES = 16



def fail(path: str | os.PathLike, problem: str) -> TensorFileError:
    """Build the one-line error that names the file first, then the problem.

    The path is escaped like a tensor name: a file name may hold newlines or terminal escape
    sequences, which must neither break the one line nor reach the user's terminal."""
    return TensorFileError(f"{show_path(path)}: {problem}")


def show_path(path: str | os.PathLike) -> str:
    """``path`` as text fit for a one-line message (escaped when not printable)."""
    try:
        text = os.fspath(path)
    except TypeError:
        text = str(path)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "backslashreplace")
    return printable(text)


def check_regular_file(path: str | os.PathLike) -> int:
    """Return the size of ``path`` after checking it is a non-empty regular file.

    Why not just ``open`` it: a directory, a FIFO or ``/dev/zero`` would give a confusing
    ``IsADirectoryError``, block forever, or never end, and a 0-byte file deserves its own
    message rather than "truncated header".
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise fail(path, "no such file") from None
    except PermissionError:
        raise fail(path, "permission denied") from None
    except (OSError, ValueError) as exc:  # ENAMETOOLONG, ELOOP, embedded NUL...
        raise fail(path, f"cannot access file ({_os_reason(exc)})") from None
    if stat.S_ISDIR(info.st_mode):
        raise fail(path, "is a directory, not a tensor file")
    if not stat.S_ISREG(info.st_mode):
        raise fail(path, "is not a regular file (device, FIFO or socket)")
    if info.st_size == 0:
        raise fail(path, "is empty (0 bytes)")
    return info.st_size


def read_head(path: str | os.PathLike, n: int = SNIFF_BYTES) -> bytes:
    """Read the first ``n`` bytes (or fewer for a short file), mapping OS errors to ours."""
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError as exc:
        raise fail(path, f"cannot read file ({_os_reason(exc)})") from None


def check_array_dtype(path: str | os.PathLike, dtype: np.dtype, where: str) -> None:
    """Refuse dtypes quantscope cannot analyse, with the reason spelled out.

    Accepted: real floating point (ml_dtypes included), signed/unsigned integers and bool —
    integers matter because already-quantized codes are worth inspecting. Object arrays are
    refused outright because they can only be read by unpickling.
    """
    if dtype.hasobject:
        raise fail(path, f"{where} holds Python objects (dtype {dtype.str!r}); refused because "
                         "loading it would unpickle untrusted data")
    if dtype.names is not None:
        raise fail(path, f"{where} has a structured dtype with fields {list(dtype.names)!r}; "
                         "only plain numeric arrays are supported")
    if dtype.subdtype is not None:
        raise fail(path, f"{where} has a sub-array dtype {dtype.str!r}; "
                         "only plain numeric arrays are supported")
    if is_ml_float(dtype):
        return
    kind_problem = {
        "c": "complex numbers are not supported (quantize the real and imaginary parts apart)",
        "S": "byte strings are not numeric",
        "U": "unicode strings are not numeric",
        "V": "raw void bytes are not numeric (np.save writes bfloat16/float8 arrays this way "
             "and loses their type: save them as safetensors, or cast to float32 first)",
        "M": "datetimes are not numeric tensors",
        "m": "timedeltas are not numeric tensors",
    }.get(dtype.kind)
    if kind_problem is not None:
        raise fail(path, f"{where} has unsupported dtype {dtype.str!r}: {kind_problem}")
    if dtype.kind not in "fiub":
        raise fail(path, f"{where} has unsupported dtype {dtype.str!r}")


def check_shape(path: str | os.PathLike, shape: object, where: str) -> tuple[int, ...]:
    """Validate a header's shape: a sequence of non-negative ints, at most ``MAX_NDIM`` long.

    ``bool`` is refused although Python treats it as an int: ``[true, 3]`` in a JSON header
    is corruption, not a shape.
    """
    if not isinstance(shape, list | tuple):
        raise fail(path, f"{where}: shape must be a list of integers, got {count(shape)}")
    if len(shape) > MAX_NDIM:
        raise fail(path, f"{where}: shape has {len(shape)} dimensions (at most {MAX_NDIM})")
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise fail(path, f"{where}: shape {count(shape)} contains a non-integer")
        if dim < 0:
            raise fail(path, f"{where}: shape {count(shape)} has a negative dimension")
    return tuple(int(d) for d in shape)


def check_numpy_size(path: str | os.PathLike, shape: tuple[int, ...], dtype: np.dtype,
                     where: str) -> None:
    """Refuse empty shapes NumPy cannot even describe: it needs the product of the non-zero
    dimensions, in bytes, to fit a signed 64-bit integer -- zero-size tensors included, so
    ``(0, 2**64)`` is impossible. (A non-empty shape is bounded by the bytes the file holds,
    which each loader checks with a more precise message.)"""
    if 0 not in shape:
        return
    extent = math.prod(d for d in shape if d) * max(dtype.itemsize, 1)
    if extent > sys.maxsize:
        raise fail(path, f"{where}: shape {count(shape)} is too large for any array "
                         f"(NumPy's limit is {sys.maxsize} bytes, even for an empty tensor)")


def data_nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """Exact byte count of the data (Python ints: no overflow for lying shapes)."""
    return math.prod(shape) * dtype.itemsize


def check_fits_in_memory(path: str | os.PathLike, nbytes: int, where: str) -> None:
    """Refuse to allocate more than the machine's physical memory for a decompressed tensor.

    Data is read into memory for analysis (see :mod:`quantscope.io.reading`); a clear
    message beats a ``MemoryError`` or the OOM killer.
    """
    limit = physical_memory_bytes()
    if limit is not None and nbytes > limit:
        raise fail(path, f"{where} needs {count(nbytes)} bytes in memory, more than this "
                         f"machine's {limit} bytes")


def memory_cap_bytes() -> int | None:
    """The most memory a decompressed tensor may take: the least of physical memory, the
    memory the kernel reports available now (``MemAvailable``) and the address space left
    under ``ulimit -v``; None where none of them is known."""
    known = [v for v in (physical_memory_bytes(), _available_bytes(), _address_space_left())
             if v is not None]
    return min(known) if known else None


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _address_space_left() -> int | None:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return max(0, soft - int(line.split()[1]) * 1024)
    except (ImportError, OSError, ValueError, IndexError):
        pass
    return None


def physical_memory_bytes() -> int | None:
    """Physical memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def pick_name(path: str | os.PathLike, names: list[str], name: str | None) -> str:
    """Resolve the requested tensor name against those the file holds.

    With no name, a single-tensor file gives its tensor; otherwise the error lists the
    choices so the user can copy one into ``--tensor``.
    """
    if name is None:
        if len(names) == 1:
            return names[0]
        if not names:
            raise fail(path, "holds no tensors")
        raise fail(path, f"holds {len(names)} tensors; choose one with --tensor NAME: "
                         f"{list_for_message(names)}")
    if name in names:
        return name
    raise fail(path, f"has no tensor named {name!r}; available: {list_for_message(names)}")


def list_for_message(names: list[str], limit: int = 12) -> str:
    """Comma-separated names, cut after ``limit`` with a count of the rest."""
    shown = ", ".join(printable(n) for n in names[:limit])
    if len(names) > limit:
        shown += f", ... ({len(names) - limit} more; `quantscope scan` lists them all)"
    return shown


def _os_reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or type(exc).__name__
