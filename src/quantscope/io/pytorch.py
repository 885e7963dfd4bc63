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
import math
import os
import struct
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantscope.io.checks import (
    MAX_NDIM,
    check_fits_in_memory,
    check_regular_file,
    fail,
    pick_name,
)
from quantscope.io.dtypes import dtype_from_name
from quantscope.io.kinds import FileKind, register
from quantscope.io.reading import STREAM_BLOCK_BYTES, Progress, read_values
from quantscope.io.tensor_info import TensorInfo, count, printable
from quantscope.io.torch_pickle import (
    PickleRefused,
    Quantization,
    StorageType,
    TensorRef,
    flatten,
    interpret,
)

#: The first pickle of a legacy checkpoint, and its protocol version.
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
#: How a legacy checkpoint starts: PROTO 2, LONG1 of 10 bytes, the magic number.
LEGACY_HEAD = b"\x80\x02\x8a\x0a" + LEGACY_MAGIC.to_bytes(10, "little")
#: A view (zero or overlapping strides, as ``expand`` makes) may hold at most this many times
#: its storage's elements: enough for real broadcasts, while a 100-byte file cannot ask for
#: gigabytes.
MAX_EXPANSION = 16
#: ``data.pkl`` larger than this is refused (a 100 000-tensor state dict is ~10 MB).
MAX_PICKLE_BYTES = 1 << 30

#: torch dtype name -> NumPy dtype name of its stored elements (quantized: their codes).
ELEMENT_DTYPES = {
    "float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "bfloat16",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "int8": "int8",
    "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64", "uint16": "uint16",
    "uint32": "uint32", "uint64": "uint64", "bool": "bool", "qint8": "int8", "quint8": "uint8",
    "qint32": "int32",
}


@dataclass(frozen=True)
class _Storage:
    """A storage the pickle referred to, located in the file.

    ``start`` is the absolute file offset of its bytes when they can be read in place (a
    stored zip member, a legacy storage); otherwise ``member`` is the compressed zip member."""

    key: str
    dtype: str | None
    numel: int
    nbytes: int
    start: int | None = None
    member: zipfile.ZipInfo | None = None


@dataclass(frozen=True)
class _Entry:
    """One listed tensor: ``part`` is ``"values"`` (a plain tensor, or a quantized one's
    dequantized values), ``"int_repr"``, ``"scale"`` or ``"zero_point"``."""

    info: TensorInfo
    ref: TensorRef
    part: str = "values"


@dataclass(frozen=True)
class _Parsed:
    entries: dict[str, _Entry]
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
    from quantscope.io.npz import _ZIP_ERRORS, MAX_RATIO, _open_archive, _stored_start

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
        if member.file_size > MAX_PICKLE_BYTES or (
                member.file_size > member.compress_size * MAX_RATIO + 4096):
            raise fail(path, f"{pkl} claims {count(member.file_size)} bytes; refused")
        try:
            data = archive.read(member)
            order = archive.read(prefix + "byteorder") if prefix + "byteorder" in names \
                else b"little"
        except _ZIP_ERRORS as exc:
            raise fail(path, f"{pkl} is corrupt ({type(exc).__name__})") from None
        if order not in (b"little", b"big"):
            raise fail(path, f"byteorder member says {order[:20]!r}, not little or big")
        storages: dict[str, _Storage] = {}
        members = {n: archive.getinfo(n) for n in names}

        def storage(pid: object) -> _Storage:
            dtype, key, numel = _check_pid(pid, 5)
            if key in storages:
                return _same(path, storages[key], dtype, numel)
            entry = members.get(f"{prefix}data/{key}")
            if entry is None:
                raise PickleRefused(f"refers to storage {printable(key)[:40]!r}, which the "
                                    "archive does not hold")
            nbytes = numel * _itemsize(dtype)
            if entry.file_size != nbytes:
                raise PickleRefused(
                    f"says storage {printable(key)[:40]!r} holds {count(numel)} elements "
                    f"({count(nbytes)} bytes) but its member holds {entry.file_size} bytes")
            if entry.compress_type == zipfile.ZIP_STORED:
                found = _Storage(key, dtype, numel, nbytes, start=_stored_start(
                    path, archive, entry))
            else:
                if entry.file_size > entry.compress_size * MAX_RATIO + 4096:
                    raise PickleRefused(f"storage member {printable(key)[:40]!r} claims more "
                                        "bytes than its compressed data can hold (a zip bomb)")
                found = _Storage(key, dtype, numel, nbytes, member=entry)
            storages[key] = found
            return found

        root = _run(path, io.BytesIO(data), storage, "data.pkl")
    return _Parsed(_entries(path, root), order == b"big")


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
    pids: dict[str, _Storage] = {}

    def storage(pid: object) -> _Storage:
        dtype, key, numel = _check_pid(pid, 6)
        if pid[5] is not None:  # type: ignore[index]
            raise PickleRefused("uses storage views (a pre-1.0 feature); not read")
        if key in pids:
            return _same(path, pids[key], dtype, numel)
        pids[key] = _Storage(key, dtype, numel, numel * _itemsize(dtype))
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
    entries = _entries(path, _relocate(root, located))
    return _Parsed(entries, not little)


def _locate_legacy(path, fh, size: int, keys: list[str], pids: dict[str, _Storage],
                   little: bool) -> dict[str, _Storage]:
    """Where each storage's bytes start: after the key list, in the list's order, each an
    8-byte element count then the data; counts must match the object graph's."""
    missing = set(pids) - set(keys)
    if missing:
        raise fail(path, f"storage {printable(sorted(missing)[0])[:40]!r} is used but not "
                         "stored")
    located: dict[str, _Storage] = {}
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
        located[key] = _Storage(key, want.dtype, want.numel, want.nbytes, start=start)
        pos = start + want.nbytes
    return located


def _relocate(root: object, located: dict[str, _Storage]) -> object:
    """``root``'s tensors pointed at the located storages (the object graph came first)."""
    pairs = flatten(root)
    out: dict[str, TensorRef] = {}
    for name, ref in pairs:
        out[name] = _with_storage(ref, located)
    return out if not (len(pairs) == 1 and pairs[0][0] == "") else out[""]


def _with_storage(ref: TensorRef, located: dict[str, _Storage]) -> TensorRef:
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


def _same(path, known: _Storage, dtype: str | None, numel: int) -> _Storage:
    if known.dtype != dtype or known.numel != numel:
        raise PickleRefused(f"describes storage {printable(known.key)[:40]!r} twice, "
                            "differently")
    return known


def _itemsize(dtype: str | None) -> int:
    if dtype is None:
        return 1
    name = ELEMENT_DTYPES.get(dtype)
    if name is None:
        return {"complex64": 8, "complex128": 16}.get(dtype, 1)
    return dtype_from_name(name).itemsize


# -- checking what the graph describes --------------------------------------------------------
def _entries(path: str | os.PathLike, root: object) -> dict[str, _Entry]:
    """Every tensor of the graph checked against its storage, as listing entries."""
    try:
        pairs = flatten(root)
    except PickleRefused as exc:
        raise fail(path, str(exc)) from None
    entries: dict[str, _Entry] = {}
    skipped: list[str] = []
    stem = Path(path).stem
    for name, ref in pairs:
        name = name or stem
        if ref.dtype not in ELEMENT_DTYPES:
            skipped.append(f"{printable(name)[:60]} ({ref.dtype})")
            continue
        _check_view(path, name, ref)
        quant = ref.quantization
        if quant is None:
            _add(path, entries, name, _Entry(_info(name, ref, ref.dtype), ref))
            continue
        _check_quantization(path, name, ref, quant)
        values = TensorInfo(name, ref.shape, "float32", f"torch.{ref.dtype} {quant.scheme}",
                            math.prod(ref.shape) * _itemsize(ref.dtype), "pytorch")
        _add(path, entries, name, _Entry(values, ref))
        _add(path, entries, f"{name}.int_repr", _Entry(_info(f"{name}.int_repr", ref,
                                                             ref.dtype), ref, "int_repr"))
        for part in ("scale", "zero_point"):
            value = getattr(quant, part)
            if isinstance(value, TensorRef):
                info = _info(f"{name}.{part}", value, value.dtype)
            else:
                kind = "float64" if part == "scale" else "int64"
                info = TensorInfo(f"{name}.{part}", (), kind, f"torch.{kind}", 8, "pytorch")
            _add(path, entries, f"{name}.{part}", _Entry(info, ref, part))
    if not entries:
        why = f": unsupported dtypes {', '.join(skipped[:4])}" if skipped else ""
        raise fail(path, f"holds no tensors quantscope can read{why}")
    return entries


def _add(path, entries: dict[str, _Entry], name: str, entry: _Entry) -> None:
    if name in entries:
        raise fail(path, f"holds two tensors named {printable(name)[:80]!r}; refused as "
                         "ambiguous")
    entries[name] = entry


def _info(name: str, ref: TensorRef, dtype: str) -> TensorInfo:
    element = ELEMENT_DTYPES[dtype]
    return TensorInfo(name, ref.shape, element, f"torch.{dtype}",
                      math.prod(ref.shape) * dtype_from_name(element).itemsize, "pytorch")


def _check_view(path, name: str, ref: TensorRef) -> None:
    """The view must lie inside its storage: offset and strides non-negative, the last
    element it reaches before the storage's end (Python ints: no overflow)."""
    where = f"tensor {printable(name)[:80]!r}"
    storage = ref.storage
    if not isinstance(storage, _Storage):
        raise fail(path, f"{where} is not backed by a storage")
    if storage.dtype is not None and storage.dtype != ref.dtype:
        raise fail(path, f"{where} is {ref.dtype} but its storage holds {storage.dtype}")
    if len(ref.shape) > MAX_NDIM or len(ref.strides) != len(ref.shape):
        raise fail(path, f"{where} has {len(ref.shape)} dimensions and {len(ref.strides)} "
                         "strides")
    if any(d < 0 for d in ref.shape) or any(s < 0 for s in ref.strides) or ref.offset < 0:
        raise fail(path, f"{where} has a negative size, stride or offset")
    if math.prod(ref.shape) == 0:
        return
    capacity = storage.nbytes // _itemsize(ref.dtype)
    last = ref.offset + sum((d - 1) * s for d, s in zip(ref.shape, ref.strides, strict=True))
    if last >= capacity:
        raise fail(path, f"{where} (offset {count(ref.offset)}, shape {count(ref.shape)}, "
                         f"strides {count(ref.strides)}) reaches element {count(last)} of a "
                         f"storage of {count(capacity)}; refused")
    if math.prod(ref.shape) > MAX_EXPANSION * max(capacity, 1):
        raise fail(path, f"{where} (shape {count(ref.shape)}, strides {count(ref.strides)}) "
                         f"repeats a storage of {count(capacity)} elements more than "
                         f"{MAX_EXPANSION} times over; refused (what a file asks to allocate "
                         "stays bounded by what it holds)")


def _check_quantization(path, name: str, ref: TensorRef, quant: Quantization) -> None:
    where = f"quantized tensor {printable(name)[:80]!r}"
    if ref.dtype not in ("qint8", "quint8", "qint32"):
        raise fail(path, f"{where} is {ref.dtype}, not a quantized dtype")
    if quant.scheme == "per_tensor_affine":
        if not (math.isfinite(quant.scale) and quant.scale > 0):
            raise fail(path, f"{where} has scale {quant.scale!r}")
        return
    axis = quant.axis
    if axis is None or not 0 <= axis < len(ref.shape):
        raise fail(path, f"{where} has channel axis {axis} for shape {count(ref.shape)}")
    for part in (quant.scale, quant.zero_point):
        _check_view(path, f"{name} {quant.scheme} parameters", part)
        if part.shape != (ref.shape[axis],):
            raise fail(path, f"{where} has {count(part.shape)} scales or zero points for "
                             f"{ref.shape[axis]} channels")
        if part.dtype not in ("float64", "float32", "int64", "int32"):
            raise fail(path, f"{where} has {part.dtype} quantization parameters")


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
            array = _read(path, parsed, value, f"tensor {printable(name)[:80]!r}", False, None)
        else:
            array = np.array(value, dtype=entry.info.dtype)
        return (array.astype(np.float32) if as_float32 else array), entry.info
    if part == "values" and ref.quantization is not None:
        codes = _read(path, parsed, ref, f"tensor {printable(name)[:80]!r}", False, progress)
        return _dequantize(path, parsed, codes, ref), entry.info
    where = f"tensor {printable(name)[:80]!r}"
    return _read(path, parsed, ref, where, as_float32, progress), entry.info


def _dequantize(path, parsed: _Parsed, codes: np.ndarray, ref: TensorRef) -> np.ndarray:
    """Values as PyTorch's CPU ``dequantize`` computes them (checked against it in tests):
    per tensor ``f32(q - zp) * f32(scale)`` in float32; per channel ``(q - zp) * scale`` in
    float64 rounded once to float32; float qparams ``q * scale + zp``."""
    quant = ref.quantization
    assert quant is not None
    q = np.asarray(codes, dtype=np.int64)
    if quant.scheme == "per_tensor_affine":
        out = (q - quant.zero_point).astype(np.float32) * np.float32(quant.scale)
        return np.require(out, np.float32, "C")
    shape = [1] * q.ndim
    shape[quant.axis] = -1
    scale = _read(path, parsed, quant.scale, "scales", False, None).astype(np.float64)
    zero = _read(path, parsed, quant.zero_point, "zero points", False, None)
    if quant.scheme == "per_channel_affine":
        out = (q - zero.astype(np.int64).reshape(shape)) * scale.reshape(shape)
    else:
        out = q * scale.reshape(shape) + zero.astype(np.float64).reshape(shape)
    return np.require(out, np.float32, "C")


def _read(path, parsed: _Parsed, ref: TensorRef, where: str, as_float32: bool,
          progress: Progress | None) -> np.ndarray:
    storage: _Storage = ref.storage
    dtype = dtype_from_name(ELEMENT_DTYPES[ref.dtype])
    if parsed.big_endian and dtype.itemsize > 1:
        if dtype.kind not in "fiub":
            raise fail(path, f"{where} is big-endian {ref.dtype}, which is not supported")
        dtype = dtype.newbyteorder(">")
    n = math.prod(ref.shape)
    if n == 0:
        return np.empty(ref.shape, np.float32 if as_float32 else dtype)
    span = ref.offset + sum((d - 1) * s for d, s in zip(ref.shape, ref.strides,
                                                       strict=True)) + 1 - ref.offset
    contiguous = _c_strides(ref.shape) == ref.strides or n == 1
    start_byte = ref.offset * dtype.itemsize
    if storage.start is not None and not as_float32:
        try:
            if contiguous:
                return np.memmap(path, dtype=dtype, mode="r", offset=storage.start +
                                 start_byte, shape=ref.shape)
            flat = np.memmap(path, dtype=dtype, mode="r", offset=storage.start + start_byte,
                             shape=(span,))
        except (OSError, ValueError) as exc:
            raise fail(path, f"cannot map {where} ({exc})") from None
        return _strided(flat, ref, dtype)
    shape = ref.shape if contiguous else (span,)
    check_fits_in_memory(path, span * dtype.itemsize, where)
    values = _read_block(path, storage, start_byte, shape, dtype,
                         as_float32 and contiguous, progress, where)
    if not contiguous:
        values = _strided(values, ref, dtype)
        values = np.require(values, np.float32 if as_float32 else dtype, "C")
    elif as_float32:
        values = np.require(values, np.float32, "C")  # ascontiguousarray would make 0-d 1-d
    return values


def _read_block(path, storage: _Storage, start_byte: int, shape: tuple[int, ...],
                dtype: np.dtype, as_float32: bool, progress: Progress | None,
                where: str) -> np.ndarray:
    """``shape`` elements from ``start_byte`` into the storage, read into memory."""
    try:
        if storage.start is not None:
            with open(path, "rb") as fh:
                fh.seek(storage.start + start_byte)
                return read_values(fh, path, where, shape=shape, dtype=dtype,
                                   as_float32=as_float32, progress=progress)
        from quantscope.io.npz import _ZIP_ERRORS

        with zipfile.ZipFile(path) as archive, archive.open(storage.member) as stream:
            skip = start_byte
            while skip:
                got = len(stream.read(min(skip, STREAM_BLOCK_BYTES)))
                if not got:
                    raise fail(path, f"{where}: its storage member ends early")
                skip -= got
            return read_values(stream, path, where, shape=shape, dtype=dtype,
                               as_float32=as_float32, progress=progress,
                               block=STREAM_BLOCK_BYTES)
    except OSError as exc:
        raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
    except _ZIP_ERRORS as exc:  # type: ignore[misc]
        raise fail(path, f"{where} is corrupt ({type(exc).__name__})") from None


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


def _strided(flat: np.ndarray, ref: TensorRef, dtype: np.dtype) -> np.ndarray:
    view = np.lib.stride_tricks.as_strided(
        flat, shape=ref.shape, strides=tuple(s * dtype.itemsize for s in ref.strides),
        writeable=False)
    return view


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
