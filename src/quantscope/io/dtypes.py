"""Tensor dtypes by name: NumPy's and the ml_dtypes floats (bf16, fp8), without loading
ml_dtypes until a file holds one. At the bottom of the loaders: headers, checks and the
tensor descriptions all speak of dtypes by these names."""

from __future__ import annotations

import numpy as np

#: ml_dtypes floating types by their NumPy name; they are not ``np.floating`` subclasses.
#: They are told apart by name (NumPy's own void dtypes are called ``void16`` and so on), so
#: ml_dtypes (~2 s to import) is loaded only when a file actually holds such a tensor.
_ML_FLOAT_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def dtype_from_name(name: str) -> np.dtype:
    """NumPy dtype for a NumPy or ml_dtypes name (``"float32"``, ``"bfloat16"``...)."""
    if name in _ML_FLOAT_NAMES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def is_floating_dtype(dtype: np.dtype) -> bool:
    """True for NumPy floats and the ml_dtypes bf16/fp8 types (which NumPy calls void-like)."""
    return dtype.kind == "f" or is_ml_float(dtype)


def is_ml_float(dtype: np.dtype) -> bool:
    """An ml_dtypes float (bf16, fp8): such a dtype exists only once ml_dtypes is loaded."""
    return dtype.kind == "V" and dtype.names is None and dtype.name in _ML_FLOAT_NAMES
