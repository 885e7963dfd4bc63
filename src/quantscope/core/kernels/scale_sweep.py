"""The exact least quantization error over an interval of scales: a compiled sweep.

For codes ``c = clamp(rint(x / s) + z, qmin, qmax)`` the error ``E(s, z) = Σ (x − s·(c − z))²``
depends on the scale only through ``m_i = rint(x_i / s)``, which changes where ``x_i / s``
crosses a half-integer, at the breakpoints ``s = |x_i| / (k + 1/2)``. Between two consecutive
breakpoints every ``m_i`` is fixed and ``E`` is, for each zero point, the quadratic
``Σx² − 2·s·Σxv + s²·Σv²`` with ``v_i = clamp(m_i + z, qmin, qmax) − z``: its least value on
the closed interval is at ``Σxv / Σv²`` clipped into it. At a breakpoint itself the rounding
rule gives one side's codes, so ``E`` there is one side's limit, and the least of the
intervals' minima is the infimum of ``E`` over every scale of the range -- not a sample of it.

The sweep starts at the top of the range, with the sums for every zero point formed from a
histogram of the ``m_i`` (``O(n + codes · zero points)``), then moves down through the
breakpoints in the range, one ``m_i`` stepping outward at each (``O(zero points)``). Rounding
at the engine's float32 arithmetic moves a breakpoint by an ulp at most, which changes the
minimum by far less than the 10^-4 dB the searches are judged by.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit

_jit = njit(nogil=True, error_model="numpy")


@_jit
def _v(m, z, qmin, qmax):
    return min(max(m + z, qmin), qmax) - z


@_jit
def window_minimum(x, s_lo, s_hi, qmin, qmax, z_lo, z_hi):
    """``(least error, its scale, its zero point)`` of the finite float32 values ``x`` over
    scales in ``[s_lo, s_hi]`` and zero points in ``[z_lo, z_hi]`` (see the module doc)."""
    kmax = qmax - qmin + 1  # |m| beyond it clips under every zero point of the range
    n = x.size
    nz = z_hi - z_lo + 1
    # the histogram of m at s_hi: counts and sums of x per m in [-kmax - 1, kmax + 1]
    width = 2 * kmax + 3
    cnt = np.zeros(width)
    sx = np.zeros(width)
    sxx = 0.0
    events = 0
    code = np.zeros(n, np.int64)
    for i in range(n):
        xi = np.float64(x[i])
        if not np.isfinite(xi):
            continue
        sxx += xi * xi
        r = np.rint(xi / s_hi)
        m = int(max(-kmax - 1.0, min(kmax + 1.0, r)))
        code[i] = m
        cnt[m + kmax + 1] += 1.0
        sx[m + kmax + 1] += xi
        a = abs(xi)
        if a > 0.0:  # breakpoints a / (k + 1/2) strictly inside (s_lo, s_hi)
            k0 = max(int(np.floor(a / s_hi - 0.5)), 0)
            k1 = min(int(np.ceil(a / s_lo - 0.5)), kmax)
            for k in range(k0, k1 + 1):
                b = a / (k + 0.5)
                if s_lo < b < s_hi:
                    events += 1
    bps = np.empty(events)
    who = np.empty(events, np.int64)
    e = 0
    for i in range(n):
        xi = np.float64(x[i])
        if not np.isfinite(xi):
            continue
        a = abs(xi)
        if a > 0.0:
            k0 = max(int(np.floor(a / s_hi - 0.5)), 0)
            k1 = min(int(np.ceil(a / s_lo - 0.5)), kmax)
            for k in range(k0, k1 + 1):
                b = a / (k + 0.5)
                if s_lo < b < s_hi:
                    bps[e] = b
                    who[e] = i
                    e += 1
    order = np.argsort(-bps)
    sxv = np.zeros(nz)
    svv = np.zeros(nz)
    for t in range(nz):
        z = z_lo + t
        for j in range(width):
            if cnt[j] > 0.0:
                v = _v(j - kmax - 1, z, qmin, qmax)
                sxv[t] += sx[j] * v
                svv[t] += cnt[j] * v * v
    best = np.inf
    best_s = s_hi
    best_z = z_lo
    upper = s_hi
    for q in range(events + 1):
        lower = s_lo if q == events else bps[order[q]]
        for t in range(nz):
            s = upper
            if svv[t] > 0.0:
                s = min(max(sxv[t] / svv[t], lower), upper)
            err = sxx - 2.0 * s * sxv[t] + s * s * svv[t]
            if err < best:
                best = err
                best_s = s
                best_z = z_lo + t
        if q == events:
            break
        i = who[order[q]]
        xi = np.float64(x[i])
        m_old = code[i]
        # crossing the breakpoint downward moves m one step outward (the tie itself is one
        # side's limit, see the module doc)
        m_new = m_old + (1 if xi > 0.0 else -1)
        if abs(m_new) > kmax + 1:
            m_new = m_old
        code[i] = m_new
        for t in range(nz):
            z = z_lo + t
            v0 = _v(m_old, z, qmin, qmax)
            v1 = _v(m_new, z, qmin, qmax)
            sxv[t] += xi * (v1 - v0)
            svv[t] += v1 * v1 - v0 * v0
        upper = lower
    return max(best, 0.0), best_s, best_z
