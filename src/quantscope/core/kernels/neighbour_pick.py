"""Which of a walked row's optimal float32 scale and its two float32 neighbours the engine's
exact report ranks least, decided from the scale's runs where it can be proven: compiled loops
for :mod:`quantscope.core.kernels.mse_bound`.

The search returns a float32 scale ``s1`` and zero point ``z``; the report's error is the
engine's, whose dequantized values are float32 (``x̂ = f32(f32(c − z)·s)``), so the float32
neighbours ``s0 < s1 < s2`` often err a little less (their ``x̂`` round otherwise: two rows in
three on an LLM weight, by ~1e-7 of the error), and an element beside a rounding tie may take
another code under the engine's arithmetic. :func:`quantscope.core.stats.mse_search._engine_pick`
evaluates all three with the engine and keeps the least (the search's own scale unless a
neighbour is strictly better): three walks of the row. Here the same choice is made from the
runs of ``s1`` without a walk, and proven, or left to those walks (NaN):

* **codes.** Let ``y = x/s1``. Each engine arithmetic computes ``x/s_j`` (plus ``z`` for the
  fused ones) within ``2^-24·(5.0003·|y| + |z|)`` (a float32 quotient ``2^-24|y|``; the float32
  reciprocal and product ``2^-23|y|``; the fused zero point's float32 sum another
  ``2^-24·(|y| + |z|)``), and ``x/s_j`` is within ``2^-23·|y|`` of ``y`` (one float32 step of
  the scale). Rounding half to even and half away agree off ties. So an element with
  ``dist(y, ℤ + 1/2) > KAPPA·(|y| + |z| + 1)`` (``KAPPA = 2^-21 = 8·2^-24``; the float64
  ``x·(1/s1)`` that gives ``y`` here is off by ``2^-52·|y|``) takes the code ``rint(y) + z``,
  then clamped, at all three scales under every arithmetic and rounding the presets use. The
  values are sorted and codes monotone: a run's elements are farthest from its ties inside,
  so only each run's first and last element are checked (``+ 1``: the run's other ``|y|``).
* **differences.** With the codes equal, ``T_j − T_1 = Σ (x̂_1 − x̂_j)(2x − x̂_1 − x̂_j)``
  (``T_j`` the exact sum of the squared errors), and ``x̂`` is one value per run: a sum over
  runs, each run's ``Σx`` from the unit's double-double prefix sums, with a bound of its
  roundoff (:func:`neighbour_pick`).
* **the report's sums.** The engine walks a row of ``n`` elements (the rows it walks:
  :data:`quantscope.core.stats.sorted_stats.WALK_PER_LEVEL`) and adds its squares in lanes
  and chunks: each term passes fewer than ``n + 8`` roundings, each square two, so its sum
  ``E_j`` is within ``(n + 8)·2^-52·T_j`` of ``T_j``.

A neighbour is ranked below or above ``s1`` only when ``T_j − T_1`` is farther from 0 than all
these roundoffs together (and the two neighbours against each other likewise): then the
engine's own comparison of its three sums cannot come out otherwise, and the pick is theirs.
On the bench's 4096x4096 weight at 8 bits 3,943 of 4,096 channels are decided so asymmetric
(the fused arithmetics' margin grows with the zero point), 4,094 symmetric.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit

_jit = njit(nogil=True, error_model="numpy")

#: How far (times ``|y| + |z| + 1``) an element must be from a rounding tie of the search's
#: scale for its code to be the same at the neighbours under every engine arithmetic.
KAPPA = 2.0**-21
#: Unit roundoff of float64.
_U = 2.0**-53
_TINY32 = float(np.finfo(np.float32).tiny)


@_jit
def _clear_of_ties(first, last, m, k, inv, zf):
    """Whether every element of a sorted run from ``first`` to ``last`` (code ``m`` at
    ``inv = 1/s``, clamped to ``[-k, k]``) is more than :data:`KAPPA` (times ``|y| + |z| + 1``)
    from the ties either side of its code: its first element from ``m − 1/2`` and its last
    from ``m + 1/2`` (a clamped run, only from the tie towards the range)."""
    if m > -k:
        y = first * inv
        if not y - (m - 0.5) > KAPPA * (abs(y) + zf + 1.0):
            return False
    if m < k:
        y = last * inv
        if not (m + 0.5) - y > KAPPA * (abs(y) + zf + 1.0):
            return False
    return True


@_jit
def neighbour_pick(x, a, b, pre, pos, code, i, i_end, s, z, qmin, qmax):
    """Of sorted ``x[a:b]``'s float32 scale ``s`` and its float32 neighbours at zero point
    ``z`` (codes ``[qmin, qmax]``), the one the engine's report ranks least, as an offset:
    ``-1.0`` (the one below), ``0.0`` (``s``) or ``1.0`` (above) -- ``s`` unless a neighbour
    is strictly less, the lesser neighbour if both are; NaN where that is not proven (the
    module doc). ``pre``: the unit's prefix sums from ``a``
    (:func:`quantscope.core.kernels.mse_bound.unit_prefix`); ``pos``, ``code`` entries
    ``i .. i_end``: the runs of ``s`` (:func:`quantscope.core.kernels.mse_bound.codes_at`)."""
    n = b - a
    if n <= 0 or not s > _TINY32:
        return np.nan  # below the least normal float32 the neighbour is clamped to it
    s32 = np.float32(s)
    s0 = np.float64(np.nextafter(s32, np.float32(0.0)))
    s2 = np.float64(np.nextafter(s32, np.float32(np.inf)))
    if not s2 < np.inf:
        return np.nan
    inv = 1.0 / s
    k = qmax - qmin + 1
    zf = abs(np.float64(z))
    x_row = max(abs(np.float64(x[a])), abs(np.float64(x[b - 1])))
    # a prefix difference's roundoff beyond 3u·Σ|x|: the low parts' own, 4u²n³ times the
    # largest |x| at most
    grow = 16.0 * n * n * n * _U * _U
    t1 = 0.0  # T_1 from the runs' sums
    d0 = 0.0  # T_0 − T_1 and T_2 − T_1
    d2 = 0.0
    mag = 0.0  # Σ n_run·(max |x| + |x̂_1|)², which bounds every term's magnitude
    h_top = 0.0
    f0, f2 = np.float32(s0), np.float32(s2)
    # the prefix sums at the run's start, carried from the last run's end
    u = pos[i] - a if i < i_end else 0
    g0, g1, g2, g3 = pre[u, 0], pre[u, 1], pre[u, 2], pre[u, 3]
    for t in range(i, i_end):
        p = pos[t]
        q = pos[t + 1] if t + 1 < i_end else b
        m = code[t]
        first, last = np.float64(x[p]), np.float64(x[q - 1])
        if not _clear_of_ties(first, last, m, k, inv, zf):
            return np.nan
        w = np.float32(min(max(m + z, qmin), qmax) - z)
        h1 = np.float64(np.float32(w * s32))
        h0 = np.float64(np.float32(w * f0))
        h2 = np.float64(np.float32(w * f2))
        cnt = np.float64(q - p)
        v = q - a
        sx = (pre[v, 0] - g0) + (pre[v, 1] - g1)
        sxx = (pre[v, 2] - g2) + (pre[v, 3] - g3)
        g0, g1, g2, g3 = pre[v, 0], pre[v, 1], pre[v, 2], pre[v, 3]
        t1 += sxx - 2.0 * h1 * sx + cnt * h1 * h1
        d0 += (h1 - h0) * (2.0 * sx - cnt * (h1 + h0))  # h1 − h_j exact: a float32 step
        d2 += (h1 - h2) * (2.0 * sx - cnt * (h1 + h2))
        top = max(abs(first), abs(last)) + abs(h1)
        mag += cnt * top * top
        h_top = max(h_top, abs(h1))
    # the roundoff of these sums (module doc): each run's terms within a few units of their
    # magnitude; |x̂_1 − x̂_j| is at most 2^-21·|x̂_1| (a step of the scale and two roundings
    # of the product, 2^-22 each), which scales the differences' magnitudes: below
    # 2^-21·2.001·mag, taken as 2^-19·mag
    runs = np.float64(i_end - i)
    slack = 1.001  # the bounds' own rounding
    ex = grow * x_row  # a run's Σx and Σx² beyond their 3u relative roundoff
    e = slack * ((runs + 7.0) * _U * 2.0**-19 * mag + 2.0 * ex * 2.0**-21 * runs * h_top)
    t1_top = t1 + slack * ((runs + 12.0) * _U * mag + runs * (ex * x_row + 2.0 * h_top * ex))
    t0_top = t1_top + abs(d0) + e
    t2_top = t1_top + abs(d2) + e
    rel = slack * (n + 8.0) * 2.0**-52  # the report's sums (module doc)
    off0 = e + rel * (t0_top + t1_top)  # how far the computed T_j − T_1 may be from E_j − E_1
    off2 = e + rel * (t2_top + t1_top)
    below0, above0 = d0 + off0 < 0.0, d0 - off0 > 0.0
    below2, above2 = d2 + off2 < 0.0, d2 - off2 > 0.0
    if not (below0 or above0) or not (below2 or above2):
        return np.nan
    if below0 and below2:
        gap = d0 - d2
        off = slack * (off0 + off2 + 4.0 * _U * (abs(d0) + abs(d2)))
        if gap + off < 0.0:
            return -1.0
        if gap - off > 0.0:
            return 1.0
        return np.nan
    if below0:
        return -1.0
    if below2:
        return 1.0
    return 0.0
