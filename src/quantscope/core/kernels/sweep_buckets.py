"""The buckets of scales that a box's sweep deals its breakpoint crossings into: compiled loops
shared by the integer search's sweep (:mod:`quantscope.core.kernels.mse_sweep`) and the
number formats' (:mod:`quantscope.core.formats.grid_bound`).

A box ``[s1, s2]`` is cut into equal buckets, largest scales first; a crossing goes to the
bucket of its breakpoint (:func:`bucket_of`). A sweep adds up each bucket's crossings, passes
most buckets whole on those sums, and puts in order only the crossings of the buckets it
solves piece by piece. The formats' sweep keeps every crossing and orders them all by
bucket (:func:`new_buckets`, :func:`place`); the integer sweep adds up the sums first and
keeps only the crossings of the buckets it may solve (:func:`deal`), which on an LLM weight's
channel are a tenth of them, so most crossings cost a few arithmetic steps and no stores.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit

_jit = njit(nogil=True, error_model="numpy")

#: Crossings per bucket of the integer sweep: a bucket whose bound reaches the best error found
#: is passed whole, unsorted.
BUCKET = 8
#: :func:`deal`'s passes: the sums of every bucket (and the crossings that clamp for some zero
#: point, kept), those sums with every crossing kept (a small box: a second pass would cost
#: more than keeping them), or the other crossings of the buckets asked for.
SUMS, SUMS_ALL, KEEP = 0, 2, 1


@njit(nogil=True, error_model="numpy", inline="always")
def bucket_of(b, s2, scale, nb):
    """The bucket of breakpoint ``b`` among ``nb`` equal buckets of a box ending at ``s2``
    (``scale``: ``nb`` over the box's width), largest scales first."""
    return min(max(int((s2 - b) * scale), 0), nb - 1)


@_jit
def bucket_table(s1, s2, nb, cols):
    """``scale`` for :func:`bucket_of` of ``nb`` buckets of ``[s1, s2]``, and their table:
    ``cols`` columns per bucket, zero but for columns 2 and 3, which are to hold its least and
    largest breakpoint (a bucket still empty has the least above the largest)."""
    width = s2 - s1
    scale = nb / width if width > 0.0 else 0.0
    bk = np.zeros((nb, cols))
    for j in range(nb):
        bk[j, 2] = np.inf
        bk[j, 3] = -np.inf
    return scale, bk


@_jit
def new_buckets(ne, s1, s2, nb, cols):
    """Empty buckets for ``ne`` crossings of the box ``[s1, s2]`` to be ordered by
    :func:`place`: (``scale`` for :func:`bucket_of`, ``start`` for the counts, ``slot`` for
    each crossing's bucket, ``bk``: :func:`bucket_table`)."""
    scale, bk = bucket_table(s1, s2, nb, cols)
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
    """Sort ``order[e0:e1]`` by ``b``, largest first, equal ones kept in their order (an
    insertion sort: a bucket is small)."""
    for i in range(e0 + 1, e1):
        o = order[i]
        v = b[o]
        t = i - 1
        while t >= e0 and b[order[t]] < v:
            order[t + 1] = order[t]
            t -= 1
        order[t + 1] = o


@_jit
def stays_inner(m_old, xv, inner_lo, inner_hi):
    """Whether a crossing from code ``m_old`` (one step outward, by the sign of ``xv``) stays
    among the codes inside every zero point's range: an inner crossing, not an edge event."""
    m_new = m_old + (1 if xv > 0.0 else -1)
    return inner_lo <= m_old <= inner_hi and inner_lo <= m_new <= inner_hi


@_jit
def next_full(bk, j, nb):
    """The first bucket from ``j`` on that holds a crossing (``nb``: none)."""
    while j < nb and bk[j, 2] > bk[j, 3]:
        j += 1
    return j


@_jit
def edge_below(bk, nb, s1):
    """For each ``j`` (and ``nb``): the least breakpoint of the first bucket from ``j`` on
    whose column 4 marks a clamping crossing, ``s1`` when there is none -- where the stretch
    of the zero points' edge parts that starts in bucket ``j − 1`` ends at the latest."""
    out = np.empty(nb + 1)
    out[nb] = s1
    for j in range(nb - 1, -1, -1):
        out[j] = bk[j, 2] if bk[j, 4] != 0.0 else out[j + 1]
    return out


@_jit
def deal(mode, x, a, rlo, rhi, rf, n_runs, s1, s2, scale, nb, inner_lo, inner_hi, bk, want,
         j_lo, j_hi, ev_b, ev_x, ev_m, head, link, ne):
    """The crossings of a box's runs (:mod:`quantscope.core.kernels.mse_sweep`: each element
    of a run whose codes differ steps outward from code ``±k`` to ``±(k + 1)`` at its
    breakpoint ``|x| / (k + 1/2)``), in the order of the runs, their steps and elements.

    ``SUMS``: each bucket's least and largest breakpoint; for the crossings between codes
    ``inner_lo .. inner_hi`` (inside every zero point's range) their changes of ``Σxm`` and
    ``Σm²`` added up (columns 0 and 1); the others -- clamped for some zero point, the edge
    events -- mark their bucket (column 4) and are kept (``SUMS_ALL``: every crossing is).
    ``KEEP``: the inner crossings of the buckets with ``want`` are kept. A crossing kept is
    entry ``ne`` of ``ev_b`` (its breakpoint), ``ev_x`` (its value) and ``ev_m`` (its code
    before the step), linked into its bucket's list (``head``, ``link``: last kept first).
    Returns the entries then kept.

    ``KEEP`` visits only the elements whose breakpoints fall in buckets ``j_lo .. j_hi`` (those
    with ``want``): a run's breakpoints of one step are monotone in its sorted values, so they
    are found by binary search (the buckets a sweep solves are a narrow part of its box)."""
    p = a
    for r in range(n_runs):
        cnt = int(rf[r, 0])
        lo, hi = rlo[r], rhi[r]
        if lo != hi:
            # from the code at s2 (the larger scale, nearer zero) outward, by the run's sign
            step = 1 if lo >= 0 else -1
            for k in range(abs(lo if lo >= 0 else hi), max(abs(lo), abs(hi))):
                inv = 1.0 / (k + 0.5)
                m_old = step * k
                m_new = m_old + step
                inner = inner_lo <= m_old <= inner_hi and inner_lo <= m_new <= inner_hi
                if mode == KEEP and not inner:
                    continue
                d1 = np.float64(m_new - m_old)
                d2 = np.float64(m_new * m_new - m_old * m_old)
                i0, i1 = p, p + cnt
                if mode == KEEP:  # positive values: later breakpoints larger, buckets lower
                    up = step > 0
                    i0 = _first_at(x, p, p + cnt, inv, s1, s2, scale, nb, j_hi if up else j_lo,
                                   up)
                    i1 = _first_at(x, i0, p + cnt, inv, s1, s2, scale, nb,
                                   j_lo - 1 if up else j_hi + 1, up)
                for i in range(i0, i1):
                    xv = np.float64(x[i])
                    b = min(max(abs(xv) * inv, s1), s2)
                    j = bucket_of(b, s2, scale, nb)
                    if mode != KEEP:
                        bk[j, 2] = min(bk[j, 2], b)
                        bk[j, 3] = max(bk[j, 3], b)
                        if inner:
                            bk[j, 0] += xv * d1
                            bk[j, 1] += d2
                            if mode == SUMS:
                                continue
                        else:
                            bk[j, 4] = 1.0
                    elif not want[j]:
                        continue
                    ev_b[ne] = b
                    ev_x[ne] = xv
                    ev_m[ne] = m_old
                    link[ne] = head[j]
                    head[j] = ne
                    ne += 1
        p += cnt
    return ne


@_jit
def _first_at(x, p, q, inv, s1, s2, scale, nb, jb, up):
    """The first position of sorted ``x[p:q]`` (one sign) whose breakpoint ``|x|·inv`` lies in
    bucket ``jb`` or past it: lower buckets when ``up`` (positive values), higher ones when
    not; ``q`` if none."""
    while p < q:
        mid = (p + q) >> 1
        j = bucket_of(min(max(abs(np.float64(x[mid])) * inv, s1), s2), s2, scale, nb)
        if (j <= jb) if up else (j >= jb):
            q = mid
        else:
            p = mid + 1
    return p


@_jit
def sorted_crossings(head, link, j, ev_b, ev_x, ev_m, inner_lo, inner_hi, edge_only, buf):
    """The kept crossings of bucket ``j`` (:func:`deal`; ``edge_only``: those that clamp for
    some zero point) into ``buf``, largest breakpoint first, equal ones in the order they were
    kept; returns how many."""
    n = 0
    e = head[j]
    while e >= 0:
        if not (edge_only and stays_inner(ev_m[e], ev_x[e], inner_lo, inner_hi)):
            buf[n] = e
            n += 1
        e = link[e]
    for i in range(n // 2):  # the list holds the last kept first
        buf[i], buf[n - 1 - i] = buf[n - 1 - i], buf[i]
    sort_bucket(buf, ev_b, 0, n)
    return n
