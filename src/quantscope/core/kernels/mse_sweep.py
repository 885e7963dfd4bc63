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
from quantscope.core.kernels.sweep_buckets import (
    BUCKET,
    KEEP,
    SUMS,
    SUMS_ALL,
    bucket_table,
    deal,
    edge_below,
    next_full,
    sorted_crossings,
    stays_inner,
)

_jit = njit(nogil=True, error_model="numpy")

#: A box with at most this many crossings keeps them all in its first pass (a group's box):
#: a second pass over its runs would cost more than the stores it saves.
SMALL_BOX = 256
#: How far above the best error a bucket's bound may lie and still have its crossings kept
#: for a sweep (:func:`_to_sweep`): the sweep's own sums differ from the bound's by rounding.
_MARGIN = 1e-9


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
    in order. The crossings are dealt into buckets of about :data:`BUCKET` by breakpoint
    (:mod:`quantscope.core.kernels.sweep_buckets`); an inner crossing changes ``A`` by
    ``(2k + 1)·s·(s − b)`` (``|x|`` from code ``k`` to ``k + 1`` at its breakpoint ``b``),
    which on a bucket's narrow span of scales is never below its value at the span's lowest
    scale. So every piece of a bucket is at least the least of the bucket's first ``A`` on its
    span plus those changes, plus the least edge part of the stretches the bucket's edge events
    cut it into: a bucket whose bound reaches ``best`` is passed with its sums; only the others
    are sorted and swept piece by piece. The sums come first, from a pass that keeps no
    inner crossing; when a bucket must be swept, the buckets that may be (:func:`_to_sweep`)
    have their crossings kept by a second pass -- a tenth of the box's on an LLM weight's
    channel -- so most crossings are never stored, ordered or read again.

    ``out`` = (error, scale, zero point) is overwritten only where something beats ``best``;
    returns whether it was. ``ev_*`` hold at least :func:`box_crossings` entries, ``q1`` and
    ``q2`` at least ``zb − za + 1``."""
    nz = zb - za + 1
    inner_lo = qmin - za
    inner_hi = qmax - zb
    q0, a1, a2 = _first_sums(rlo, rhi, rf, n_runs, qmin, qmax, za, nz, inner_lo, inner_hi, q1,
                             q2)
    n_cross = box_crossings(rlo, rhi, rf, n_runs)
    if n_cross == 0:
        fz = np.empty(nz)
        f_low = _edge_least(q1, q2, nz, s1, s2, fz)
        return _piece(q0, a1, a2, q1, q2, fz, nz, za, s1, s2, s1, s2, f_low, best, out)
    # per bucket: Σ of its inner crossings' changes of a1 and a2, its least and largest
    # breakpoint, and 1.0 when it holds an edge event (those crossings kept)
    nb = max(1, n_cross // BUCKET)
    scale, bk = bucket_table(s1, s2, nb, 5)
    # the work arrays in four allocations (a group's small boxes took as long to allocate
    # a dozen as to sweep); ``slot`` and ``steps``: the inner crossings' buckets and steps
    ints = np.empty(nb + 2 * n_cross, np.int64)
    head, link, buf = ints[:nb], ints[nb:nb + n_cross], ints[nb + n_cross:]
    head[:] = -1
    slot = np.empty(n_cross, np.int32)
    steps = np.empty((n_cross + 2, 3), np.int64)
    flags = np.zeros(2 * nb, np.bool_)
    want, kept = flags[:nb], flags[nb:]  # kept: buckets whose inner crossings are kept too
    fz = np.empty(nz)
    small = n_cross <= SMALL_BOX
    ne = deal(SUMS_ALL if small else SUMS, x, a, rlo, rhi, rf, n_runs, s1, s2, scale, nb,
              inner_lo, inner_hi, bk, want, 0, nb - 1, slot, steps, ev_b, ev_x, ev_m, head,
              link, 0)
    kept[:] = small
    edge_lo = edge_below(bk, nb, s1)
    # each zero point's least edge part on the first stretch (``fz``), down to the first edge
    # bucket's least breakpoint, and the least of them
    f_low = _edge_least(q1, q2, nz, edge_lo[0], s2, fz)
    # the edge parts of the stretches each edge bucket's events cut it into, computed once for
    # the bucket loop and :func:`_to_sweep` alike
    f_edge, after = _edge_table(bk, nb, head, link, ev_b, ev_x, ev_m, inner_lo, inner_hi, q1, q2,
                                nz, za, qmin, qmax, edge_lo, f_low, buf)
    span_hi = s2  # the least breakpoint of the last nonempty bucket passed (s2 at first)
    nxt = 0  # the next nonempty bucket after the current one
    e = 0  # the edge buckets before this one
    hit = False
    for j in range(nb):
        if bk[j, 2] > bk[j, 3]:
            continue
        nxt = next_full(bk, max(nxt, j + 1), nb)
        span_lo = s1 if nxt >= nb else bk[nxt, 3]
        low = _bucket_low(q0, a1, a2, bk, j, span_lo, span_hi)
        f_end = f_low
        f_min = f_low
        edge = bk[j, 4] != 0.0
        if edge:
            f_min, f_end = f_edge[e, 0], f_edge[e, 1]
        if low + f_min >= best or (not edge and nz > 1 and _bucket_low_z(
                q0, a1, a2, q1, q2, nz, bk, j, span_lo, span_hi) >= best):
            a1 += bk[j, 0]
            a2 += bk[j, 1]
            if edge:
                q1[:nz] = after[e, 0]
                q2[:nz] = after[e, 1]
                fz[:nz] = after[e, 2]
                f_low = f_end
                e += 1
            span_hi = bk[j, 2]
            continue
        if not kept[j]:
            # the buckets from here on that may be swept, their inner crossings kept
            j_hi = _to_sweep(j, nb, bk, q0, a1, a2, f_low, span_hi, s1, best, f_edge, e, want,
                             kept)
            ne = deal(KEEP, x, a, rlo, rhi, rf, n_runs, s1, s2, scale, nb, inner_lo, inner_hi,
                      bk, want, j, j_hi, slot, steps, ev_b, ev_x, ev_m, head, link, ne)
            for u in range(j, nb):
                kept[u] = kept[u] or want[u]
        # sweep the bucket piece by piece: its crossings sorted, largest breakpoint first
        n = sorted_crossings(head, link, j, ev_b, ev_x, ev_m, inner_lo, inner_hi, False, buf)
        upper = span_hi
        for i in range(n):
            o = buf[i]
            lower = ev_b[o]
            if lower < upper:
                if _piece(q0, a1, a2, q1, q2, fz, nz, za, lower, upper, s1, s2, f_low, best,
                          out):
                    best = out[0]
                    hit = True
            xv = ev_x[o]
            m_old = ev_m[o]
            if stays_inner(m_old, xv, inner_lo, inner_hi):
                m_new = m_old + (1 if xv > 0.0 else -1)
                a1 += xv * np.float64(m_new - m_old)
                a2 += np.float64(m_new * m_new - m_old * m_old)
            else:
                _edge_step(q1, q2, nz, za, qmin, qmax, m_old, xv)
                # the stretch below: down to the next edge event of this bucket, or the
                # least breakpoint of the next edge bucket
                st_lo = edge_lo[j + 1]
                for u in range(i + 1, n):
                    if not stays_inner(ev_m[buf[u]], ev_x[buf[u]], inner_lo, inner_hi):
                        st_lo = ev_b[buf[u]]
                        break
                f_low = _edge_least(q1, q2, nz, st_lo, lower, fz)
            upper = lower
        # the bucket's last piece, down to the next bucket's largest breakpoint
        if span_lo < upper or nxt >= nb:
            if _piece(q0, a1, a2, q1, q2, fz, nz, za, span_lo, upper, s1, s2, f_low, best,
                      out):
                best = out[0]
                hit = True
        span_hi = bk[j, 2]
        if edge:
            e += 1
    return hit


@_jit
def _first_sums(rlo, rhi, rf, n_runs, qmin, qmax, za, nz, inner_lo, inner_hi, q1, q2):
    """The sums of a box's quadratics at its largest scale ``s2``, where each run takes the
    code nearer zero: (``Σx²``, the inner codes' ``Σxm`` and ``Σm²``), and each zero point's
    sums of the other codes into ``q1`` and ``q2``."""
    q0 = 0.0
    a1 = 0.0
    a2 = 0.0
    for t in range(nz):
        q1[t] = 0.0
        q2[t] = 0.0
    for r in range(n_runs):
        lo, hi = rlo[r], rhi[r]
        q0 += rf[r, 2]
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
    return q0, a1, a2


@_jit
def _bucket_low(q0, a1, a2, bk, j, span_lo, span_hi):
    """The least shared part ``A`` of every piece of bucket ``j`` (``A``'s sums ``a1``, ``a2``
    before it) on its span ``[span_lo, span_hi]``: a crossing of ``|x|`` from code ``k`` to
    ``k + 1`` at ``b = |x| / (k + 1/2)`` changes ``A`` by ``(2k + 1)·s·(s − b)`` (from a
    format's grid value ``v`` to ``w``: ``(w² − v²)·s·(s − b)``, the formats' sweep's
    bound), nothing at ``b`` and least at the span's lowest scale (all its breakpoints lie
    above it), so every piece's ``A`` is at least the bucket's first ``A`` plus those least
    changes."""
    slack = span_lo * (span_lo * bk[j, 1] - 2.0 * bk[j, 0])
    return _least_on(q0, a1, a2, span_lo, span_hi) + min(slack, 0.0)


@_jit
def _bucket_low_z(q0, a1, a2, q1, q2, nz, bk, j, span_lo, span_hi):
    """:func:`_bucket_low` of each zero point's whole quadratic, the shared part and its own
    edge part together, on a bucket that holds no edge event (so the edge parts are fixed
    on it): the least over the zero points.

    The bucket's bound adds the least shared part on its span to the least edge part on the
    whole stretch, which spans many buckets and whose least lies where another zero point's
    does: far below any one zero point's error on this narrow span. Taken together on the
    span, the bound left 20 of the 56 buckets an asymmetric sweep swept (the box below the
    min/max scale of the bench's LLM-like weight's channels, 8 bits, ~27 zero points)."""
    slack = span_lo * (span_lo * bk[j, 1] - 2.0 * bk[j, 0])
    low = np.inf
    for t in range(nz):
        low = min(low, _least_on(q0, a1 + q1[t], a2 + q2[t], span_lo, span_hi))
    return low + min(slack, 0.0)


@_jit
def _edge_step(q1, q2, nz, za, qmin, qmax, m_old, xv):
    """Each zero point's edge sums after an element ``xv`` steps outward from code ``m_old``
    to ``m_new``: only the zero points whose range holds both codes change (the others clamp
    the element to the same end before and after), each by ``±xv`` and ``m_new² − m_old²``."""
    m_new = m_old + (1 if xv > 0.0 else -1)
    d1 = xv if m_new > m_old else -xv
    d2 = np.float64(m_new * m_new - m_old * m_old)
    t_lo = max(qmin - min(m_old, m_new) - za, 0)
    t_hi = min(qmax - max(m_old, m_new) - za, nz - 1)
    for t in range(t_lo, t_hi + 1):
        q1[t] += d1
        q2[t] += d2


@_jit
def _edge_stretches(buf, n, ev_b, ev_x, ev_m, q1, q2, eq1, eq2, efz, nz, za, qmin, qmax,
                    st_end, f_low):
    """A bucket's edge events ``buf[:n]`` (in order) applied to copies ``eq1``, ``eq2`` of the
    edge sums: (the least edge part of the stretches they start, ``f_low`` the one before
    them among them; the last stretch's, which ends at ``st_end``, each zero point's into
    ``efz``), each as the sweep computes it when it meets them."""
    eq1[:nz] = q1[:nz]
    eq2[:nz] = q2[:nz]
    f_min = f_low
    f = f_low
    for i in range(n):
        o = buf[i]
        _edge_step(eq1, eq2, nz, za, qmin, qmax, ev_m[o], ev_x[o])
        st_lo = ev_b[buf[i + 1]] if i + 1 < n else st_end
        f = _edge_least(eq1, eq2, nz, st_lo, ev_b[o], efz)
        f_min = min(f_min, f)
    return f_min, f


@_jit
def _to_sweep(j0, nb, bk, q0, a1, a2, f_low, span_hi, s1, best, f_edge, e, want, kept):
    """``want``: bucket ``j0`` and the later ones whose crossings are not kept yet that the
    sweep may solve piece by piece, given its sums before ``j0`` (``e`` edge buckets before
    it, ``f_edge`` their edge parts: :func:`_edge_table`); returns the last of them.

    :func:`box_sweep`'s bounds, bucket by bucket, with every bucket passed: the sweep itself
    passes a bucket on the same bound, with ``best`` no higher and sums that differ only by
    their rounding (a bucket it sweeps adds its crossings one by one), and on
    :func:`_bucket_low_z` as well, left out here: a few buckets' crossings kept in vain cost
    less than that bound of every bucket (and, compiled into this loop, it slowed the
    symmetric sweep by a tenth). A bucket met unkept all the same is asked for again from
    there."""
    nxt = j0
    last = j0
    for j in range(j0):
        want[j] = False
    for j in range(j0, nb):
        want[j] = False
        if bk[j, 2] > bk[j, 3]:
            continue
        nxt = next_full(bk, max(nxt, j + 1), nb)
        span_lo = s1 if nxt >= nb else bk[nxt, 3]
        f_min = f_low
        if bk[j, 4] != 0.0:
            f_min, f_low = f_edge[e, 0], f_edge[e, 1]
            e += 1
        if not kept[j] and (j == j0 or _bucket_low(q0, a1, a2, bk, j, span_lo, span_hi) + f_min
                            < best + _MARGIN * abs(best)):
            want[j] = True
            last = j
        a1 += bk[j, 0]
        a2 += bk[j, 1]
        span_hi = bk[j, 2]
    return last


@_jit
def _edge_table(bk, nb, head, link, ev_b, ev_x, ev_m, inner_lo, inner_hi, q1, q2, nz, za, qmin,
                qmax, edge_lo, f_low, buf):
    """Each edge bucket's edge parts, in order from the edge sums ``q1``, ``q2`` (``f_low``
    the least edge part on the first stretch): the least edge part of the stretches its events
    start and the last one's (``f_edge[e]``, :func:`_edge_stretches`), and each zero point's
    ``q1``, ``q2`` and least edge part on its last stretch (``after[e]``).

    The bucket loop needs them at every edge bucket it meets, whether it passes or sweeps it
    (a sweep steps the sums through the same events in the same order, to the same numbers),
    and so does :func:`_to_sweep` for the buckets after the one it starts at: computed once,
    not once for each (the events' steps and stretches were a tenth of an asymmetric box)."""
    n_edge = 0
    for j in range(nb):
        if bk[j, 4] != 0.0:
            n_edge += 1
    f_edge = np.empty((n_edge, 2))
    after = np.empty((n_edge, 3, nz))
    e = 0
    for j in range(nb):
        if bk[j, 4] == 0.0:
            continue
        n = sorted_crossings(head, link, j, ev_b, ev_x, ev_m, inner_lo, inner_hi, True, buf)
        if e == 0:
            c1, c2 = q1[:nz], q2[:nz]
        else:
            c1, c2 = after[e - 1, 0], after[e - 1, 1]
        f_min, f_low = _edge_stretches(buf, n, ev_b, ev_x, ev_m, c1, c2, after[e, 0],
                                       after[e, 1], after[e, 2], nz, za, qmin, qmax,
                                       edge_lo[j + 1], f_low)
        f_edge[e, 0] = f_min
        f_edge[e, 1] = f_low
        e += 1
    return f_edge, after


@_jit
def _edge_least(q1, q2, nz, lower, upper, fz):
    """Each zero point's least edge part ``−2s·q1[t] + s²·q2[t]`` on ``[lower, upper]`` into
    ``fz[t]``; the least of them."""
    low = np.inf
    for t in range(nz):
        fz[t] = _least_on(0.0, q1[t], q2[t], lower, upper)
        low = min(low, fz[t])
    return low


@_jit
def _piece(q0, a1, a2, q1, q2, fz, nz, za, lower, upper, s1, s2, f_low, best, out):
    """Every zero point's least error over the float32 scales of the piece ``[lower, upper]``
    (codes fixed on it) that beats ``best``, into ``out``; whether one did. ``fz``: each zero
    point's least edge part on the stretch that holds the piece, ``f_low`` the least of them:
    a zero point whose shared part's least plus its own reaches ``best`` is not looked at
    further (most of them, on most pieces)."""
    base = _least_on(q0, a1, a2, lower, upper)
    if base + f_low >= best:
        return False
    hit = False
    for t in range(nz):
        if base + fz[t] < best and base + _least_on(0.0, q1[t], q2[t], lower, upper) < best:
            hit_t, e_t, s_t = _piece_best(q0, a1 + q1[t], a2 + q2[t], lower, upper, s1, s2,
                                          best)
            if hit_t:
                best = e_t
                out[0] = e_t
                out[1] = s_t
                out[2] = za + t
                hit = True
    return hit
