"""Loading real tensor files safely: every kind in the registry of :mod:`quantscope.io.kinds`
(``.npy``, ``.npz``, ``.safetensors`` and the kinds parsers add), a file or a folder /
``*.index.json`` of shards, through the same four calls from every entry point (and writing
what the front ends save: :mod:`~quantscope.io.writing`, :mod:`~quantscope.io.archive`).

Every loader validates the whole header before touching data, never unpickles, and reports any
problem as a one-line ``TensorFileError`` naming the file. Data for analysis is read into
memory in blocks (a memory map of a file rewritten in place crashes the process on its next
read); ``load_tensor`` maps what it can, for a look at files larger than memory. The
kind is recognised from the file's first bytes (the extension only breaks ties), so a
renamed file still opens.

>>> from quantscope.io import list_tensors, load_for_analysis
>>> infos = list_tensors("model.safetensors")              # doctest: +SKIP
>>> x, info = load_for_analysis("model.safetensors", infos[0].name)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

# each parser module registers its kind of file (quantscope.io.kinds) when imported
from quantscope.io import (  # noqa: F401
    onnx_model,
    pytorch,
    samples,
    standard_kinds,
    torch_tar,
)
from quantscope.io.checks import fail, pick_name
from quantscope.io.kinds import FileKind, file_kind, kinds, register, supported_text
from quantscope.io.reading import Progress
from quantscope.io.tensor_info import TensorFileError, TensorInfo, count

__all__ = [
    "FileKind",
    "TensorFileError",
    "TensorInfo",
    "detect_format",
    "is_folder_source",
    "kinds",
    "list_tensors",
    "load",
    "load_for_analysis",
    "load_tensor",
    "register",
    "samples",
    "supported_text",
]


def detect_format(path: str | os.PathLike) -> str:
    """The registered kind of the file at ``path`` (``"npy"``, ``"safetensors"``...), from
    its content.

    Raises
    ------
    TensorFileError
        Missing path, directory, empty or unrecognised file, or a plain pickle.
    """
    return file_kind(path).name


def is_folder_source(path: str | os.PathLike) -> bool:
    """True for a path that stands for several files: a folder of shards or tensor files, or
    an ``*.index.json`` naming shards (:mod:`quantscope.io.checkpoint` lists them)."""
    from quantscope.io.checkpoint import INDEX_SUFFIX

    p = Path(path)
    return p.is_dir() or p.name.endswith(INDEX_SUFFIX)


def list_tensors(path: str | os.PathLike) -> list[TensorInfo]:
    """Name, shape, dtype and byte size of every tensor in ``path``, without reading data.

    ``path`` is a file of any registered kind, or a folder / ``*.index.json`` of shards (then
    the tensors every readable shard holds, in shard order; when no shard is readable, the
    first shard's problem is raised). Headers are fully validated (a listed tensor is
    guaranteed loadable unless the file changes), so a picker never offers something that
    then fails.
    """
    if is_folder_source(path):
        return [t.info for t in _readable(path)]  # type: ignore[misc]
    return file_kind(path).list(path)


def load_tensor(path: str | os.PathLike, name: str | None = None) -> np.ndarray:
    """One tensor in its stored dtype, memory-mapped read-only where the format allows.

    Parameters
    ----------
    path : path-like
        A file of any registered kind (see :func:`supported_text`), or a folder /
        ``*.index.json`` of shards.
    name : str, optional
        Which tensor (see ``list_tensors``). May be omitted when the file holds exactly one.

    Returns
    -------
    numpy.ndarray
        bf16 / fp8 come back as ``ml_dtypes`` arrays; compressed members are the only data
        decompressed into memory. A mapping reads the file whenever it is touched: if the
        file may be rewritten while you hold it, use :func:`load_for_analysis` (or copy the
        array), since reading a mapped page of a truncated file kills the process.
    """
    return load_tensor_with_info(path, name)[0]


def load_tensor_with_info(path: str | os.PathLike,
                          name: str | None = None) -> tuple[np.ndarray, TensorInfo]:
    """``load_tensor`` plus the tensor's ``TensorInfo`` (name resolved, stored dtype)."""
    if is_folder_source(path):
        file, name, info = _locate(path, name)
        if info.format == "stored":
            return _decoded(path, name, info)
        return file_kind(file).load(file, name)
    return file_kind(path).load(path, name)


def load_for_analysis(path: str | os.PathLike, name: str | None = None, *,
                      progress: Progress | None = None) -> tuple[np.ndarray, TensorInfo]:
    """A tensor read into memory as a C-contiguous float32 array, plus what it was stored as.

    The engine works in float32 (the dtype real int8 runtimes quantize from); bf16, fp16 and
    fp8 widen exactly, float64 rounds to nearest (a finite value beyond float32's range is
    refused with its count and place: as inf it would be dropped unseen), integers and bools
    are converted as values -- block by block, so the only full-size array is the result. The
    result never maps the file: it stays valid when the file is rewritten or deleted.
    ``path`` is anything :func:`list_tensors` takes.

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
    if is_folder_source(path):
        file, name, found = _locate(path, name)
        if found.format == "stored":
            return _decoded(path, name, found)
        path = file
    kind = file_kind(path)
    infos = {info.name: info for info in kind.list(path)}
    info = infos[pick_name(path, list(infos), name)]
    if info.size == 0:
        raise fail(path, f"tensor {info.name!r} is empty (shape "
                         f"{count(info.shape)}); nothing to analyse")
    return kind.load(path, info.name, as_float32=True, progress=progress)


def load(path: str | os.PathLike, tensor: str | None = None) -> np.ndarray:
    """The float32 tensor the window would explore for ``path`` (and ``tensor`` inside it):
    ``qs.analyze(qs.load("model.pt", "fc.weight"), params)`` reads exactly what ``quantscope
    report model.pt --tensor fc.weight`` and the window read (:func:`load_for_analysis`)."""
    return load_for_analysis(path, tensor)[0]


def _readable(path: str | os.PathLike):
    """The tensors of a folder source that can be read (raising the first problem when no
    tensor can); a quantized checkpoint's stored weights under their own names."""
    from quantscope.io.stored import source_checkpoint

    checkpoint = source_checkpoint(path)
    readable = [t for t in checkpoint.tensors if t.info is not None]
    if not readable and checkpoint.tensors:
        raise TensorFileError(checkpoint.tensors[0].problem or f"{path}: no readable tensor")
    return readable


def _locate(path: str | os.PathLike, name: str | None) -> tuple[Path, str, TensorInfo]:
    """The file of a folder source holding tensor ``name`` (the only one when None), the name
    and its info (``format`` ``"stored"`` for a quantized checkpoint's decoded weight); an
    unknown name is refused with the names available."""
    from quantscope.io.stored import source_checkpoint

    checkpoint = source_checkpoint(path)
    by_name = {t.name: t for t in checkpoint.tensors}
    chosen = by_name[pick_name(path, list(by_name), name)]
    if chosen.info is None:
        raise TensorFileError(chosen.problem or f"{path}: tensor {chosen.name!r} is unreadable")
    return chosen.file, chosen.name, chosen.info


def _decoded(path: str | os.PathLike, name: str, info: TensorInfo
             ) -> tuple[np.ndarray, TensorInfo]:
    """A quantized checkpoint's weight decoded as its package decodes it, as float32."""
    from quantscope.io.stored import load_stored

    values = load_stored(path, name).values
    if values.size == 0:
        raise fail(path, f"tensor {name!r} is empty; nothing to analyse")
    return np.ascontiguousarray(values, np.float32), info
