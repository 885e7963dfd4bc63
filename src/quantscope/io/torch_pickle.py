"""A pickle interpreter that builds what a PyTorch checkpoint holds, and nothing else.

``torch.save`` writes its object graph as a pickle; ``pickle.load`` on it would import and
call whatever the file names (``os.system`` included), and torch's own ``weights_only``
unpickler has had code-execution holes. Here the opcodes are walked one by one
(:func:`pickletools.genops` decodes them without running anything) and each is applied to a
stack of plain Python values by this module's own rules:

* containers and plain values: dicts, lists, tuples, sets, str, bytes, int, float, bool, None;
* an allowlist of globals, each standing for a rule here, never for the named object:
  ``torch._utils._rebuild_tensor_v2`` / ``_v3`` / ``_rebuild_parameter`` / ``_rebuild_qtensor``
  build a :class:`TensorRef` (storage, offset, shape, strides, dtype -- no data is read),
  the storage types and dtypes name a dtype, ``collections.OrderedDict`` is a dict,
  ``_codecs.encode`` turns protocol 2's text form of bytes back into bytes, and a NumPy
  scalar of a plain number type (``numpy.dtype`` + ``multiarray.scalar``) becomes its value;
* storages arrive as persistent ids, handed to the container's ``storage(pid)``.

Any other global, a REDUCE of anything but an allowed rule, a BUILD on anything but a dict,
an opcode that would create an instance (INST, OBJ, NEWOBJ, EXT*), or out-of-bounds memo
access is refused with a :class:`PickleRefused` naming it. Sizes are bounded: the opcodes
come from a bounded stream, nesting is limited (:data:`MAX_DEPTH`), and walking the result
visits each container once and names at most :data:`MAX_NODES` tensors, which is what defeats
a memo bomb (a list holding the same list twice, 60 levels deep).
"""

from __future__ import annotations

import pickletools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

#: Containers nested deeper than this are refused (a real checkpoint nests a handful).
MAX_DEPTH = 100
#: Tensors a pickle may name (a tensor reached by several paths counts once per path).
MAX_NODES = 1_000_000
#: Opcodes in one pickle: far above a checkpoint of 100 000 tensors (~60 opcodes each).
MAX_OPS = 50_000_000


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

QSCHEMES = ("per_tensor_affine", "per_channel_affine", "per_channel_affine_float_qparams")


@dataclass(frozen=True)
class _Rule:
    """An allowed global: ``call(args)`` is what REDUCE of it builds."""

    name: str
    call: Callable[[tuple], Any]


class _OrderedDict(dict):
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


def _ordered_dict(args: tuple) -> _OrderedDict:
    if args not in ((), ([],)):
        raise PickleRefused("collections.OrderedDict called with arguments")
    return _OrderedDict()


def _encode(args: tuple) -> bytes:
    """``_codecs.encode(text, "latin1")``: how protocol 2 pickles a bytes object."""
    if len(args) != 2 or not isinstance(args[0], str) or args[1] not in ("latin1", "latin-1"):
        raise PickleRefused("_codecs.encode called other than as bytes are pickled")
    return args[0].encode("latin1")


def _set(args: tuple) -> set:
    if len(args) > 1 or (args and not isinstance(args[0], list)):
        raise PickleRefused("builtins.set called with other than a list")
    return _hashable_set(args[0] if args else [])


class _NumpyDtype:
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


def _numpy_dtype(args: tuple) -> _NumpyDtype:
    if len(args) != 3 or args[0] not in _NumpyDtype.CODES:
        raise PickleRefused(f"builds NumPy dtype {str(args[:1])[:40]}, not a plain number "
                            "type; refused")
    return _NumpyDtype(args[0])


def _numpy_scalar(args: tuple) -> object:
    """``numpy.core.multiarray.scalar(dtype, bytes)``: the number as a Python value."""
    import numpy as np

    if len(args) != 2 or not isinstance(args[0], _NumpyDtype) or not isinstance(
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


_RULES: dict[tuple[str, str], _Rule] = {
    ("torch._utils", "_rebuild_tensor_v2"): _Rule("_rebuild_tensor_v2", _rebuild_v2),
    ("torch._utils", "_rebuild_tensor"): _Rule("_rebuild_tensor", _rebuild_v2),
    ("torch._utils", "_rebuild_tensor_v3"): _Rule("_rebuild_tensor_v3", _rebuild_v3),
    ("torch._utils", "_rebuild_qtensor"): _Rule("_rebuild_qtensor", _rebuild_qtensor),
    ("torch._utils", "_rebuild_parameter"): _Rule("_rebuild_parameter", _rebuild_parameter),
    ("torch._utils", "_rebuild_parameter_with_state"): _Rule(
        "_rebuild_parameter_with_state", _rebuild_parameter),
    ("collections", "OrderedDict"): _Rule("OrderedDict", _ordered_dict),
    ("_codecs", "encode"): _Rule("encode", _encode),
    ("builtins", "set"): _Rule("set", _set),
    ("__builtin__", "set"): _Rule("set", _set),
    ("torch", "device"): _Rule("device", _device),
    ("numpy", "dtype"): _Rule("numpy.dtype", _numpy_dtype),
    ("numpy.core.multiarray", "scalar"): _Rule("numpy scalar", _numpy_scalar),
    ("numpy._core.multiarray", "scalar"): _Rule("numpy scalar", _numpy_scalar),
}


def _global(module: str, name: str) -> object:
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
    if module == "torch" and name in QSCHEMES:
        return QScheme(name)
    shown = f"{module}.{name}"[:120]
    raise PickleRefused(f"names {shown!r}, which is not a tensor, storage or plain container; "
                        "refused (nothing in the file was imported or run)")


def _hashable_set(items: list) -> set:
    for item in items:
        _check_key(item)
    return set(items)


def _check_key(key: object) -> None:
    """Dict keys and set items must be plain scalars: hashing a nested tuple could recurse
    without bound, and no checkpoint uses anything else."""
    if key is not None and not isinstance(key, str | bytes | int | float | bool):
        raise PickleRefused(f"a dict key or set item is a {type(key).__name__}, not a plain "
                            "value; refused")


@dataclass
class _Machine:
    storage: Callable[[object], object]
    stack: list = field(default_factory=list)
    marks: list = field(default_factory=list)
    memo: dict = field(default_factory=dict)

    def pop_mark(self) -> list:
        if not self.marks:
            raise PickleRefused("pops to a MARK that was never set (corrupt pickle)")
        at = self.marks.pop()
        items = self.stack[at:]
        del self.stack[at:]
        return items

    def pop(self) -> object:
        if len(self.stack) <= (self.marks[-1] if self.marks else 0):
            raise PickleRefused("pops an empty stack (corrupt pickle)")
        return self.stack.pop()

    def top(self) -> object:
        if len(self.stack) <= (self.marks[-1] if self.marks else 0):
            raise PickleRefused("reads an empty stack (corrupt pickle)")
        return self.stack[-1]


_CONSTANTS = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False, "EMPTY_DICT": dict,
              "EMPTY_LIST": list, "EMPTY_TUPLE": tuple, "EMPTY_SET": set}
_VALUE_OPS = {"INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "STRING",
              "BINSTRING", "SHORT_BINSTRING", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
              "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "FLOAT", "BINFLOAT",
              "BYTEARRAY8"}
_PUT_OPS = {"PUT", "BINPUT", "LONG_BINPUT"}
_GET_OPS = {"GET", "BINGET", "LONG_BINGET"}
_IGNORED = {"PROTO", "FRAME"}


def interpret(stream: BinaryIO, storage: Callable[[object], object]) -> object:
    """Run one pickle from ``stream`` (positioned at its first opcode) up to its STOP and
    return the value it builds. ``storage(pid)`` resolves a persistent id (BINPERSID).

    Raises
    ------
    PickleRefused
        For anything outside this module's rules (see the module docstring), and for a
        corrupt or truncated pickle.
    """
    m = _Machine(storage)
    try:
        ops = pickletools.genops(stream)
        for n, (op, arg, _) in enumerate(ops):
            if n > MAX_OPS:
                raise PickleRefused(f"holds more than {MAX_OPS} opcodes; refused")
            if op.name == "STOP":
                value = m.pop()
                if m.stack or m.marks:
                    raise PickleRefused("leaves values on its stack at STOP (corrupt pickle)")
                return value
            _step(m, op.name, arg)
    except PickleRefused:
        raise
    except RecursionError:
        raise PickleRefused("nests too deeply") from None
    except (ValueError, EOFError, OverflowError, UnicodeDecodeError, MemoryError) as exc:
        text = str(exc).splitlines()[0][:100] if str(exc) else type(exc).__name__
        raise PickleRefused(f"is corrupt or truncated ({text})") from None
    raise PickleRefused("ends before its STOP opcode (truncated)")


def _step(m: _Machine, name: str, arg: object) -> None:
    if name in _IGNORED:
        return
    if name in _VALUE_OPS:
        m.stack.append(bytes(arg) if name == "BYTEARRAY8" else arg)
    elif name in _CONSTANTS:
        value = _CONSTANTS[name]
        m.stack.append(value() if callable(value) else value)
    elif name == "MARK":
        m.marks.append(len(m.stack))
        if len(m.marks) > MAX_DEPTH:
            raise PickleRefused(f"nests more than {MAX_DEPTH} levels deep; refused")
    elif name in _PUT_OPS:
        m.memo[arg] = m.top()
    elif name == "MEMOIZE":
        m.memo[len(m.memo)] = m.top()
    elif name in _GET_OPS:
        if arg not in m.memo:
            raise PickleRefused(f"reads memo entry {arg!s:.20} that was never stored "
                                "(corrupt pickle)")
        m.stack.append(m.memo[arg])
    elif name in ("POP",):
        m.pop()
    elif name == "POP_MARK":
        m.pop_mark()
    elif name == "DUP":
        m.stack.append(m.top())
    elif name == "TUPLE":
        m.stack.append(tuple(m.pop_mark()))
    elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
        k = int(name[-1])
        items = [m.pop() for _ in range(k)][::-1]
        m.stack.append(tuple(items))
    elif name == "LIST":
        m.stack.append(m.pop_mark())
    elif name == "DICT":
        items = m.pop_mark()
        m.stack.append(_set_items({}, items))
    elif name in ("APPEND", "APPENDS"):
        items = [m.pop()] if name == "APPEND" else m.pop_mark()
        target = m.top()
        if not isinstance(target, list):
            raise PickleRefused(f"appends to a {type(target).__name__}, not a list")
        target.extend(items)
    elif name in ("SETITEM", "SETITEMS"):
        items = [m.pop() for _ in range(2)][::-1] if name == "SETITEM" else m.pop_mark()
        target = m.top()
        if not isinstance(target, dict):
            raise PickleRefused(f"sets items on a {type(target).__name__}, not a dict")
        _set_items(target, items)
    elif name == "ADDITEMS":
        items = m.pop_mark()
        target = m.top()
        if not isinstance(target, set):
            raise PickleRefused("adds set items to something that is not a set")
        target |= _hashable_set(items)
    elif name == "FROZENSET":
        m.stack.append(frozenset(_hashable_set(m.pop_mark())))
    elif name == "GLOBAL":
        module, _, attr = str(arg).partition(" ")
        m.stack.append(_global(module, attr))
    elif name == "STACK_GLOBAL":
        attr, module = m.pop(), m.pop()
        if not isinstance(module, str) or not isinstance(attr, str):
            raise PickleRefused("STACK_GLOBAL of something that is not a name")
        m.stack.append(_global(module, attr))
    elif name == "REDUCE":
        args, func = m.pop(), m.pop()
        if not isinstance(func, _Rule):
            raise PickleRefused(f"calls a {type(func).__name__}, which is not an allowed "
                                "function; refused (nothing was run)")
        if not isinstance(args, tuple):
            raise PickleRefused(f"calls {func.name} with arguments that are not a tuple")
        m.stack.append(func.call(args))
    elif name == "BUILD":
        state = m.pop()
        target = m.top()
        if isinstance(target, _NumpyDtype):
            target.build(state)
            return
        if not isinstance(target, _OrderedDict) or not isinstance(state, dict | type(None)):
            raise PickleRefused(f"sets the state of a {type(target).__name__}; only a state "
                                "dict's attributes are accepted")
        target.attributes.update(state or {})
    elif name == "BINPERSID":
        m.stack.append(m.storage(m.pop()))
    else:  # INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID, NEXT_BUFFER, READONLY_BUFFER
        raise PickleRefused(f"uses the {name} opcode, which builds objects this reader does "
                            "not; refused (nothing was run)")


def _set_items(target: dict, items: list) -> dict:
    if len(items) % 2:
        raise PickleRefused("sets an odd number of dict keys and values (corrupt pickle)")
    for key, value in zip(items[::2], items[1::2], strict=True):
        _check_key(key)
        target[key] = value
    return target


def _children(value: object) -> list[tuple[str, object]] | None:
    if isinstance(value, dict):
        return [(str(k), v) for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [(str(i), v) for i, v in enumerate(value)]
    return None


def count_tensors(root: object) -> int:
    """How many names :func:`flatten` would give, counted without building them: each
    container is counted once (a count per container, reused where it is reached again), so
    a memo bomb costs one step per container. Raises :class:`PickleRefused` for more than
    :data:`MAX_NODES`, a container inside itself, or nesting beyond :data:`MAX_DEPTH`."""
    counts: dict[int, int] = {}
    on_path: set[int] = set()

    def walk(value: object, depth: int) -> int:
        if isinstance(value, TensorRef):
            return 1
        children = _children(value)
        if children is None:
            return 0
        if id(value) in counts:
            return counts[id(value)]
        if depth >= MAX_DEPTH:
            raise PickleRefused(f"nests more than {MAX_DEPTH} levels deep; refused")
        if id(value) in on_path:
            raise PickleRefused("holds a container inside itself; refused")
        on_path.add(id(value))
        total = 0
        for _, child in children:
            total += walk(child, depth + 1)
            if total > MAX_NODES:
                raise PickleRefused(f"names more than {MAX_NODES} tensors (the same "
                                    "containers referenced over and over: a memo bomb); "
                                    "refused")
        on_path.discard(id(value))
        counts[id(value)] = total
        return total

    return walk(root, 0)


def flatten(root: object) -> list[tuple[str, TensorRef]]:
    """Every tensor under ``root`` with its dotted name: dict keys and list positions joined
    by ``.`` (a state dict's own keys, unchanged); a bare tensor is named ``""``.

    A value reached twice (tied weights) is listed under each name. The names are counted
    first (:func:`count_tensors`), so a memo bomb, a container inside itself or nesting
    beyond :data:`MAX_DEPTH` is refused before any name is built."""
    count_tensors(root)  # the objects live until we return: ids stay unique
    found: list[tuple[str, TensorRef]] = []

    def walk(value: object, name: str) -> None:
        if isinstance(value, TensorRef):
            found.append((name, value))
            return
        for key, child in _children(value) or ():
            walk(child, f"{name}.{key}" if name else key)

    walk(root, "")
    return found
