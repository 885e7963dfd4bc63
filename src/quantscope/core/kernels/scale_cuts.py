"""Whole ranges of scales ruled out at once, before the integer MSE search opens a box:
compiled loops for :mod:`quantscope.core.kernels.mse_bound`.

The branch and bound's boxes are bounded through runs of equal codes, and over a wide box
most elements change code many times: they count nothing, and the boxes far above or far below
the optimum were split again and again, and swept, only to be dropped (half of a channel's
boxes on the bench's weight). Two bounds that need no codes settle those ranges in a few
passes over the unit instead:

* large scales (:func:`spread_cut`): the values cut into groups narrower than a cell cannot
  all sit near grid points at any larger scale (:func:`spread_bound`);
* small scales (:func:`clip_cut`): the codes' window is narrower than the values' range at
  every smaller scale and must leave some outside, clamped (:func:`window_clip`);
* just below the min/max scale, where the clipping alone no longer passes the best error
  (:func:`clip_spread_cut`): the clipping of the values near the ends and the spread of the
  rest, added up.

Each is a lower bound of the error at every zero point and every scale beyond a cut; the cut
is placed where the bound exceeds the best error already found, so nothing beyond it can be
as good.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.sorted_kernel import _gallop, _upper_bound

_jit = njit(nogil=True, error_model="numpy")

#: Most bisection steps of :func:`window_clip`'s window position (the bracket of the least
#: clipping shrinks to 2^-40 of the positions' range; the bound is certified at any step).
CLIP_STEPS = 40


@_jit
def spread_bound(x, p, q, s1, pre, a):
    """A lower bound of the error of sorted ``x[p:q]`` at every scale ``s >= s1`` and every
    zero point, from how the values spread (no codes needed); ``pre``: the unit's prefix sums
    from position ``a`` (:func:`quantscope.core.kernels.mse_bound.unit_prefix`), which give
    each group's mean without a pass over it.

    The values are cut into consecutive groups each spanning less than ``s1``. At a scale
    ``s >= s1`` a group lies in one or two neighbouring cells of the grid ``s·m``: either all
    its elements round to one grid point (error at least the group's sum of squared deviations
    ``SS``), or its first ``t`` round to ``s·m`` and the rest to ``s·(m + 1)``: error at least
    ``SS_L + SS_R + (t·(n − t)/n)·(s − d)²`` (``d`` the distance of the two parts' means,
    less than ``s1``), which is ``SS + s1·(s1·t·(n − t)/n + 2·Σ_{i<t}(x_i − mean))`` at
    ``s = s1`` and only larger above. The least of these over ``t`` bounds the group; clamping
    an element to the codes' range only moves it further from its value. A group as wide as a
    cell holds about ``s²/12`` an element at every scale (85-90% of the error on the bench's
    channels), where a wide box's runs count nothing for an element whose code moves by more
    than one step across it."""
    total = 0.0
    width = s1 * (1.0 - 1e-9)  # strictly below s1 despite the rounding of x[i] + width
    i = p
    while i < q:
        xi = np.float64(x[i])
        if abs(xi) > 1e6 * s1:  # the sum's rounding could reach the margin: a group of one
            i += 1
            continue
        j = _group_end(x, i + 1, q, xi + width)
        n = j - i
        if n >= 2:
            # the double-double prefix sums' difference is the group's sum to its own
            # rounding, as a sum over the group is (a mean slightly off only adds n·δ² to the
            # squares below); its squares are summed here, about the mean, where they do not
            # cancel
            u, v = i - a, j - a
            mean = ((pre[v, 0] - pre[u, 0]) + (pre[v, 1] - pre[u, 1])) / n
            ss, low = _group_terms(x, i, n, mean, s1 / n)
            total += max(ss + s1 * low, 0.0)
        i = j
    return total


@_jit
def _group_end(x, j, q, limit):
    """First position from ``j`` (at most ``q``) of sorted ``x`` not below ``limit``: a group
    ends a few to a few hundred elements on. Sixteen at a time, then one by one: two
    mispredicted branches a group, where a gallop and a binary search took half a dozen."""
    while j + 16 <= q and x[j + 15] < limit:
        j += 16
    while j < q and x[j] < limit:
        j += 1
    return j


@njit(nogil=True, error_model="numpy", fastmath={"contract"})
def _group_terms(x, i, n, mean, c):
    """Of the group ``x[i:i + n]`` (``n >= 2``) about ``mean``: the sum of squared deviations
    ``SS`` and ``min(0, min over 0 < t < n of c·t·(n − t) + 2·D_t)``, ``D_t`` the sum of the
    first ``t`` deviations (:func:`spread_bound`).

    The deviations sum to 0, so ``D_t`` is also minus the sum of the last ``n − t``: the
    front half's ``D_t`` runs forward and the back half's backward, two chains of additions
    instead of one twice as long (a running sum waits on its last addition; the pass over a
    channel's groups was most of a cut's time), and ``t·(n − t)`` is the same at ``t`` and
    ``n − t``. That coefficient steps by ``c·(n − 1 − 2t)`` from one ``t`` to the next, and
    products and sums may fuse (rounding once): the result differs from one running sum's
    by rounding alone (at most about ``n`` ulps of the group's terms, against the search's
    relative slack of 1e-7)."""
    h = n // 2
    m = n - 1 - h  # the back half's steps, t = n - 1 down to h + 1; m is h or h - 1
    ss_f, ss_b = 0.0, 0.0
    dev_f, dev_b = 0.0, 0.0
    low_f, low_b = 0.0, 0.0
    q = 0.0
    step = c * (n - 1)
    for t in range(1, m + 1):
        q += step
        step -= 2.0 * c
        e = np.float64(x[i + t - 1]) - mean
        ss_f += e * e
        dev_f += e
        low_f = min(low_f, q + 2.0 * dev_f)
        e = np.float64(x[i + n - t]) - mean
        ss_b += e * e
        dev_b -= e
        low_b = min(low_b, q + 2.0 * dev_b)
    if h > m:  # odd steps: the front's last, t = h
        e = np.float64(x[i + h - 1]) - mean
        ss_f += e * e
        dev_f += e
        low_f = min(low_f, c * (h * (n - h)) + 2.0 * dev_f)
    e = np.float64(x[i + h]) - mean  # the one element no step reads
    return ss_f + ss_b + e * e, min(low_f, low_b)


@_jit
def spread_cut(x, p, q, s_from, s_top, bar, pre, a, s_known=0.0, low_known=0.0):
    """A float32 scale in ``[s_from, s_top)`` from which on every scale's error exceeds
    ``bar`` (:func:`spread_bound`, with the prefix sums ``pre`` from ``a``), or ``s_top``
    when none of the few tried does.

    The bound grows about as the square of the scale, so each try aims at where the last one
    says it passes ``bar`` (1% beyond): two or three passes over the unit stand in for every
    box above. The first aim is from the bound at ``s_from`` -- or, when the caller has one
    (``low_known > 0``), from the unit's bound ``low_known`` at ``s_known``, a pass fewer:
    the clip and spread cut's pass just below the min/max scale, scaled up by the square,
    lies within 1-3% of the one at it on the bench's channels."""
    if low_known > 0.0:
        guess, low = s_known, low_known * 1.03
    else:
        guess, low = s_from, spread_bound(x, p, q, s_from, pre, a)
    if not low > 0.0:
        return s_top
    for _ in range(3):
        c = max(_up32(min(guess * np.sqrt(bar / low) * 1.01, s_top)), _up32(s_from))
        if c >= s_top:
            return s_top
        low = spread_bound(x, p, q, c, pre, a)
        if low > bar:
            return c
        if not low > 0.0:
            return s_top
        guess = c
    return s_top


@_jit
def _up32(s):
    """The least float32 value not below ``s``."""
    c = np.float64(np.float32(s))
    if c < s:
        c = np.float64(np.nextafter(np.float32(c), np.float32(np.inf)))
    return c


@_jit
def _clip(x, p, q, lo_end, hi_end, u, v):
    """``Σ`` over sorted ``x[p:q]`` of the squared distance to ``[lo_end, hi_end]`` and its
    derivative in a shift of the interval, walking in from both ends: from the left below
    position ``u`` only, from the right from ``v`` on only (``u = q``, ``v = p``: every value;
    the values between are left out)."""
    f = 0.0
    g = 0.0
    i = p
    while i < u and x[i] < lo_end:
        d = lo_end - np.float64(x[i])
        f += d * d
        g += d
        i += 1
    j = q - 1
    while j >= i and j >= v and x[j] > hi_end:
        d = np.float64(x[j]) - hi_end
        f += d * d
        g -= d
        j -= 1
    return f, 2.0 * g


@_jit
def window_clip(x, p, q, width, l_min, l_max, bar):
    """:func:`tails_clip` of every value of sorted ``x[p:q]``."""
    return tails_clip(x, p, q, q, p, width, l_min, l_max, bar)


@_jit
def tails_clip(x, p, q, u, v, width, l_min, l_max, bar):
    """A lower bound of the least clipping of sorted ``x[p:q]`` by any window
    ``[l, l + width]`` with ``l`` in ``[l_min, l_max]``: the squared distances of the values
    outside it, counting only those of ``x[p:u]`` and ``x[v:q]`` (:func:`_clip`). The
    clipping is convex in ``l``: bisection on its slope brackets the least, and the tangents
    at the bracket's ends bound it from below. Stops once the bound exceeds ``bar`` or the
    bracket's ends show the least does not.

    The least of all real ``l`` lies between ``x[p]`` and ``x[q − 1] − width`` (whichever
    order they are in), whichever values are counted (none is below ``x[p]`` or above
    ``x[q − 1]``): below both the slope is not positive (nothing is clipped on the left),
    above both not negative. So the bracket starts there, clamped into ``[l_min, l_max]`` --
    the same least, and each walk of :func:`_clip` passes the few values outside a window
    near the data instead of half the unit, as the ends of a zero point's whole range do."""
    if q > p:
        near = min(np.float64(x[p]), np.float64(x[q - 1]) - width)
        far = max(np.float64(x[p]), np.float64(x[q - 1]) - width)
        l_min, l_max = min(max(near, l_min), l_max), max(min(far, l_max), l_min)
    f, g = _clip(x, p, q, l_min, l_min + width, u, v)
    if g >= 0.0 or l_max <= l_min:
        return f
    fr, gr = _clip(x, p, q, l_max, l_max + width, u, v)
    if gr <= 0.0:
        return fr
    lo, hi, f_lo, g_lo, f_hi, g_hi = l_min, l_max, f, g, fr, gr
    bound = 0.0
    for _ in range(CLIP_STEPS):
        bound = max(f_lo + g_lo * (hi - lo), f_hi - g_hi * (hi - lo), 0.0)
        if bound > bar or min(f_lo, f_hi) <= bar:
            break
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        fm, gm = _clip(x, p, q, mid, mid + width, u, v)
        if gm < 0.0:
            lo, f_lo, g_lo = mid, fm, gm
        else:
            hi, f_hi, g_hi = mid, fm, gm
    return max(bound, f_lo + g_lo * (hi - lo), f_hi - g_hi * (hi - lo))


@_jit
def clip_cut(x, p, q, s_from, s_bottom, a_lo, a_hi, span, bar):
    """A float32 scale in ``(s_bottom, s_from)`` up to which every scale's error exceeds
    ``bar``, or ``s_bottom`` when none of the few tried does.

    At scale ``s`` and zero point ``z`` the codes reach the window ``s·[qmin − z, qmax − z]``
    (``span = qmax − qmin`` wide, ``qmin − z`` in ``[a_lo, a_hi]``, never above 0): every
    value outside is clamped to its edge, at least its distance from the window away. Below a
    scale ``c`` each such window lies inside one at ``c`` (the window holds 0, so scaling it
    up only widens it), whose least clipping (:func:`window_clip`) bounds the error of every
    scale below. Tries from just below ``s_from`` outward, doubling the step, then halves the
    last step twice."""
    ok = s_bottom
    fail = s_from
    step = 0.03
    for _ in range(5):
        c = _down32(s_from * (1.0 - step))
        if c <= s_bottom:
            break
        if window_clip(x, p, q, c * span, c * a_lo, c * a_hi, bar) > bar:
            ok = c
            break
        fail = c
        step *= 2.0
    if ok <= s_bottom:
        return s_bottom
    for _ in range(2):
        c = _down32(0.5 * (ok + fail))
        if not ok < c < fail:
            break
        if window_clip(x, p, q, c * span, c * a_lo, c * a_hi, bar) > bar:
            ok = c
        else:
            fail = c
    return ok


@_jit
def _down32(s):
    """The largest float32 value not above ``s``."""
    c = np.float64(np.float32(s))
    if c > s:
        c = np.float64(np.nextafter(np.float32(c), np.float32(0.0)))
    return c


@_jit
def clip_spread_cut(x, p, q, s_from, s_top, a_lo, a_hi, span, bar, pre, a):
    """A float32 scale in ``[s_from, s_top)`` up to which every scale's error from ``s_from``
    on exceeds ``bar``, from the clipping of the values near the ends and the spread of the
    rest together (``pre``, ``a``: as :func:`spread_bound`); ``s_from`` when the first one
    tried does not pass. With it the unit's :func:`spread_bound` at ``s_from`` (0 when it
    was not needed), from which :func:`spread_cut` aims.

    :func:`clip_cut` counts the clipping alone, which stops it where the rounding error is
    still most of the error (0.85 of the min/max scale on an LLM weight's channel, whose
    optimum lies above 0.95 of it). Here the values split into the *tails* -- those some
    window may leave out -- and the *core* between them. At every scale of ``[s_from, c]``
    and every zero point the core's error is at least its :func:`spread_bound` at
    ``s_from`` (which holds at every larger scale) and the tails' at least their least
    clipping by a window at ``c`` (:func:`tails_clip`; each window at a smaller scale lies
    inside one at ``c``, as in :func:`clip_cut`): disjoint parts, so the sum bounds the
    error. One pass over the core, then only the tails for each ``c`` tried: outward from
    ``s_from``, doubling the step while it passes, then halving the last step twice."""
    if q - p < 2 or not s_from < s_top:
        return s_from, 0.0
    x_lo, x_hi = np.float64(x[p]), np.float64(x[q - 1])
    # a value between s_from·a_hi and s_from·(a_lo + span) is inside every window of every
    # scale from s_from on; with many zero points that is little or nothing, but a window
    # near the data leaves out at most d of either end (d: what the range with 0 in it, as
    # every window holds 0, exceeds the window's width)
    d = max(max(x_hi, 0.0) - min(x_lo, 0.0) - span * s_from, 0.0)
    left = min(s_from * a_hi, max(x_lo + 2.0 * d, s_from * a_lo))
    right = max(s_from * (a_lo + span), min(x_hi - 2.0 * d, s_from * (a_hi + span)))
    u = _gallop(x, p, q, left)
    v = max(_upper_bound(x, u, q, right), u)
    core = spread_bound(x, u, v, s_from, pre, a)
    # the tails' own spread: with the core's, a bound of the whole unit at s_from
    whole = core + spread_bound(x, p, u, s_from, pre, a) + spread_bound(x, v, q, s_from, pre, a)
    ok = s_from
    fail = s_top
    step = 0.01
    for _ in range(5):
        c = _down32(s_from * (1.0 + step))
        if not ok < c < s_top:
            break
        if tails_clip(x, p, q, u, v, c * span, c * a_lo, c * a_hi, bar - core) + core > bar:
            ok = c
            step *= 2.0
        else:
            fail = c
            break
    for _ in range(2):
        c = _down32(0.5 * (ok + fail))
        if not ok < c < fail:
            break
        if tails_clip(x, p, q, u, v, c * span, c * a_lo, c * a_hi, bar - core) + core > bar:
            ok = c
        else:
            fail = c
    return ok, whole
