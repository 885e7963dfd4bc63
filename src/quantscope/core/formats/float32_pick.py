"""The float32 scale the engine's own report rates best, near the scale a search found:
compiled loops.

The format MSE search (:mod:`quantscope.core.formats.grid_bound`) rates scales by the error of
the real reconstruction ``s · v``; the engine's report rounds it to ``y = float32(v · s)``. On
the elements sharing a value ``v`` (``n`` of them, ``Σx``) the two errors differ by exactly
``2δ·(Σx − n·v·s) + n·δ²`` with ``δ = v·s − y``: up to half an ulp of ``v·s`` times the net
offset of those elements, a quantity that jumps from one float32 scale to the next. On a
4096-element row in FP8 that is a few parts in 10^7 of the error, more than the real error
changes over the float32 scales beside its optimum: the scale the search rates best is then
not the one the report rates best (a MiniLM query row: 6.2e-7 above a scale six ulps away).

Between two breakpoints every element keeps its value and the report's error at a float32
scale ``t`` is the real error, a quadratic in ``t``, plus that rounding part. Writing each
value as a signed power of two times one of the grid's few mantissas ``m`` (eight for FP8
E4M3), ``float32(v·t)`` is that power of two times ``float32(m·t)``, so the rounding part is
``Σ_m 2δ_m·(α_m − t·β_m) + δ_m²·γ_m`` with ``δ_m = m·t − float32(m·t)`` and sums ``α``,
``β``, ``γ`` per mantissa: a few flops per scale, not a pass over the row.
:func:`refine_rows` scans the float32 scales of the search's piece from its vertex outwards
while the real error less the largest rounding part is below the best found (beyond, the real
error only rises), and goes on into the next piece while a scan reaches the end of its own.
Scales within :data:`MARGIN` steps of a breakpoint are left out: there the report's float32
quotient ``x / t`` may fall on the other side of a midpoint than the real one.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.grid_bound import grid_runs
from quantscope.core.kernels.jit_cache import njit

_jit = njit(nogil=True, error_model="numpy")

#: Float32 steps kept clear of a piece's ends: there the float32 quotient ``x / t`` the engine
#: rounds may still fall on the other side of a midpoint.
MARGIN = 2
#: The most float32 scales scanned per piece.
MAX_SCAN = 4096
#: The most pieces scanned per row.
MAX_PIECES = 2
_ULP = 2.0 ** -23


@_jit
def _piece_of(x, a, rlo, rf, n_runs, mids):
    """``(lower, upper)``: the scales at which every run of a row (one value each, sorted
    ``x`` from position ``a``) keeps its value: each run's extreme elements stay between the
    midpoints beside its value (``x / t`` in ``(mids[c − 1], mids[c]]``)."""
    lower = 0.0
    upper = np.inf
    p = a
    last = mids.size
    for r in range(n_runs):
        cnt = int(rf[r, 0])
        c = rlo[r]
        x_lo = np.float64(x[p])
        x_hi = np.float64(x[p + cnt - 1])
        p += cnt
        if c < last:  # the largest x / t at most mids[c]
            m = mids[c]
            if m > 0.0:
                if x_hi > 0.0:
                    lower = max(lower, x_hi / m)
            else:
                upper = min(upper, x_hi / m)
        if c > 0:  # the least x / t above mids[c - 1]
            m = mids[c - 1]
            if m < 0.0:
                if x_lo < 0.0:
                    lower = max(lower, x_lo / m)
            else:
                upper = min(upper, x_lo / m)
    return lower, upper


@_jit
def _up(f, k):
    """The float32 ``k`` steps above float32 ``f``."""
    for _ in range(k):
        f = np.nextafter(f, np.float32(np.inf))
    return f


@_jit
def refine_rows(values, starts, rec, rec_starts, smp, smp_starts, search, rows, scale, s_floor,
                vals, mids, fmt, code_m, code_w, mant, out, cover, rated):
    """For each sorted row ``rows[e]`` and its float32 ``scale[e]`` (the search's), the
    float32 scale not below ``s_floor[e]`` with the least error by the report's arithmetic
    (module doc) into ``out[e]``: ``scale[e]`` itself unless one is strictly less. Scanned:
    the piece of ``scale[e]``, and on from each end of it into the next piece while the scan
    reaches that end (at most :data:`MAX_PIECES` pieces). ``vals[c] = code_w[c] ·
    mant[code_m[c]]`` with ``code_w`` a signed power of two and ``mant`` the grid's distinct
    mantissas (:func:`mantissa_table`). ``cover[e]``: the float32 scales around
    ``scale[e]`` that the scan of its piece rated or proved no better than its best, from
    ``cover[e, 0]`` to ``cover[e, 1]`` (empty when the first is above the second).
    ``rated[e]``: the error of ``out[e]`` and of ``scale[e]`` by the report's arithmetic as
    the scan rated them (inf where it did not: ``scale[e]`` beside its piece's ends)."""
    cap = 2 * vals.size + 8
    rlo = np.empty(cap, np.int64)
    rhi = np.empty(cap, np.int64)
    rf = np.empty((cap, 4))
    sums = np.empty((3, mant.size))
    found = np.empty(8)
    for e in range(rows.size):
        r = rows[e]
        a, b = starts[r], starts[r + 1]
        out[e] = scale[e]
        cover[e, 0] = np.inf
        cover[e, 1] = -np.inf
        rated[e, 0] = np.inf
        rated[e, 1] = np.inf
        if b == a or not scale[e] > 0.0:
            continue
        k0, m0 = (rec_starts[r], smp_starts[r]) if search[e] else (0, 0)
        found[0] = np.inf
        found[1] = scale[e]
        _scan_piece(values, a, b, rec, k0, smp, m0, search[e], np.float64(scale[e]), s_floor[e],
                    vals, mids, fmt, code_m, code_w, mant, rlo, rhi, rf, sums, found)
        rated[e, 1] = found[7]
        cover[e, 0] = found[5]
        cover[e, 1] = found[6]
        ends = (found[2], found[3])
        reached = (found[4] == 1.0 or found[4] == 3.0, found[4] >= 2.0)
        for side in range(2):
            end = ends[side]
            more = reached[side]
            pieces = 1
            while more and pieces < MAX_PIECES:
                f = np.float32(end)
                anchor = _down(f, MARGIN + 1) if side == 0 else _up(f, MARGIN + 1)
                if not np.float64(anchor) >= s_floor[e] or not np.isfinite(anchor):
                    break
                _scan_piece(values, a, b, rec, k0, smp, m0, search[e], np.float64(anchor),
                            s_floor[e], vals, mids, fmt, code_m, code_w, mant, rlo, rhi, rf, sums,
                            found)
                end = found[2] if side == 0 else found[3]
                more = found[4] == 1.0 + side or found[4] == 3.0
                pieces += 1
        out[e] = np.float32(found[1])
        rated[e, 0] = found[0]


@_jit
def _scan_piece(x, a, b, rec, k0, smp, m0, search, anchor, s_floor, vals, mids, fmt, code_m,
                code_w, mant, rlo, rhi, rf, sums, found):
    """Scan the float32 scales of the piece around ``anchor`` (clear of its ends by
    :data:`MARGIN`) from its vertex outwards while the real error less the rounding's bound
    is below ``found[0]`` (the best error, at ``found[1]``; both updated). ``found[2:4]``: the
    piece's ends; ``found[4]``: 1 when the scan reached its lower end, 2 its upper end, 3
    both; ``found[5:7]``: the float32 scales it rated or proved no better than ``found[0]``
    (where the real error less the rounding's bound reaches it, every scale beyond, as far as
    the margin, does too: the real error only rises away from the vertex), from the first to
    the second; ``found[7]``: the error of ``anchor`` itself where the scan may rate it (clear
    of the ends), else inf."""
    n_runs = grid_runs(x, a, b, rec, k0, smp, m0, search, anchor, anchor, vals, mids, fmt, rlo,
                       rhi, rf)
    lower, upper = _piece_of(x, a, rlo, rf, n_runs, mids)
    lower = max(lower, s_floor)
    found[2] = lower
    found[3] = upper
    found[4] = 0.0
    found[5] = np.inf
    found[6] = -np.inf
    found[7] = np.inf
    # the real error Q0 − 2t·Q1 + t²·Q2 on the piece, and per mantissa m the sums that give
    # the rounding's part: 2δ·(α − t·β) + δ²·γ with δ = m·t − float32(m·t)
    alpha, beta, gamma = sums[0], sums[1], sums[2]
    q0 = 0.0
    q1 = 0.0
    q2 = 0.0
    for i in range(mant.size):
        alpha[i] = 0.0
        beta[i] = 0.0
        gamma[i] = 0.0
    for k in range(n_runs):
        c = rlo[k]
        v = vals[c]
        w = code_w[c]
        i = code_m[c]
        q0 += rf[k, 2]
        q1 += v * rf[k, 1]
        q2 += v * v * rf[k, 0]
        alpha[i] += w * rf[k, 1]
        beta[i] += w * v * rf[k, 0]
        gamma[i] += w * w * rf[k, 0]
    if q2 <= 0.0 or not lower < upper:
        return
    vertex = min(max(q1 / q2, lower), upper)
    # how far the rounding can move the error on the scales scanned: δ at most half an ulp of
    # m·t, and α − t·β moves by at most t·β per part of t (the scan stays within 1e-3 of the
    # vertex: MAX_SCAN ulps)
    slack = 0.0
    for i in range(mant.size):
        half = 0.5 * _ULP * mant[i] * vertex * 1.01
        slack += 2.0 * half * (abs(alpha[i] - vertex * beta[i]) + 1e-3 * abs(
            vertex * beta[i])) + half * half * gamma[i]
    lo_ok = np.float64(_up(np.float32(lower), MARGIN))
    f0 = np.float32(min(max(vertex, lo_ok), upper))
    top = np.float32(upper)
    if np.float64(top) > upper:
        top = _down(top, 1)
    up_ok = np.float64(_down(top, MARGIN))  # the largest float32 scale the scan may reach
    if anchor >= lo_ok and np.float64(_up(np.float32(anchor), MARGIN)) <= upper:  # as below
        found[7] = _rounded_error(q0, q1, q2, alpha, beta, gamma, mant, anchor)
    n = 0
    for step in (-1, 1):
        f = f0 if step > 0 else _down(f0, 1)
        while True:
            t = np.float64(f)
            if t < lo_ok or np.float64(_up(f, MARGIN)) > upper:
                found[4] += 1.0 if step < 0 else 2.0  # the end of the piece
                covered = np.float64(_up(f, 1) if step < 0 else _down(f, 1))
                break
            if n >= MAX_SCAN:
                covered = np.float64(_up(f, 1) if step < 0 else _down(f, 1))
                break
            if q0 - 2.0 * t * q1 + t * t * q2 - slack >= found[0]:
                covered = np.float64(lo_ok if step < 0 else up_ok)  # and the rest of the side
                break
            err = _rounded_error(q0, q1, q2, alpha, beta, gamma, mant, t)
            if err < found[0]:
                found[0] = err
                found[1] = t
            f = _up(f, 1) if step > 0 else _down(f, 1)
            n += 1
        if step < 0:
            found[5] = covered
        else:
            found[6] = covered


@_jit
def _down(f, k):
    """The float32 ``k`` steps below float32 ``f``."""
    for _ in range(k):
        f = np.nextafter(f, np.float32(0.0))
    return f


@_jit
def _rounded_error(q0, q1, q2, alpha, beta, gamma, mant, t):
    """The error at float32 scale ``t`` of a piece with every reconstruction rounded to
    float32 as the report rounds it (:func:`refine_rows`)."""
    err = q0 - 2.0 * t * q1 + t * t * q2
    for i in range(mant.size):
        mt = mant[i] * t  # exact: both hold few enough bits
        d = mt - np.float64(np.float32(mt))
        err += 2.0 * d * (alpha[i] - t * beta[i]) + d * d * gamma[i]
    return err


def mantissa_table(vals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(code_m, code_w, mant)`` with ``vals[c] == code_w[c] * mant[code_m[c]]``: ``mant``
    the distinct mantissas in ``[1, 2)`` of the grid's values (at most ``2^mbits`` for a
    floating-point grid), ``code_w`` a signed power of two (0 for the value 0). Scaling by a
    power of two is exact in float32, so ``float32(v·t) = w·float32(m·t)``."""
    frac, ex = np.frexp(np.asarray(vals, np.float64))
    m = np.abs(frac) * 2.0
    w = np.sign(frac) * np.ldexp(1.0, ex - 1)
    m = np.where(frac == 0.0, 1.0, m)
    mant, code_m = np.unique(m, return_inverse=True)
    return code_m.astype(np.int64), w.astype(np.float64), mant.astype(np.float64)
