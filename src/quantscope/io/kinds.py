"""The kinds of tensor file quantscope reads, in one registry every entry point goes through.

A kind says how to recognise a file (from its first bytes, or from the archive it is, and only
as a last resort from its extension), how to list its tensors from headers alone and how to
load one. The window, ``report``, ``export``, ``scan``, ``qs.view``, ``qs.figure`` and
``qs.load`` all reach files through :func:`file_kind`, so a kind registered here opens
everywhere at once, with the same tensor names.

A parser for a new kind of file registers itself with :func:`register` (its module imported by
:mod:`quantscope.io`, so the registry is complete once ``quantscope.io`` is imported). Its
``list`` and ``load`` must follow the rules of the other loaders: the whole header validated
before any data is touched, reads bounded by the file's real size, never a pickle load, every
problem one :class:`~quantscope.io.tensor_info.TensorFileError` naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from quantscope.io.checks import SNIFF_BYTES, check_regular_file, fail, read_head
from quantscope.io.reading import Progress
from quantscope.io.tensor_info import TensorInfo


class Lister(Protocol):
    """``list(path)``: every tensor's :class:`TensorInfo`, from headers alone."""

    def __call__(self, path: str | os.PathLike, /) -> list[TensorInfo]: ...


class Loader(Protocol):
    """``load(path, name, as_float32=, progress=)``: one tensor and its info.

    Without ``as_float32`` the tensor comes back in its stored dtype, memory-mapped where the
    file allows; with it, as a C-contiguous float32 array read into memory (never a map)."""

    def __call__(self, path: str | os.PathLike, name: str | None = None, /, *,
                 as_float32: bool = False,
                 progress: Progress | None = None) -> tuple[np.ndarray, TensorInfo]: ...


#: ``sniff(path, head)``: True when the file is of this kind. ``head`` holds the first
#: :data:`HEAD_BYTES` bytes (fewer for a short file); a sniff may open the file to look
#: further (a zip's member names), but must stay cheap and must never raise.
Sniff = Callable[[Path, bytes], bool]

#: Bytes handed to each sniff.
HEAD_BYTES = 512


@dataclass(frozen=True)
class FileKind:
    """One kind of tensor file.

    Attributes
    ----------
    name : str
        Short name (``"safetensors"``, ``"pytorch"``...): ``TensorInfo.format`` and
        ``detect_format`` give it.
    label : str
        How messages name the kind, e.g. ``"PyTorch checkpoint (.pt, .pth, .bin)"``.
    suffixes : tuple of str
        Extensions (lower case, with the dot). They only decide which kind's error a file
        that no sniff recognises gets, or recognise a kind without magic bytes (``.onnx``)
        when ``by_suffix`` is set.
    sniff : callable
        ``sniff(path, head) -> bool`` (see :data:`Sniff`).
    list, load : callable
        See :class:`Lister` and :class:`Loader`; the parser module is imported by them, not
        when the kind is registered.
    not_this : callable, optional
        ``not_this(path, head) -> str``: the error for a file with one of ``suffixes`` that no
        sniff recognised ("is not a NumPy .npy file (missing the magic)").
    by_suffix : bool
        The format has no magic bytes: a file with one of ``suffixes`` is of this kind unless
        an earlier sniff claimed it.
    """

    name: str
    label: str
    suffixes: tuple[str, ...]
    sniff: Sniff
    list: Lister
    load: Loader
    not_this: Callable[[Path, bytes], str] | None = None
    by_suffix: bool = False


_KINDS: list[FileKind] = []


def register(kind: FileKind, *, before: str | None = None) -> None:
    """Add ``kind`` to the registry (replacing one of the same name).

    Sniffs run in registration order; ``before`` puts this kind's sniff ahead of the named
    one's (a PyTorch zip must be claimed before the ``.npz`` sniff sees "a zip")."""
    global _KINDS
    kinds = [k for k in _KINDS if k.name != kind.name]
    names = [k.name for k in kinds]
    at = names.index(before) if before in names else len(kinds)
    kinds.insert(at, kind)
    _KINDS = kinds


def unregister(name: str) -> None:
    """Remove the kind called ``name`` (nothing when there is none)."""
    global _KINDS
    _KINDS = [k for k in _KINDS if k.name != name]


def kinds() -> tuple[FileKind, ...]:
    """Every registered kind, in sniffing order."""
    return tuple(_KINDS)


def kind_named(name: str) -> FileKind:
    """The registered kind called ``name`` (KeyError when there is none)."""
    for kind in _KINDS:
        if kind.name == name:
            return kind
    raise KeyError(name)


def supported_text() -> str:
    """What quantscope opens, for messages: every kind's label, then folders."""
    labels = [k.label for k in _KINDS]
    return ", ".join(labels) + ", or a Hugging Face folder / *.index.json of shards"


def file_kind(path: str | os.PathLike) -> FileKind:
    """The kind of the regular file at ``path``, from its content (the extension only breaks
    ties and names the error).

    Raises
    ------
    TensorFileError
        A missing, empty or unreadable path, a directory, a plain Python pickle (named as
        such: quantscope never unpickles), or a file of no registered kind (the message lists
        what is supported).
    """
    check_regular_file(path)
    p = Path(path)
    head = read_head(p, HEAD_BYTES)
    for kind in _KINDS:
        if kind.sniff(p, head):
            return kind
    suffix = p.suffix.lower()
    for kind in _KINDS:
        if kind.by_suffix and suffix in kind.suffixes:
            return kind
    if head[:1] == b"\x80" and head[1:2] in {bytes([v]) for v in range(2, 6)}:
        raise fail(p, "is a Python pickle; quantscope never unpickles files, and this one is "
                      "no PyTorch checkpoint (save the array with numpy.save or safetensors "
                      "instead)")
    for kind in _KINDS:
        if suffix in kind.suffixes:
            if len(head) < SNIFF_BYTES:
                raise fail(p, f"is truncated ({len(head)} bytes): too short to be a "
                              f"{suffix} file")
            if kind.not_this is not None:
                raise fail(p, kind.not_this(p, head))
            raise fail(p, f"is not a valid {kind.label}")
    raise fail(p, f"unrecognised format: expected {supported_text()}")
