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

#: Crossings per bucket of a sweep (:func:`box_sweep`): a bucket whose bound reaches the best
#: error found is passed whole, unsorted.
BUCKET = 8


@_jit
def box_crossings(rlo, rhi, rf, n_runs):
    """How many breakpoints the runs of a box cross: each element of a run whose codes differ
    crosses one per step between them."""
    total = 0
    for r in range(n_runs):
        if rlo[r] != rhi[r]:
            total += int(rf[r, 0]) * (rhi[r] - rlo[r])
    return total


@njit(nogil=True, error_model="numpy", inline="always")
def bucket_of(b, s2, scale, nb):
    """The bucket of breakpoint ``b`` among ``nb`` equal buckets of a box ending at ``s2``
    (``scale``: ``nb`` over the box's width), largest scales first."""
    return min(max(int((s2 - b) * scale), 0), nb - 1)


@_jit
def new_buckets(ne, s1, s2, nb, cols):
    """Empty buckets for ``ne`` crossings of the box ``[s1, s2]``: (``scale`` for
    :func:`bucket_of`, ``start`` for the counts, ``slot`` for each crossing's bucket, ``bk``:
    ``cols`` columns per bucket, zero but for columns 2 and 3, which are to hold its least and
    largest breakpoint)."""
    width = s2 - s1
    scale = nb / width if width > 0.0 else 0.0
    bk = np.zeros((nb, cols))
    for j in range(nb):
        bk[j, 2] = np.inf
        bk[j, 3] = -np.inf
    return scale, np.zeros(nb + 1, np.int64), np.empty(ne, np.int64), bk


@_jit
def place(slot, start, ne, nb):
    """The counting sort's second half: ``start[j + 1]`` holding bucket ``j``'s count becomes
    where it starts, and the positions ``0 .. ne − 1`` are returned bucket by bucket
    (``slot``: each one's bucket). The crossings of a narrow box spread evenly over it, so
    this is linear where a comparison sort took as long as the rest of the sweep."""
    for j in range(nb):
        start[j + 1] += start[j]
    order = np.empty(ne, np.int64)
    fill = start[:nb].copy()
    for i in range(ne):
        j = slot[i]
        order[fill[j]] = i
        fill[j] += 1
    return order


@_jit
def sort_bucket(order, b, e0, e1):
    """Sort ``order[e0:e1]`` by ``b``, largest first (an insertion sort: a bucket is small)."""
    for i in range(e0 + 1, e1):
        o = order[i]
        v = b[o]
        t = i - 1
        while t >= e0 and b[order[t]] < v:
            order[t + 1] = order[t]
            t -= 1
        order[t + 1] = o


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
    events times its zero points -- not its crossings times the zero points that survive it.

    Most of a box holds nothing better than ``best``, and most crossings need not even be put
    in order. The crossings are dealt into buckets of about :data:`BUCKET` by breakpoint; an
    inner crossing changes ``A`` by ``(2k + 1)·s·(s − b)`` (``|x|`` from code ``k`` to
    ``k + 1`` at its breakpoint ``b``), which on a bucket's narrow span of scales is never
    below its value at the span's lowest scale. So every piece of a bucket is at least the
    least of the bucket's first ``A`` on its span plus those changes: a bucket whose bound plus
    the stretch's least edge part reaches ``best`` is passed with its sums; only the others
    (and those with an edge event) are sorted and swept piece by piece.

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
    # the crossings, each dealt into its bucket of scales as it is made (largest scales
    # first); per bucket: Σ of its inner crossings' changes of a1 and a2, its least and
    # largest breakpoint, and 1.0 when it holds an edge event
    n_cross = box_crossings(rlo, rhi, rf, n_runs)
    nb = max(1, n_cross // BUCKET)
    scale, start, slot, bk = new_buckets(n_cross, s1, s2, nb, 5)
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
            # every element of the run steps outward (its sign) from code ±k to ±(k + 1)
            step = 1 if lo >= 0 else -1
            k0 = abs(c2)
            k1 = max(abs(lo), abs(hi))
            for k in range(k0, k1):
                inv = 1.0 / (k + 0.5)
                m_old = step * k
                m_new = m_old + step
                inner = inner_lo <= m_old <= inner_hi and inner_lo <= m_new <= inner_hi
                d1 = np.float64(m_new - m_old)
                d2 = np.float64(m_new * m_new - m_old * m_old)
                for i in range(p, p + cnt):
                    xv = np.float64(x[i])
                    b = min(max(abs(xv) * inv, s1), s2)
                    ev_b[ne] = b
                    ev_x[ne] = xv
                    ev_m[ne] = m_old
                    j = bucket_of(b, s2, scale, nb)
                    slot[ne] = j
                    start[j + 1] += 1
                    bk[j, 2] = min(bk[j, 2], b)
                    bk[j, 3] = max(bk[j, 3], b)
                    if inner:
                        bk[j, 0] += xv * d1
                        bk[j, 1] += d2
                    else:
                        bk[j, 4] = 1.0
                    ne += 1
        p += cnt
    hit = False
    if ne == 0:
        f_low = _edge_least(q1, q2, nz, s1, s2)
        return _piece(q0, a1, a2, q1, q2, nz, za, s1, s2, s1, s2, f_low, best, out)
    order = place(slot, start, ne, nb)
    # the least edge part on the first stretch: down to the first edge bucket's least breakpoint
    edge_at = 0  # the first edge bucket at or after the current one (nb: none)
    while edge_at < nb and bk[edge_at, 4] == 0.0:
        edge_at += 1
    f_low = _edge_least(q1, q2, nz, s1 if edge_at >= nb else bk[edge_at, 2], s2)
    span_hi = s2  # the least breakpoint of the last nonempty bucket passed (s2 at first)
    nxt = 0  # the next nonempty bucket after the current one
    for j in range(nb):
        if start[j + 1] == start[j]:
            continue
        nxt = max(nxt, j + 1)
        while nxt < nb and start[nxt + 1] == start[nxt]:
            nxt += 1
        span_lo = s1 if nxt >= nb else bk[nxt, 3]
        if bk[j, 4] == 0.0:
            # a crossing of |x| from code k to k + 1 at b = |x| / (k + 1/2) changes A by
            # (2k + 1)·s·(s − b): nothing at b, least at the span's lowest scale (all its
            # breakpoints lie above it), so every piece's A is at least the bucket's first A
            # plus those least changes
            slack = span_lo * (span_lo * bk[j, 1] - 2.0 * bk[j, 0])
            if _least_on(q0, a1, a2, span_lo, span_hi) + min(slack, 0.0) + f_low >= best:
                a1 += bk[j, 0]
                a2 += bk[j, 1]
                span_hi = bk[j, 2]
                continue
        # sweep the bucket piece by piece: its crossings sorted, largest breakpoint first
        e0, e1 = start[j], start[j + 1]
        sort_bucket(order, ev_b, e0, e1)
        if edge_at <= j:  # the next edge bucket after this one, for the stretches below
            edge_at = j + 1
            while edge_at < nb and bk[edge_at, 4] == 0.0:
                edge_at += 1
        upper = span_hi
        for i in range(e0, e1):
            o = order[i]
            lower = ev_b[o]
            if lower < upper:
                if _piece(q0, a1, a2, q1, q2, nz, za, lower, upper, s1, s2, f_low, best, out):
                    best = out[0]
                    hit = True
            xv = ev_x[o]
            m_old = ev_m[o]
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
                # the stretch below: down to the next edge event of this bucket, or the
                # least breakpoint of the next edge bucket
                st_lo = s1 if edge_at >= nb else bk[edge_at, 2]
                for u in range(i + 1, e1):
                    if not _inner(ev_m[order[u]], ev_x[order[u]], inner_lo, inner_hi):
                        st_lo = ev_b[order[u]]
                        break
                f_low = _edge_least(q1, q2, nz, st_lo, lower)
            upper = lower
        # the bucket's last piece, down to the next bucket's largest breakpoint
        if span_lo < upper or nxt >= nb:
            if _piece(q0, a1, a2, q1, q2, nz, za, span_lo, upper, s1, s2, f_low, best, out):
                best = out[0]
                hit = True
        span_hi = bk[j, 2]
    return hit


@_jit
def _edge_least(q1, q2, nz, lower, upper):
    """The least edge part ``−2s·q1[t] + s²·q2[t]`` of every zero point on ``[lower, upper]``."""
    low = np.inf
    for t in range(nz):
        low = min(low, _least_on(0.0, q1[t], q2[t], lower, upper))
    return low


@_jit
def _piece(q0, a1, a2, q1, q2, nz, za, lower, upper, s1, s2, f_low, best, out):
    """Every zero point's least error over the float32 scales of the piece ``[lower, upper]``
    (codes fixed on it) that beats ``best``, into ``out``; whether one did."""
    base = _least_on(q0, a1, a2, lower, upper)
    if base + f_low >= best:
        return False
    hit = False
    for t in range(nz):
        if base + _least_on(0.0, q1[t], q2[t], lower, upper) < best:
            hit_t, e_t, s_t = _piece_best(q0, a1 + q1[t], a2 + q2[t], lower, upper, s1, s2,
                                          best)
            if hit_t:
                best = e_t
                out[0] = e_t
                out[1] = s_t
                out[2] = za + t
                hit = True
    return hit


@_jit
def _inner(m_old, xv, inner_lo, inner_hi):
    """Whether a crossing from code ``m_old`` (one step outward, by the sign of ``xv``) stays
    among the codes inside every zero point's range."""
    m_new = m_old + (1 if xv > 0.0 else -1)
    return inner_lo <= m_old <= inner_hi and inner_lo <= m_new <= inner_hi
