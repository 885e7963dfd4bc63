"""Output columns that every compiled loop sees in one memory layout.

Numba compiles a loop once for each combination of its argument types, and an array's memory
layout is part of its type: C-contiguous, F-contiguous or neither ('A'). The reports' loops
write one row of statistics per unit into column-major outputs (each statistic of all units
one contiguous column, read as it is by the report), and such an array, or the slice of its
rows one thread writes, is C-contiguous with one unit, F-contiguous as a whole and neither as
a part: one loop compiled three times on a machine's first run (20 s of CPU each for the
number formats' direct pass), where one serves. :func:`unit_columns` lays the columns out so
that the array and every non-empty slice of its rows is strided, never contiguous.
"""

from __future__ import annotations

import numpy as np


def unit_columns(n: int, k: int, dtype=np.float64, *, zeros: bool = True) -> np.ndarray:
    """An ``n × k`` array (zeros, or left uninitialised with ``zeros`` False) whose columns are
    each contiguous, one element longer than the rows, so that neither the array nor any
    non-empty slice of its rows is contiguous: Numba types all of them as layout 'A' (an empty
    slice is contiguous: a loop is not handed one)."""
    make = np.zeros if zeros else np.empty
    return make((k, n + 1), dtype).T[:n]
