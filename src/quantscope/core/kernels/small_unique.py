"""The sorted distinct values of a short float64 array, inside compiled loops.

The MSE searches take the distinct values of a handful of candidate scales (a grid of five
and two or three ends). ``np.unique`` in a compiled loop made Numba compile its whole
quicksort and its unique for it: on a first run about half a minute of compiling on two idle
cores (a minute and more when they are shared), before the trade-off curve's optimum could
be drawn, for eight values. For fewer than 16 values Numba's quicksort is exactly this
insertion sort with the same comparison (NaN after every number), and its unique keeps the
first of each run of equal values as this does: the same values in the same order, bit for
bit (longer arrays differ at most in which of ``-0.0`` and ``+0.0`` comes first: scales are
positive).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit


@njit(nogil=True, error_model="numpy", inline="always")
def _before(a, b) -> bool:
    """Numba's ``lt_floats``: ``a < b``, and every number before NaN."""
    return a < b or (b != b and a == a)


@njit(nogil=True, error_model="numpy")
def small_unique(a):
    """``np.unique(a)`` of a 1-D float64 array (see the module docstring)."""
    b = a.copy()
    for i in range(1, b.size):
        v = b[i]
        j = i
        while j > 0 and _before(v, b[j - 1]):
            b[j] = b[j - 1]
            j -= 1
        b[j] = v
    out = np.empty(b.size)
    m = 0
    for i in range(b.size):
        if i == 0 or b[i] != b[i - 1]:
            out[m] = b[i]
            m += 1
    return out[:m].copy()
