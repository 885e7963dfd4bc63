"""ONNX models (``.onnx``): every initializer (and the tensor of every ``Constant`` node,
under its output's name: some exporters keep weights there), and the weights a QDQ model
stores quantized, decoded as ONNX Runtime's ``DequantizeLinear`` decodes them.

The protobuf is parsed by the ``onnx`` package (the optional extra ``quantscope[onnx]``; the
error says so when it is missing); the tensors' bytes are then decoded here from the fields the
format defines (``raw_data`` little-endian, or the typed ``*_data`` lists), after checking that
their length is exactly what ``dims`` and the type require -- a model cannot lie its way to a
larger array. Data stored outside the model (``data_location = EXTERNAL``) is read only from a
regular file inside the model's own folder: an absolute path, a ``..`` component or a symlink
leading out of the folder is refused, and ``offset`` + ``length`` must lie within that file.
Such data is memory-mapped when loaded in its own dtype, and read block by block for analysis.

For each ``DequantizeLinear`` node whose input, scale and zero point are all initializers (or
constants), the model also lists the node's output (its name in the graph) as the dequantized
weight:
``(int32(x) - zero_point) * scale`` in float32 for integer codes (int8, uint8, int16, uint16,
int32, int4, uint4), ``float(x) * scale`` for float8 codes, per tensor, per ``axis`` or per
block of ``block_size`` along it, cast to the scale's type -- what ONNX Runtime computes (the
tests run ONNX Runtime on these nodes and compare every value).
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantscope.io.checks import MAX_NDIM, check_fits_in_memory, check_regular_file, fail, pick_name
from quantscope.io.dtypes import dtype_from_name
from quantscope.io.kinds import FileKind, register
from quantscope.io.reading import Progress, read_values
from quantscope.io.tensor_info import TensorInfo, count, printable

#: Protobuf cannot encode a message over 2 GiB; a larger ``.onnx`` is not one.
MAX_MODEL_BYTES = 2 << 30
EXTRA = "pip install 'quantscope[onnx]'"

#: ONNX TensorProto data types read here -> (NumPy dtype name of the decoded values, name).
DATA_TYPES = {
    1: ("float32", "FLOAT"), 2: ("uint8", "UINT8"), 3: ("int8", "INT8"),
    4: ("uint16", "UINT16"), 5: ("int16", "INT16"), 6: ("int32", "INT32"),
    7: ("int64", "INT64"), 9: ("bool", "BOOL"), 10: ("float16", "FLOAT16"),
    11: ("float64", "DOUBLE"), 12: ("uint32", "UINT32"), 13: ("uint64", "UINT64"),
    16: ("bfloat16", "BFLOAT16"), 17: ("float8_e4m3fn", "FLOAT8E4M3FN"),
    19: ("float8_e5m2", "FLOAT8E5M2"), 21: ("uint8", "UINT4"), 22: ("int8", "INT4"),
}
_PACKED4 = (21, 22)
#: Types stored in ``int32_data`` (fp16/bf16/fp8 as their bit patterns), per the ONNX spec.
_INT32_FIELD = (2, 3, 4, 5, 6, 9, 10, 16, 17, 19)
_BITS = {10: "uint16", 16: "uint16", 17: "uint8", 19: "uint8"}
_EXTERNAL = 1


@dataclass(frozen=True)
class _Init:
    """An initializer: its decoded-dtype description and where its bytes are."""

    proto: object
    info: TensorInfo
    external: tuple[Path, int] | None  # (file, offset) of data stored outside the model


@dataclass(frozen=True)
class _Dequantized:
    """A DequantizeLinear node's output: codes ``x``, ``scale``, ``zero_point`` (or None),
    ``axis`` and ``block_size`` (0: per tensor or per axis)."""

    info: TensorInfo
    x: str
    scale: str
    zero_point: str | None
    axis: int
    block_size: int


@dataclass(frozen=True)
class _Model:
    initializers: dict[str, _Init]
    dequantized: dict[str, _Dequantized]


def _text(value: object) -> str:
    """A protobuf string field as text: ONNX's messages are proto2, whose parser hands back
    bytes for a string that is not valid UTF-8 (a corrupt or hostile model)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def _onnx():
    try:
        import onnx
    except ImportError:
        return None
    return onnx


_CACHE: OrderedDict[tuple, _Model] = OrderedDict()


def _model(path: str | os.PathLike) -> _Model:
    """The validated description of ``path``, parsed once per file version."""
    size = check_regular_file(path)
    onnx = _onnx()
    if onnx is None:
        raise fail(path, f"reading ONNX models needs the onnx package: {EXTRA}")
    if size > MAX_MODEL_BYTES:
        raise fail(path, f"is {size} bytes, more than a protobuf can hold (2 GiB); not an "
                         "ONNX model")
    st = os.stat(path)
    key = (os.fspath(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _CACHE:
        return _CACHE[key]
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise fail(path, f"cannot read file ({exc.strerror or exc})") from None
    try:
        proto = onnx.ModelProto.FromString(raw)
    except Exception as exc:  # google.protobuf.message.DecodeError and its relatives
        raise fail(path, f"is not a valid ONNX model (protobuf: {type(exc).__name__})") \
            from None
    del raw
    if not proto.HasField("graph"):
        raise fail(path, "is not an ONNX model (no graph)")
    model = _describe(path, proto)
    _CACHE.clear()  # one model at a time: its in-file data lives in the parsed protobuf
    _CACHE[key] = model
    return model


def _describe(path, proto) -> _Model:
    inits: dict[str, _Init] = {}
    skipped: list[str] = []
    for t in proto.graph.initializer:
        name = _text(t.name)
        if name in inits:
            raise fail(path, f"has two initializers named {printable(name)[:80]!r}")
        if t.data_type not in DATA_TYPES:
            skipped.append(f"{printable(name)[:60]} (type {t.data_type})")
            continue
        inits[name] = _check_initializer(path, t, name)
    for node in proto.graph.node:  # weights some exporters keep in Constant nodes instead
        if _text(node.op_type) != "Constant" or not node.output:
            continue
        value = [a.t for a in node.attribute if _text(a.name) == "value" and a.HasField("t")]
        name = _text(node.output[0])
        if value and name not in inits and value[0].data_type in DATA_TYPES:
            inits[name] = _check_initializer(path, value[0], name)
    dequantized: dict[str, _Dequantized] = {}
    for node in proto.graph.node:
        if _text(node.op_type) != "DequantizeLinear" or _text(node.domain) not in (
                "", "ai.onnx", "com.microsoft"):
            continue
        found = _check_dequantize(path, node, inits)
        if found is not None and found.info.name not in inits:
            dequantized[found.info.name] = found
    if not inits:
        why = f": unsupported types {', '.join(skipped[:4])}" if skipped else ""
        raise fail(path, f"holds no initializers quantscope can read{why}")
    return _Model(inits, dequantized)


def _check_initializer(path, t, name: str) -> _Init:
    where = f"initializer {printable(name)[:80]!r}"
    dims = tuple(t.dims)
    if len(dims) > MAX_NDIM or any(d < 0 for d in dims):
        raise fail(path, f"{where} has dims {count(dims)}")
    numpy_name, type_name = DATA_TYPES[t.data_type]
    n = math.prod(dims)
    stored = (n + 1) // 2 if t.data_type in _PACKED4 else n * dtype_from_name(
        numpy_name).itemsize
    info = TensorInfo(name, dims, numpy_name, type_name, stored, "onnx")
    if t.data_location == _EXTERNAL:
        return _Init(t, info, _external(path, t, where, stored))
    if t.HasField("raw_data"):
        if len(t.raw_data) != stored:
            raise fail(path, f"{where}: dims {count(dims)} of {type_name} need {stored} bytes "
                             f"but raw_data holds {len(t.raw_data)}")
        return _Init(t, info, None)
    field = _typed_field(t)
    held = len(field) if field is not None else 0
    want = n
    if t.data_type in _PACKED4:
        raise fail(path, f"{where}: 4-bit values outside raw_data are not read")
    if held != want:
        raise fail(path, f"{where}: dims {count(dims)} need {want} values but the model "
                         f"holds {held}")
    return _Init(t, info, None)


def _typed_field(t):
    if t.data_type == 1:
        return t.float_data
    if t.data_type in _INT32_FIELD:
        return t.int32_data
    if t.data_type == 7:
        return t.int64_data
    if t.data_type == 11:
        return t.double_data
    if t.data_type in (12, 13):
        return t.uint64_data
    return None


def _external(path, t, where: str, stored: int) -> tuple[Path, int]:
    """The file and offset of externally stored data, checked to lie inside the model's
    folder and inside that file."""
    entries = {_text(e.key): _text(e.value) for e in t.external_data}
    location = entries.get("location", "")
    shown = printable(location)[:80]
    folder = Path(path).resolve().parent
    parts = location.replace("\\", "/").split("/")
    if not location or location.startswith(("/", "\\")) or os.path.isabs(location) or \
            ".." in parts or ":" in parts[0]:
        raise fail(path, f"{where}: external data {shown!r} is not a file in the model's "
                         "folder; refused")
    target = folder / location
    try:
        real = target.resolve(strict=True)
    except (OSError, RuntimeError):
        raise fail(path, f"{where}: external data file {shown!r} does not exist") from None
    if not real.is_relative_to(folder):
        raise fail(path, f"{where}: external data {shown!r} leads outside the model's folder "
                         "(a symlink); refused")
    size = check_regular_file(real)
    try:
        offset = int(entries.get("offset", "0"))
        length = int(entries["length"]) if "length" in entries else stored
    except ValueError:
        raise fail(path, f"{where}: external data offset or length is not a number") from None
    if offset < 0 or length != stored:
        raise fail(path, f"{where}: external data says {length} bytes at offset {offset}; "
                         f"dims {count(tuple(t.dims))} need {stored}")
    if offset + stored > size:
        raise fail(path, f"{where}: external data {shown!r} needs bytes {offset} to "
                         f"{offset + stored}, past the end of its {size}-byte file")
    return real, offset


def _check_dequantize(path, node, inits: dict[str, _Init]) -> _Dequantized | None:
    """The node's output as a listed tensor, when its inputs are all initializers."""
    inputs = [_text(i) for i in node.input]
    outputs = [_text(o) for o in node.output]
    if len(inputs) < 2 or inputs[0] not in inits or inputs[1] not in inits or (
            len(inputs) > 2 and inputs[2] and inputs[2] not in inits) or not outputs:
        return None
    x, scale = inits[inputs[0]].info, inits[inputs[1]].info
    zp = inits[inputs[2]].info if len(inputs) > 2 and inputs[2] else None
    attrs = {_text(a.name): a.i for a in node.attribute}
    axis, block = int(attrs.get("axis", 1)), int(attrs.get("block_size", 0))
    where = f"DequantizeLinear {printable(outputs[0])[:80]!r}"
    if scale.dtype not in ("float32", "float16", "bfloat16"):
        raise fail(path, f"{where}: scale is {scale.file_dtype}, not a float type")
    if zp is not None and (zp.file_dtype != x.file_dtype or zp.shape != scale.shape):
        raise fail(path, f"{where}: zero point ({zp.file_dtype} {count(zp.shape)}) does not "
                         f"match the codes' type {x.file_dtype} and the scale's shape "
                         f"{count(scale.shape)}")
    if x.file_dtype in ("FLOAT", "FLOAT16", "BFLOAT16", "DOUBLE", "BOOL"):
        raise fail(path, f"{where}: its input is {x.file_dtype}, not quantized codes")
    if math.prod(scale.shape) != 1 or block:
        if not -len(x.shape) <= axis < len(x.shape):
            raise fail(path, f"{where}: axis {axis} is out of range for {count(x.shape)}")
        axis %= len(x.shape)
        if block < 0:
            raise fail(path, f"{where}: block_size {block} is negative")
        if block == 0:
            want: tuple[int, ...] = (x.shape[axis],)
        else:
            want = tuple(-(-d // block) if i == axis else d for i, d in enumerate(x.shape))
        if scale.shape != want:
            raise fail(path, f"{where}: scale has shape {count(scale.shape)} but codes "
                             f"{count(x.shape)} along axis {axis} need {count(want)}")
    else:
        axis, block = -1, 0
    out = "float32" if scale.dtype == "float32" else scale.dtype
    info = TensorInfo(outputs[0], x.shape, out,
                      f"DequantizeLinear({x.file_dtype}"
                      + (", per tensor)" if axis < 0 else f", axis {axis}"
                         + (f", block {block})" if block else ")")),
                      x.nbytes, "onnx")
    return _Dequantized(info, inputs[0], inputs[1], inputs[2] if zp is not None else None,
                        axis, block)


# -- reading ----------------------------------------------------------------------------------
def list_onnx(path: str | os.PathLike) -> list[TensorInfo]:
    """Every readable initializer, then every dequantized QDQ weight, from the model alone
    (external data files are checked, not read)."""
    model = _model(path)
    return [i.info for i in model.initializers.values()] + [
        d.info for d in model.dequantized.values()]


def load_onnx(path: str | os.PathLike, name: str | None = None, *, as_float32: bool = False,
              progress: Progress | None = None) -> tuple[np.ndarray, TensorInfo]:
    """One initializer in its type (external data memory-mapped), a dequantized weight, or
    with ``as_float32`` either as a C-contiguous float32 array in memory."""
    model = _model(path)
    names = [*model.initializers, *model.dequantized]
    name = pick_name(path, names, name)
    if name in model.dequantized:
        d = model.dequantized[name]
        values = _dequantize(path, model, d)
        return (np.require(values, np.float32, "C") if as_float32 else values), d.info
    init = model.initializers[name]
    values = _values(path, init, as_float32, progress)
    return values, init.info


def _values(path, init: _Init, as_float32: bool = False,
            progress: Progress | None = None) -> np.ndarray:
    t, info = init.proto, init.info
    dtype = dtype_from_name(info.dtype)
    code = t.data_type
    where = f"initializer {printable(info.name)[:80]!r}"
    if init.external is not None and code not in _PACKED4:
        file, offset = init.external
        stored = dtype.newbyteorder("<") if dtype.itemsize > 1 and dtype.kind in "fiu" \
            else dtype
        if info.size == 0:
            return np.empty(info.shape, np.float32 if as_float32 else dtype)
        if not as_float32:
            try:
                return np.memmap(file, dtype=stored, mode="r", offset=offset,
                                 shape=info.shape)
            except (OSError, ValueError) as exc:
                raise fail(path, f"cannot map {where} ({exc})") from None
        try:
            with open(file, "rb") as fh:
                fh.seek(offset)
                return read_values(fh, path, where, shape=info.shape, dtype=stored,
                                   as_float32=True, progress=progress)
        except OSError as exc:
            raise fail(path, f"cannot read {where} ({exc.strerror or exc})") from None
    check_fits_in_memory(path, info.size * max(dtype.itemsize, 4), where)
    if init.external is not None:
        file, offset = init.external
        with open(file, "rb") as fh:
            fh.seek(offset)
            raw = fh.read(info.nbytes)
        if len(raw) != info.nbytes:
            raise fail(path, f"{where}: its external data file shrank")
    else:
        raw = t.raw_data if t.HasField("raw_data") else None
    if code in _PACKED4:
        values = _unpack4(np.frombuffer(raw, np.uint8), info.size, signed=code == 22)
    elif raw is not None:
        stored = dtype.newbyteorder("<") if dtype.itemsize > 1 and dtype.kind in "fiu" \
            else dtype
        values = np.frombuffer(raw, stored).astype(dtype)
    elif code in _BITS:
        values = np.array(_typed_field(t), dtype=np.int64).astype(_BITS[code]).view(dtype)
    else:
        values = np.array(_typed_field(t), dtype=dtype)
    values = values.reshape(info.shape)
    return np.require(values, np.float32, "C") if as_float32 else values


def _unpack4(packed: np.ndarray, n: int, signed: bool) -> np.ndarray:
    """Two 4-bit values per byte, the first in the low nibble (the ONNX packing)."""
    out = np.empty(packed.size * 2, np.uint8)
    out[0::2] = packed & 0x0F
    out[1::2] = packed >> 4
    out = out[:n]
    if signed:
        return ((out.astype(np.int8) ^ 8) - 8).astype(np.int8)
    return out


def _dequantize(path, model: _Model, d: _Dequantized) -> np.ndarray:
    """``DequantizeLinear`` as ONNX Runtime's CPU kernel computes it (see the module
    docstring)."""
    x = _values(path, model.initializers[d.x])
    scale = _values(path, model.initializers[d.scale]).astype(np.float32)
    zp = _values(path, model.initializers[d.zero_point]) if d.zero_point else None
    if d.axis >= 0:
        if d.block_size:
            for_axis = np.repeat(scale, d.block_size, axis=d.axis)
            scale = np.take(for_axis, np.arange(x.shape[d.axis]), axis=d.axis)
            if zp is not None:
                zp = np.take(np.repeat(zp, d.block_size, axis=d.axis),
                             np.arange(x.shape[d.axis]), axis=d.axis)
        else:
            shape = [1] * x.ndim
            shape[d.axis] = -1
            scale = scale.reshape(shape)
            zp = zp.reshape(shape) if zp is not None else None
    else:
        scale = scale.reshape(())
        zp = zp.reshape(()) if zp is not None else None
    if x.dtype.kind in "iu":
        diff = x.astype(np.int32) - (zp.astype(np.int32) if zp is not None else 0)
        out = diff.astype(np.float32) * scale
    else:  # float8 codes: no zero point to subtract
        out = x.astype(np.float32) * scale
    wanted = dtype_from_name(d.info.dtype)
    return np.require(out.astype(wanted), wanted, "C")


def _list(path):
    return list_onnx(path)


def _load(path, name=None, /, **options):
    return load_onnx(path, name, **options)


register(FileKind("onnx", "ONNX model (.onnx)", (".onnx",), lambda p, h: False, _list, _load,
                  by_suffix=True))
