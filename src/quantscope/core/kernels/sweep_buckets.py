"""The buckets of scales that a box's sweep deals its breakpoint crossings into: compiled loops
shared by the integer search's sweep (:mod:`quantscope.core.kernels.mse_sweep`) and the
number formats' (:mod:`quantscope.core.formats.grid_bound`).

A box ``[s1, s2]`` is cut into equal buckets, largest scales first; a crossing goes to the
bucket of its breakpoint (:func:`bucket_of`). A sweep adds up each bucket's crossings, passes
most buckets whole on those sums, and puts in order only the crossings of the buckets it
solves piece by piece. The formats' sweep keeps every crossing and orders them all by
bucket (:func:`new_buckets`, :func:`place`); the integer sweep adds up the sums first and
keeps only the crossings of the buckets it may solve (:func:`deal`), which on an LLM weight's
channel are a tenth of them, so most crossings cost a few arithmetic steps and one store (the
number of their bucket, which the second pass reads instead of computing it again).
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
def breakpoint_in(xv, inv, s1, s2):
    """The breakpoint ``|x|·inv`` of value ``xv`` (``inv``: its step's ``1/(k + 1/2)``) held
    to the box ``[s1, s2]``: one expression for every pass, so a crossing kept by
    :func:`deal`'s keep pass has the breakpoint its sums pass put it in a bucket by."""
    return min(max(abs(xv) * inv, s1), s2)


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
         j_lo, j_hi, slot, steps, ev_b, ev_x, ev_m, head, link, ne):
    """The crossings of a box's runs (:mod:`quantscope.core.kernels.mse_sweep`: each element
    of a run whose codes differ steps outward from code ``±k`` to ``±(k + 1)`` at its
    breakpoint ``|x| / (k + 1/2)``), in the order of the runs, their steps and elements.

    ``SUMS``: each bucket's least and largest breakpoint; for the crossings between codes
    ``inner_lo .. inner_hi`` (inside every zero point's range) their changes of ``Σxm`` and
    ``Σm²`` added up (columns 0 and 1), and written down: their buckets into ``slot`` (in the
    order above), their steps into ``steps`` (row 0: how many steps ``n``; rows ``1 .. n``:
    each step's first position in ``slot``, its run's first element and its code before the
    step; row ``n + 1``: the number written into ``slot``). The others -- clamped for some
    zero point, the edge events -- mark their bucket (column 4) and are kept (``SUMS_ALL``:
    every crossing is kept, and nothing written down). ``KEEP`` (after ``SUMS``, with its
    ``slot`` and ``steps``): the inner crossings of the buckets with ``want``, all of them in
    ``j_lo .. j_hi``, are kept. A crossing kept is entry ``ne`` of ``ev_b`` (its breakpoint),
    ``ev_x`` (its value) and ``ev_m`` (its code before the step), linked into its bucket's
    list (``head``, ``link``: last kept first). Returns the entries then kept.

    Each pass is a loop of its own, with no test of the pass or of the step's kind inside
    its loop over elements. The keep pass reads the buckets the sums pass wrote down instead
    of computing them again for its binary searches in every step of every run: one look at
    an integer per inner crossing, in the order dealt, and for the few in ``j_lo .. j_hi``
    (a narrow part of the box) their step, found by walking ``steps`` forward, and their
    breakpoint, computed again by the same expression from the same numbers. So it keeps the
    same crossings with the same breakpoints, in the same order, as the pass that computed
    every bucket again. The sums pass adds each bucket's crossings in the order of the runs,
    steps and elements, as before, so its sums are the same numbers to the bit, and a
    crossing's bucket is that of its own breakpoint, so the bucket's least and largest
    breakpoint bound every crossing in it (which the bound of
    :func:`quantscope.core.kernels.mse_sweep.box_sweep` rests on).

    On an LLM weight's channel (int8) the keep pass had been a third of the two passes' time;
    it now takes about half of what it took. The sums pass takes about as long: the tests
    taken out of its loop pay for the store of each crossing's bucket."""
    if mode == KEEP:
        return _keep_pass(x, s1, s2, want, j_lo, j_hi, slot, steps, ev_b, ev_x, ev_m, head,
                          link, ne)
    return _sums_pass(mode == SUMS_ALL, x, a, rlo, rhi, rf, n_runs, s1, s2, scale, nb,
                      inner_lo, inner_hi, bk, slot, steps, ev_b, ev_x, ev_m, head, link, ne)


@_jit
def _sums_pass(keep_all, x, a, rlo, rhi, rf, n_runs, s1, s2, scale, nb, inner_lo, inner_hi, bk,
               slot, steps, ev_b, ev_x, ev_m, head, link, ne):
    """:func:`deal`'s ``SUMS`` (``SUMS_ALL`` with ``keep_all``)."""
    p = a
    c = 0  # the inner crossings dealt so far: where this step's buckets go in ``slot``
    n_steps = 0
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
                d1 = np.float64(m_new - m_old)
                d2 = np.float64(m_new * m_new - m_old * m_old)
                if inner and not keep_all:
                    _add_up(x, p, cnt, inv, s1, s2, scale, nb, d1, d2, slot, c, bk)
                    n_steps += 1
                    steps[n_steps, 0] = c
                    steps[n_steps, 1] = p
                    steps[n_steps, 2] = m_old
                    c += cnt
                else:
                    ne = _add_kept(x, p, cnt, inv, s1, s2, scale, nb, inner, m_old, d1, d2, bk,
                                   ev_b, ev_x, ev_m, head, link, ne)
        p += cnt
    steps[0, 0] = n_steps
    steps[n_steps + 1, 0] = c
    return ne


@_jit
def _add_up(x, p, cnt, inv, s1, s2, scale, nb, d1, d2, slot, c, bk):
    """One step's inner crossings, of ``x[p:p + cnt]`` at ``|x|·inv``, added to their buckets
    (least and largest breakpoint, changes of ``Σxm`` and ``Σm²``), their buckets written
    down from ``slot[c]`` on."""
    xs = x[p:p + cnt]  # from 0: indices the compiler knows are not negative
    so = slot[c:c + cnt]
    for i in range(cnt):
        xv = np.float64(xs[i])
        b = breakpoint_in(xv, inv, s1, s2)
        j = bucket_of(b, s2, scale, nb)
        so[i] = j
        bk[j, 2] = min(bk[j, 2], b)
        bk[j, 3] = max(bk[j, 3], b)
        bk[j, 0] += xv * d1
        bk[j, 1] += d2


@_jit
def _add_kept(x, p, cnt, inv, s1, s2, scale, nb, inner, m_old, d1, d2, bk, ev_b, ev_x, ev_m,
              head, link, ne):
    """One step's crossings, of ``x[p:p + cnt]`` at ``|x|·inv``, added to their buckets and
    kept (entries from ``ne``): an edge step's (not ``inner``: its buckets marked, no sums) or
    a small box's."""
    xs = x[p:p + cnt]  # from 0: indices the compiler knows are not negative
    for i in range(cnt):
        xv = np.float64(xs[i])
        b = breakpoint_in(xv, inv, s1, s2)
        j = bucket_of(b, s2, scale, nb)
        bk[j, 2] = min(bk[j, 2], b)
        bk[j, 3] = max(bk[j, 3], b)
        if inner:
            bk[j, 0] += xv * d1
            bk[j, 1] += d2
        else:
            bk[j, 4] = 1.0
        ne = _keep(j, b, xv, m_old, ev_b, ev_x, ev_m, head, link, ne)
    return ne


@njit(nogil=True, error_model="numpy", inline="always")
def _keep(j, b, xv, m_old, ev_b, ev_x, ev_m, head, link, ne):
    """Keep a crossing as entry ``ne`` of bucket ``j``'s list; the next entry."""
    ev_b[ne] = b
    ev_x[ne] = xv
    ev_m[ne] = m_old
    link[ne] = head[j]
    head[j] = ne
    return ne + 1


@_jit
def _keep_pass(x, s1, s2, want, j_lo, j_hi, slot, steps, ev_b, ev_x, ev_m, head, link, ne):
    """:func:`deal`'s ``KEEP``: one look at each inner crossing's bucket, in the order dealt;
    a crossing kept is found in its step (``steps``: the next one whose first crossing is
    past it, found going forward) and its breakpoint computed again."""
    n_steps = steps[0, 0]
    s = 1
    for i in range(steps[n_steps + 1, 0]):
        j = slot[i]
        if j_lo <= j <= j_hi and want[j]:
            while steps[s + 1, 0] <= i:
                s += 1
            m_old = steps[s, 2]
            xv = np.float64(x[steps[s, 1] + i - steps[s, 0]])
            b = breakpoint_in(xv, 1.0 / (abs(m_old) + 0.5), s1, s2)
            ne = _keep(j, b, xv, m_old, ev_b, ev_x, ev_m, head, link, ne)
    return ne


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
