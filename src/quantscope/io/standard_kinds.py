"""The NumPy, safetensors and GGUF kinds of :mod:`quantscope.io.kinds`: ``.npy``, ``.npz``,
``.safetensors`` and ``.gguf``, recognised from their first bytes."""

from __future__ import annotations

from pathlib import Path

from quantscope.io.kinds import FileKind, register


def _list_npy(path):
    from quantscope.io.npy import list_npy

    return list_npy(path)


def _load_npy(path, name=None, /, **options):
    from quantscope.io.npy import load_npy

    return load_npy(path, name, **options)


def _list_npz(path):
    from quantscope.io.npz import list_npz

    return list_npz(path)


def _load_npz(path, name=None, /, **options):
    from quantscope.io.npz import load_npz

    return load_npz(path, name, **options)


def _list_safetensors(path):
    from quantscope.io.safetensors import list_safetensors

    return list_safetensors(path)


def _load_safetensors(path, name=None, /, **options):
    from quantscope.io.safetensors import load_safetensors

    return load_safetensors(path, name, **options)


def _is_npy(path: Path, head: bytes) -> bool:
    return head.startswith(b"\x93NUMPY")


def _is_zip(path: Path, head: bytes) -> bool:
    return head.startswith((b"PK\x03\x04", b"PK\x05\x06"))


def _is_safetensors(path: Path, head: bytes) -> bool:
    # an 8-byte little-endian header length, then the JSON header
    return len(head) >= 9 and head[8:9] == b"{"


register(FileKind(
    "npy", "NumPy .npy", (".npy",), _is_npy, _list_npy, _load_npy,
    not_this=lambda p, h: "is not a NumPy .npy file (missing the \\x93NUMPY magic)"))
register(FileKind(
    "npz", "NumPy .npz", (".npz",), _is_zip, _list_npz, _load_npz,
    not_this=lambda p, h: "is not a NumPy .npz file (not a zip archive)"))
register(FileKind(
    "safetensors", ".safetensors", (".safetensors",), _is_safetensors, _list_safetensors,
    _load_safetensors,
    not_this=lambda p, h: "is not a safetensors file (header does not start with '{')"))


def _list_gguf(path):
    from quantscope.io.gguf_file import list_gguf

    return list_gguf(path)


def _load_gguf(path, name=None, /, **options):
    from quantscope.io.gguf_file import load_gguf

    return load_gguf(path, name, **options)


register(FileKind(
    "gguf", "GGUF (.gguf)", (".gguf",), lambda p, h: h.startswith(b"GGUF"), _list_gguf,
    _load_gguf, not_this=lambda p, h: "is not a GGUF file (missing the GGUF magic)"))
