"""Strict JSON for engine results: NumPy scalars and arrays become plain numbers and lists, and
non-finite floats (an exact quantization has SQNR = inf) become ``null`` with a flag.

``Infinity`` is not JSON (browsers' ``JSON.parse`` and ``jq`` reject it), and a string such as
``"inf"`` in a field that is otherwise a number breaks every consumer that does arithmetic on
the column. So a number stays a number or is ``null``, and the object that holds it gains a
``"nonfinite"`` object naming the field and what it was: ``{"sqnr_db": null, "nonfinite":
{"sqnr_db": "inf"}}``; an element of a list is named with its index (``"x[3]"``).
"""

from __future__ import annotations

import json
import math

import numpy as np

#: The key of the flags object added beside non-finite numbers.
NONFINITE = "nonfinite"


def _kind(f: float) -> str:
    return "nan" if math.isnan(f) else ("inf" if f > 0 else "-inf")


def _convert(obj, flags: dict[str, str], key: str):
    """``obj`` made strict-JSON safe; a non-finite number under ``key`` is recorded in
    ``flags`` (the enclosing object's) and becomes None."""
    if isinstance(obj, dict):
        return to_jsonable(obj)
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, list | tuple):
        return [_convert(v, flags, f"{key}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        f = float(obj)
        if math.isfinite(f):
            return f
        flags[key] = _kind(f)
        return None
    return obj


def to_jsonable(obj):
    """Return ``obj`` with every NumPy value made plain and every non-finite float ``null``,
    flagged in its object's ``"nonfinite"`` (see the module docstring)."""
    if isinstance(obj, dict):
        flags: dict[str, str] = {}
        out = {str(k): _convert(v, flags, str(k)) for k, v in obj.items() if k != NONFINITE}
        if flags:
            out[NONFINITE] = flags
        return out
    top: dict[str, str] = {}
    value = _convert(obj, top, "")
    if top:  # a bare non-finite number or list has no object to carry its flag
        return {"value": value, NONFINITE: top}
    return value


def dumps(obj, **kwargs) -> str:
    """``json.dumps`` of :func:`to_jsonable` (strict: raises rather than write ``Infinity``)."""
    return json.dumps(to_jsonable(obj), allow_nan=False, **kwargs)
