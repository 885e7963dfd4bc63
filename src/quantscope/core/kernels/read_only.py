"""One compiled loop for a tensor whether it is writable or not.

Numba compiles a loop once for each combination of its argument types, and a read-only array
(``flags.writeable`` false: a tensor the window opened, a memory-mapped file) is a type of its
own. A loop that only reads its tensor was therefore compiled twice on a first run, once for
the API's writable arrays and once for the window's read-only ones: 15-30 s of CPU each for
the number formats' direct pass. Its callers hand it :func:`read_only`'s view instead, so both
kinds of tensor reach the one loop compiled for read-only arrays (the same machine code: a
read-only array differs only in what Numba lets a loop write).
"""

from __future__ import annotations

import numpy as np


def read_only(a: np.ndarray) -> np.ndarray:
    """``a`` itself when it is read-only, else a read-only view of it (no copy)."""
    if not a.flags.writeable:
        return a
    view = a.view()
    view.flags.writeable = False
    return view
