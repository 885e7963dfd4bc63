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
    if isinstance(x, np.ndarray):
        return x
    framework = framework_of(x)
    if framework == "torch":
        return _from_torch(x, what)
    if framework == "cupy":
        return np.asarray(cast(_DeviceArray, x).get())
    if framework is None:
        _refuse_sparse(x, what)
        if hasattr(x, "__dlpack__") and not hasattr(x, "__array__"):
            try:
                return np.from_dlpack(x)
            except (BufferError, TypeError, RuntimeError) as exc:
                raise EngineTypeError(f"{what} ({type(x).__name__}) cannot be read through "
                                      f"DLPack: {exc}") from None
    try:
        return np.asarray(x)
    except ValueError as exc:  # ragged nested lists
        raise EngineTypeError(f"{what} cannot be read as an array: {exc}") from None


def _refuse_sparse(x: object, what: str) -> None:
    if type(x).__module__.startswith("scipy.sparse"):
        raise EngineTypeError(f"{what} is a SciPy sparse {type(x).__name__}; quantscope "
                              "needs the dense values: pass x.toarray()")


def _from_torch(t, what: str) -> np.ndarray:
    import torch  # already imported: ``t`` is one of its tensors

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
