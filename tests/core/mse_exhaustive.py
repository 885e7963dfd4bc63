"""The exact minimum of the quantization error over every scale and every zero point: the
reference the MSE-optimal search is tested against.

For codes ``c = clamp(rint(x / s) + z, qmin, qmax)`` the error ``E(s, z) = Σ (x - s·(c - z))²``
depends on ``s`` through ``m_i = rint(x_i / s)`` only, which changes where ``x_i / s`` crosses
a half-integer: at the *breakpoints* ``s = |x_i| / (k + 1/2)``. Between two consecutive
breakpoints every ``m_i`` is fixed, for every zero point, and ``E`` is the quadratic
``Σx² − 2 s Σ x v + s² Σ v²`` with ``v_i = clamp(m_i + z, qmin, qmax) − z``: its least value
on the closed interval is at ``Σxv / Σv²`` clipped to it. At a breakpoint itself the rounding
rule picks one side's codes, so the error there is one side's limit. Sweeping the breakpoints
from the largest scale down, one ``m_i`` moving by one at each, and keeping ``Σxv`` and
``Σv²`` for every zero point, visits every interval: the least of the interval minima is the
infimum of ``E`` over every real scale in the range and every zero point -- a fortiori over
every float32 scale. Cost ``O(N · levels · zero points)``: small tensors only."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _events(x, s_lo, s_hi, kmax):
    """The breakpoints ``|x_i| / (k + 1/2)`` inside ``(s_lo, s_hi)`` for ``k`` up to ``kmax``,
    largest first, and the element of each. For one ``k`` they fall in the order of ``|x|``:
    the events are a merge of ``kmax + 1`` runs, each in order once ``|x|`` is sorted (a heap
    of one head per run; sorting every event took most of the sweep's time). Equal
    breakpoints may come in any order: at a breakpoint both codes give the same error."""
    n = x.size
    a = np.abs(x)
    idx = np.argsort(-a)
    srt = a[idx]
    runs = kmax + 1
    pos = np.empty(runs, np.int64)
    end = np.empty(runs, np.int64)
    count = 0
    for k in range(runs):
        j = 0
        while j < n and not srt[j] / (k + 0.5) < s_hi:
            j += 1
        e = j
        while e < n and srt[e] / (k + 0.5) > s_lo:
            e += 1
        pos[k], end[k] = j, e
        count += e - j
    bps = np.empty(count)
    who = np.empty(count, np.int64)
    heap_b = np.empty(runs)  # a max-heap of each run's next breakpoint
    heap_k = np.empty(runs, np.int64)
    size = 0
    for k in range(runs):
        if pos[k] < end[k]:
            b = srt[pos[k]] / (k + 0.5)
            c = size
            size += 1
            while c > 0 and heap_b[(c - 1) // 2] < b:
                heap_b[c], heap_k[c] = heap_b[(c - 1) // 2], heap_k[(c - 1) // 2]
                c = (c - 1) // 2
            heap_b[c], heap_k[c] = b, k
    for e in range(count):
        k = heap_k[0]
        bps[e] = heap_b[0]
        who[e] = idx[pos[k]]
        pos[k] += 1
        if pos[k] < end[k]:  # the run's next breakpoint takes the top's place
            b = srt[pos[k]] / (k + 0.5)
        else:  # the run is spent: the last entry takes the top's place
            size -= 1
            b, k = heap_b[size], heap_k[size]
        c = 0
        while True:
            child = 2 * c + 1
            if child >= size:
                break
            if child + 1 < size and heap_b[child + 1] > heap_b[child]:
                child += 1
            if heap_b[child] <= b:
                break
            heap_b[c], heap_k[c] = heap_b[child], heap_k[child]
            c = child
        if size > 0:
            heap_b[c], heap_k[c] = b, k
    return bps, who


@numba.njit(cache=True)
def _sweep(x, s_lo, s_hi, qmin, qmax, zs):
    n = x.size
    levels = qmax - qmin
    kmax = levels + 1  # beyond it every zero point clips the element: its error is fixed
    bps, who = _events(x, s_lo, s_hi, kmax)
    count = bps.size
    nz = zs.size
    m = np.empty(n, np.int64)
    for i in range(n):  # codes at s_hi, clamped to kmax (a larger |m| clips alike)
        r = np.rint(x[i] / s_hi)
        m[i] = int(max(-kmax - 1, min(kmax + 1, r)))
    sxx = 0.0
    for i in range(n):
        sxx += x[i] * x[i]
    sxv = np.zeros(nz)
    svv = np.zeros(nz)
    for t in range(nz):
        z = zs[t]
        for i in range(n):
            v = min(max(m[i] + z, qmin), qmax) - z
            sxv[t] += x[i] * v
            svv[t] += v * v
    best = np.inf
    best_s = s_hi
    best_z = zs[0]
    upper = s_hi
    for e in range(count + 1):
        lower = s_lo if e == count else bps[e]
        for t in range(nz):  # the interval [lower, upper] with the current codes
            if svv[t] > 0:
                s = min(max(sxv[t] / svv[t], lower), upper)
            else:
                s = upper
            err = sxx - 2 * s * sxv[t] + s * s * svv[t]
            if err < best:
                best = err
                best_s = s
                best_z = zs[t]
        if e == count:
            break
        i = who[e]
        old = m[i]
        new = old + (1 if x[i] > 0 else -1)  # a smaller scale: one step further out
        if abs(new) > kmax + 1:
            new = old
        for t in range(nz):
            z = zs[t]
            v0 = min(max(old + z, qmin), qmax) - z
            v1 = min(max(new + z, qmin), qmax) - z
            sxv[t] += x[i] * (v1 - v0)
            svv[t] += v1 * v1 - v0 * v0
        m[i] = new
        upper = lower
    return best, best_s, best_z


def exhaustive_minimum(x: np.ndarray, *, qmin: int, qmax: int, symmetric: bool,
                       s_lo: float, s_hi: float) -> tuple[float, float, int]:
    """(least total squared error, its scale, its zero point) over every real scale in
    ``[s_lo, s_hi]`` and every zero point in ``[qmin, qmax]`` (the symmetric zero point
    only: 0, or the middle code for unsigned codes) of the finite values of ``x``."""
    v = np.asarray(x, np.float64).ravel()
    v = v[np.isfinite(v)]
    if symmetric:
        zs = np.array([0 if qmin < 0 else (qmin + qmax + 1) // 2], np.int64)
    else:
        zs = np.arange(qmin, qmax + 1, dtype=np.int64)
    best, s, z = _sweep(v, float(s_lo), float(s_hi), int(qmin), int(qmax), zs)
    return float(best), float(s), int(z)
