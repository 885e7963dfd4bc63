"""A pickle interpreter that builds what a PyTorch checkpoint holds, and nothing else.

``torch.save`` writes its object graph as a pickle; ``pickle.load`` on it would import and
call whatever the file names (``os.system`` included), and torch's own ``weights_only``
unpickler has had code-execution holes. Here the opcodes are walked one by one
(:func:`pickletools.genops` decodes them without running anything) and each is applied to a
stack of plain Python values by this module's own rules:

* containers and plain values: dicts, lists, tuples, sets, str, bytes, int, float, bool, None;
* an allowlist of globals (:mod:`quantscope.io.torch_globals`), each standing for a rule
  there, never for the named object:
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
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from quantscope.io.torch_globals import (  # noqa: F401  (the types callers read)
    Dtype,
    NumpyDtype,
    PickleRefused,
    QScheme,
    Quantization,
    Rule,
    StateDict,
    StorageType,
    TensorRef,
    check_key,
    plain_set,
    resolve_global,
)

#: Containers nested deeper than this are refused (a real checkpoint nests a handful).
MAX_DEPTH = 100
#: Tensors a pickle may name (a tensor reached by several paths counts once per path).
MAX_NODES = 1_000_000
#: Opcodes in one pickle: far above a checkpoint of 100 000 tensors (~60 opcodes each).
MAX_OPS = 50_000_000


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
    with warnings.catch_warnings():
        # a protocol-0 string with a bad escape makes genops' decoder warn; its text is
        # still read as written (and checked like any other value)
        warnings.simplefilter("ignore", DeprecationWarning)
        return _run_ops(m, stream)


def _run_ops(m: _Machine, stream: BinaryIO) -> object:
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
        target |= plain_set(items)
    elif name == "FROZENSET":
        m.stack.append(frozenset(plain_set(m.pop_mark())))
    elif name == "GLOBAL":
        module, _, attr = str(arg).partition(" ")
        m.stack.append(resolve_global(module, attr))
    elif name == "STACK_GLOBAL":
        attr, module = m.pop(), m.pop()
        if not isinstance(module, str) or not isinstance(attr, str):
            raise PickleRefused("STACK_GLOBAL of something that is not a name")
        m.stack.append(resolve_global(module, attr))
    elif name == "REDUCE":
        args, func = m.pop(), m.pop()
        if not isinstance(func, Rule):
            raise PickleRefused(f"calls a {type(func).__name__}, which is not an allowed "
                                "function; refused (nothing was run)")
        if not isinstance(args, tuple):
            raise PickleRefused(f"calls {func.name} with arguments that are not a tuple")
        m.stack.append(func.call(args))
    elif name == "BUILD":
        state = m.pop()
        target = m.top()
        if isinstance(target, NumpyDtype):
            target.build(state)
            return
        if not isinstance(target, StateDict) or not isinstance(state, dict | type(None)):
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
        check_key(key)
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
