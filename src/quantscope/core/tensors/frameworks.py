"""Tensors from any framework as NumPy arrays, without importing the framework.

The engine works on NumPy arrays; users hold torch tensors (CPU or CUDA, with gradients,
bfloat16 or float8), JAX and CuPy arrays, DLPack producers or nested lists. :func:`as_numpy`
turns each into an ndarray with as few copies as the data allows:

* torch: ``detach()`` (no gradient tape is touched), a host copy only for a tensor off the CPU,
  then a zero-copy ``.numpy()`` view; bfloat16 and float8 have no NumPy dtype, so their bits are
  viewed as same-width integers and re-viewed as the ml_dtypes type of the same format;
* JAX (``__array__``, which already speaks ml_dtypes), CuPy (``.get()``, a host copy: CuPy
  refuses an implicit one), any other ``__dlpack__`` producer (``np.from_dlpack``), nested lists;
* refused with :class:`EngineTypeError` saying what to do: complex, sparse (torch or SciPy),
  quantized torch tensors (their float values are ``x.dequantize()``), packed float4, meta
  tensors without data, ragged lists.

A framework is recognised by looking it up in ``sys.modules``: a torch tensor can only exist
once torch is imported, so nothing here ever imports torch, JAX or CuPy itself.
"""

from __future__ import annotations

import sys
from typing import Protocol, cast

import numpy as np

from quantscope.errors import EngineTypeError


class _DeviceArray(Protocol):
    """A CuPy array, as far as it is read here: ``get()`` copies it to the host."""

    def get(self) -> np.ndarray: ...


#: torch float formats NumPy lacks -> (ml_dtypes name, integer dtype of the same width).
_TORCH_ML_DTYPES = {
    "bfloat16": ("bfloat16", "int16"),
    "float8_e4m3fn": ("float8_e4m3fn", "uint8"),
    "float8_e4m3fnuz": ("float8_e4m3fnuz", "uint8"),
    "float8_e5m2": ("float8_e5m2", "uint8"),
    "float8_e5m2fnuz": ("float8_e5m2fnuz", "uint8"),
    "float8_e8m0fnu": ("float8_e8m0fnu", "uint8"),
}


#: The frameworks recognised, by module and array class.
_FRAMEWORKS = (("torch", "Tensor"), ("jax", "Array"), ("cupy", "ndarray"))


def framework_of(x: object) -> str | None:
    """``"torch"``, ``"jax"`` or ``"cupy"`` when ``x`` is one of their arrays, else None.

    Only frameworks already imported are asked: an instance of their class can exist only once
    its module is loaded, so this never imports one (and sees subclasses defined elsewhere,
    such as ``torch.nn.Parameter``).
    """
    for name, cls_name in _FRAMEWORKS:
        module = sys.modules.get(name)
        if module is not None and isinstance(x, getattr(module, cls_name, ())):
            return name
    return None


def as_numpy(x: object, what: str = "x") -> np.ndarray:
    """Return ``x`` as an ndarray (zero-copy where possible; see the module docstring).

    Raises
    ------
    EngineTypeError
        For data with no real floating-point or integer values to read (see the module
        docstring), with the call that fixes it.
    """
    return check_expanded(_as_numpy(x, what), what)


def _as_numpy(x: object, what: str) -> np.ndarray:
    if isinstance(x, np.ma.MaskedArray):
        return _unmasked(x, what)
    if isinstance(x, np.ndarray):
        return x
    framework = framework_of(x)
    if framework == "torch":
        return _from_torch(x, what)
    if framework == "cupy":
        return np.asarray(cast(_DeviceArray, x).get())
    kind = type(x).__name__
    if framework is None:
        _refuse_sparse(x, what)
        if hasattr(x, "__dlpack__") and not hasattr(x, "__array__"):
            try:
                return np.from_dlpack(x)
            except Exception as exc:  # the user's own object: whatever its methods raise
                raise EngineTypeError(f"{what} ({kind}) cannot be read through DLPack: "
                                      f"{_reason(exc)}") from None
        if not isinstance(x, list | tuple) and _is_plain_sequence(x):
            x = _sequence_items(x, what)
    try:
        return np.asarray(x)
    except MemoryError:
        raise
    except Exception as exc:  # ragged lists, or the user's object raising from its methods
        raise EngineTypeError(f"{what} ({kind}) cannot be read as an array: "
                              f"{_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_plain_sequence(x: object) -> bool:
    """An object NumPy would read by ``len`` and indexing (no array protocol of its own)."""
    return (hasattr(x, "__len__") and hasattr(x, "__getitem__")
            and not any(hasattr(x, a) for a in ("__array__", "__array_interface__",
                                                "__array_struct__", "__buffer__"))
            and not isinstance(x, str | bytes | bytearray | memoryview | dict))


def _sequence_items(x: object, what: str) -> list:
    """The items of a user's sequence, at most as many as its ``len`` says: NumPy iterates
    until ``IndexError``, so a ``__getitem__`` that never raises it would fill memory."""
    kind = type(x).__name__
    try:
        n = len(x)  # type: ignore[arg-type]
        items = []
        for i in range(n):
            items.append(x[i])  # type: ignore[index]
        try:
            x[n]  # type: ignore[index]
        except IndexError:
            pass
        else:
            raise EngineTypeError(f"{what} ({kind}) says its length is {n} but holds more "
                                  "items (its __len__ and __getitem__ disagree)")
    except EngineTypeError:
        raise
    except MemoryError:
        raise
    except Exception as exc:
        raise EngineTypeError(f"{what} ({kind}) cannot be read as a sequence: "
                              f"{_reason(exc)}") from None
    return items


def _unmasked(x: np.ma.MaskedArray, what: str) -> np.ndarray:
    """A masked array's data when nothing is masked; refused otherwise: the engine's
    statistics would honour the mask in some places and not in others."""
    masked = int(np.ma.count_masked(x))
    if masked:
        raise EngineTypeError(
            f"{what} is a masked array with {masked:,} masked value(s) of {x.size:,}; "
            "quantscope reads every value, so pass x.compressed() (the unmasked values) or "
            "x.filled(v) (masked ones replaced by v)")
    return np.asarray(x.data)


#: A view whose stride-0 axes (``np.broadcast_to``, torch ``expand``) repeat its data is read
#: as the tensor it stands for, once its float32 copy would stay below this...
EXPANDED_LIMIT = 256 << 20
#: ...or below this many times the memory it really holds.
EXPANDED_FACTOR = 4


def check_expanded(arr: np.ndarray, what: str = "x") -> np.ndarray:
    """``arr`` itself, or :class:`EngineValueError` up front when it is a stride-0 view whose
    values, once copied (every statistic reads them as a float32 tensor), would need far
    more memory than the data it holds: a 4 KB ``np.broadcast_to`` of 10^9 elements."""
    if arr.ndim == 0 or all(s != 0 or n <= 1 for s, n in zip(arr.strides, arr.shape,
                                                              strict=True)):
        return arr
    held = arr.itemsize * int(np.prod([n for s, n in zip(arr.strides, arr.shape, strict=True)
                                       if s != 0], dtype=np.float64))
    needed = 4 * float(arr.size)
    if needed <= max(EXPANDED_LIMIT, EXPANDED_FACTOR * held):
        return arr
    from quantscope.errors import EngineValueError

    axes = [i for i, (s, n) in enumerate(zip(arr.strides, arr.shape, strict=True))
            if s == 0 and n > 1]
    raise EngineValueError(
        f"{what} is an expanded view (broadcast or expand: axes {axes} of shape "
        f"{tuple(arr.shape)} repeat their data) holding {_size(held)} of values but "
        f"standing for {arr.size:,} elements, {_size(needed)} as float32; pass the data "
        "it repeats, or a copy (np.ascontiguousarray) if the repeated tensor is what you mean")


def _size(nbytes: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:,.0f} {unit}" if unit == "bytes" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"


def _refuse_sparse(x: object, what: str) -> None:
    if type(x).__module__.startswith("scipy.sparse"):
        raise EngineTypeError(f"{what} is a SciPy sparse {type(x).__name__}; quantscope "
                              "needs the dense values: pass x.toarray()")


def _from_torch(t, what: str) -> np.ndarray:
    import torch  # already imported: ``t`` is one of its tensors

    if getattr(t, "is_nested", False):
        raise EngineTypeError(f"{what} is a nested (ragged) torch tensor of "
                              f"{t.size(0)} components; quantscope needs one rectangular "
                              "tensor: pass one component (x.unbind()[i]) or "
                              "x.to_padded_tensor(0.0)")
    if t.layout != torch.strided:
        raise EngineTypeError(f"{what} is a sparse torch tensor ({t.layout}); quantscope needs "
                              "the dense values: pass x.to_dense()")
    if t.is_quantized:
        raise EngineTypeError(
            f"{what} is a quantized torch tensor ({t.dtype}, {quantized_scheme(t)}): its float "
            "values are x.dequantize(); quantscope.view(x) shows them under its own scale and "
            "zero point")
    if t.is_complex():
        raise EngineTypeError(f"{what} is a complex torch tensor ({t.dtype}); quantization "
                              "needs real values (x.real or x.abs())")
    if t.device.type == "meta":
        raise EngineTypeError(f"{what} is a torch tensor on the meta device: it has a shape "
                              "but no values to quantize")
    name = str(t.dtype).removeprefix("torch.")
    if name.startswith("float4"):
        raise EngineTypeError(f"{what} has dtype {t.dtype} (two 4-bit values packed per byte); "
                              "unpack it to a float dtype first")
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()  # the engine is NumPy: one host copy, the only one
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    if name in _TORCH_ML_DTYPES:
        import ml_dtypes

        ml_name, int_name = _TORCH_ML_DTYPES[name]
        bits = t.view(getattr(torch, int_name)).numpy()
        return bits.view(getattr(ml_dtypes, ml_name))
    return t.numpy()


def quantized_scheme(t) -> str:
    """One phrase for a quantized torch tensor's parameters (per tensor or per channel)."""
    import torch

    if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        return f"per-tensor scale {t.q_scale():.6g}, zero point {t.q_zero_point()}"
    return f"per-channel along axis {t.q_per_channel_axis()}"
