"""The MSE-optimal shared exponent of every block of an OCP MX format (``method="mse"``).

An MX block's scale is an E8M0 value, a power of two ``2^e`` with ``-127 <= e <= 127``: the
search is over those representable scales, exhaustively, with the engine's own arithmetic
(``float32(x / 2^e)`` cast to the element type, saturated unless a non-saturating cast is
asked for, times ``2^e`` in float32), so each block's exponent is the exact minimiser of its
total squared error -- not an approximation of one. Few exponents need trying:

* above the smallest ``e`` whose grid reaches the block's amax (``2^e · max_finite >=
  amax``), doubling the scale never lowers the error (within the data's range the grid of
  ``2s`` is part of the grid of ``s``), so that ``e`` is the largest candidate: the
  specification's exponent or the one above it;
* below, an exponent is tried only while the clipping alone of the elements beyond
  ``2^e · max_finite`` costs less than the best error found (each costs at least its distance
  to the grid's end); the first that does not ends the search, for every lower one too.

Ties keep the specification's exponent (``floor(log2 amax) - emax_elem``), so a block the
rule already quantizes best is left as it is.
"""

from __future__ import annotations

import math

import numpy as np

from quantscope.core.formats.elements import ElementType, cast_one
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.read_only import read_only

_jit = njit(nogil=True, error_model="numpy")


@_jit
def _block_error(x, a, b, s, kind, mbits, emin, step, mx, overflow, signed_zero, saturate,
                 lut_mid, lut_val):
    """Total squared error of ``x[a:b]`` (finite elements) at the power-of-two scale ``s``,
    inf where a non-saturating cast overflows."""
    sf = np.float32(s)
    err = 0.0
    for i in range(a, b):
        xv = x[i]
        if not np.isfinite(xv):
            continue
        r = cast_one(np.float32(xv / sf), kind, mbits, emin, step, mx, overflow, signed_zero,
                     saturate, lut_mid, lut_val)
        if not np.isfinite(r):
            return np.inf
        d = np.float64(xv) - np.float64(np.float32(np.float32(r) * sf))
        err += d * d
    return err


@_jit
def _clip_cost(x, a, b, t):
    """Σ (|x| − t)² over the finite elements of ``x[a:b]`` beyond ``±t``."""
    total = 0.0
    for i in range(a, b):
        v = abs(np.float64(x[i]))
        if v > t and np.isfinite(v):
            total += (v - t) * (v - t)
    return total


@_jit
def mse_exponents(x2d, block, e_spec, kind, mbits, emin, step, mx, overflow, signed_zero,
                  saturate, lut_mid, lut_val, out_e, out_err):
    """Per block of ``block`` elements along each row of ``x2d``: the exponent with the least
    error (module doc) into ``out_e`` and that error into ``out_err``; ``e_spec`` holds the
    specification's exponents (rows x blocks)."""
    n = x2d.shape[1]
    for r in range(x2d.shape[0]):
        row = x2d[r]
        for k in range(e_spec.shape[1]):
            a = k * block
            b = min(a + block, n)
            e0 = e_spec[r, k]
            best_e = e0
            best = _block_error(row, a, b, math.ldexp(1.0, e0), kind, mbits, emin, step, mx,
                                overflow, signed_zero, saturate, lut_mid, lut_val)
            amax = 0.0
            for i in range(a, b):
                v = abs(np.float64(row[i]))
                if v > amax and np.isfinite(v):
                    amax = v
            top = e0
            while top < 127 and math.ldexp(mx, top) < amax:
                top += 1  # the smallest exponent whose grid reaches the amax, at most
            e = top
            while e >= -127:
                if e != e0:
                    s = math.ldexp(1.0, e)
                    if e < top and _clip_cost(row, a, b, s * mx) >= best:
                        break  # this one, and every lower one, clips more than that
                    err = _block_error(row, a, b, s, kind, mbits, emin, step, mx, overflow,
                                       signed_zero, saturate, lut_mid, lut_val)
                    if err < best:
                        best, best_e = err, e
                    elif e < top and not err < np.inf:
                        break  # a non-saturating cast overflows here, and lower too
                e -= 1
            out_e[r, k] = best_e
            out_err[r, k] = best


def mx_mse_exponents(xf: np.ndarray, element: ElementType, block: int, e_spec: np.ndarray,
                     saturate: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The MSE-optimal E8M0 exponents of ``xf``'s blocks along its last axis (the shape of
    ``e_spec``, the specification's exponents) and each block's error (module doc)."""
    n = xf.shape[-1] if xf.ndim else 1
    # one loop for either kind of tensor (a read-only view is no copy)
    x2d = read_only(np.ascontiguousarray(xf, np.float32).reshape(-1, n))
    spec = np.ascontiguousarray(e_spec, np.int64).reshape(x2d.shape[0], -1)
    out_e = np.empty(spec.shape, np.int64)
    out_err = np.empty(spec.shape)
    kind, mbits, emin, step, mx, overflow, signed_zero, lut_mid, lut_val = element.params()
    mse_exponents(x2d, block, spec, kind, mbits, emin, step, mx, overflow, signed_zero,
                  bool(saturate), lut_mid, lut_val, out_e, out_err)
    return out_e.reshape(e_spec.shape).astype(np.int32), out_err.reshape(e_spec.shape)
