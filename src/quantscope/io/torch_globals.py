"""What the globals a PyTorch pickle may name stand for: the allowlist of
:mod:`quantscope.io.torch_pickle`.

Each allowed ``module.name`` maps to a rule here, never to the object it names:
``torch._utils._rebuild_tensor_v2`` / ``_v3`` / ``_rebuild_parameter`` / ``_rebuild_qtensor``
build a :class:`TensorRef` (storage, offset, shape, strides, dtype -- no data is read), the
storage types and dtypes name a dtype, ``collections.OrderedDict`` is a dict that keeps a state
dict's attributes aside, ``_codecs.encode`` turns protocol 2's text form of bytes back into
bytes, and a NumPy scalar of a plain number type becomes its value. Anything else is refused
by :func:`resolve_global` with a :class:`PickleRefused` naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class PickleRefused(Exception):
    """The pickle asks for something this interpreter does not do; the message says what."""


@dataclass(frozen=True)
class Dtype:
    """A torch dtype named in the pickle (``torch.float8_e4m3fn``)."""

    name: str


@dataclass(frozen=True)
class QScheme:
    """A torch quantization scheme named in the pickle (``torch.per_tensor_affine``)."""

    name: str


@dataclass(frozen=True)
class StorageType:
    """A storage class named in the pickle: its element dtype (``None``: untyped bytes)."""

    name: str
    dtype: str | None


@dataclass(frozen=True)
class Quantization:
    """How a quantized tensor maps its integer codes to values.

    ``scheme`` is ``per_tensor_affine`` (``scale`` a float, ``zero_point`` an int),
    ``per_channel_affine`` or ``per_channel_affine_float_qparams`` (both :class:`TensorRef`,
    along ``axis``)."""

    scheme: str
    scale: Any
    zero_point: Any
    axis: int | None = None


@dataclass(frozen=True, eq=False)
class TensorRef:
    """A tensor as the pickle describes it: a view of ``storage`` (whatever the container's
    ``storage(pid)`` returned) starting ``offset`` elements in, with ``shape`` and ``strides``
    in elements of ``dtype`` (a torch dtype name); ``quantization`` for a quantized one."""

    storage: Any
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    quantization: Quantization | None = None


#: Storage classes by name -> element dtype (torch dtype names).
STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
    "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "QInt8Storage": "qint8", "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}

#: torch dtypes a pickle may name (``torch.<name>``); aliases map to the canonical name.
DTYPE_NAMES = {
    **{n: n for n in (
        "float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
        "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "int8", "uint8", "int16",
        "int32", "int64", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
        "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "float4_e2m1fn_x2")},
    "float": "float32", "double": "float64", "half": "float16", "short": "int16",
    "int": "int32", "long": "int64", "cfloat": "complex64", "cdouble": "complex128",
}

#: Tensor classes of torch before 1.0 (named by the tar format's tensor table) -> dtype.
TENSOR_TYPES = {name.replace("Storage", "Tensor"): dtype for name, dtype in STORAGE_DTYPES.items()
                if not name.startswith("Q")}

QSCHEMES = ("per_tensor_affine", "per_channel_affine", "per_channel_affine_float_qparams")


@dataclass(frozen=True)
class Rule:
    """An allowed global: ``call(args)`` is what REDUCE of it builds."""

    name: str
    call: Callable[[tuple], Any]


class StateDict(dict):
    """``collections.OrderedDict`` as built here: a dict that accepts (and keeps aside) the
    attributes BUILD sets on a state dict (``_metadata``)."""

    attributes: dict

    def __init__(self) -> None:
        super().__init__()
        self.attributes = {}


def _ints(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise PickleRefused(f"a tensor's {what} is not a tuple of integers")
    return value


def _tensor_args(args: tuple, what: str, n_min: int) -> tuple:
    if len(args) < n_min:
        raise PickleRefused(f"{what} called with {len(args)} arguments, expected {n_min}")
    storage, offset = args[0], args[1]
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise PickleRefused(f"{what}: storage offset is not an integer")
    return storage, offset, _ints(args[2], "shape"), _ints(args[3], "strides")


def _storage_dtype(storage: object, what: str) -> str | None:
    dtype = getattr(storage, "dtype", "missing")
    if dtype == "missing":
        raise PickleRefused(f"{what}: its first argument is not a storage")
    return dtype  # type: ignore[return-value]


def _rebuild_v2(args: tuple) -> TensorRef:
    """``_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, meta])`` and
    ``_rebuild_tensor(storage, offset, size, stride)``: the dtype is the storage's."""
    storage, offset, shape, strides = _tensor_args(args, "_rebuild_tensor_v2", 4)
    dtype = _storage_dtype(storage, "_rebuild_tensor_v2")
    if dtype is None:
        raise PickleRefused("_rebuild_tensor_v2 on an untyped storage (no dtype given)")
    return TensorRef(storage, offset, shape, strides, dtype)


def _rebuild_v3(args: tuple) -> TensorRef:
    """``_rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype)``:
    an untyped (byte) storage read as ``dtype``."""
    storage, offset, shape, strides = _tensor_args(args, "_rebuild_tensor_v3", 7)
    _storage_dtype(storage, "_rebuild_tensor_v3")
    if not isinstance(args[6], Dtype):
        raise PickleRefused("_rebuild_tensor_v3: its dtype argument is not a torch dtype")
    return TensorRef(storage, offset, shape, strides, args[6].name)


def _rebuild_qtensor(args: tuple) -> TensorRef:
    """``_rebuild_qtensor(storage, offset, size, stride, quantizer_params, requires_grad,
    hooks)``; ``quantizer_params`` is ``(scheme, scale, zero_point[, axis])``."""
    storage, offset, shape, strides = _tensor_args(args, "_rebuild_qtensor", 5)
    dtype = _storage_dtype(storage, "_rebuild_qtensor")
    params = args[4]
    if not isinstance(params, tuple) or not params or not isinstance(params[0], QScheme):
        raise PickleRefused("_rebuild_qtensor: quantizer parameters are not (scheme, ...)")
    scheme = params[0].name
    if scheme == "per_tensor_affine" and len(params) == 3 and isinstance(
            params[1], float | int) and isinstance(params[2], int):
        quant = Quantization(scheme, float(params[1]), int(params[2]))
    elif scheme in ("per_channel_affine", "per_channel_affine_float_qparams") and len(
            params) == 4 and isinstance(params[1], TensorRef) and isinstance(
            params[2], TensorRef) and isinstance(params[3], int):
        quant = Quantization(scheme, params[1], params[2], int(params[3]))
    else:
        raise PickleRefused(f"_rebuild_qtensor: unsupported quantizer parameters for {scheme}")
    if dtype is None:
        raise PickleRefused("_rebuild_qtensor on an untyped storage")
    return TensorRef(storage, offset, shape, strides, dtype, quant)


def _rebuild_parameter(args: tuple) -> TensorRef:
    """``_rebuild_parameter(data, requires_grad, hooks[, state])``: the tensor itself."""
    if not args or not isinstance(args[0], TensorRef):
        raise PickleRefused("_rebuild_parameter of something that is not a tensor")
    return args[0]


def _ordered_dict(args: tuple) -> StateDict:
    if args not in ((), ([],)):
        raise PickleRefused("collections.OrderedDict called with arguments")
    return StateDict()


def _encode(args: tuple) -> bytes:
    """``_codecs.encode(text, "latin1")``: how protocol 2 pickles a bytes object."""
    if len(args) != 2 or not isinstance(args[0], str) or args[1] not in ("latin1", "latin-1"):
        raise PickleRefused("_codecs.encode called other than as bytes are pickled")
    return args[0].encode("latin1")


def _set(args: tuple) -> set:
    if len(args) > 1 or (args and not isinstance(args[0], list)):
        raise PickleRefused("builtins.set called with other than a list")
    return plain_set(args[0] if args else [])


class NumpyDtype:
    """``numpy.dtype(code, False, True)`` as protocol 2 pickles it, its byte order set by the
    BUILD that follows: only plain numeric codes, to read NumPy scalars (an epoch counter, a
    best score) that checkpoints hold beside their tensors."""

    CODES = ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "b1")

    def __init__(self, code: str) -> None:
        self.code, self.order = code, "="

    def build(self, state: object) -> None:
        if not isinstance(state, tuple) or len(state) < 2 or state[1] not in "<>|=" or \
                not isinstance(state[1], str) or len(state[1]) != 1:
            raise PickleRefused("sets a NumPy dtype's state to something unexpected")
        self.order = state[1]


def _numpy_dtype(args: tuple) -> NumpyDtype:
    if len(args) != 3 or args[0] not in NumpyDtype.CODES:
        raise PickleRefused(f"builds NumPy dtype {str(args[:1])[:40]}, not a plain number "
                            "type; refused")
    return NumpyDtype(args[0])


def _numpy_scalar(args: tuple) -> object:
    """``numpy.core.multiarray.scalar(dtype, bytes)``: the number as a Python value."""
    import numpy as np

    if len(args) != 2 or not isinstance(args[0], NumpyDtype) or not isinstance(
            args[1], bytes):
        raise PickleRefused("builds a NumPy scalar from something other than a dtype and "
                            "its bytes")
    dtype = np.dtype(args[0].order.replace("|", "=") + args[0].code)
    if len(args[1]) != dtype.itemsize:
        raise PickleRefused(f"builds a NumPy {dtype.name} scalar from {len(args[1])} bytes")
    return np.frombuffer(args[1], dtype)[0].item()


def _device(args: tuple) -> str:
    if not args or not all(isinstance(a, str | int) for a in args):
        raise PickleRefused("torch.device called with other than a name")
    return ":".join(str(a) for a in args)


_RULES: dict[tuple[str, str], Rule] = {
    ("torch._utils", "_rebuild_tensor_v2"): Rule("_rebuild_tensor_v2", _rebuild_v2),
    ("torch._utils", "_rebuild_tensor"): Rule("_rebuild_tensor", _rebuild_v2),
    ("torch._utils", "_rebuild_tensor_v3"): Rule("_rebuild_tensor_v3", _rebuild_v3),
    ("torch._utils", "_rebuild_qtensor"): Rule("_rebuild_qtensor", _rebuild_qtensor),
    ("torch._utils", "_rebuild_parameter"): Rule("_rebuild_parameter", _rebuild_parameter),
    ("torch._utils", "_rebuild_parameter_with_state"): Rule(
        "_rebuild_parameter_with_state", _rebuild_parameter),
    ("collections", "OrderedDict"): Rule("OrderedDict", _ordered_dict),
    ("_codecs", "encode"): Rule("encode", _encode),
    ("builtins", "set"): Rule("set", _set),
    ("__builtin__", "set"): Rule("set", _set),
    ("torch", "device"): Rule("device", _device),
    ("numpy", "dtype"): Rule("numpy.dtype", _numpy_dtype),
    ("numpy.core.multiarray", "scalar"): Rule("numpy scalar", _numpy_scalar),
    ("numpy._core.multiarray", "scalar"): Rule("numpy scalar", _numpy_scalar),
}


def resolve_global(module: str, name: str) -> object:
    """What GLOBAL ``module name`` stands for here; anything not allowlisted is refused."""
    rule = _RULES.get((module, name))
    if rule is not None:
        return rule
    if module == "torch" and name in STORAGE_DTYPES:
        return StorageType(name, STORAGE_DTYPES[name])
    if (module, name) in (("torch.storage", "UntypedStorage"), ("torch", "UntypedStorage")):
        return StorageType(name, None)
    if module == "torch" and name in DTYPE_NAMES:
        return Dtype(DTYPE_NAMES[name])
    if module == "torch" and name in TENSOR_TYPES:
        return Dtype(TENSOR_TYPES[name])
    if module == "torch" and name in QSCHEMES:
        return QScheme(name)
    shown = f"{module}.{name}"[:120]
    raise PickleRefused(f"names {shown!r}, which is not a tensor, storage or plain container; "
                        "refused (nothing in the file was imported or run)")


def plain_set(items: list) -> set:
    for item in items:
        check_key(item)
    return set(items)


def check_key(key: object) -> None:
    """Dict keys and set items must be plain scalars: hashing a nested tuple could recurse
    without bound, and no checkpoint uses anything else."""
    if key is not None and not isinstance(key, str | bytes | int | float | bool):
        raise PickleRefused(f"a dict key or set item is a {type(key).__name__}, not a plain "
                            "value; refused")
