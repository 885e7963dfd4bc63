"""The exact minimum of a number format's quantization error over its scale, by exhaustion:
the reference the format MSE search is tested against.

At scale ``s`` an element ``x`` becomes ``s · v`` with ``v`` the grid value nearest ``x / s``;
the code changes only where ``x / s`` crosses a midpoint ``m`` of the grid, at the
*breakpoints* ``s = x / m``. Between consecutive breakpoints every code is fixed and the error
is the quadratic ``Σx² − 2s·Σxv + s²·Σv²``, least at ``Σxv / Σv²`` clipped to the interval.
Sweeping every breakpoint of the range from the largest scale down, one element's code moving
one step at each, visits every interval: the least interval minimum is the infimum of the
error over every real scale of the range -- a fortiori a lower bound for every float32 scale.
Cost ``O(N · levels · log)``: small tensors only.

:func:`true_errors` is the other half: the error at given float32 scales as the runtimes
compute it, from ``ml_dtypes``' own casts (``float32(x / s)`` cast to the element type,
saturated, times ``s`` in float32), independent of the engine's loops.
"""

from __future__ import annotations

import ml_dtypes
import numba
import numpy as np

#: The ml_dtypes type of each element format the search serves.
DTYPES = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2,
          "fp8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "fp8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
          "fp6_e2m3": ml_dtypes.float6_e2m3fn, "fp6_e3m2": ml_dtypes.float6_e3m2fn,
          "fp4_e2m1": ml_dtypes.float4_e2m1fn}


def grid(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, midpoints) of a format's grid, from ml_dtypes' bit patterns."""
    dt = DTYPES[name]
    bits = int(name[2])  # fp8 / fp6 / fp4: the low bits of a byte
    pats = np.arange(1 << bits, dtype=np.uint8).view(dt).astype(np.float64)
    vals = np.unique(pats[np.isfinite(pats)] + 0.0)
    return vals, (vals[:-1] + vals[1:]) / 2


@numba.njit(cache=True)
def _sweep(x, vals, mids, s_lo, s_hi):
    n = x.size
    count = 0
    for i in range(n):
        for k in range(mids.size):
            if (x[i] > 0) == (mids[k] > 0) and x[i] != 0:
                b = x[i] / mids[k]
                if s_lo < b < s_hi:
                    count += 1
    bps = np.empty(count)
    who = np.empty(count, np.int64)
    j = 0
    for i in range(n):
        for k in range(mids.size):
            if (x[i] > 0) == (mids[k] > 0) and x[i] != 0:
                b = x[i] / mids[k]
                if s_lo < b < s_hi:
                    bps[j] = b
                    who[j] = i
                    j += 1
    order = np.argsort(-bps)
    code = np.searchsorted(mids, x / s_hi)  # nearest value at s_hi (a tie: the lower)
    sxx = 0.0
    sxv = 0.0
    svv = 0.0
    for i in range(n):
        v = vals[code[i]]
        sxx += x[i] * x[i]
        sxv += x[i] * v
        svv += v * v
    best = np.inf
    best_s = s_hi
    upper = s_hi
    for e in range(count + 1):
        lower = s_lo if e == count else bps[order[e]]
        s = min(max(sxv / svv, lower), upper) if svv > 0 else upper
        err = sxx - 2 * s * sxv + s * s * svv
        if err < best:
            best = err
            best_s = s
        if e == count:
            break
        i = who[order[e]]
        old = vals[code[i]]
        code[i] += 1 if x[i] > 0 else -1
        new = vals[code[i]]
        sxv += x[i] * (new - old)
        svv += new * new - old * old
        upper = lower
    return max(best, 0.0), best_s


def exhaustive_minimum(x: np.ndarray, name: str, s_lo: float, s_hi: float
                       ) -> tuple[float, float]:
    """(the infimum of the error over every real scale in ``[s_lo, s_hi]``, its scale)."""
    vals, mids = grid(name)
    return _sweep(np.asarray(x, np.float64).ravel(), vals, mids, s_lo, s_hi)


def true_errors(x: np.ndarray, scales: np.ndarray, name: str, saturate: bool = True,
                chunk: int = 1 << 22) -> np.ndarray:
    """The total squared error of ``x`` at each float32 scale, by ml_dtypes' casts (module
    doc); inf where a non-saturating cast overflows."""
    dt = DTYPES[name]
    mx = np.float32(ml_dtypes.finfo(dt).max)
    xf = np.asarray(x, np.float32).ravel()
    s = np.asarray(scales, np.float32).ravel()
    out = np.empty(s.size)
    step = max(1, chunk // max(xf.size, 1))
    for a in range(0, s.size, step):
        sc = s[a:a + step, None]
        t = (xf[None, :] / sc).astype(np.float32)
        if saturate:
            t = np.clip(t, -mx, mx)
        with np.errstate(over="ignore", invalid="ignore"):
            v = t.astype(dt).astype(np.float32)
            xhat = (v * sc).astype(np.float32)
            d = xf[None, :].astype(np.float64) - xhat.astype(np.float64)
            e = np.sum(d * d, axis=1)
        out[a:a + step] = np.where(np.isfinite(e), e, np.inf)
    return out
