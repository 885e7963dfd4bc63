"""A model held in memory -- a state dict or a torch ``nn.Module`` -- scanned as a checkpoint.

``quantscope scan`` reads a checkpoint's stored bytes; a Python user holds the same tensors as
framework arrays. :func:`tensor_entries` lists them (a module's ``state_dict()``, whose tensors
share the parameters' and buffers' storage, so listing copies nothing) with a
:class:`~quantscope.io.tensor_info.TensorInfo` built from each tensor's own shape and dtype,
and :func:`scan_entries` computes each row's figures by exactly the route
:class:`~quantscope.state.model_scan.ModelScan` takes for the same tensor in a file: the fused
pass over the stored dtype's values where the settings allow it and the tensor is larger than
:data:`~quantscope.state.pane_rules.DIRECT_MAX` elements, else the engine's pass on float32.
One tensor is turned into a NumPy array at a time (zero-copy on the CPU; a host copy for a GPU
tensor, released before the next), so memory never holds two converted tensors.

torch is never imported: a module is recognised by its ``state_dict`` and ``named_modules``
methods, a tensor through :func:`quantscope.core.tensors.frameworks.as_numpy`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from quantscope.core.stats.fused import figures_of, fused_axis, raw_dtype
from quantscope.core.tensors.frameworks import as_numpy
from quantscope.errors import QuantscopeError, UserError
from quantscope.io.tensor_info import TensorInfo
from quantscope.state.formats import best_formats
from quantscope.state.model_scan import (
    ERROR,
    OK,
    PENDING,
    SKIPPED,
    ModelRow,
    channel_axis,
    engine_figures,
    fused_rules,
    layer_and_kind,
    skip_reason,
)
from quantscope.state.pane_rules import DIRECT_MAX
from quantscope.state.settings import Settings

#: NumPy dtype name -> the name safetensors writes, so a tensor's record reads as it would
#: from the same tensor saved to a ``.safetensors`` file.
_FILE_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
                "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "int64": "I64",
                "int32": "I32", "int16": "I16", "int8": "I8", "uint64": "U64", "uint32": "U32",
                "uint16": "U16", "uint8": "U8", "bool": "BOOL"}


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of an in-memory model: its name, header-like info and how to read it."""

    name: str
    info: TensorInfo
    read: Callable[[], np.ndarray]


def is_module(obj: object) -> bool:
    """True for a torch ``nn.Module`` (or anything shaped like one), without importing torch."""
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "named_modules", None))


def tensor_entries(obj: object) -> list[TensorEntry]:
    """The tensors of a state dict (a mapping of names to arrays) or of a module's
    ``state_dict()``, in order, each with its info; nothing is converted yet.

    Raises
    ------
    UserError
        For an object that is neither, or a key that is not a string.
    """
    if is_module(obj):
        items: Mapping = obj.state_dict()  # type: ignore[attr-defined]
    elif isinstance(obj, Mapping):
        items = obj
    else:
        raise UserError(f"cannot scan a {type(obj).__name__}: give a path, a state dict "
                        "(names -> tensors) or a torch nn.Module")
    out = []
    for name, value in items.items():
        if not isinstance(name, str):
            raise UserError(f"state dict keys must be strings, got {name!r}")
        out.append(TensorEntry(name, _info(name, value), _reader(value, name)))
    return out


def _reader(value: object, name: str) -> Callable[[], np.ndarray]:
    return lambda: as_numpy(value, name)


def _info(name: str, value: object) -> TensorInfo:
    """The info of a framework tensor from its own shape and dtype (no data read)."""
    given = getattr(value, "shape", None)
    shape = tuple(int(d) for d in (given if given is not None else np.shape(value)))  # type: ignore[call-overload]
    dtype = getattr(value, "dtype", None)
    dname = str(dtype).removeprefix("torch.") if dtype is not None else "object"
    if dname == "bool_":
        dname = "bool"
    itemsize = getattr(dtype, "itemsize", None)
    if not isinstance(itemsize, int):
        itemsize = np.dtype(dname).itemsize if dname in _FILE_DTYPES else 0
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    return TensorInfo(name, shape, dname, _FILE_DTYPES.get(dname, dname), size * itemsize,
                      "memory")


def entry_rows(entries: list[TensorEntry], label: str = "memory") -> list[ModelRow]:
    """The entries as model rows: analysable ones pending, the others marked with why."""
    rows = []
    for i, e in enumerate(entries):
        layer, kind = layer_and_kind(e.name)
        status, reason = PENDING, ""
        try:
            floating = e.info.is_floating
        except (TypeError, ValueError, KeyError):
            floating = False
        if not floating:
            status, reason = SKIPPED, f"not floating point ({e.info.dtype})"
        elif (why := skip_reason(e.info)) is not None:
            status, reason = SKIPPED, why
        rows.append(ModelRow(i, e.name, label, e.info, layer, kind, status, reason))
    return rows


def row_figures(row: ModelRow, x: np.ndarray, settings: Settings, *, axis: int | None = None,
                formats: bool = False) -> ModelRow:
    """A pending row filled in from its tensor ``x`` (as stored: bf16, fp16, float32...), by
    the route :class:`~quantscope.state.model_scan.ModelScan` takes for it in a file."""
    ax = channel_axis(row, axis)
    rules = fused_rules(settings)
    try:
        xf = None
        if (rules is not None and raw_dtype(x.dtype.name) is not None and x.size > DIRECT_MAX
                and (ax is None or fused_axis(x.shape, ax) is not None)):
            figures = figures_of(np.ascontiguousarray(x), ax, rules)
        else:
            xf = np.ascontiguousarray(x, np.float32)
            figures = engine_figures(xf, ax, settings)
        best = None
        if formats and figures.n:  # the int8 figures are the plain scan's either way
            xf = np.ascontiguousarray(x, np.float32) if xf is None else xf
            at = settings if ax is None else dataclasses.replace(settings, axis=ax)
            best = best_formats(xf, at, per_channel=ax is not None)
    except QuantscopeError as exc:
        return dataclasses.replace(row, status=ERROR, reason=str(exc))
    if figures.n == 0:
        return dataclasses.replace(row, status=SKIPPED,
                                   reason=f"all {row.params} values are NaN or infinite")
    return dataclasses.replace(row, status=OK, figures=figures, axis=ax, formats=best)


def scan_entries(entries: list[TensorEntry], settings: Settings, *, axis: int | None = None,
                 formats: bool = False, label: str = "memory",
                 on_row: Callable[[ModelRow], None] | None = None,
                 axes: Mapping[str, int] | None = None) -> list[ModelRow]:
    """Every entry's row, scanned one tensor at a time (see the module docstring)."""
    rows = entry_rows(entries, label)
    for i, (row, entry) in enumerate(zip(rows, entries, strict=True)):
        if row.status != PENDING:
            continue
        try:
            x = entry.read()
        except QuantscopeError as exc:
            rows[i] = dataclasses.replace(row, status=ERROR, reason=str(exc))
        else:
            given = axes.get(row.name, axis) if axes else axis
            rows[i] = row_figures(row, x, settings, axis=given, formats=formats)
            del x
        if on_row is not None:
            on_row(rows[i])
    return rows


def path_like(obj: object) -> bool:
    """True for what names a file or folder."""
    return isinstance(obj, str | os.PathLike)
