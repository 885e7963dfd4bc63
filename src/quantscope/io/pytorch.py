"""PyTorch checkpoints (``.pt``, ``.pth``, ``.bin``, ``.ckpt``) read without torch and without
unpickling.

Three containers exist. ``torch.save``'s default since 1.6 is a zip: ``<archive>/data.pkl``
(the pickled object graph), ``<archive>/byteorder`` and one member ``<archive>/data/<key>``
of raw bytes per storage, stored uncompressed. The legacy format
(``_use_new_zipfile_serialization=False``) is five pickles in a row -- a magic number, the
protocol version, a description of the machine, the object graph, the list of storage keys --
followed by each storage as an 8-byte element count and its raw bytes. Before 1.0 it was a
tar (:mod:`quantscope.io.torch_tar`).

The object graph is run by :mod:`quantscope.io.torch_pickle`, which builds only tensor
descriptions (storage, offset, shape, strides, dtype) and plain containers and refuses
anything else. Every tensor is then checked against its storage, and every storage against
the bytes the file really holds, before a listing is returned: a listed tensor is a loadable
one, and no lying size or offset can make a read go past the file. Tensors are named as the
checkpoint's dicts and lists nest them, keys joined by ``.`` (a state dict's own names).

A quantized tensor (``torch.quantize_per_tensor`` / ``per_channel``) lists as its dequantized
float32 values under its own name -- computed as PyTorch's CPU ``dequantize`` computes them --
plus ``<name>.int_repr`` (the stored codes), ``<name>.scale`` and ``<name>.zero_point``.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantscope.io.checks import (
    check_regular_file,
    fail,
    pick_name,
)
from quantscope.io.kinds import FileKind, register
from quantscope.io.reading import Progress
from quantscope.io.tensor_info import TensorInfo, count, printable
from quantscope.io.torch_pickle import (
    PickleRefused,
    Quantization,
    StorageType,
    TensorRef,
    flatten,
    interpret,
)
from quantscope.io.torch_storage import (
    Entry,
    Storage,
    dequantize,
    entries,
    itemsize,
    read,
)

#: The first pickle of a legacy checkpoint, and its protocol version.
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
#: How a legacy checkpoint starts: PROTO 2, LONG1 of 10 bytes, the magic number.
LEGACY_HEAD = b"\x80\x02\x8a\x0a" + LEGACY_MAGIC.to_bytes(10, "little")
#: ``data.pkl`` larger than this is refused (a 100 000-tensor state dict is ~10 MB).
MAX_PICKLE_BYTES = 1 << 30

@dataclass(frozen=True)
class _Parsed:
    entries: dict[str, Entry]
    big_endian: bool


#: Further containers (``sniff(path, head)``, ``parse(path)``) registered by the modules that
#: read them (:mod:`quantscope.io.torch_tar`, the pre-1.0 tar format).
CONTAINERS: list[tuple[Callable[[Path, bytes], bool], Callable[[str | os.PathLike], _Parsed]]] \
    = []


# -- recognising ------------------------------------------------------------------------------
def _sniff(path: Path, head: bytes) -> bool:
    if head.startswith(LEGACY_HEAD):
        return True
    if any(sniff(path, head) for sniff, _ in CONTAINERS):
        return True
    if not head.startswith(b"PK\x03\x04"):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            if len(archive.filelist) > 1_000_000:
                return False
            return _pickle_member_name(archive.namelist()) is not None
    except Exception:  # a broken zip is left to the .npz loader's precise message
        return False


def _pickle_member_name(names: list[str]) -> str | None:
    found = [n for n in names if n == "data.pkl" or (
        n.endswith("/data.pkl") and n.count("/") == 1)]
    return found[0] if len(found) == 1 else None


# -- parsing ----------------------------------------------------------------------------------
_CACHE: OrderedDict[tuple, _Parsed] = OrderedDict()
_CACHE_SIZE = 4


def _parsed(path: str | os.PathLike) -> _Parsed:
    """The validated listing of ``path``, parsed once per file version (a scan loads every
    tensor: re-running the pickle for each would be quadratic in their number)."""
    check_regular_file(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
    key = (os.fspath(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    with open(path, "rb") as fh:
        head = fh.read(512)
    other = [parse for sniff, parse in CONTAINERS if sniff(Path(path), head)]
    if other:
        parsed = other[0](path)
    elif head.startswith(LEGACY_HEAD):
        parsed = _parse_legacy(path, st.st_size)
    else:
        parsed = _parse_zip(path)
    _CACHE[key] = parsed
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return parsed


def _parse_zip(path: str | os.PathLike) -> _Parsed:
    from quantscope.io.npz import _ZIP_ERRORS, _open_archive, _stored_start, member_stream

    with _open_archive(path) as archive:
        names = archive.namelist()
        for name in names:
            parts = name.split("/")
            if name.startswith("/") or "\\" in name or ".." in parts:
                raise fail(path, f"holds zip member {printable(name)[:80]!r}, a path outside "
                                 "the archive's folder; refused")
        pkl = _pickle_member_name(names)
        if pkl is None:
            raise fail(path, "is a zip without exactly one data.pkl: not a PyTorch checkpoint")
        prefix = pkl[: -len("data.pkl")]
        member = archive.getinfo(pkl)
        if member.file_size > MAX_PICKLE_BYTES:
            raise fail(path, f"{pkl} claims {count(member.file_size)} bytes; refused")
        try:
            data = _read_member(path, archive, member, member_stream)
            order = _read_member(path, archive, archive.getinfo(prefix + "byteorder"),
                                 member_stream) if prefix + "byteorder" in names else b"little"
        except _ZIP_ERRORS as exc:
            raise fail(path, f"{pkl} is corrupt ({type(exc).__name__})") from None
        if order not in (b"little", b"big"):
            raise fail(path, f"byteorder member says {order[:20]!r}, not little or big")
        storages: dict[str, Storage] = {}
        members = {n: archive.getinfo(n) for n in names}

        def storage(pid: object) -> Storage:
            dtype, key, numel = _check_pid(pid, 5)
            if key in storages:
                return _same(path, storages[key], dtype, numel)
            entry = members.get(f"{prefix}data/{key}")
            if entry is None:
                raise PickleRefused(f"refers to storage {printable(key)[:40]!r}, which the "
                                    "archive does not hold")
            nbytes = numel * itemsize(dtype)
            if entry.file_size != nbytes:
                raise PickleRefused(
                    f"says storage {printable(key)[:40]!r} holds {count(numel)} elements "
                    f"({count(nbytes)} bytes) but its member holds {entry.file_size} bytes")
            if entry.compress_type == zipfile.ZIP_STORED:
                found = Storage(key, dtype, numel, nbytes, start=_stored_start(
                    path, archive, entry))
            else:  # read bounded by the bytes it produces (io.zip_member)
                found = Storage(key, dtype, numel, nbytes, member=entry)
            storages[key] = found
            return found

        root = _run(path, io.BytesIO(data), storage, "data.pkl")
    return _Parsed(entries(path, root), order == b"big")


def _read_member(path, archive: zipfile.ZipFile, member: zipfile.ZipInfo,
                 member_stream) -> bytes:
    """A small member whole, never producing more than its declared size."""
    if member.file_size > MAX_PICKLE_BYTES:
        raise fail(path, f"{member.filename[:80]!r} claims {count(member.file_size)} bytes; "
                         "refused")
    stream = member_stream(path, archive, member)
    data = stream.read(member.file_size)
    finish = getattr(stream, "finish", None)
    if finish is not None:
        finish()
    stream.close()
    return data


class _Bounded(io.RawIOBase):
    """A file read through, never asked for more than the file holds (a pickle's declared
    string length cannot make a read allocate beyond the file's size)."""

    def __init__(self, fh, size: int) -> None:
        self.fh, self.size = fh, size

    def read(self, n: int = -1) -> bytes:
        left = self.size - self.fh.tell()
        return self.fh.read(left if n is None or n < 0 else min(n, max(left, 0)))

    def readline(self, limit: int = -1) -> bytes:
        left = max(self.size - self.fh.tell(), 0)
        return self.fh.readline(left if limit is None or limit < 0 else min(limit, left))

    def tell(self) -> int:
        return self.fh.tell()


def _parse_legacy(path: str | os.PathLike, size: int) -> _Parsed:
    pids: dict[str, Storage] = {}

    def storage(pid: object) -> Storage:
        dtype, key, numel = _check_pid(pid, 6)
        if pid[5] is not None:  # type: ignore[index]
            raise PickleRefused("uses storage views (a pre-1.0 feature); not read")
        if key in pids:
            return _same(path, pids[key], dtype, numel)
        pids[key] = Storage(key, dtype, numel, numel * itemsize(dtype))
        return pids[key]

    def no_storage(pid: object) -> object:
        raise PickleRefused("refers to a storage before its object graph")

    try:
        with open(path, "rb") as fh:
            stream = _Bounded(fh, size)
            if _run(path, stream, no_storage, "magic number") != LEGACY_MAGIC:
                raise fail(path, "is not a legacy PyTorch checkpoint (wrong magic number)")
            version = _run(path, stream, no_storage, "protocol version")
            if version != LEGACY_PROTOCOL:
                raise fail(path, f"has legacy protocol version {count(version)}, not "
                                 f"{LEGACY_PROTOCOL}")
            info = _run(path, stream, no_storage, "system info")
            little = info.get("little_endian", True) if isinstance(info, dict) else True
            root = _run(path, stream, storage, "object graph")
            keys = _run(path, stream, no_storage, "storage keys")
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise fail(path, "its storage key list is not a list of names")
            located = _locate_legacy(path, fh, size, keys, pids, bool(little))
    except OSError as exc:
        raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
    return _Parsed(entries(path, _relocate(root, located)), not little)


def _locate_legacy(path, fh, size: int, keys: list[str], pids: dict[str, Storage],
                   little: bool) -> dict[str, Storage]:
    """Where each storage's bytes start: after the key list, in the list's order, each an
    8-byte element count then the data; counts must match the object graph's."""
    missing = set(pids) - set(keys)
    if missing:
        raise fail(path, f"storage {printable(sorted(missing)[0])[:40]!r} is used but not "
                         "stored")
    located: dict[str, Storage] = {}
    pos = fh.tell()
    for key in keys:
        if key in located or key not in pids:
            raise fail(path, f"storage key list names {printable(key)[:40]!r} twice or "
                             "without a use")
        fh.seek(pos)
        raw = fh.read(8)
        if len(raw) < 8:
            raise fail(path, f"ends before storage {printable(key)[:40]!r} (truncated)")
        numel = struct.unpack("<q" if little else ">q", raw)[0]
        want = pids[key]
        if numel != want.numel:
            raise fail(path, f"storage {printable(key)[:40]!r} holds {count(numel)} elements "
                             f"but the object graph says {count(want.numel)}")
        start = pos + 8
        if start + want.nbytes > size:
            raise fail(path, f"storage {printable(key)[:40]!r} needs {count(want.nbytes)} "
                             f"bytes at offset {start}, past the end of the {size}-byte file "
                             "(truncated or lying)")
        located[key] = Storage(key, want.dtype, want.numel, want.nbytes, start=start)
        pos = start + want.nbytes
    return located


def _relocate(root: object, located: dict[str, Storage]) -> object:
    """``root``'s tensors pointed at the located storages (the object graph came first)."""
    pairs = flatten(root)
    out: dict[str, TensorRef] = {}
    for name, ref in pairs:
        out[name] = _with_storage(ref, located)
    return out if not (len(pairs) == 1 and pairs[0][0] == "") else out[""]


def _with_storage(ref: TensorRef, located: dict[str, Storage]) -> TensorRef:
    quant = ref.quantization
    if quant is not None and isinstance(quant.scale, TensorRef):
        quant = Quantization(quant.scheme, _with_storage(quant.scale, located),
                             _with_storage(quant.zero_point, located), quant.axis)
    return TensorRef(located[ref.storage.key], ref.offset, ref.shape, ref.strides, ref.dtype,
                     quant)


def _run(path, stream, storage, what: str) -> object:
    try:
        return interpret(stream, storage)
    except PickleRefused as exc:
        raise fail(path, f"{what}: {exc}") from None


def _check_pid(pid: object, length: int) -> tuple[str | None, str, int]:
    if not (isinstance(pid, tuple) and len(pid) == length and pid[0] == "storage"
            and isinstance(pid[1], StorageType) and isinstance(pid[2], str)
            and isinstance(pid[3], str) and isinstance(pid[4], int)
            and not isinstance(pid[4], bool) and pid[4] >= 0):
        raise PickleRefused("has a persistent id that is not ('storage', type, key, "
                            "location, size)")
    if len(pid[2]) > 200:
        raise PickleRefused("names a storage key longer than 200 characters")
    return pid[1].dtype, pid[2], pid[4]


def _same(path, known: Storage, dtype: str | None, numel: int) -> Storage:
    if known.dtype != dtype or known.numel != numel:
        raise PickleRefused(f"describes storage {printable(known.key)[:40]!r} twice, "
                            "differently")
    return known


# -- reading ----------------------------------------------------------------------------------
def list_pytorch(path: str | os.PathLike) -> list[TensorInfo]:
    """Every tensor of a PyTorch checkpoint (see the module docstring), from the pickle and
    the archive's directory alone."""
    return [e.info for e in _parsed(path).entries.values()]


def load_pytorch(path: str | os.PathLike, name: str | None = None, *, as_float32: bool = False,
                 progress: Progress | None = None) -> tuple[np.ndarray, TensorInfo]:
    """One tensor: memory-mapped read-only in its stored dtype where its storage is stored
    uncompressed (a view keeps its strides), or with ``as_float32`` read into memory as
    C-contiguous float32. A quantized tensor's values are dequantized as PyTorch does."""
    parsed = _parsed(path)
    name = pick_name(path, list(parsed.entries), name)
    entry = parsed.entries[name]
    ref, part = entry.ref, entry.part
    if part in ("scale", "zero_point"):
        value = getattr(ref.quantization, part)
        if isinstance(value, TensorRef):
            array = read(path, parsed.big_endian, value, f"tensor {printable(name)[:80]!r}",
                         False, None)
        else:
            array = np.array(value, dtype=entry.info.dtype)
        return (array.astype(np.float32) if as_float32 else array), entry.info
    if part == "values" and ref.quantization is not None:
        codes = read(path, parsed.big_endian, ref, f"tensor {printable(name)[:80]!r}", False,
                     progress)
        return dequantize(path, parsed.big_endian, codes, ref), entry.info
    where = f"tensor {printable(name)[:80]!r}"
    return read(path, parsed.big_endian, ref, where, as_float32, progress), entry.info


def _list(path):
    return list_pytorch(path)


def _load(path, name=None, /, **options):
    return load_pytorch(path, name, **options)


register(FileKind(
    "pytorch", "PyTorch checkpoint (.pt, .pth, .bin, .ckpt)", (".pt", ".pth", ".bin", ".ckpt"),
    _sniff, _list, _load,
    not_this=lambda p, h: ("is a tar archive without the storages, tensors and pickle members "
                           "of PyTorch's pre-1.0 format")
    if h[257:262] == b"ustar" else "is not a PyTorch checkpoint (neither a zip holding "
                                   "data.pkl nor the legacy pickle format)"), before="npz")
