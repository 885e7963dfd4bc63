"""Strict JSON for engine results: NumPy scalars and arrays become plain numbers and lists, and
non-finite floats (an exact quantization has SQNR = inf) become the strings "inf", "-inf" and
"nan", because ``Infinity`` is not JSON and browsers' ``JSON.parse`` rejects it."""

from __future__ import annotations

import json
import math

import numpy as np


def to_jsonable(obj):
    """Return ``obj`` with every NumPy value and non-finite float made strict-JSON safe."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        f = float(obj)
        if math.isfinite(f):
            return f
        return "nan" if math.isnan(f) else ("inf" if f > 0 else "-inf")
    return obj


def dumps(obj, **kwargs) -> str:
    """``json.dumps`` of :func:`to_jsonable` (strict: raises rather than write ``Infinity``)."""
    return json.dumps(to_jsonable(obj), allow_nan=False, **kwargs)
