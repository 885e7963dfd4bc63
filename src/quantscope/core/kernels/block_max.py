"""Each block's largest finite magnitude (or its finite minimum and maximum), in one compiled
pass on every core.

The block formats take their scales from each block's ``max |x|``; NumPy's reductions along a
last axis of 16 or 32 values spend most of their time starting and ending rows (three passes
-- finite test, minimum, maximum -- took 15 times a copy of the tensor). Here each row of
blocks is one loop over its values.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.parallel import parallel, shares
from quantscope.core.kernels.read_only import read_only


@njit(nogil=True, error_model="numpy")
def _rows_block_max(x2d, block, out):
    """``out[r, b]``: the largest finite ``|x|`` of ``x2d[r, b·block:(b+1)·block]`` (0 when
    the block holds no finite value)."""
    n = x2d.shape[1]
    for r in range(x2d.shape[0]):
        row = x2d[r]
        for b in range(out.shape[1]):
            top = np.float32(0.0)
            for i in range(b * block, min((b + 1) * block, n)):
                a = abs(row[i])
                if a > top and a < np.inf:  # NaN and inf fail one of the two tests
                    top = a
            out[r, b] = top


def block_abs_max(x2d: np.ndarray, block: int) -> np.ndarray:
    """Per row of float32 ``x2d`` and block of ``block`` values along it (the last one may be
    shorter): the largest finite ``|x|``, float32, shape ``(rows, ceil(n / block))``."""
    rows, n = x2d.shape
    out = np.empty((rows, -(-n // block)), np.float32)
    if rows == 0 or out.shape[1] == 0:
        return out
    x2d = read_only(np.ascontiguousarray(x2d, np.float32))  # one loop for either kind

    def share(lo: int, hi: int) -> None:
        _rows_block_max(x2d[lo:hi], block, out[lo:hi])

    k = min(len(shares(x2d.size)), rows)  # threads by elements, ranges by rows
    parallel(share, [(j * rows // k, (j + 1) * rows // k) for j in range(k)])
    return out


@njit(nogil=True, error_model="numpy")
def _rows_block_min_max(x2d, block, lo, hi, bad):
    """``lo[r, b]`` / ``hi[r, b]``: the finite minimum and maximum of block ``b`` of row ``r``
    (0 and 0 when it holds no finite value); ``bad[r]``: the row's non-finite values."""
    n = x2d.shape[1]
    for r in range(x2d.shape[0]):
        row = x2d[r]
        n_bad = np.int64(0)
        for b in range(lo.shape[1]):
            a = np.float32(np.inf)
            z = np.float32(-np.inf)
            for i in range(b * block, min((b + 1) * block, n)):
                v = row[i]
                fin = v - v == 0
                n_bad += np.int64(not fin)
                a = min(a, v) if fin else a
                z = max(z, v) if fin else z
            empty = a > z
            lo[r, b] = 0.0 if empty else a
            hi[r, b] = 0.0 if empty else z
        bad[r] = n_bad


def block_min_max(x2d: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Per row of float32 ``x2d`` and block of ``block`` values along it: the finite minimum
    and maximum (float64, ``(rows, ceil(n / block))``; 0 and 0 for a block with no finite
    value) and the count of non-finite values -- what
    :func:`~quantscope.core.schemes.qparams.unit_min_max` gives for groups along the last
    axis, whose NumPy reductions over rows of 32 values took 10 ns per element."""
    rows, n = x2d.shape
    lo = np.zeros((rows, -(-n // block)))
    hi = np.zeros_like(lo)
    bad = np.zeros(rows, np.int64)
    if rows == 0 or lo.shape[1] == 0:
        return lo, hi, 0
    x2d = read_only(np.ascontiguousarray(x2d, np.float32))  # one loop for either kind

    def share(a: int, b: int) -> None:
        _rows_block_min_max(x2d[a:b], block, lo[a:b], hi[a:b], bad[a:b])

    k = min(len(shares(x2d.size)), rows)
    parallel(share, [(j * rows // k, (j + 1) * rows // k) for j in range(k)])
    return lo, hi, int(bad.sum())
