"""The stored tensors of one quantized weight, read and checked, and the shared arithmetic.

Every part is checked against what the layout requires (dtype kind, shape) before a value of
it is used, so a checkpoint whose tensors disagree with its config fails with one message
naming the tensor, the shape found and the shape the config implies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from quantscope.io import load_tensor_with_info
from quantscope.io.checkpoint import CheckpointTensor
from quantscope.io.checks import check_fits_in_memory, fail
from quantscope.io.dtypes import dtype_from_name
from quantscope.io.tensor_info import count, printable


class Parts:
    """The tensors a weight is stored as, by role (``"weight_packed"``, ``"scales"``...)."""

    def __init__(self, name: str, tensors: dict[str, CheckpointTensor]) -> None:
        self.name = name
        self.tensors = tensors

    def has(self, role: str) -> bool:
        return role in self.tensors

    def shape(self, role: str) -> tuple[int, ...]:
        info = self._info(role)
        return info.shape

    def dtype(self, role: str) -> str:
        return self._info(role).dtype

    def nbytes(self) -> dict[str, int]:
        """Bytes each part occupies in the checkpoint."""
        return {t.name: t.info.nbytes for t in self.tensors.values() if t.info is not None}

    def _info(self, role: str):
        t = self.tensors[role]
        if t.info is None:
            raise fail(t.file, t.problem or f"tensor {printable(t.name)!r} cannot be read")
        return t.info

    def error(self, role: str, problem: str) -> Exception:
        """One error naming the part's tensor and file."""
        t = self.tensors.get(role)
        where = t.file if t is not None else "checkpoint"
        shown = printable(t.name) if t is not None else f"{printable(self.name)} ({role})"
        return fail(where, f"tensor {shown!r}: {problem}")

    def missing(self, role: str, why: str) -> Exception:
        t = next(iter(self.tensors.values()))
        return fail(t.file, f"{printable(self.name)}: the quantization config ({why}) needs "
                            f"a {role!r} tensor beside it, and the checkpoint has none")

    def read(self, role: str, kinds: str, shape: Sequence[int] | None = None,
             dtypes: Sequence[str] | None = None) -> np.ndarray:
        """The part's values in memory, after checking its dtype kind (``"i"``, ``"u"``,
        ``"f"`` for every float incl. bf16 / fp8) and, when given, its exact shape."""
        info = self._info(role)
        kind = "f" if info.is_floating else np.dtype(info.numpy_dtype).kind
        if kind not in kinds or (dtypes is not None and info.dtype not in dtypes):
            wanted = ", ".join(dtypes) if dtypes else {
                "i": "signed integers", "u": "unsigned integers", "f": "floats",
                "iu": "integers", "ui": "integers"}.get(kinds, kinds)
            raise self.error(role, f"is {info.dtype}; its layout stores {wanted}")
        if shape is not None and tuple(info.shape) != tuple(shape):
            raise self.error(role, f"has shape {count(list(info.shape))} but the "
                                   f"quantization config implies {count(list(shape))}")
        t = self.tensors[role]
        array, found = load_tensor_with_info(t.file, t.name)
        if found.shape != info.shape or found.dtype != info.dtype:
            raise fail(t.file, f"tensor {printable(t.name)!r} changed since it was listed")
        return np.array(array)  # a copy: no mapping of a file that may change is kept

    def floats(self, role: str, shape: Sequence[int] | None = None) -> np.ndarray:
        """A float part (scales) widened exactly to float32 (float64 rounds)."""
        return self.read(role, "f", shape).astype(np.float32)


def check_elements(parts: Parts, role: str, shape: Sequence[int]) -> None:
    """Refuse a decoded size the memory cannot hold, before any allocation."""
    n = math.prod(shape)
    t = parts.tensors[role]
    check_fits_in_memory(t.file, n * 8, f"tensor {printable(parts.name)!r}")


def scaled(steps: np.ndarray, scale: np.ndarray, out_dtype: str) -> np.ndarray:
    """``steps * scale`` as the packages compute it, returned as float32.

    ``steps`` are the codes less their zero point (small integers or float-element values,
    exact in float32), ``scale`` broadcasts against them. torch multiplies in the scale's
    dtype: a bf16 or fp16 product is the float32 product (exact: at most 8 + 11 significant
    bits) rounded once to that dtype, a float32 product is rounded once in float32; both are
    reproduced here bit for bit.
    """
    product = np.multiply(steps.astype(np.float32, copy=False), scale.astype(np.float32),
                          dtype=np.float32)
    if out_dtype != "float32":
        product = product.astype(dtype_from_name(out_dtype)).astype(np.float32)
    return product


def code_window(lo: float, hi: float, zero: np.ndarray | float, scale: np.ndarray,
                out_dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """The decoded values of the lowest and highest code, ``(code - zero) * scale`` computed
    as the values are (:func:`scaled`): the edges of each element's window."""
    zero32 = np.asarray(zero, np.float32)
    return (scaled(np.float32(lo) - zero32, scale, out_dtype),
            scaled(np.float32(hi) - zero32, scale, out_dtype))


def expand_groups(scale: np.ndarray, columns: int, group_of_column: np.ndarray | None,
                  group_size: int) -> np.ndarray:
    """A (rows, groups) scale (or zero point) spread to (rows, columns): column j uses group
    ``g_idx[j]`` when an index is stored (activation order), else ``j // group_size``."""
    if group_of_column is None:
        group_of_column = np.arange(columns) // group_size
    return scale[:, group_of_column]


def check_group_index(parts: Parts, role: str, g_idx: np.ndarray, groups: int) -> np.ndarray:
    """A stored group index: one entry per input column, each naming an existing group."""
    if g_idx.size and (g_idx.min() < 0 or g_idx.max() >= groups):
        wrong = int(g_idx.max() if g_idx.max() >= groups else g_idx.min())
        raise parts.error(role, f"names group {wrong} but the scales hold {groups} groups")
    return g_idx.astype(np.int64)
