"""Loading real tensor files safely: ``.npy``, ``.npz`` and ``.safetensors`` (and writing what
the front ends save: :mod:`~quantscope.io.writing`, :mod:`~quantscope.io.archive`).

Every loader validates the whole header before touching data, never unpickles, and reports any
problem as a one-line ``TensorFileError`` naming the file. Data for analysis is read into
memory in blocks (a memory map of a file rewritten in place crashes the process on its next
read); ``load_tensor`` maps what it can, for a look at files larger than memory. The
format is recognised from the file's first bytes (the extension only breaks ties), so a
renamed file still opens.

>>> from quantscope.io import list_tensors, load_for_analysis
>>> infos = list_tensors("model.safetensors")              # doctest: +SKIP
>>> x, info = load_for_analysis("model.safetensors", infos[0].name)  # doctest: +SKIP
"""

from __future__ import annotations

import os

import numpy as np

from quantscope.io import samples
from quantscope.io.checks import check_regular_file, fail, pick_name, read_head, sniff_format
from quantscope.io.npy import list_npy, load_npy
from quantscope.io.npz import list_npz, load_npz
from quantscope.io.reading import Progress
from quantscope.io.safetensors import list_safetensors, load_safetensors
from quantscope.io.tensor_info import TensorFileError, TensorInfo, count

__all__ = [
    "TensorFileError",
    "TensorInfo",
    "detect_format",
    "list_tensors",
    "load_for_analysis",
    "load_tensor",
    "samples",
]

_LISTERS = {"npy": list_npy, "npz": list_npz, "safetensors": list_safetensors}
_LOADERS = {"npy": load_npy, "npz": load_npz, "safetensors": load_safetensors}


def detect_format(path: str | os.PathLike) -> str:
    """``"npy"``, ``"npz"`` or ``"safetensors"`` from the file's content.

    Raises
    ------
    TensorFileError
        Missing path, directory, empty or unrecognised file, or a pickle.
    """
    check_regular_file(path)
    return sniff_format(path, read_head(path))


def list_tensors(path: str | os.PathLike) -> list[TensorInfo]:
    """Name, shape, dtype and byte size of every tensor in ``path``, without reading data.

    Headers are fully validated (a listed tensor is guaranteed loadable unless the file
    changes), so a picker never offers something that then fails.
    """
    return _LISTERS[detect_format(path)](path)


def load_tensor(path: str | os.PathLike, name: str | None = None) -> np.ndarray:
    """One tensor in its stored dtype, memory-mapped read-only where the format allows.

    Parameters
    ----------
    path : path-like
        A ``.npy``, ``.npz`` or ``.safetensors`` file.
    name : str, optional
        Which tensor (see ``list_tensors``). May be omitted when the file holds exactly one.

    Returns
    -------
    numpy.ndarray
        bf16 / fp8 come back as ``ml_dtypes`` arrays; compressed ``.npz`` members are the
        only data decompressed into memory. A mapping reads the file whenever it is touched:
        if the file may be rewritten while you hold it, use :func:`load_for_analysis` (or
        copy the array), since reading a mapped page of a truncated file kills the process.
    """
    return load_tensor_with_info(path, name)[0]


def load_tensor_with_info(path: str | os.PathLike,
                          name: str | None = None) -> tuple[np.ndarray, TensorInfo]:
    """``load_tensor`` plus the tensor's ``TensorInfo`` (name resolved, stored dtype)."""
    return _LOADERS[detect_format(path)](path, name)


def load_for_analysis(path: str | os.PathLike, name: str | None = None, *,
                      progress: Progress | None = None) -> tuple[np.ndarray, TensorInfo]:
    """A tensor read into memory as a C-contiguous float32 array, plus what it was stored as.

    The engine works in float32 (the dtype real int8 runtimes quantize from); bf16, fp16 and
    fp8 widen exactly, float64 rounds to nearest (overflow becomes ±inf, which the engine
    reports), integers and bools are converted as values -- block by block, so the only
    full-size array is the result. The result never maps the file: it stays valid when the
    file is rewritten or deleted.

    Parameters
    ----------
    progress : callable, optional
        ``progress(fraction, text)`` after each block read; an exception it raises (a cancel)
        stops the read and propagates.

    Raises
    ------
    TensorFileError
        Everything ``load_tensor`` raises, for a tensor with no elements, for data that does
        not fit in memory, and for a file that shrinks while it is read.
    """
    fmt = detect_format(path)
    infos = {info.name: info for info in _LISTERS[fmt](path)}
    info = infos[pick_name(path, list(infos), name)]
    if info.size == 0:
        raise fail(path, f"tensor {info.name!r} is empty (shape "
                         f"{count(info.shape)}); nothing to analyse")
    return _LOADERS[fmt](path, info.name, as_float32=True, progress=progress)
