"""What a PyTorch checkpoint's object graph describes, checked against the file, and read.

:mod:`quantscope.io.pytorch` (and :mod:`quantscope.io.torch_tar`) locate each storage in the
file as a :class:`Storage`; :func:`entries` checks every tensor of the graph against its
storage (dtype, offset, strides, the last element it reaches, how often it repeats the
storage) and lists it as an :class:`Entry` -- a quantized tensor as its dequantized values,
codes, scales and zero points; :func:`read` and :func:`dequantize` read one in its stored dtype
(memory-mapped where the bytes can be read in place) or as float32.
"""

from __future__ import annotations

import math
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantscope.io.checks import MAX_NDIM, check_fits_in_memory, fail
from quantscope.io.dtypes import dtype_from_name
from quantscope.io.reading import STREAM_BLOCK_BYTES, Progress, read_values
from quantscope.io.tensor_info import TensorInfo, count, printable
from quantscope.io.torch_pickle import PickleRefused, Quantization, TensorRef, flatten

#: A view (zero or overlapping strides, as ``expand`` makes) may hold at most this many times
#: its storage's elements: enough for real broadcasts, while a 100-byte file cannot ask for
#: gigabytes.
MAX_EXPANSION = 16

#: torch dtype name -> NumPy dtype name of its stored elements (quantized: their codes).
ELEMENT_DTYPES = {
    "float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "bfloat16",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "int8": "int8",
    "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64", "uint16": "uint16",
    "uint32": "uint32", "uint64": "uint64", "bool": "bool", "qint8": "int8", "quint8": "uint8",
    "qint32": "int32",
}


@dataclass(frozen=True)
class Storage:
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
class Entry:
    """One listed tensor: ``part`` is ``"values"`` (a plain tensor, or a quantized one's
    dequantized values), ``"int_repr"``, ``"scale"`` or ``"zero_point"``."""

    info: TensorInfo
    ref: TensorRef
    part: str = "values"


def itemsize(dtype: str | None) -> int:
    if dtype is None:
        return 1
    name = ELEMENT_DTYPES.get(dtype)
    if name is None:
        return {"complex64": 8, "complex128": 16}.get(dtype, 1)
    return dtype_from_name(name).itemsize


# -- checking what the graph describes --------------------------------------------------------
def entries(path: str | os.PathLike, root: object) -> dict[str, Entry]:
    """Every tensor of the graph checked against its storage, as listing entries."""
    try:
        pairs = flatten(root)
    except PickleRefused as exc:
        raise fail(path, str(exc)) from None
    listed: dict[str, Entry] = {}
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
            _add(path, listed, name, Entry(_info(name, ref, ref.dtype), ref))
            continue
        _check_quantization(path, name, ref, quant)
        values = TensorInfo(name, ref.shape, "float32", f"torch.{ref.dtype} {quant.scheme}",
                            math.prod(ref.shape) * itemsize(ref.dtype), "pytorch")
        _add(path, listed, name, Entry(values, ref))
        _add(path, listed, f"{name}.int_repr", Entry(_info(f"{name}.int_repr", ref,
                                                             ref.dtype), ref, "int_repr"))
        for part in ("scale", "zero_point"):
            value = getattr(quant, part)
            if isinstance(value, TensorRef):
                info = _info(f"{name}.{part}", value, value.dtype)
            else:
                kind = "float64" if part == "scale" else "int64"
                info = TensorInfo(f"{name}.{part}", (), kind, f"torch.{kind}", 8, "pytorch")
            _add(path, listed, f"{name}.{part}", Entry(info, ref, part))
    if not listed:
        why = f": unsupported dtypes {', '.join(skipped[:4])}" if skipped else ""
        raise fail(path, f"holds no tensors quantscope can read{why}")
    return listed


def _add(path, entries: dict[str, Entry], name: str, entry: Entry) -> None:
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
    if not isinstance(storage, Storage):
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
    capacity = storage.nbytes // itemsize(ref.dtype)
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
def dequantize(path, big_endian: bool, codes: np.ndarray, ref: TensorRef) -> np.ndarray:
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
    scale = read(path, big_endian, quant.scale, "scales", False, None).astype(np.float64)
    zero = read(path, big_endian, quant.zero_point, "zero points", False, None)
    if quant.scheme == "per_channel_affine":
        out = (q - zero.astype(np.int64).reshape(shape)) * scale.reshape(shape)
    else:
        out = q * scale.reshape(shape) + zero.astype(np.float64).reshape(shape)
    return np.require(out, np.float32, "C")


def read(path, big_endian: bool, ref: TensorRef, where: str, as_float32: bool,
          progress: Progress | None) -> np.ndarray:
    storage: Storage = ref.storage
    dtype = dtype_from_name(ELEMENT_DTYPES[ref.dtype])
    if big_endian and dtype.itemsize > 1:
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


def _read_block(path, storage: Storage, start_byte: int, shape: tuple[int, ...],
                dtype: np.dtype, as_float32: bool, progress: Progress | None,
                where: str) -> np.ndarray:
    """``shape`` elements from ``start_byte`` into the storage, read into memory."""
    try:
        if storage.start is not None:
            with open(path, "rb") as fh:
                fh.seek(storage.start + start_byte)
                return read_values(fh, path, where, shape=shape, dtype=dtype,
                                   as_float32=as_float32, progress=progress)
        from quantscope.io.npz import _ZIP_ERRORS, member_stream

        with zipfile.ZipFile(path) as archive, member_stream(path, archive,
                                                             storage.member) as stream:
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


