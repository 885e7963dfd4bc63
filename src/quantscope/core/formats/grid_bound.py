"""The global minimum of a number format's quantization error over its scale, found by branch
and bound: compiled loops.

A format (FP8, FP6, FP4 ...) is an ascending grid of values ``v`` with the midpoints ``m``
between neighbours as its rounding boundaries; at scale ``s`` an element ``x`` becomes
``s · v[c]`` with ``c`` the number of midpoints below ``x / s`` (the nearest value; beyond
the outer midpoints the outer value, which is what a saturating cast gives). As ``s`` shrinks,
``x / s`` moves away from zero and ``c`` steps outward at each *breakpoint* ``s = x / m[k]``;
between breakpoints every code is fixed and the total error is the quadratic
``Σx² − 2s·Σxv + s²·Σv²``. An exhaustive search visits ``elements × midpoints`` pieces: 4·10^9
for a 4096×4096 weight in FP8.

The bound follows :mod:`quantscope.core.kernels.mse_bound` (the integer search), with the
grid's values in place of integer codes and no zero point. For a *box* of scales ``[s1, s2]``
the codes ``c(s1)`` and ``c(s2)`` of each element bound its codes in the box (``c`` is
monotone in ``s`` for either sign of ``x``); sorted values with the same pair form a *run*:

* a run with one code ``c`` keeps it on the whole box: its error is exactly ``Σ(x − s·v[c])²``;
* a run with two neighbouring codes splits, at each scale, into a prefix at ``v[c]`` and a
  suffix at ``v[c + 1]`` (the split at ``s · m[c]``): its least error over the box, exact in
  one pass over the run (:func:`two_value_run_minimum`), or for a long row the sum of each
  element's squared distance to the nearer of the intervals ``s1·v..s2·v`` of its two values
  (from the row's prefix sums);
* any other run counts 0.

The exact part is one quadratic, minimised over the box in closed form. A box whose bound is
not below the best error found (less a relative ``eps``) is dropped; a box with few
breakpoints is settled by sweeping them (:func:`grid_sweep`: on every piece the convex
quadratic is least at a float32 neighbour of its vertex clipped into the piece, so the sweep
returns the least error of every float32 scale of the box); other boxes are halved at a
float32 scale. Scales below a ``s_lo`` are excluded wholesale: there every element beyond
``s_lo · max`` is at least its distance to ``s_lo · max`` away from any grid point
(:func:`clip_floor`), a bound that already exceeds the best error.

The evaluations take codes from ``x · (1/s)`` in float64 and the products ``s · v`` unrounded;
the engine divides in float32 and rounds ``s · v`` to float32: the two differ beside rounding
ties (where both codes' errors agree to within an ulp) and by the float32 rounding of each
reconstruction, far below the search's ``eps`` of the error of any unit quantized to fewer than
20 bits. The caller re-evaluates the winner by the engine's own rule.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.elements import float32_bits, pow2
from quantscope.core.kernels.block_sums import prefix_at, prefix_from
from quantscope.core.kernels.box_heap import grow, heap_add, heap_pop
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.long_runs import _dd, _gap_bound
from quantscope.core.kernels.mse_sweep import _bucket_low, _least_on, _piece_best
from quantscope.core.kernels.run_ends import _first_not_below
from quantscope.core.kernels.small_unique import small_unique
from quantscope.core.kernels.sorted_kernel import _upper_bound
from quantscope.core.kernels.sweep_buckets import bucket_of, new_buckets, place, sort_bucket

_jit = njit(nogil=True, error_model="numpy")

#: A long row's two-value runs up to this long take the exact bound (one pass over the run),
#: longer ones the bound from the prefix sums alone: in a wide box the exact one's passes over
#: every crossing element cost more than the boxes it saves (a 4096x4096 weight in FP8 per
#: tensor: 2.1 s of processor time at 256, 2.7 s at 8192, the same optimum).
EXACT_RUN = 256
#: Crossings per bucket of a sweep (:func:`grid_sweep`): a bucket whose bound reaches the
#: error to beat is passed whole, on its sums (FP8 per channel on a 4096x4096 weight, the
#: search's processor time on one thread against 8: 0.93; 32 as 16).
SWEEP_BUCKET = 16
#: Room for the rounding of a sweep's bucket sums, as a share of the unit's Σx²: a bucket is
#: passed for the error between buckets only when its bound exceeds that error by more.
CUT_ROOM = 1e-12
#: A long row's run ends are galloped on its value at every ``SAMPLE``-th position
#: (:func:`_run_end`), a copy of 1/1024 of the row that stays in the cache (FP8 E4M3 per
#: tensor on a 4096x4096 weight, the search's processor time: 0.79 s at 64, 0.78 at 256,
#: 0.78-0.85 at 1024, against 0.94-1.01 with no sample; 1024 adds 0.004 bytes per element).
SAMPLE = 1024
#: Columns of the per-unit result (:func:`unit_optimum`).
OUT_ERR, OUT_SCALE, OUT_PROVEN, OUT_BOXES, OUT_S_LO, OUT_MM_ERR, OUT_MM_TERMS = range(7)
OUT_COLUMNS = 7


@_jit
def grid_code(t, mids):
    """The index of the grid value nearest ``t``: the number of midpoints below it (a value
    on a midpoint takes the lower code; beyond the outer midpoints, the outer values)."""
    lo = 0
    hi = mids.size
    while lo < hi:
        m = (lo + hi) >> 1
        if mids[m] < t:
            lo = m + 1
        else:
            hi = m
    return lo


@njit(nogil=True, error_model="numpy", inline="always")
def code_of(t, mids, fmt):
    """The index of the grid value nearest ``t``. ``fmt`` = (mbits, emin, index of zero,
    positive values) of a floating-point grid: the nearest value from ``t``'s binade (the
    exponent of ``float32(|t|)``; where that rounds up to the next power of two, the
    mantissa rounds to it too) and ``rint`` of its mantissa (ties to even rather than down:
    either code of a tie is as near), beyond the last midpoint the largest value, with no
    search; ``fmt[0] < 0``: any other grid, by :func:`grid_code` (a binary search whose
    unpredictable branches took most of a box's time)."""
    mbits = fmt[0]
    if mbits < 0:
        return grid_code(t, mids)
    a = abs(t)
    if a > mids[mids.size - 1]:
        c = fmt[3]
    else:
        emin = fmt[1]
        e = (np.int64(float32_bits(np.float32(a))) >> 23) - 127
        if e < emin:
            c = np.int64(np.rint(a * pow2(mbits - emin)))
        else:
            c = ((e - emin + 1) << mbits) + np.int64(np.rint(a * pow2(mbits - e))) - (1 << mbits)
        c = min(c, fmt[3])
    return fmt[2] + c if t > 0 else fmt[2] - c


@_jit
def _same(xv, inv1, inv2, mids, fmt, lo, hi):
    c1 = code_of(xv * inv1, mids, fmt)
    c2 = code_of(xv * inv2, mids, fmt)
    return min(c1, c2) == lo and max(c1, c2) == hi


@_jit
def _run_end(x, p, b, a, smp, m0, inv1, inv2, mids, fmt, lo, hi):
    """First position after ``p`` (at most ``b``) whose codes are not ``(lo, hi)`` (codes are
    monotone in the sorted values): galloping on the row's sample ``smp`` (from ``m0``: its
    value at every :data:`SAMPLE`-th position from ``a``), then a binary search on the
    sample and one within the stretch of the row between two samples. The row is long: a
    search on it alone missed the cache at nearly every probe, most of a box's time."""
    kp = (p - a) // SAMPLE  # the last sample at or before p
    k_top = (b - 1 - a) // SAMPLE  # the row's last sample
    same_k = kp  # the last sample known to keep the codes (kp: p itself stands for it)
    diff_k = k_top + 1  # the first known not to (k_top + 1: none)
    t = kp + 1
    step = 1
    while t <= k_top:
        if _same(np.float64(smp[m0 + t]), inv1, inv2, mids, fmt, lo, hi):
            same_k = t
            t += step
            step *= 2
        else:
            diff_k = t
            break
    while diff_k - same_k > 1:
        mid = (same_k + diff_k) >> 1
        if _same(np.float64(smp[m0 + mid]), inv1, inv2, mids, fmt, lo, hi):
            same_k = mid
        else:
            diff_k = mid
    left = p + 1 if same_k == kp else a + same_k * SAMPLE + 1
    right = b if diff_k > k_top else a + diff_k * SAMPLE
    while left < right:
        mid = (left + right) >> 1
        if _same(np.float64(x[mid]), inv1, inv2, mids, fmt, lo, hi):
            left = mid + 1
        else:
            right = mid
    return left


@_jit
def two_value_run_minimum(x, p, q, s1, s2, vl, vh, mid, sx, sxx):
    """The least error over scales in ``[s1, s2]`` of a run ``x[p:q]`` whose codes are the
    neighbouring values ``vl < vh`` (``mid`` between them) on the box; ``sx``, ``sxx`` its
    Σx and Σx². At a scale ``s`` the elements up to ``s · mid`` take ``vl``, the rest ``vh``:
    for every split of the sorted run, the quadratic of that split least over the scales
    that give it (one pass)."""
    cnt = q - p
    best = np.inf
    pre = 0.0
    inv_mid = 1.0 / mid
    for j in range(cnt + 1):
        if j > 0:
            e1 = np.float64(x[p + j - 1]) * inv_mid
        else:
            e1 = -np.inf if mid > 0 else np.inf
        if j < cnt:
            e2 = np.float64(x[p + j]) * inv_mid
        else:
            e2 = np.inf if mid > 0 else -np.inf
        lower = max(min(e1, e2), s1)
        upper = min(max(e1, e2), s2)
        if lower <= upper:
            bq = vl * pre + vh * (sx - pre)
            cq = vl * vl * j + vh * vh * (cnt - j)
            if cq > 0.0:
                s = min(max(bq / cq, lower), upper)
            else:
                s = upper if bq > 0.0 else lower
            err = sxx - 2.0 * s * bq + s * s * cq
            if err < best:
                best = err
        if j < cnt:
            pre += np.float64(x[p + j])
    return max(best, 0.0) if best < np.inf else 0.0


@_jit
def _runs_merge(x, a, b, s1, s2, vals, mids, rlo, rhi, rf):
    """:func:`grid_runs` of a walked row: the codes at ``s1`` and ``s2`` carried along the
    sorted row (each only grows: a compare per element and midpoint passed), the runs'
    sums element by element, then the two-value bounds.

    A run goes on while neither code grows: its elements are summed by a loop that only
    checks that (count and sums in registers, the same additions in the same order), and
    the codes move on where it stops. One loop doing both spilled its values to memory and
    took three times as long per element."""
    inv1, inv2 = 1.0 / s1, 1.0 / s2
    last = mids.size
    row = x[a:b]  # from 0: indices the compiler knows are not negative
    n = b - a
    c1 = 0
    c2 = 0
    r = 0
    i = 0
    while i < n:
        xv = np.float64(row[i])
        t1 = xv * inv1
        while c1 < last and mids[c1] < t1:
            c1 += 1
        t2 = xv * inv2
        while c2 < last and mids[c2] < t2:
            c2 += 1
        # s1 <= s2, so c1 >= c2; the run ends where either code grows
        th1 = mids[c1] if c1 < last else np.inf
        th2 = mids[c2] if c2 < last else np.inf
        cnt = 0.0
        sx = 0.0
        sxx = 0.0
        j = i
        while j < n:
            v = np.float64(row[j])
            if v * inv1 > th1 or v * inv2 > th2:
                break
            cnt += 1.0
            sx += v
            sxx += v * v
            j += 1
        lo, hi = min(c1, c2), max(c1, c2)
        rlo[r] = lo
        rhi[r] = hi
        rf[r, 0] = cnt
        rf[r, 1] = sx
        rf[r, 2] = sxx
        rf[r, 3] = 0.0
        if hi == lo + 1 and s1 < s2:
            rf[r, 3] = two_value_run_minimum(x, a + i, a + j, s1, s2, vals[lo], vals[hi],
                                             mids[lo], sx, sxx)
        r += 1
        i = j
    return r


@_jit
def grid_runs(x, a, b, rec, k0, smp, m0, search, s1, s2, vals, mids, fmt, rlo, rhi, rf):
    """The runs of sorted ``x[a:b]`` for the box ``[s1, s2]`` (module doc): their codes into
    ``rlo``/``rhi`` (ascending pair) and ``rf`` (count, Σx, Σx², two-value bound). ``search``:
    each run's end found by galloping on the codes (on the row's sample ``smp`` from ``m0``:
    :func:`_run_end`) and its sums from the row's block prefix sums ``rec`` (from ``k0``),
    else a walk (:func:`_runs_merge`). Returns the number of runs."""
    if not search:
        return _runs_merge(x, a, b, s1, s2, vals, mids, rlo, rhi, rf)
    inv1, inv2 = 1.0 / s1, 1.0 / s2
    r = 0
    p = a
    g = (0.0, 0.0, 0.0, 0.0)
    while p < b:
        xv = np.float64(x[p])
        c1 = code_of(xv * inv1, mids, fmt)
        c2 = code_of(xv * inv2, mids, fmt)
        lo, hi = min(c1, c2), max(c1, c2)
        q = _run_end(x, p, b, a, smp, m0, inv1, inv2, mids, fmt, lo, hi)
        bound = 0.0
        two = hi == lo + 1 and s1 < s2
        if two and q - p > EXACT_RUN:
            bound, gq = _gap_bound(x, a, p, q, g, rec, k0, s1, s2, vals[lo], vals[hi])
        else:
            gq = prefix_from(x, a, p, g, q, rec, k0)
        sx, sxx = _dd(g, gq)
        g = gq
        if two and q - p <= EXACT_RUN:
            bound = two_value_run_minimum(x, p, q, s1, s2, vals[lo], vals[hi], mids[lo], sx,
                                          sxx)
        rlo[r] = lo
        rhi[r] = hi
        rf[r, 0] = q - p
        rf[r, 1] = sx
        rf[r, 2] = sxx
        rf[r, 3] = bound
        r += 1
        p = q
    return r


@_jit
def box_bound(rlo, rhi, rf, n_runs, s1, s2, vals):
    """The lower bound of the error over ``[s1, s2]`` from the box's runs (module doc); at
    ``s1 == s2`` the error at that scale."""
    q0 = 0.0
    q1 = 0.0
    q2 = 0.0
    t = 0.0
    for r in range(n_runs):
        if rlo[r] == rhi[r]:
            v = vals[rlo[r]]
            q0 += rf[r, 2]
            q1 += v * rf[r, 1]
            q2 += v * v * rf[r, 0]
        elif rhi[r] == rlo[r] + 1:
            t += rf[r, 3]
    if q2 > 0.0:
        s = min(max(q1 / q2, s1), s2)
    else:
        s = s2 if q1 > 0.0 else s1
    return max(q0 - 2.0 * q1 * s + q2 * s * s, 0.0) + t


@_jit
def box_crossings(rlo, rhi, rf, n_runs):
    """Breakpoints inside the box: one per element and step between its two codes."""
    total = 0
    for r in range(n_runs):
        total += int(rf[r, 0]) * (rhi[r] - rlo[r])
    return total


@_jit
def _step(vals, k, positive):
    """``(d1, d2)`` of a crossing of midpoint ``k`` away from zero: the change of the value
    and of its square (``k`` to ``k + 1`` for a positive element, ``k + 1`` to ``k`` for a
    negative one)."""
    old = vals[k] if positive else vals[k + 1]
    new = vals[k + 1] if positive else vals[k]
    return new - old, new * new - old * old


@_jit
def _bucket_sums(x, a, rlo, rhi, rf, n_runs, s1, s2, vals, mids, scale, count, bk):
    """The box's crossings dealt into buckets by scale (:func:`grid_sweep`), only their sums
    kept: ``count[j + 1]`` the crossings of bucket ``j``, ``bk[j]`` = (Σ of their changes of
    ``q1``, of ``q2``, their least and their largest breakpoint). Returns ``(q0, q1, q2)``:
    the quadratic at ``s2``."""
    nb = count.size - 1
    q0 = 0.0
    q1 = 0.0
    q2 = 0.0
    p = a
    for r in range(n_runs):
        cnt = int(rf[r, 0])
        lo, hi = rlo[r], rhi[r]
        q0 += rf[r, 2]
        positive = np.float64(x[p]) > 0.0  # a run whose codes differ has one sign
        c2 = lo if lo == hi or positive else hi  # the code at s2: nearer zero
        v = vals[c2]
        q1 += v * rf[r, 1]
        q2 += v * v * rf[r, 0]
        for k in range(lo, hi):  # each midpoint crossed, the run's elements in order
            inv = 1.0 / mids[k]
            d1, d2 = _step(vals, k, positive)
            xs = x[p:p + cnt]  # from 0: indices the compiler knows are not negative
            for i in range(cnt):
                xv = np.float64(xs[i])
                b = min(max(xv * inv, s1), s2)
                j = bucket_of(b, s2, scale, nb)
                count[j + 1] += 1
                bk[j, 0] += xv * d1
                bk[j, 1] += d2
                bk[j, 2] = min(bk[j, 2], b)
                bk[j, 3] = max(bk[j, 3], b)
        p += cnt
    return q0, q1, q2


@_jit
def _kept_crossings(x, a, rlo, rhi, rf, n_runs, s1, s2, vals, mids, scale, kept, start,
                    slot, ev_b, ev_1, ev_2):
    """The crossings of the kept buckets (``kept[j + 1] > kept[j]``: ``kept`` counts them
    cumulatively), dealt as :func:`_bucket_sums` deals them: breakpoint, changes of ``q1`` and
    ``q2`` into ``ev_*``, bucket into ``slot``, counted in ``start[j + 1]``. One midpoint's
    crossings of a run are in order of scale: a run's crossings with no kept bucket between
    its first and last are passed without a look."""
    nb = start.size - 1
    n = 0
    p = a
    for r in range(n_runs):
        cnt = int(rf[r, 0])
        lo, hi = rlo[r], rhi[r]
        positive = np.float64(x[p]) > 0.0
        for k in range(lo, hi):
            inv = 1.0 / mids[k]
            ja = bucket_of(min(max(np.float64(x[p]) * inv, s1), s2), s2, scale, nb)
            jb = bucket_of(min(max(np.float64(x[p + cnt - 1]) * inv, s1), s2), s2, scale, nb)
            if kept[max(ja, jb) + 1] == kept[min(ja, jb)]:
                continue
            d1, d2 = _step(vals, k, positive)
            for i in range(p, p + cnt):
                xv = np.float64(x[i])
                b = min(max(xv * inv, s1), s2)
                j = bucket_of(b, s2, scale, nb)
                if kept[j + 1] > kept[j]:
                    ev_b[n] = b
                    ev_1[n] = xv * d1
                    ev_2[n] = d2
                    slot[n] = j
                    start[j + 1] += 1
                    n += 1
        p += cnt
    return n


@_jit
def grid_sweep(x, a, rlo, rhi, rf, n_runs, s1, s2, vals, mids, best, ev_b, ev_1, ev_2, out):
    """The least error over every float32 scale of ``[s1, s2]`` of sorted ``x`` from position
    ``a``, given the box's runs: the pieces between its breakpoints, largest scale first, each
    minimised at the float32 neighbours of its vertex. ``out`` = (error, scale) is written only
    where something beats ``best``; returns whether it was. ``out[2]``: a lower bound of the
    error over every real scale of the box, the least where something was found (what
    :func:`unit_optimum` folds onto lower octaves). ``out[3]``: the error at ``s1`` (every
    crossing taken: the codes at ``s1``), by the same sums. ``ev_*``: room for the crossings
    of the buckets kept (where they hold fewer, this sweep takes its own).

    Most of a box holds nothing better than ``best``, and most breakpoints need not be put in
    order, nor even stored: they are dealt into buckets of about :data:`SWEEP_BUCKET` by
    scale, each bucket keeping only its sums. A crossing from value ``v`` to ``w`` at
    breakpoint ``b`` changes the error by ``(w² − v²)·s·(s − b)`` below ``b`` (nothing above),
    which on a bucket's span, narrower than an octave, is least at the span's lowest scale: a
    bucket whose first quadratic's least on its span plus those least changes reaches the
    error to beat holds nothing better. That error is at most ``best`` and, first, at most the
    least error of the pieces *between* buckets (no crossing inside: each bucket's first
    quadratic is the error there), a few thousand exact errors spread over the box whose least
    lies near the box's own (on a 4096-element row in FP8 about one bucket in a thousand is
    left; ``best`` from the search's few evaluations leaves one in twelve). Only the crossings
    of the buckets left are dealt again, stored, sorted and swept piece by piece, the buckets
    in order of scale, so that of equal errors the largest scale is found, as a sweep of
    every piece finds it."""
    ne = box_crossings(rlo, rhi, rf, n_runs)
    nb = max(1, ne // SWEEP_BUCKET)
    scale, count, _, bk = new_buckets(0, s1, s2, nb, 4)
    q0, q1, q2 = _bucket_sums(x, a, rlo, rhi, rf, n_runs, s1, s2, vals, mids, scale, count,
                              bk)
    if ne == 0:  # one piece: the whole box
        found, err, s = _piece_best(q0, q1, q2, s1, s2, s1, s2, best)
        if found:
            out[0] = err
            out[1] = s
        out[2] = max(_least_on(q0, q1, q2, s1, s2), 0.0)
        out[3] = q0 - 2.0 * s1 * q1 + s1 * s1 * q2
        return found
    # each bucket's first quadratic, and the pieces between buckets: the error to beat
    b1 = np.empty(nb)
    b2 = np.empty(nb)
    cut = best
    upper = s2
    for j in range(nb):
        b1[j] = q1
        b2[j] = q2
        if count[j + 1] == 0:
            continue
        if bk[j, 3] < upper:
            cut = _piece_best(q0, q1, q2, bk[j, 3], upper, s1, s2, cut)[1]
        q1 += bk[j, 0]
        q2 += bk[j, 1]
        upper = bk[j, 2]
    out[3] = q0 - 2.0 * s1 * q1 + s1 * s1 * q2
    cut = min(cut, _piece_best(q0, q1, q2, min(s1, upper), upper, s1, s2, cut)[1])
    # a bucket is kept when its bound is below both (the cut with room for the rounding of
    # its sums: the bucket that holds the cut's own piece is always kept)
    cut += CUT_ROOM * q0
    kept = np.zeros(nb + 1, np.int64)
    span_lo = np.empty(nb)  # per bucket, the scales its sweep covers
    span_hi = np.empty(nb)
    least = np.inf
    n_kept = 0
    last = 0  # the last nonempty bucket
    hi = s2
    nxt = 0
    for j in range(nb):
        kept[j + 1] = kept[j]
        if count[j + 1] == 0:
            continue
        last = j
        nxt = max(nxt, j + 1)
        while nxt < nb and count[nxt + 1] == 0:
            nxt += 1
        lo = s1 if nxt >= nb else bk[nxt, 3]
        span_lo[j] = lo
        span_hi[j] = hi
        hi = bk[j, 2]
        if 2.0 * lo >= bk[j, 3]:
            low = _bucket_low(q0, b1[j], b2[j], bk, j, lo, span_hi[j])
            if low >= best or low > cut:
                least = min(least, low)
                continue
        kept[j + 1] += 1
        n_kept += count[j + 1]
    hit = False
    if n_kept > 0:
        if n_kept > ev_b.size:  # only the kept crossings are stored: a few of the box's
            ev_b = np.empty(n_kept)
            ev_1 = np.empty(n_kept)
            ev_2 = np.empty(n_kept)
        start = np.zeros(nb + 1, np.int64)
        slot = np.empty(n_kept, np.int64)
        n = _kept_crossings(x, a, rlo, rhi, rf, n_runs, s1, s2, vals, mids, scale, kept,
                            start, slot, ev_b, ev_1, ev_2)
        order = place(slot, start, n, nb)
        for j in range(nb):
            if kept[j + 1] == kept[j]:
                continue
            q1 = b1[j]
            q2 = b2[j]
            e0, e1 = start[j], start[j + 1]
            sort_bucket(order, ev_b, e0, e1)
            upper = span_hi[j]
            for i in range(e0, e1 + 1):
                if i < e1:
                    o = order[i]
                    lower = ev_b[o]
                else:  # the bucket's last piece, down to the next bucket's largest breakpoint
                    lower = span_lo[j]
                if lower < upper or (i == e1 and j == last):
                    lower = min(lower, upper)
                    least = min(least, _least_on(q0, q1, q2, lower, upper))
                    found, err, s = _piece_best(q0, q1, q2, lower, upper, s1, s2, best)
                    if found:
                        best = err
                        out[0] = err
                        out[1] = s
                        hit = True
                if i < e1:
                    q1 += ev_1[o]
                    q2 += ev_2[o]
                    upper = lower
    out[2] = max(least, 0.0)
    return hit


@_jit
def _span_sums(x, a, p, q, rec, k0, search):
    """``(Σx, Σx²)`` of sorted ``x[p:q]`` (a row from ``a``)."""
    if search:
        return _dd(prefix_at(x, a, p, rec, k0), prefix_at(x, a, q, rec, k0))
    sx = 0.0
    sxx = 0.0
    for i in range(p, q):
        v = np.float64(x[i])
        sx += v
        sxx += v * v
    return sx, sxx


@_jit
def clip_floor(x, a, b, rec, k0, search, t):
    """``Σ (|x| − t)²`` over the elements of sorted ``x[a:b]`` with ``|x| > t``: at every scale
    whose grid ends within ``±t`` each of them is at least that far from every grid point."""
    p1 = _first_not_below(x, a, b, -t)
    p2 = _upper_bound(x, p1, b, t)
    sx, sxx = _span_sums(x, a, a, p1, rec, k0, search)
    total = sxx + 2.0 * t * sx + t * t * (p1 - a)
    sx, sxx = _span_sums(x, a, p2, b, rec, k0, search)
    total += sxx - 2.0 * t * sx + t * t * (b - p2)
    return max(total, 0.0)


@_jit
def new_scratch(n_values):
    """The buffers of :func:`unit_optimum` for a grid of ``n_values`` values."""
    cap_runs = 2 * n_values + 8
    cap = 256
    return (np.empty(cap_runs, np.int64), np.empty(cap_runs, np.int64),
            np.empty((cap_runs, 4)), np.empty(cap), np.empty(cap), np.empty(cap),
            np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(1024),
            np.empty(1024), np.empty(1024), np.empty(4))


@_jit
def _error_at(x, a, b, rec, k0, smp, m0, search, s, vals, mids, fmt, rlo, rhi, rf):
    n_runs = grid_runs(x, a, b, rec, k0, smp, m0, search, s, s, vals, mids, fmt, rlo, rhi, rf)
    return box_bound(rlo, rhi, rf, n_runs, s, s, vals)


@_jit
def sub_slack(x, a, b, t, vals, fmt):
    """How much the error at scale ``t`` can exceed the error on the unbounded grid
    (:func:`unit_optimum`) for the elements of sorted ``x[a:b]`` not beyond the top: only the
    elements below ``t`` times the smallest normal value differ, each by at most its squared
    half-gap of the grid there (``t`` times the widest gap between values up to it)."""
    edge = pow2(fmt[1])
    gap = 0.0
    z0 = fmt[2]
    for k in range(z0, vals.size - 1):
        if vals[k] >= edge:
            break
        gap = max(gap, vals[k + 1] - vals[k])
    lim = t * edge
    cnt = _upper_bound(x, a, b, lim) - _first_not_below(x, a, b, -lim)
    half = 0.5 * t * gap
    return cnt * half * half


@_jit
def _depth(n, runs, crossings):
    """The most additions any term of an error's sums goes through, for a row of ``n``
    elements in ``runs`` runs and a sweep of ``crossings`` (0: an evaluation at one scale):
    each element's square, its run's sums, the runs' and the buckets' sums in turn, and the
    crossings of one bucket at most -- what bounds the sums' rounding
    (:func:`quantscope.core.stats.format_mse.min_max_floor`)."""
    return float(n + runs + crossings + crossings // SWEEP_BUCKET + 17)


@_jit
def _record(r_s1, r_s2, r_b, n_rec, s1, s2, bound):
    if n_rec >= r_s1.size:
        r_s1 = grow(r_s1, 2 * r_s1.size)
        r_s2 = grow(r_s2, 2 * r_s2.size)
        r_b = grow(r_b, 2 * r_b.size)
    r_s1[n_rec] = s1
    r_s2[n_rec] = s2
    r_b[n_rec] = bound
    return r_s1, r_s2, r_b, n_rec + 1


@_jit
def _lowest_scale(x, a, b, rec, k0, search, s_mm, s_floor, top, threshold):
    """The lowest scale not excluded: the largest power-of-two fraction of ``s_mm`` (float32)
    at which the clipping alone (:func:`clip_floor`) reaches ``threshold``, at least
    ``s_floor``."""
    s_lo = s_mm
    while True:
        s_lo *= 0.5
        if s_lo <= s_floor:
            s_lo = s_floor
            break
        if clip_floor(x, a, b, rec, k0, search, s_lo * top) >= threshold:
            break
    return np.float64(np.float32(s_lo))


@_jit
def unit_optimum(x, a, b, rec, k0, smp, m0, search, vals, mids, fmt, s_floor, s_top, s_mm, eps,
                 floor, grid, max_boxes, sweep_cells, best0, fold, img_lo, out, scratch):
    """The least error of sorted ``x[a:b]`` over the float32 scales of ``[s_floor, s_top]``,
    by branch and bound (module doc): ``out`` = (error, scale, 1.0 when every box was settled,
    boxes opened, the lowest scale not excluded by :func:`clip_floor`, the error at ``s_mm``
    by the search's arithmetic or inf where it took none, the most additions any of that
    error's sums went through: :func:`_depth`). ``s_mm`` (the min/max
    scale) and ``s_mm · grid`` are evaluated first (but for a walked row's folded range,
    swept whole); scales from ``s_floor`` up to the largest
    power-of-two fraction of ``s_mm`` that :func:`clip_floor` excludes are dropped at once; a
    box is dropped when its bound reaches ``(1 − eps)`` times the best error less ``floor``;
    a box with at most ``sweep_cells`` breakpoints is swept; at most ``max_boxes`` boxes are
    opened (then ``out[2]`` is 0). ``best0``: an error already reached elsewhere (inf if
    none), which prunes from the start; when nothing in the range beats it, ``out[1]`` is -1.

    ``fold`` (a saturating floating-point grid, ``s_top`` at least ``2 · s_mm`` or the range
    one of several parts that cover ``[s_mm, 2 · s_mm]``): the range's boxes are only those
    from ``s_mm`` up, and the scales below, down to ``img_lo`` (or, when 0, the lowest not
    excluded), are searched only where those boxes allow. On the grid
    continued without bounds (every ``±2^e · (1 + j / 2^mbits)`` and 0) the error at ``s`` and
    at ``2s`` are equal (the grid is the same up to a factor of two), and the format's error is
    never below it (its values are among the continued grid's: clipping and the subnormals only
    take some away); at a scale of the range (no element beyond the top) the two differ only by
    the elements below the smallest normal value (:func:`sub_slack`). So a box of the range
    whose least error is ``L`` bounds each of its images ``2^-k``·box below by ``L`` less that
    slack: an image is searched only when that is below the best error, which after the range
    is nearly never (the lower octaves cost what the range's near-optimal boxes cost, not a
    search of their own)."""
    rlo, rhi, rf, h_key, h_s1, h_s2, h_za, h_zb, ev_b, ev_1, ev_2, res = scratch
    top = vals[vals.size - 1]
    best = best0
    best_s = -1.0
    pts = np.empty(grid.size + 2)
    pts[0] = s_top
    pts[1] = min(max(s_mm, s_floor), s_top)
    for i in range(grid.size):
        pts[i + 2] = min(max(np.float64(np.float32(s_mm * grid[i])), s_floor), s_top)
    # a walked row's folded range is swept whole at once: its evaluations would cost a walk
    # each and bound nothing the sweep's own pieces do not; the lowest scale not excluded is
    # found when the range is done, by the best error the range holds
    at_once = fold and not search
    out[OUT_MM_ERR] = np.inf
    out[OUT_MM_TERMS] = 0.0
    if not at_once:
        for i in range(pts.size):
            err = _error_at(x, a, b, rec, k0, smp, m0, search, pts[i], vals, mids, fmt, rlo,
                            rhi, rf)
            if i == 1 and pts[i] == s_mm:
                out[OUT_MM_ERR] = err
                out[OUT_MM_TERMS] = _depth(b - a, rlo.size, 0)
            if err < best:
                best, best_s = err, pts[i]
    s_lo = s_mm
    if not at_once:
        s_lo = _lowest_scale(x, a, b, rec, k0, search, s_mm, s_floor, top,
                             best * (1.0 - eps) - floor)
        err = _error_at(x, a, b, rec, k0, smp, m0, search, s_lo, vals, mids, fmt, rlo, rhi,
                        rf)
        if err < best:
            best, best_s = err, s_lo
    folding = fold
    pts = small_unique(np.append(pts, s_lo))
    size = 0
    for i in range(pts.size - 1):
        if pts[i] >= s_lo and (pts[i] >= s_mm or not folding):
            h_key, h_s1, h_s2, h_za, h_zb = heap_add(h_key, h_s1, h_s2, h_za, h_zb, size,
                                                     -np.inf, pts[i], pts[i + 1], 0, 0)
            size += 1
    img_floor = img_lo if img_lo > 0.0 else s_lo
    n_rec = 0
    r_s1 = np.empty(64)
    r_s2 = np.empty(64)
    r_b = np.empty(64)
    boxes = 0
    proven = 1.0
    while True:
        threshold = best * (1.0 - eps) - floor
        if size == 0 or h_key[0] >= threshold:
            # every box left has a bound at least this one's
            if not folding:
                break
            folding = False
            if at_once:
                s_lo = _lowest_scale(x, a, b, rec, k0, search, s_mm, s_floor, top, threshold)
                img_floor = img_lo if img_lo > 0.0 else s_lo
            for i in range(size):  # the range's boxes left: their bounds, for the images
                r_s1, r_s2, r_b, n_rec = _record(r_s1, r_s2, r_b, n_rec, h_s1[i], h_s2[i],
                                                 h_key[i] - sub_slack(x, a, b, h_s2[i], vals,
                                                                      fmt))
            size = 0
            for i in range(n_rec):
                if r_b[i] >= threshold:
                    continue
                m = 0.5
                while True:
                    i1 = max(r_s1[i] * m, img_floor)
                    i2 = min(r_s2[i] * m, s_mm)
                    if r_s2[i] * m <= img_floor:
                        break
                    if i1 < i2:
                        h_key, h_s1, h_s2, h_za, h_zb = heap_add(
                            h_key, h_s1, h_s2, h_za, h_zb, size, r_b[i], i1, i2, 0, 0)
                        size += 1
                    m *= 0.5
            continue
        s1, s2 = h_s1[0], h_s2[0]
        heap_pop(h_key, h_s1, h_s2, h_za, h_zb, size)
        size -= 1
        if boxes >= max_boxes:
            proven = 0.0
            break
        boxes += 1
        n_runs = grid_runs(x, a, b, rec, k0, smp, m0, search, s1, s2, vals, mids, fmt, rlo,
                           rhi, rf)
        low = box_bound(rlo, rhi, rf, n_runs, s1, s2, vals)
        if low >= threshold:
            if folding:
                r_s1, r_s2, r_b, n_rec = _record(r_s1, r_s2, r_b, n_rec, s1, s2,
                                                 low - sub_slack(x, a, b, s2, vals, fmt))
            continue
        mid = np.float64(np.float32(np.sqrt(s1 * s2)))
        if not s1 < mid < s2:
            mid = np.float64(np.float32(0.5 * (s1 + s2)))
        inside = s1 < mid < s2
        crossings = box_crossings(rlo, rhi, rf, n_runs)
        if crossings <= sweep_cells or not (search or inside):
            if grid_sweep(x, a, rlo, rhi, rf, n_runs, s1, s2, vals, mids, best, ev_b, ev_1,
                          ev_2, res):
                best, best_s = res[0], res[1]
            if s1 == s_mm:
                out[OUT_MM_ERR] = res[3]
                out[OUT_MM_TERMS] = _depth(b - a, n_runs, crossings)
            if folding:
                r_s1, r_s2, r_b, n_rec = _record(r_s1, r_s2, r_b, n_rec, s1, s2,
                                                 res[2] - sub_slack(x, a, b, s2, vals, fmt))
            continue
        if not inside:
            if folding:  # both ends were evaluated, nothing between: its images are searched
                r_s1, r_s2, r_b, n_rec = _record(r_s1, r_s2, r_b, n_rec, s1, s2, -np.inf)
            continue
        if search:  # a walked row's boxes end in a sweep, which takes their ends too
            err = _error_at(x, a, b, rec, k0, smp, m0, search, mid, vals, mids, fmt, rlo,
                            rhi, rf)
            if err < best:
                best, best_s = err, mid
        h_key, h_s1, h_s2, h_za, h_zb = heap_add(h_key, h_s1, h_s2, h_za, h_zb, size, low, s1,
                                                 mid, 0, 0)
        size += 1
        h_key, h_s1, h_s2, h_za, h_zb = heap_add(h_key, h_s1, h_s2, h_za, h_zb, size, low, mid,
                                                 s2, 0, 0)
        size += 1
    if at_once and folding:  # stopped by max_boxes within the range
        s_lo = _lowest_scale(x, a, b, rec, k0, search, s_mm, s_floor, top,
                             best * (1.0 - eps) - floor)
    out[0] = max(best, 0.0)
    out[1] = best_s
    out[2] = proven
    out[3] = boxes
    out[4] = s_lo if img_lo <= 0.0 else min(s_lo, img_lo)


@_jit
def grid_rows_optimum(values, starts, rec, rec_starts, smp, smp_starts, search, rows, vals, mids,
                      fmt, s_floor, s_top, s_mm, eps, floor, grid, max_boxes, sweep_cells, best0,
                      fold, img_lo, out):
    """:func:`unit_optimum` of each sorted row ``rows[e]`` of ``values`` (rows at ``starts``;
    ``search[e]``: use its block prefix sums ``rec`` from ``rec_starts`` and its sample
    ``smp`` from ``smp_starts``), with that row's ``s_floor[e]``, ``s_top[e]``, ``s_mm[e]``,
    ``floor[e]``, ``best0[e]`` and ``img_lo[e]``, into ``out[e]`` (a row may come several
    times, with parts of its range)."""
    scratch = new_scratch(vals.size)
    for e in range(rows.size):
        r = rows[e]
        k0, m0 = (rec_starts[r], smp_starts[r]) if search[e] else (0, 0)
        unit_optimum(values, starts[r], starts[r + 1], rec, k0, smp, m0, search[e], vals, mids,
                     fmt, s_floor[e], s_top[e], s_mm[e], eps, floor[e], grid, max_boxes,
                     sweep_cells, best0[e], fold, img_lo[e], out[e], scratch)
