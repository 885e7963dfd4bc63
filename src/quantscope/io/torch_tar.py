"""The PyTorch checkpoint format before 1.0: a tar of three members, read without unpickling.

``storages`` holds a pickled count, then per storage a pickled ``(key, location, storage
type)``, an 8-byte element count and the raw bytes, then a pickled list of storage views
``(key, root key, offset, count)``; ``tensors`` holds a pickled count, then per tensor a
pickled ``(key, storage key, tensor type)`` followed by its ``ndim`` (4 bytes, 4 padding),
sizes, strides and storage offset as 8-byte integers; ``pickle`` holds the object graph,
whose persistent ids are tensor keys. ``torch.load`` still reads these files (its loop is
what this mirrors); every pickle goes through :mod:`quantscope.io.torch_pickle`, every size
and offset is checked against the member holding it, and a graph that pickles a whole
``nn.Module`` (its class and source code) is refused.
"""

from __future__ import annotations

import os
import struct
import tarfile
from pathlib import Path

from quantscope.io import pytorch
from quantscope.io.checks import MAX_NDIM, check_regular_file, fail
from quantscope.io.pytorch import _Bounded, _Parsed, _run
from quantscope.io.tensor_info import count, printable
from quantscope.io.torch_pickle import Dtype, PickleRefused, StorageType, TensorRef
from quantscope.io.torch_storage import Storage, entries, itemsize

MEMBERS = ("storages", "tensors", "pickle")
#: A real tar checkpoint holds three or four members; more is not one.
MAX_MEMBERS = 16
#: Storages or tensors a table may count (a count is only a claim until each is read).
MAX_ENTRIES = 1_000_000


def _is_tar(path: Path, head: bytes) -> bool:
    if head[257:262] != b"ustar":
        return False
    try:
        return set(MEMBERS) <= set(_members(path))
    except Exception:  # not a readable tar: the kinds' messages say what it is
        return False


def _members(path) -> dict[str, tarfile.TarInfo]:
    found: dict[str, tarfile.TarInfo] = {}
    with tarfile.open(path, "r:") as tar:
        for _ in range(MAX_MEMBERS + 1):
            member = tar.next()
            if member is None:
                return found
            found[member.name] = member
    raise ValueError("too many members")


def _key(value: object) -> str:
    """Storage and tensor keys are compared as ``int(key)`` by torch: normalised alike."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and len(value) <= 200:
        return str(int(value)) if value.isdigit() else value
    raise PickleRefused("uses a key that is not a number or a short name")


def parse_tar(path: str | os.PathLike) -> _Parsed:
    """The tensors of a tar checkpoint, checked as the other containers' are."""
    size = check_regular_file(path)
    try:
        members = _members(path)
    except (tarfile.TarError, ValueError, OSError, EOFError) as exc:
        raise fail(path, f"is not a readable tar archive ({type(exc).__name__})") from None
    for name in MEMBERS:
        member = members.get(name)
        if member is None or not member.isfile():
            raise fail(path, f"is a tar without a {name!r} member: not a PyTorch checkpoint")
        if member.offset_data + member.size > size:
            raise fail(path, f"tar member {name!r} extends past the end of the file")
    try:
        with open(path, "rb") as fh:
            storages = _storages(path, fh, members["storages"])
            tensors = _tensors(path, fh, members["tensors"], storages)
            pickled = members["pickle"]
            fh.seek(pickled.offset_data)

            def tensor(pid: object) -> TensorRef:
                if isinstance(pid, tuple):
                    raise PickleRefused("pickles a whole module (its class and source code); "
                                        "only tensors and plain containers are read")
                found = tensors.get(_key(pid))
                if found is None:
                    raise PickleRefused(f"refers to tensor {printable(str(pid))[:40]!r}, "
                                        "which the tensor table does not hold")
                return found

            root = _run(path, _Bounded(fh, pickled.offset_data + pickled.size), tensor,
                        "object graph")
    except OSError as exc:
        raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
    return _Parsed(entries(path, root), False)


def _count(path, stream, what: str) -> int:
    n = _run(path, stream, _no_storage, what)
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_ENTRIES:
        raise fail(path, f"{what} is {count(n)}, not a count up to {MAX_ENTRIES}")
    return n


def _no_storage(pid: object) -> object:
    raise PickleRefused("refers to a storage where none may appear")


def _storages(path, fh, member: tarfile.TarInfo) -> dict[str, Storage]:
    end = member.offset_data + member.size
    fh.seek(member.offset_data)
    stream = _Bounded(fh, end)
    found: dict[str, Storage] = {}
    for _ in range(_count(path, stream, "storage count")):
        head = _run(path, stream, _no_storage, "storage header")
        if not (isinstance(head, tuple) and len(head) == 3 and isinstance(head[2], StorageType)
                and head[2].dtype is not None):
            raise fail(path, "a storage header is not (key, location, storage type)")
        key = _tar_key(path, head[0])
        raw = fh.read(8)
        if len(raw) < 8 or fh.tell() > end:
            raise fail(path, f"storage {printable(key)[:40]!r} ends early (truncated)")
        numel = struct.unpack("<q", raw)[0]
        nbytes = numel * itemsize(head[2].dtype)
        start = fh.tell()
        if numel < 0 or start + nbytes > end:
            raise fail(path, f"storage {printable(key)[:40]!r} claims {count(numel)} elements, "
                             f"more than its member holds")
        found[key] = Storage(key, head[2].dtype, numel, nbytes, start=start)
        fh.seek(start + nbytes)
    views = _run(path, stream, _no_storage, "storage views")
    if not isinstance(views, list) or len(views) > MAX_ENTRIES:
        raise fail(path, "its storage views are not a list")
    for view in views:
        if not (isinstance(view, tuple) and len(view) == 4):
            raise fail(path, "a storage view is not (key, root, offset, count)")
        key, root = _tar_key(path, view[0]), found.get(_tar_key(path, view[1]))
        offset, numel = view[2], view[3]
        if root is None or not isinstance(offset, int) or not isinstance(numel, int) or \
                offset < 0 or numel < 0 or offset + numel > root.numel:
            raise fail(path, f"storage view {printable(key)[:40]!r} lies outside its root")
        item = itemsize(root.dtype)
        found[key] = Storage(key, root.dtype, numel, numel * item,
                              start=root.start + offset * item)  # type: ignore[operator]
    return found


def _tensors(path, fh, member: tarfile.TarInfo,
             storages: dict[str, Storage]) -> dict[str, TensorRef]:
    end = member.offset_data + member.size
    fh.seek(member.offset_data)
    stream = _Bounded(fh, end)
    found: dict[str, TensorRef] = {}
    for _ in range(_count(path, stream, "tensor count")):
        head = _run(path, stream, _no_storage, "tensor header")
        if not (isinstance(head, tuple) and len(head) == 3 and isinstance(head[2], Dtype)):
            raise fail(path, "a tensor header is not (key, storage key, tensor type)")
        key, storage = _tar_key(path, head[0]), storages.get(_tar_key(path, head[1]))
        if storage is None:
            raise fail(path, f"tensor {printable(key)[:40]!r} refers to a missing storage")
        raw = fh.read(8)
        ndim = struct.unpack("<i", raw[:4])[0] if len(raw) == 8 else -1
        if not 0 <= ndim <= MAX_NDIM:
            raise fail(path, f"tensor {printable(key)[:40]!r} has {ndim} dimensions")
        raw = fh.read(8 * (2 * ndim + 1))
        if len(raw) < 8 * (2 * ndim + 1) or fh.tell() > end:
            raise fail(path, f"tensor {printable(key)[:40]!r} ends early (truncated)")
        values = struct.unpack(f"<{2 * ndim + 1}q", raw)
        found[key] = TensorRef(storage, values[-1], tuple(values[:ndim]),
                               tuple(values[ndim:2 * ndim]), storage.dtype or head[2].name)
    return found


def _tar_key(path, value: object) -> str:
    try:
        return _key(value)
    except (PickleRefused, ValueError) as exc:
        raise fail(path, f"uses a key that is not a number or a short name ({exc})") from None


pytorch.CONTAINERS.append((_is_tar, parse_tar))
