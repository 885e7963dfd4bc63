"""The least error over every float32 scale of a narrow box of scales, exactly: the branch and
bound's last step, swept over the box's own breakpoints.

Inside a box ``[s1, s2]`` of scales the codes of most elements do not move. The runs of the
box (:func:`quantscope.core.kernels.mse_bound.runs_walk`: sorted values with the same pair of
codes at ``s1`` and ``s2``) say which do and how far: a run whose codes are ``c2`` at ``s2``
and ``c1`` at ``s1`` crosses the breakpoints ``|x| / (k + 1/2)`` for ``k`` from ``|c2|`` to
``|c1| − 1``, once per element and ``k``, and nothing else changes inside the box. Between two
consecutive breakpoints every code is fixed and the error of each zero point ``z`` is the
quadratic ``Σx² − 2s·Σxv + s²·Σv²`` (``v = clamp(m + z, qmin, qmax) − z``); a crossing moves
one element's ``m`` one step outward and changes ``Σxv`` and ``Σv²`` of each zero point by
a constant. So the sweep costs the runs once plus ``O(zero points)`` per breakpoint of the box
-- not per element of the row, which is what makes it cheaper than bisecting further once a
box holds a few thousand crossings.

On each piece the quadratic is convex, so its least value over the float32 scales of the
piece is at one of the two float32 neighbours of its real minimiser (clipped into the piece):
the sweep returns the least error of every float32 scale of the box, not an infimum over
reals that a float32 scale may miss. Codes are ``rint(x · (1/s))`` in float64, as the
search's evaluations take them; the breakpoints are where that changes, up to an ulp of the
scale, where both codes' errors agree to within rounding.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit

_jit = njit(nogil=True, error_model="numpy")


@_jit
def box_crossings(rlo, rhi, rf, n_runs):
    """How many breakpoints the runs of a box cross: each element of a run whose codes differ
    crosses one per step between them."""
    total = 0
    for r in range(n_runs):
        if rlo[r] != rhi[r]:
            total += int(rf[r, 0]) * (rhi[r] - rlo[r])
    return total


@_jit
def _descending(b, ne, s1, s2):
    """Positions of ``b[:ne]`` (each in ``[s1, s2]``) by value, largest first: a counting sort
    into ``ne`` equal buckets of the box, then an insertion sort that only reorders within
    buckets. The crossings of a narrow box spread evenly over it, so this is linear where a
    comparison sort took as long as the rest of the sweep."""
    order = np.empty(ne, np.int64)
    if ne == 0:
        return order
    count = np.zeros(ne + 1, np.int64)
    width = s2 - s1
    scale = ne / width if width > 0.0 else 0.0
    slot = np.empty(ne, np.int64)
    for i in range(ne):
        j = int((s2 - b[i]) * scale)
        j = min(max(j, 0), ne - 1)
        slot[i] = j
        count[j + 1] += 1
    for j in range(ne):
        count[j + 1] += count[j]
    for i in range(ne):
        j = slot[i]
        order[count[j]] = i
        count[j] += 1
    for i in range(1, ne):
        o = order[i]
        v = b[o]
        t = i - 1
        while t >= 0 and b[order[t]] < v:
            order[t + 1] = order[t]
            t -= 1
        order[t + 1] = o
    return order


@_jit
def _v(m, z, qmin, qmax):
    return min(max(m + z, qmin), qmax) - z


@_jit
def _piece_best(q0, q1, q2, lower, upper, s1, s2, best):
    """The least value of ``q0 − 2s·q1 + s²·q2`` over the float32 scales ``s`` of
    ``[lower, upper]`` (and of the box ``[s1, s2]``) when below ``best``: (whether it is,
    the value, the scale)."""
    # the real minimiser: an end unless the vertex q1 / q2 lies inside (pieces between
    # neighbouring crossings are narrow, so the division is rarely needed)
    if q2 * upper <= q1:
        s = upper
    elif q2 * lower >= q1:
        s = lower
    else:
        s = q1 / q2
    if q0 - 2.0 * s * q1 + q2 * s * s >= best:
        return False, best, s  # not even the real minimum of the piece is better
    f = np.float32(s)
    below = np.float64(np.nextafter(f, np.float32(0.0)))
    above = np.float64(np.nextafter(f, np.float32(np.inf)))
    hit = False
    at = s
    for c in (below, np.float64(f), above):
        if lower <= c <= upper and s1 <= c <= s2:
            e = q0 - 2.0 * c * q1 + q2 * c * c
            if e < best:
                best = e
                at = c
                hit = True
    return hit, best, at


@_jit
def _least_on(q0, q1, q2, lower, upper):
    """The least value of ``q0 − 2s·q1 + s²·q2`` over real ``s`` in ``[lower, upper]``
    (``q2 >= 0``)."""
    if q2 * upper <= q1:
        s = upper
    elif q2 * lower >= q1:
        s = lower
    else:
        s = q1 / q2
    return q0 - 2.0 * s * q1 + q2 * s * s


@_jit
def box_sweep(x, a, rlo, rhi, rf, n_runs, s1, s2, qmin, qmax, za, zb, best, ev_b, ev_x,
              ev_m, q1, q2, out):
    """The least error over every float32 scale of ``[s1, s2]`` and zero point of
    ``[za, zb]`` of sorted ``x`` from position ``a``, given the box's runs (module doc).

    The zero points share most of the work. A code ``m`` in ``[qmin − za, qmax − zb]`` is
    inside the range of every zero point of the box: such *inner* codes contribute the same
    ``Σxm`` and ``Σm²`` to every zero point's quadratic (``a1``, ``a2``), and a crossing
    between two of them moves those two sums only. The rest -- codes clamped for some zero
    point: a unit's few outliers -- are kept per zero point (``q1``, ``q2``) and change only at
    their own crossings, the *edge* events, which cut the box into stretches. On a piece the
    error of zero point ``z`` is ``A(s) + f_z(s)`` (``A`` the shared quadratic with ``Σx²``,
    ``f_z`` the edge part); the least of ``A`` on the piece plus the least of ``f_z`` on the
    stretch bound it from below, so a piece is solved zero point by zero point only when that
    bound is below ``best`` (rarely): a box costs about its crossings once, plus its edge
    events times its zero points -- a channel's asymmetric box no longer costs its crossings
    times the zero points that survive it.

    ``out`` = (error, scale, zero point) is overwritten only where something beats ``best``;
    returns whether it was. ``ev_*`` hold at least :func:`box_crossings` entries, ``q1`` and
    ``q2`` at least ``zb − za + 1``."""
    nz = zb - za + 1
    inner_lo = qmin - za
    inner_hi = qmax - zb
    q0 = 0.0
    a1 = 0.0
    a2 = 0.0
    for t in range(nz):
        q1[t] = 0.0
        q2[t] = 0.0
    ne = 0
    p = a
    for r in range(n_runs):
        cnt = int(rf[r, 0])
        lo, hi = rlo[r], rhi[r]
        q0 += rf[r, 2]
        # the code at s2 (the larger scale): nearer zero
        c2 = lo if lo >= 0 else hi
        if inner_lo <= c2 <= inner_hi:
            m = np.float64(c2)
            a1 += m * rf[r, 1]
            a2 += m * m * rf[r, 0]
        else:
            for t in range(nz):
                v = np.float64(_v(c2, za + t, qmin, qmax))
                q1[t] += v * rf[r, 1]
                q2[t] += v * v * rf[r, 0]
        if lo != hi:
            step = 1 if lo >= 0 else -1
            k0 = abs(c2)
            k1 = max(abs(lo), abs(hi))
            for k in range(k0, k1):
                inv = 1.0 / (k + 0.5)
                for i in range(p, p + cnt):
                    xv = np.float64(x[i])
                    ev_b[ne] = min(max(abs(xv) * inv, s1), s2)
                    ev_x[ne] = xv
                    ev_m[ne] = step * k
                    ne += 1
        p += cnt
    order = _descending(ev_b, ne, s1, s2)
    hit = False
    upper = s2
    # the stretch [st_lo, upper of its first piece]: the least edge part of every zero point
    # on it (lowest), recomputed after each edge event
    nxt = 0  # first position in ``order`` at or after the current one that is an edge event
    fresh = True
    f_low = 0.0
    for e in range(ne + 1):
        if fresh:
            while nxt < ne and _inner(ev_m[order[nxt]], ev_x[order[nxt]], inner_lo, inner_hi):
                nxt += 1
            st_lo = s1 if nxt >= ne else ev_b[order[nxt]]
            f_low = np.inf
            for t in range(nz):
                f_low = min(f_low, _least_on(0.0, q1[t], q2[t], st_lo, upper))
            fresh = False
        lower = s1 if e == ne else ev_b[order[e]]
        if lower < upper or e == ne:
            base = _least_on(q0, a1, a2, lower, upper)
            if base + f_low < best:
                for t in range(nz):
                    if base + _least_on(0.0, q1[t], q2[t], lower, upper) < best:
                        hit_t, e_t, s_t = _piece_best(q0, a1 + q1[t], a2 + q2[t], lower,
                                                      upper, s1, s2, best)
                        if hit_t:
                            best = e_t
                            out[0] = e_t
                            out[1] = s_t
                            out[2] = za + t
                            hit = True
        if e == ne:
            break
        j = order[e]
        xv = ev_x[j]
        m_old = ev_m[j]
        m_new = m_old + (1 if xv > 0.0 else -1)
        if inner_lo <= m_old <= inner_hi and inner_lo <= m_new <= inner_hi:
            a1 += xv * np.float64(m_new - m_old)
            a2 += np.float64(m_new * m_new - m_old * m_old)
        else:
            for t in range(nz):
                z = za + t
                v0 = np.float64(_v(m_old, z, qmin, qmax))
                v1 = np.float64(_v(m_new, z, qmin, qmax))
                if v0 != v1:
                    q1[t] += xv * (v1 - v0)
                    q2[t] += v1 * v1 - v0 * v0
            nxt = e + 1
            fresh = True
        upper = lower
    return hit


@_jit
def _inner(m_old, xv, inner_lo, inner_hi):
    """Whether a crossing from code ``m_old`` (one step outward, by the sign of ``xv``) stays
    among the codes inside every zero point's range."""
    m_new = m_old + (1 if xv > 0.0 else -1)
    return inner_lo <= m_old <= inner_hi and inner_lo <= m_new <= inner_hi
