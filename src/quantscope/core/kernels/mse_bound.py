"""The global minimum of the integer quantization error over scales and zero points, found by
branch and bound: compiled loops.

For codes ``c = clamp(rint(x / s) + z, qmin, qmax)`` each element's error is its distance to
the nearest point of the grid ``{s·v : v ∈ [qmin − z, qmax − z]}`` (rounding to the nearest
code and clamping both pick the nearest grid point), squared. As ``s`` shrinks, an element's
unclamped code ``m = rint(x / s)`` steps outward by one at each *breakpoint*
``s = |x| / (k + 1/2)``; between breakpoints every code is fixed and the total error is, for
each zero point, the quadratic ``Σx² − 2s·Σxv + s²·Σv²``. An exhaustive search visits every
such piece of every zero point: ``O(n · levels · zero points)``, hours for a 4096×4096 weight.

Branch and bound visits few. For a *box* of scales ``[s1, s2]`` the codes ``m(s1)`` and
``m(s2)`` of each element bound all its codes in the box (``m`` is monotone in ``s``). Sorted
values with the same pair form a *run*, and the runs give, for every zero point at once, a
valid lower bound of the error over the whole box (:func:`z_bounds`):

* a run whose pair is one code ``m`` inside the zero point's range ``[qmin − z, qmax − z]``
  keeps that code on the whole box: its error is exactly ``Σ(x − s·m)²``;
* a run whose codes all lie beyond the range is clamped to the range's end ``e`` on the whole
  box: exactly ``Σ(x − s·e)²``;
* a run whose codes are two neighbours ``m, m + 1`` inside the range splits, at each scale,
  into a prefix at ``s·m`` and a suffix at ``s·(m + 1)``: its error is at least its own least
  error over the box (:func:`two_code_run_minimum`, one pass over the run; a long row's search
  takes the weaker sum of each element's squared distance to the nearer of the intervals
  ``s1·m..s2·m`` and ``s1·(m + 1)..s2·(m + 1)``, from its prefix sums);
* any other run (codes further apart, or straddling an end of the range) counts 0.

The exact parts are one quadratic in ``s``, minimised over ``[s1, s2]`` in closed form; the
rest is a constant. At ``s1 = s2`` every run is exact and the bound *is* the error
(:func:`z_bounds` then evaluates every zero point of a scale in one pass).

The search of a walked row (:func:`unit_optimum`; a long row's, read through its prefix sums,
is :func:`long_row_optimum`, which takes the grid and the boxes only) evaluates the min/max
scale and a few scales just below it where an LLM weight's optimum usually lies
(:data:`INCUMBENTS`: a best error to compare with from the start); it
rules out the scales below and above two cuts wholesale
(:mod:`quantscope.core.kernels.scale_cuts`: every scale beyond them has an error above the
best so far, whatever its codes); it evaluates the grid's float32 scales between them (and
the cuts), then keeps boxes between evaluated float32 scales in a heap, lowest bound first:
a box whose bound, for every zero point, is at least the best error found (less a relative
``eps``) cannot hold a better scale and is dropped; otherwise its two halves go back into the
heap with the zero points that survive. A walked row's box with few crossings, or none but
its ends, is settled by sweeping them instead (below); a long row's midpoint is evaluated
before it is split, so a box with no float32 scale strictly inside is done (its ends were
evaluated). The bound tightens as boxes narrow -- fewer elements change code inside, and the
quadratic part is exact -- so every box ends dropped or done: the result is, by construction,
within ``eps`` of the least error of every float32 scale of the range and every zero point
(and of every real scale between them). Small boxes of a walked row are solved outright by
the sweep of their own breakpoints (:func:`quantscope.core.kernels.mse_sweep.box_sweep`, the
least error of every float32 scale of the box) instead of split further. A walked row keeps the runs
of every scale it evaluated (:func:`codes_at`): a box's runs are its two ends' runs merged
(:func:`runs_between`), so no box gallops over the row again. The evaluations
multiply by a float64 reciprocal and round half to even, as the engine's arithmetic does
except beside rounding ties, where both codes have the same error to within an ulp.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.block_sums import _step, prefix_at
from quantscope.core.kernels.box_heap import (
    grow,
    grow_int,
    heap_halves,
    heap_of,
    heap_take,
)
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.long_runs import (
    LADDER_ENTRIES,
    LADDER_SCALES,
    box_runs,
    grow_rows,
    point_runs,
    runs_search,
    starts_at,
)
from quantscope.core.kernels.mse_sweep import box_crossings, box_sweep
from quantscope.core.kernels.neighbour_pick import neighbour_pick
from quantscope.core.kernels.run_ends import _code, _first_not_below, _run_end, next_run
from quantscope.core.kernels.scale_cuts import clip_cut, clip_spread_cut, spread_cut
from quantscope.core.kernels.scale_errors import errors_at
from quantscope.core.kernels.small_unique import small_unique
from quantscope.core.kernels.sorted_kernel import _changes_in

_jit = njit(nogil=True, error_model="numpy")

#: Columns of a run's float record: count, Σx, Σx², and the lower bound of a two-code run.
_N, _SX, _SXX, _LB = 0, 1, 2, 3
#: Scales a walked row evaluates right after its min/max scale, as multiples of it: the optimum
#: of an LLM weight's channel lies at 0.956-1.014 of it (symmetric; asymmetric 0.974-1.014),
#: so the best of these is within about 0.1% of the optimum error (:func:`_incumbents`).
INCUMBENTS = np.array([0.97, 0.98, 0.99])
#: Columns of the per-unit result (:func:`unit_optimum`); a searched row's pick is left as it
#: was.
OUT_ERR, OUT_SCALE, OUT_ZP, OUT_PROVEN, OUT_BOXES, OUT_PICK = 0, 1, 2, 3, 4, 5


@_jit
def runs_walk(x, a, b, s1, s2, k, rlo, rhi, rf):
    """The runs of sorted ``x[a:b]`` for the box ``[s1, s2]``, one element at a time: into
    ``rlo``/``rhi`` (the codes' pair, ascending) and ``rf`` (count, Σx, Σx², two-code bound).
    Returns the number of runs."""
    if s1 == s2:
        return _runs_at(x, a, b, s1, k, rlo, rhi, rf)
    return _runs_gallop(x, a, b, s1, s2, k, rlo, rhi, rf)


@_jit
def _runs_element_by_element(x, a, b, s1, s2, k, rlo, rhi, rf):
    """:func:`runs_walk` computing both codes of every element (the reference the galloping
    walk is tested against)."""
    inv1, inv2 = 1.0 / s1, 1.0 / s2
    r = -1
    start = np.empty(b - a + 1, np.int64)
    for i in range(a, b):
        xv = np.float64(x[i])
        c1 = _code(xv, inv1, k)
        c2 = _code(xv, inv2, k)
        lo, hi = min(c1, c2), max(c1, c2)
        if r < 0 or lo != rlo[r] or hi != rhi[r]:
            r += 1
            start[r] = i
            rlo[r] = lo
            rhi[r] = hi
            rf[r, 0] = 0.0
            rf[r, 1] = 0.0
            rf[r, 2] = 0.0
            rf[r, 3] = 0.0
        rf[r, 0] += 1.0
        rf[r, 1] += xv
        rf[r, 2] += xv * xv
    for t in range(r + 1):
        if rhi[t] == rlo[t] + 1:
            p = start[t]
            rf[t, 3] = two_code_run_minimum(x, p, p + int(rf[t, 0]), s1, s2, rlo[t],
                                            rf[t, 1], rf[t, 2])
    return r + 1


@_jit
def two_code_run_minimum(x, p, q, s1, s2, lo, sx, sxx):
    """The least error over scales in ``[s1, s2]`` of a run ``x[p:q]`` whose codes are
    ``lo`` and ``lo + 1`` on the box (``sx``, ``sxx`` its Σx and Σx²), when both codes are
    inside the range: exact, not a sum of each element's own least error.

    At a scale ``s`` the elements below ``s·(lo + 1/2)`` take ``lo`` and the rest ``lo + 1``
    (for either sign of ``lo``), so a prefix of the sorted run takes ``lo``; while the split
    stays, the run's error is the quadratic ``Σx² − 2s·(lo·Σ_pre x + (lo + 1)·Σ_suf x) +
    s²·(lo²·n_pre + (lo + 1)²·n_suf)``, least at its vertex clipped into the scales of that
    split. Every split is visited in one pass over the run. The elements of one run reach
    their own least errors at different scales, so this is far above the sum of those when
    the box is wide (every element of a run can be near a grid point somewhere in it, but
    not all at the same scale)."""
    hi = lo + 1
    half = lo + 0.5
    inv_half = 1.0 / half
    cnt = q - p
    best = np.inf
    pre = 0.0  # Σx of the first j elements
    # the scales whose split is j lie between the breakpoints of elements j - 1 and j; each
    # breakpoint is computed once and carried to the next split
    prev = -np.inf if half > 0 else np.inf
    beyond = -prev
    c_hi = hi * hi * cnt  # the quadratic coefficient of split 0, less (2·lo + 1) per split
    step = 2 * lo + 1
    for j in range(cnt + 1):
        xv = 0.0
        if j < cnt:
            xv = np.float64(x[p + j])
            e = xv * inv_half
        else:
            e = beyond
        lower = max(min(prev, e), s1)
        upper = min(max(prev, e), s2)
        if lower <= upper:
            bq = lo * pre + hi * (sx - pre)
            cq = np.float64(c_hi - step * j)
            if cq > 0.0:
                s = min(max(bq / cq, lower), upper)
            else:
                s = upper if bq > 0.0 else lower
            err = sxx - 2.0 * s * bq + s * s * cq
            if err < best:
                best = err
        pre += xv
        prev = e
    return max(best, 0.0) if best < np.inf else 0.0


@_jit
def _runs_gallop(x, a, b, s1, s2, k, rlo, rhi, rf):
    """:func:`runs_walk` of a box: each run's end found by galloping and binary search on its
    codes (a few code evaluations per run instead of one per element), its sums and two-code
    bounds added up element by element."""
    inv1, inv2 = 1.0 / s1, 1.0 / s2
    r = 0
    p = a
    while p < b:
        lo, hi, q = next_run(x, p, b, inv1, inv2, k)
        sx = 0.0
        sxx = 0.0
        bound = 0.0
        for i in range(p, q):
            v = np.float64(x[i])
            sx += v
            sxx += v * v
        if hi == lo + 1:
            bound = two_code_run_minimum(x, p, q, s1, s2, lo, sx, sxx)
        rlo[r] = lo
        rhi[r] = hi
        rf[r, 0] = q - p
        rf[r, 1] = sx
        rf[r, 2] = sxx
        rf[r, 3] = bound
        r += 1
        p = q
    return r


#: Elements of a sorted unit whose running sums :func:`unit_prefix` checks at once.
PREFIX_BLOCK = 32


@_jit
def unit_prefix(x, a, b, pre):
    """The double-double prefix sums of sorted ``x[a:b]`` into ``pre[0 .. b − a]`` (columns Σx
    and its rounding errors, Σx² and its rounding errors;
    :mod:`quantscope.core.kernels.block_sums`'s running sum, bit for bit): built once per unit,
    they give every run of every box its sums in O(1).

    Each step is :func:`_fast_step`, whose test ``|hi| >= |v|`` took a third of the loop's
    time (two absolute values and a branch, twice an element). Here it is settled for
    :data:`PREFIX_BLOCK` (``B``) elements at once, from the block's largest ``|v|``, ``M`` (at
    one of its ends: the unit is sorted), and the block is summed without it:

    * ``Σx²`` never decreases (its terms are not negative and rounding is monotone), and every
      term of the block is at most ``fl(M²)``: ``hi >= fl(M²)`` at the block's start holds
      for every step of it;
    * if ``|hi| >= 2·B·M`` at the block's start (``2·B`` a power of two: the product is
      exact), each step with ``|hi| >= M`` leaves ``|hi'| >= (1 − u)·(|hi| − M)`` (``hi`` and
      ``v`` cancel to no less than ``|hi| − M``; a sum rounds by at most ``u`` relative, and
      exactly where it is subnormal), so after ``j < B`` steps ``|hi| >= (1 − u)^j·2·B·M −
      j·M >= B·M − (B − 1)·M = M`` (``(1 − u)^j >= 1/2``): every step of the block has
      ``|hi| >= |v|``.

    A block that fails either test (the first few, where the sums are still small, and those
    where ``Σx`` passes through 0; NaN and infinity fail both) takes :func:`_fast_step`
    element by element. On the bench's channels of 4096 the loop took 0.6 of the time it
    took with the test at every element."""
    pre[0, 0] = 0.0
    pre[0, 1] = 0.0
    pre[0, 2] = 0.0
    pre[0, 3] = 0.0
    # slices walked from 0: no index is checked for wrapping around
    y = x[a:b]
    out = pre[1:]
    h1, l1, h2, l2 = 0.0, 0.0, 0.0, 0.0
    reach = 2.0 * PREFIX_BLOCK
    for i in range(0, y.size, PREFIX_BLOCK):
        block = y[i:i + PREFIX_BLOCK]
        put = out[i:i + PREFIX_BLOCK]
        top = max(abs(np.float64(block[0])), abs(np.float64(block[block.size - 1])))
        checked = abs(h1) >= reach * top and h2 >= top * top
        for j in range(block.size):
            v = np.float64(block[j])
            if checked:
                h1, l1 = _fast2sum(h1, l1, v)
                h2, l2 = _fast2sum(h2, l2, v * v)
            else:
                h1, l1 = _fast_step(h1, l1, v)
                h2, l2 = _fast_step(h2, l2, v * v)
            put[j, 0] = h1
            put[j, 1] = l1
            put[j, 2] = h2
            put[j, 3] = l2


@njit(nogil=True, error_model="numpy", inline="always")
def _fast2sum(hi, lo, v):
    """``hi + v`` rounded and ``lo`` plus its rounding error, exact when ``|hi| >= |v|``:
    Dekker's Fast2Sum, ``v − (sum − hi)``."""
    cur = hi + v
    return cur, lo + (v - (cur - hi))


@_jit
def _fast_step(hi, lo, v):
    """:func:`quantscope.core.kernels.block_sums._step`, bit for bit, in half the operations
    where it can: when ``|hi| >= |v|`` the rounding error of ``hi + v`` is exactly
    ``v − (sum − hi)`` (:func:`_fast2sum`), the same number TwoSum finds in six."""
    if abs(hi) >= abs(v):
        return _fast2sum(hi, lo, v)
    return _step(hi, lo, v)


@_jit
def runs_prefix(x, a, b, pre, s1, s2, k, rlo, rhi, rf):
    """:func:`runs_walk` with the unit's prefix sums ``pre`` (:func:`unit_prefix`): each run's
    end found by galloping, its sums as a difference of two prefixes, and only a two-code
    run's elements visited (for its bound). A box costs about ``runs · log n`` plus its
    two-code elements, not a pass over the unit: a channel of 4096 took 10 µs per box walked
    element by element, half of it adding up sums."""
    inv1, inv2 = 1.0 / s1, 1.0 / s2
    r = 0
    p = a
    while p < b:
        lo, hi, q = next_run(x, p, b, inv1, inv2, k)
        _put_run(x, a, pre, p, q, s1, s2, lo, hi, r, rlo, rhi, rf)
        r += 1
        p = q
    return r


@_jit
def _put_run(x, a, pre, p, q, s1, s2, lo, hi, r, rlo, rhi, rf, bounds=True):
    """Run ``r``: the elements ``x[p:q]`` with codes ``lo .. hi`` on the box ``[s1, s2]``,
    their sums from the unit's prefix sums ``pre`` and, for two codes and ``bounds``, their
    bound (else 0: still a lower bound)."""
    u, v = p - a, q - a
    sx = (pre[v, 0] - pre[u, 0]) + (pre[v, 1] - pre[u, 1])
    sxx = (pre[v, 2] - pre[u, 2]) + (pre[v, 3] - pre[u, 3])
    rlo[r] = lo
    rhi[r] = hi
    rf[r, 0] = q - p
    rf[r, 1] = sx
    rf[r, 2] = sxx
    rf[r, 3] = 0.0
    if bounds and hi == lo + 1:
        rf[r, 3] = two_code_run_minimum(x, p, q, s1, s2, lo, sx, sxx)


@njit(nogil=True, error_model="numpy", inline="always")
def _codes_of(y, x, inv, k):
    """``y[i]`` = the code of ``x[i]`` (:func:`_code`, as a float32 integer) for every ``i``: a
    loop the compiler vectorises (both slices walked from 0, as
    :func:`quantscope.core.kernels.scale_errors._rounding_error` explains)."""
    kf = np.float64(k)
    for i in range(y.size):
        y[i] = np.float32(min(max(np.rint(np.float64(x[i]) * inv), -kf), kf))


@_jit
def codes_at(x, a, b, s, k, pos, code, n, fcodes, changes):
    """The runs of sorted ``x[a:b]`` at one scale ``s`` (each element's code ``rint(x / s)``
    clamped to ``[-k, k]``, :func:`_code`): each run's first position and code into ``pos``
    and ``code`` from entry ``n`` on; returns the entry after the last. A walked row's search
    keeps these of every scale it evaluated: the runs of a box are its two ends' runs merged
    (:func:`runs_between`), so each scale is walked once, not once per box it bounds.

    Every code in one vectorised pass into ``fcodes``, then the places where it changes
    listed 16 at a time into ``changes`` (:func:`code_scratch` of at least ``b − a``;
    :func:`quantscope.core.kernels.sorted_kernel._changes_in`): 2.0 µs for a
    channel of 4096 where galloping from run to run took 4.1 -- a run's end is a branch no
    predictor learns."""
    m = b - a
    if m <= 0:
        return n
    _codes_of(fcodes[:m], x[a:b], 1.0 / s, k)
    pos[n] = a
    code[n] = int(fcodes[0])
    c = _changes_in(fcodes, 1, m, changes)
    for t in range(c):
        p = changes[t]
        pos[n + 1 + t] = a + p
        code[n + 1 + t] = int(fcodes[p])
    return n + 1 + c


@_jit
def runs_between(x, a, b, pre, s1, s2, pos, code, i, i_end, j, j_end, rlo, rhi, rf,
                 bounds=True):
    """:func:`runs_prefix` of the box ``[s1, s2]`` from the runs of its ends
    (:func:`codes_at`: entries ``i .. i_end`` at ``s1``, ``j .. j_end`` at ``s2``). Both
    codes are monotone in the sorted values, so the box's pair of codes changes exactly where
    either end's code does: its runs start at the union of the ends' run starts, the same
    runs with the same sums and bounds as the gallop finds (``bounds``: :func:`_put_run`)."""
    r = 0
    p = a
    while p < b:
        c1 = code[i]
        c2 = code[j]
        n1 = pos[i + 1] if i + 1 < i_end else b
        n2 = pos[j + 1] if j + 1 < j_end else b
        q = min(n1, n2)
        _put_run(x, a, pre, p, q, s1, s2, min(c1, c2), max(c1, c2), r, rlo, rhi, rf, bounds)
        r += 1
        if n1 == q:
            i += 1
        if n2 == q:
            j += 1
        p = q
    return r


@_jit
def _runs_at(x, a, b, s, k, rlo, rhi, rf):
    """:func:`runs_walk` at one scale: every run is one code, found by galloping."""
    inv = 1.0 / s
    r = 0
    p = a
    while p < b:
        c = _code(np.float64(x[p]), inv, k)
        q = _run_end(x, p, b, inv, inv, k, c, c)
        sx = 0.0
        sxx = 0.0
        for i in range(p, q):
            v = np.float64(x[i])
            sx += v
            sxx += v * v
        rlo[r] = c
        rhi[r] = c
        rf[r, 0] = q - p
        rf[r, 1] = sx
        rf[r, 2] = sxx
        rf[r, 3] = 0.0
        r += 1
        p = q
    return r


@_jit
def z_bounds(rlo, rhi, rf, n_runs, s1, s2, qmin, qmax, za, zb, cum, lb, arg):
    """For every zero point ``z`` in ``[za, zb]``: the lower bound of the error over scales in
    ``[s1, s2]`` (see the module doc) into ``lb[z − za]``, and the scale where its exact part
    is least into ``arg[z − za]``. With ``s1 == s2`` the bound is the error at that scale.
    ``cum`` is scratch of at least ``n_runs + 1`` rows."""
    # running sums over runs: count, Σx, Σx² (all runs); Σx², Σm·x, Σm²·count (one-code runs);
    # the two-code bounds
    cum[0, :] = 0.0
    for r in range(n_runs):
        for c in range(7):
            cum[r + 1, c] = cum[r, c]
        cum[r + 1, 0] += rf[r, 0]
        cum[r + 1, 1] += rf[r, 1]
        cum[r + 1, 2] += rf[r, 2]
        if rlo[r] == rhi[r]:
            m = np.float64(rlo[r])
            cum[r + 1, 3] += rf[r, 2]
            cum[r + 1, 4] += m * rf[r, 1]
            cum[r + 1, 5] += m * m * rf[r, 0]
        elif rhi[r] == rlo[r] + 1:
            cum[r + 1, 6] += rf[r, 3]
    below = 0   # first run with hi >= A: runs before it clamp to A
    inner = 0   # first run with lo >= A
    inner_end = 0  # first run with hi > B
    above = 0   # first run with lo > B: runs from it clamp to B
    for z in range(zb, za - 1, -1):  # A and B grow: every pointer moves forward only
        lo_code = qmin - z
        hi_code = qmax - z
        while below < n_runs and rhi[below] < lo_code:
            below += 1
        while inner < n_runs and rlo[inner] < lo_code:
            inner += 1
        while inner_end < n_runs and rhi[inner_end] <= hi_code:
            inner_end += 1
        while above < n_runs and rlo[above] <= hi_code:
            above += 1
        e_lo, e_hi = np.float64(lo_code), np.float64(hi_code)
        nb, sxb, sxxb = cum[below, 0], cum[below, 1], cum[below, 2]
        na = cum[n_runs, 0] - cum[above, 0]
        sxa = cum[n_runs, 1] - cum[above, 1]
        sxxa = cum[n_runs, 2] - cum[above, 2]
        q0 = sxxb + sxxa
        q1 = e_lo * sxb + e_hi * sxa
        q2 = e_lo * e_lo * nb + e_hi * e_hi * na
        t = 0.0
        if inner_end > inner:
            q0 += cum[inner_end, 3] - cum[inner, 3]
            q1 += cum[inner_end, 4] - cum[inner, 4]
            q2 += cum[inner_end, 5] - cum[inner, 5]
            t = cum[inner_end, 6] - cum[inner, 6]
        if q2 > 0.0:
            s = min(max(q1 / q2, s1), s2)
        else:
            s = s2 if q1 > 0.0 else s1
        lb[z - za] = q0 - 2.0 * q1 * s + q2 * s * s + t
        arg[z - za] = s


@_jit
def search_grid(s_lo, s_hi, s_mm, grid):
    """The scales a search evaluates first: float32 scales, ascending, from ``s_lo`` to
    ``s_hi``, the min/max scale ``s_mm`` and ``s_mm · grid`` (within the range) among them."""
    pts = np.empty(grid.size + 3)
    pts[0] = np.float64(np.float32(s_lo))
    pts[1] = np.float64(np.float32(s_hi))
    pts[2] = s_mm
    for i in range(grid.size):
        pts[i + 3] = min(max(np.float64(np.float32(s_mm * grid[i])), pts[0]), pts[1])
    return small_unique(pts)


@_jit
def unit_optimum(x, a, b, qmin, qmax, z_fixed, s_lo, s_hi, s_mm, eps, floor, grid, max_boxes,
                 sweep_crossings, out, scratch=None):
    """The least error of sorted ``x[a:b]``, a walked row, over float32 scales in
    ``[s_lo, s_hi]`` and zero points in ``[qmin, qmax]`` (only ``z_fixed`` when it is not below
    ``qmin``), by branch and bound (see the module doc): ``out`` = (error, scale, zero point,
    1.0 when every box was settled, boxes opened). ``s_mm`` (the min/max scale) is evaluated
    with the range's ends and the scales ``s_mm · grid`` inside it; a box is dropped when its
    bound reaches ``(1 − eps)`` times the best error less ``floor`` (the float64 roundoff of the
    sums); a box with at most ``sweep_crossings`` crossings is swept; at most ``max_boxes``
    boxes are opened (then ``out[3]`` is 0). ``scratch``
    (:func:`new_scratch`) is reused from one unit to the next: a small unit (a group of 128)
    took as long to allocate its buffers as to search."""
    k = qmax - qmin + 1
    if scratch is None:
        scratch = new_scratch(qmin, qmax)
    rlo, rhi, rf, cum, lb, arg, h_key, h_s1, h_s2, h_za, h_zb, ev_b, ev_x, ev_m, q1, q2, \
        res, pre, pos, code, off, lad_s, lad_id, fcodes, changes = scratch
    per = min(b - a, 2 * k + 1)  # runs at one scale, at most
    if pre.shape[0] < b - a + 1:
        pre = np.empty((b - a + 1, 4))
        fcodes, changes = code_scratch(b - a)
    unit_prefix(x, a, b, pre)
    if z_fixed >= qmin:
        z0, z1 = z_fixed, z_fixed
    else:
        z0, z1 = qmin, qmax
    best = np.inf
    best_s = s_mm
    best_z = z0
    pts = search_grid(s_lo, s_hi, s_mm, grid)
    # the evaluated scales, ascending (``lad_s``; no box holds one inside), and where each
    # one's runs are kept (``lad_id``: entries ``off[id] .. off[id + 1]``)
    if off.size < pts.size + 3:
        off = np.empty(2 * pts.size + 3, np.int64)
        lad_s = np.empty(2 * pts.size + 2)
        lad_id = np.empty(2 * pts.size + 2, np.int64)
    if pos.size < (pts.size + 2) * per:
        pos = np.empty(2 * (pts.size + 2) * per, np.int64)
        code = np.empty(2 * (pts.size + 2) * per, np.int64)
    off[0] = 0
    # the min/max scale first; then the scales beyond two cuts (:mod:`scale_cuts`) are ruled
    # out whole, and of the grid only the scales between the cuts are evaluated, with the cuts
    todo = np.empty(pts.size + 2)
    todo[0] = s_mm
    n_todo = 1
    cut_lo, cut_hi = -np.inf, -np.inf  # the cuts among the scales to evaluate, once placed
    i = 0
    while i < n_todo:
        s = todo[i]
        off[i + 1] = codes_at(x, a, b, s, k, pos, code, off[i], fcodes, changes)
        _ladder_insert(lad_s, lad_id, i, _first_not_below(lad_s, 0, i, s), s, i)
        # a cut's error exceeds the best so far (that placed it): its runs are kept for
        # the boxes beside it, its error is not worth computing
        if s != cut_lo and s != cut_hi:
            za, zb = _zero_points_near(x, a, b, s, k, qmin, qmax, z0, z1, floor)
            # its errors element by element (:func:`errors_at`), from its runs where
            # many values clamp
            if not errors_at(x, a, b, s, k, qmin, qmax, za, zb, lb):
                n_runs = runs_between(x, a, b, pre, s, s, pos, code, off[i], off[i + 1],
                                      off[i], off[i + 1], rlo, rhi, rf)
                z_bounds(rlo, rhi, rf, n_runs, s, s, qmin, qmax, za, zb, cum, lb, arg)
            best, best_s, best_z = _least(lb, s, za, zb, best, best_s, best_z)
        i += 1
        if i == 1:
            best, best_s, best_z = _incumbents(x, a, b, pre, s_mm, pts[0], pts[pts.size - 1],
                                               best, best_s, best_z, k, qmin, qmax, z0, z1,
                                               floor, rlo, rhi, rf, cum, lb, arg)
            ends = pts[0], pts[pts.size - 1]
            pts = _between_cuts(x, a, b, pre, pts, s_mm, best, qmin, qmax, z0, z1)
            if pts[0] > ends[0]:
                cut_lo = pts[0]
            if pts[pts.size - 1] < ends[1]:
                cut_hi = pts[pts.size - 1]
            for u in range(pts.size):
                if pts[u] != s_mm:
                    todo[n_todo] = pts[u]
                    n_todo += 1
    # the heap of boxes, lowest bound first
    h_key, h_s1, h_s2, h_za, h_zb, size = heap_of(h_key, h_s1, h_s2, h_za, h_zb, pts, z0, z1)
    n_lad = pts.size
    at = 0
    boxes = 0
    proven = 1.0
    while size > 0:
        go, s1, s2, za, zb, threshold, proven = next_box(h_key, h_s1, h_s2, h_za, h_zb, size,
                                                         best, eps, floor, boxes, max_boxes)
        size -= 1
        if not go:
            break
        boxes += 1
        mid = split_scale(s1, s2)
        inside = s1 < mid < s2
        at = _first_not_below(lad_s, 0, n_lad, s1)  # s2 is the next scale evaluated
        i1, i2 = lad_id[at], lad_id[at + 1]
        # a box that will be swept takes its runs' sums only: its two-code runs' bounds (a
        # pass over their elements) would only sharpen which zero points it sweeps, and a
        # wide box's bound drops nothing
        n_runs = runs_between(x, a, b, pre, s1, s2, pos, code, off[i1], off[i1 + 1], off[i2],
                              off[i2 + 1], rlo, rhi, rf, False)
        crossings = box_crossings(rlo, rhi, rf, n_runs)
        if crossings > sweep_crossings and inside:
            n_runs = runs_between(x, a, b, pre, s1, s2, pos, code, off[i1], off[i1 + 1],
                                  off[i2], off[i2 + 1], rlo, rhi, rf)
        z_bounds(rlo, rhi, rf, n_runs, s1, s2, qmin, qmax, za, zb, cum, lb, arg)
        lo_z, hi_z, low = box_zero_points(rlo, rhi, n_runs, qmin, qmax, za, zb, lb, threshold)
        if hi_z < lo_z:
            continue
        if crossings <= sweep_crossings or not inside:
            # few crossings: the box's own breakpoints settle it (every float32 scale)
            if crossings > ev_b.size:
                ev_b = np.empty(2 * crossings)
                ev_x = np.empty(2 * crossings)
                ev_m = np.empty(2 * crossings, np.int64)
            if box_sweep(x, a, rlo, rhi, rf, n_runs, s1, s2, qmin, qmax, lo_z, hi_z, best,
                         ev_b, ev_x, ev_m, q1, q2, res):
                best, best_s, best_z = res[0], res[1], int(res[2])
            continue
        # the box is split: the runs at its midpoint are kept for both halves
        lad_s, lad_id, off = ladder_room(lad_s, lad_id, off, n_lad)
        if off[n_lad] + per > pos.size:
            pos = grow_int(pos, 2 * pos.size + per)
            code = grow_int(code, 2 * code.size + per)
        off[n_lad + 1] = codes_at(x, a, b, mid, k, pos, code, off[n_lad], fcodes, changes)
        _ladder_insert(lad_s, lad_id, n_lad, at + 1, mid, n_lad)
        n_lad += 1
        h_key, h_s1, h_s2, h_za, h_zb, size = heap_halves(h_key, h_s1, h_s2, h_za, h_zb, size,
                                                          low, s1, mid, s2, lo_z, hi_z)
    put_optimum(out, x, a, b, best, best_s, best_z, k, qmin, qmax, z0, proven, boxes)
    # the engine's pick among the scale and its float32 neighbours, from the scale's runs
    # (those kept if it was evaluated as a box end, else found now)
    at = _first_not_below(lad_s, 0, n_lad, best_s)
    if at < n_lad and lad_s[at] == best_s:
        i1, i2 = off[lad_id[at]], off[lad_id[at] + 1]
    else:
        if off[n_lad] + per > pos.size:
            pos = grow_int(pos, off[n_lad] + per)
            code = grow_int(code, off[n_lad] + per)
        i1 = off[n_lad]
        i2 = codes_at(x, a, b, best_s, k, pos, code, i1, fcodes, changes)
    out[OUT_PICK] = neighbour_pick(x, a, b, pre, pos, code, i1, i2, best_s, int(out[2]), qmin,
                                   qmax)


@_jit
def _incumbents(x, a, b, pre, s_mm, s_lo, s_hi, best, best_s, best_z, k, qmin, qmax, z0, z1,
                floor, rlo, rhi, rf, cum, lb, arg):
    """The best of (``best``, ``best_s``, ``best_z``) and the errors of every zero point of
    ``[z0, z1]`` at the scales ``s_mm · INCUMBENTS`` of ``[s_lo, s_hi]`` (a walked row's,
    from its prefix sums ``pre``; those that could be least, :func:`_zero_points_near`),
    equal errors going to the least scale.

    Not box ends: only a better error to compare with from the start. The cuts
    (:func:`_between_cuts`) and every bound compare against it, and a sweep passes a bucket
    only when its bound reaches it, so the sweep from the min/max scale down to the optimum
    -- whose error is 1-3% below the min/max scale's on an LLM weight's channels -- swept
    piece by piece every bucket whose error was below the min/max scale's. As box ends the
    same scales cost more than they saved (each box's runs, bounds and sweep set-up)."""
    if not best > 0.0:
        return best, best_s, best_z  # nothing to improve on; the grid's ties decide
    for f in INCUMBENTS:
        s = np.float64(np.float32(s_mm * f))
        if not s_lo <= s <= s_hi:
            continue
        za, zb = _zero_points_near(x, a, b, s, k, qmin, qmax, z0, z1, floor)
        # the errors alone, element by element; the runs where many values clamp
        if not errors_at(x, a, b, s, k, qmin, qmax, za, zb, lb):
            n_runs = runs_prefix(x, a, b, pre, s, s, k, rlo, rhi, rf)
            z_bounds(rlo, rhi, rf, n_runs, s, s, qmin, qmax, za, zb, cum, lb, arg)
        best, best_s, best_z = _least(lb, s, za, zb, best, best_s, best_z)
    return best, best_s, best_z


@_jit
def _zero_points_near(x, a, b, s, k, qmin, qmax, z0, z1, floor):
    """The zero points of ``[z0, z1]`` among which the least error of sorted ``x[a:b]`` at
    scale ``s`` lies: all of them but those whose error exceeds another's by more than the
    sums' roundoff ``floor`` (so :func:`z_bounds` picks the same one from these alone).

    With ``c_lo``, ``c_hi`` the codes of the least and greatest value, zero point ``z``
    clamps the least value when ``z < A = qmin − c_lo`` and the greatest when ``z > B = qmax
    − c_hi``. Below both ``A`` and ``B`` the step ``z → z + 1`` lowers every clamped
    element's grid point by one towards its value and clamps nothing new: no error grows,
    and from ``z ≤ A − 2`` on the least value, at least 1.5 steps below its grid point, gains
    at least ``2s²``. So every ``z ≤ min(A, B) − 2`` errs by ``2s²`` more than
    ``min(A, B) − 1`` (one step below both may tie exactly: a value half way between two
    codes), and likewise above ``max(A, B) + 1``. Where ``2s²`` is not above ``2·floor`` (a
    unit far from 0 for its spread) the roundoff could order them otherwise: all are kept."""
    if b <= a or not s * s > floor:
        return z0, z1
    inv = 1.0 / s
    za = qmin - _code(np.float64(x[a]), inv, k)
    zb = qmax - _code(np.float64(x[b - 1]), inv, k)
    lo, hi = min(za, zb) - 1, max(za, zb) + 1
    return min(max(lo, z0), z1), max(min(hi, z1), z0)


@_jit
def _evaluate(rlo, rhi, rf, n_runs, s, qmin, qmax, za, zb, best, best_s, best_z, cum, lb, arg):
    """The best of (``best``, ``best_s``, ``best_z``) and the errors at scale ``s`` of the
    zero points ``[za, zb]`` (:func:`z_bounds` of the scale's runs): the least error, equal
    errors going to the least scale, then to the least zero point."""
    z_bounds(rlo, rhi, rf, n_runs, s, s, qmin, qmax, za, zb, cum, lb, arg)
    return _least(lb, s, za, zb, best, best_s, best_z)


@_jit
def _least(lb, s, za, zb, best, best_s, best_z):
    """The best of (``best``, ``best_s``, ``best_z``) and the errors ``lb`` at scale ``s`` of
    the zero points ``[za, zb]``: the least error, equal errors going to the least scale, then
    to the least zero point."""
    for t in range(zb - za + 1):
        # the least scale of equal errors, whatever the order the scales are evaluated in
        if lb[t] < best or (lb[t] == best and s < best_s):
            best, best_s, best_z = lb[t], s, za + t
    return best, best_s, best_z


@_jit
def _between_cuts(x, a, b, pre, pts, s_mm, best, qmin, qmax, z0, z1):
    """The grid ``pts`` (ascending, ``s_mm`` among them) less the scales beyond the cuts
    below and above ``s_mm`` past which every scale's error exceeds ``best`` at every zero
    point of ``[z0, z1]`` (:mod:`quantscope.core.kernels.scale_cuts`), with the cuts as its
    new ends. A unit without error at ``s_mm`` keeps its whole grid (every scale that ties
    it is evaluated, as before)."""
    if not best > 0.0 or b - a < 2:
        return pts
    lo = clip_cut(x, a, b, s_mm, pts[0], qmin - z1, qmin - z0, qmax - qmin, best)
    s_known, low_known = lo, 0.0  # a spread bound of the unit, to aim the upper cut from
    if lo > pts[0]:  # the clipping alone rules out some scales: with the spread, more
        lo, low_known = clip_spread_cut(x, a, b, lo, s_mm, qmin - z1, qmin - z0, qmax - qmin,
                                        best, pre, a)
    hi = spread_cut(x, a, b, s_mm, pts[pts.size - 1], best, pre, a, s_known, low_known)
    lo, hi = min(lo, s_mm), max(hi, s_mm)  # s_mm stays, whatever the rounding of the sums
    out = np.empty(pts.size + 2)
    n = 0
    out[n] = max(lo, pts[0])
    n += 1
    for u in range(pts.size):
        if out[0] < pts[u] < hi:
            out[n] = pts[u]
            n += 1
    if hi > out[n - 1]:
        out[n] = min(hi, pts[pts.size - 1])
        n += 1
    return out[:n]


@_jit
def put_optimum(out, x, a, b, best, best_s, best_z, k, qmin, qmax, z0, proven, boxes):
    """A search's result into ``out``: (error, scale, zero point, proven, boxes opened), the
    zero point the lowest of those alike (:func:`_lowest_alike`)."""
    out[0] = max(best, 0.0)
    out[1] = best_s
    out[2] = _lowest_alike(x, a, b, best_s, best_z, k, qmin, qmax, z0)
    out[3] = proven
    out[4] = boxes


@_jit
def next_box(h_key, h_s1, h_s2, h_za, h_zb, size, best, eps, floor, boxes, max_boxes):
    """The box of the least bound, taken from the heap of ``size`` boxes, and the threshold of
    the bounds that drop a box (``(1 − eps)`` times the ``best`` error less ``floor``):
    ``(go, s1, s2, za, zb, threshold, proven)``. ``go`` is False when the search ends there:
    every box left has a bound at least this one's, which reaches the threshold (``proven``
    1.0), or ``max_boxes`` were opened (``proven`` 0.0)."""
    key, s1, s2, za, zb = heap_take(h_key, h_s1, h_s2, h_za, h_zb, size)
    threshold = best * (1.0 - eps) - floor
    if key >= threshold:
        return False, s1, s2, za, zb, threshold, 1.0
    if boxes >= max_boxes:
        return False, s1, s2, za, zb, threshold, 0.0
    return True, s1, s2, za, zb, threshold, 1.0


@_jit
def split_scale(s1, s2):
    """Where a box ``[s1, s2]`` is split: the float32 scale nearest their geometric mean, or
    their mean where that is not strictly inside (then neither may be)."""
    mid = np.float64(np.float32(np.sqrt(s1 * s2)))
    if not s1 < mid < s2:
        mid = np.float64(np.float32(0.5 * (s1 + s2)))
    return mid


@_jit
def box_zero_points(rlo, rhi, n_runs, qmin, qmax, za, zb, lb, threshold):
    """The zero points of a box (``za .. zb``, bounds ``lb``, runs ``rlo``/``rhi``) that may
    hold an error below ``threshold``: their hull and least bound ``(lo_z, hi_z, low)``;
    ``hi_z < lo_z`` when none may (the box is dropped)."""
    lo_z, hi_z = za, za - 1  # the hull of the zero points that survive (none yet)
    low = np.inf
    for t in range(zb - za + 1):
        if lb[t] < threshold:
            if hi_z < lo_z:
                lo_z = za + t
            hi_z = za + t
            low = min(low, lb[t])
    if hi_z < lo_z:
        return lo_z, hi_z, low
    f = _free_zero_point(rlo, rhi, n_runs, qmin, qmax, za, zb, lb)
    if f >= za:
        # every zero point's error is at least that of one that clamps nothing, the
        # unbounded grid's: the box is that one zero point's (its bound is the box's)
        low = lb[f - za]
        if low >= threshold:
            return za, za - 1, low
        lo_z, hi_z = f, f
    return lo_z, hi_z, low


@_jit
def ladder_room(lad_s, lad_id, off, n):
    """The ladder of evaluated scales (``lad_s``, ``lad_id`` and the ends of their runs
    ``off``) with room for one more after its ``n``: the same arrays, or larger copies."""
    if n >= lad_s.size:
        lad_s = grow(lad_s, 2 * lad_s.size)
        lad_id = grow_int(lad_id, lad_s.size)
        off = grow_int(off, lad_s.size + 1)
    return lad_s, lad_id, off


@_jit
def _free_zero_point(rlo, rhi, n_runs, qmin, qmax, za, zb, lb):
    """A zero point of ``[za, zb]`` at which no element of the box's runs is clamped at any
    scale of the box, the one with the highest bound ``lb``; ``za − 1`` if there is none.

    Why one is enough: rounding to the nearest point of the unbounded grid ``s·m`` is never
    worse than clamping to an end of the range, so at every scale each zero point's error is
    at least the unclamped error, and a zero point that clamps nothing has exactly that
    error. Such zero points are the least at every scale of the box, all alike, so the
    box's least error is theirs -- and each one's bound bounds it. With more codes than a
    unit has elements (8 bits, groups of 128) most zero points clamp nothing, and a sweep
    that carried them all treated every crossing as a clamped one, per zero point."""
    if n_runs == 0:
        return za - 1
    # the codes of a box lie between its first run's lower code and its last run's upper
    # one; zero point z clamps none of them when qmin <= code + z <= qmax
    f_lo = max(qmin - rlo[0], za)
    f_hi = min(qmax - rhi[n_runs - 1], zb)
    f = za - 1
    for z in range(f_lo, f_hi + 1):
        if f < za or lb[z - za] > lb[f - za]:
            f = z
    return f


@_jit
def _lowest_alike(x, a, b, s, z, k, qmin, qmax, z0):
    """The lowest zero point (not below ``z0``, the least searched) whose codes at scale
    ``s`` are zero point ``z``'s shifted, none clamped, when ``z`` clamps nothing (else
    ``z``): they all have the same error, and the search may have kept any one of them
    (:func:`_free_zero_point`); the lowest aligns the unit's least value with ``qmin``, as
    the min/max rule does."""
    if b <= a:
        return z
    inv = 1.0 / s
    c_lo = _code(np.float64(x[a]), inv, k)
    c_hi = _code(np.float64(x[b - 1]), inv, k)
    if not (qmin <= c_lo + z and c_hi + z <= qmax):
        return z
    return max(qmin - c_lo, z0)


@_jit
def _next32(s, floor):
    """The float32 scale just above ``s`` (at least ``floor``)."""
    t = np.float64(np.float32(s))
    if t <= s:
        t = np.float64(np.nextafter(np.float32(t), np.float32(np.inf)))
    return max(t, floor)


@_jit
def _prev32(s, ceiling):
    """The float32 scale just below ``s`` (at most ``ceiling``)."""
    t = np.float64(np.float32(s))
    if t >= s:
        t = np.float64(np.nextafter(np.float32(t), np.float32(0.0)))
    return min(t, ceiling)


@_jit
def _ladder_insert(lad_s, lad_id, n, at, s, ident):
    """Insert scale ``s`` (runs kept as ``ident``) at position ``at`` of ``lad_s[:n]``."""
    for t in range(n, at, -1):
        lad_s[t] = lad_s[t - 1]
        lad_id[t] = lad_id[t - 1]
    lad_s[at] = s
    lad_id[at] = ident




@_jit
def new_scratch(qmin, qmax, longest=0):
    """The buffers of :func:`unit_optimum` for codes ``[qmin, qmax]``: runs, their running
    sums, per zero point bounds, the heap of boxes, a sweep's crossings and sums, the prefix
    sums of a walked unit of up to ``longest`` elements, the runs of 64 of its scales
    (:func:`codes_at`), their ladder and the codes and code changes of one of them."""
    k = qmax - qmin + 1
    cap_runs = 4 * k + 8
    cap = 256
    per = min(longest, 2 * k + 1)
    fcodes, changes = code_scratch(longest)
    return (np.empty(cap_runs, np.int64), np.empty(cap_runs, np.int64), np.empty((cap_runs, 4)),
            np.empty((cap_runs + 1, 7)), np.empty(k), np.empty(k), np.empty(cap),
            np.empty(cap), np.empty(cap), np.empty(cap, np.int64), np.empty(cap, np.int64),
            np.empty(1024), np.empty(1024), np.empty(1024, np.int64), np.empty(k),
            np.empty(k), np.empty(3), np.empty((longest + 1, 4)), np.empty(64 * per, np.int64),
            np.empty(64 * per, np.int64), np.empty(65, np.int64), np.empty(64),
            np.empty(64, np.int64), fcodes, changes)


@_jit
def code_scratch(longest):
    """:func:`codes_at`'s buffers for a unit of up to ``longest`` elements: its codes and the
    places where they change."""
    return np.empty(longest, np.float32), np.empty(longest + 16, np.int32)


@_jit
def long_row_optimum(x, a, b, rec, k0, qmin, qmax, z_fixed, s_lo, s_hi, s_mm, eps, floor,
                     grid, max_boxes, out, scratch, ladder_entries, ladder_scales):
    """The search of a long row (sorted ``x[a:b]``, block prefix sums from ``rec[k0]``): as
    :func:`unit_optimum` (same arguments and output, the pick left as it was) without
    incumbents, cuts or sweeps -- the grid, then boxes split at their evaluated midpoints --
    each box's runs merged from its ends' kept in a ladder of at most ``ladder_entries`` run
    starts and ``ladder_scales`` scales (:mod:`quantscope.core.kernels.long_runs`); a box with
    an end the ladder had no room for searches the row (:func:`runs_search`). The NumPy twin
    :mod:`quantscope.core.stats.mse_twin` takes the same steps."""
    k = qmax - qmin + 1
    rlo, rhi, rf, cum, lb, arg, h_key, h_s1, h_s2, h_za, h_zb = scratch[:11]
    if z_fixed >= qmin:
        z0, z1 = z_fixed, z_fixed
    else:
        z0, z1 = qmin, qmax
    best = np.inf
    best_s = s_mm
    best_z = z0
    g_end = prefix_at(x, a, b, rec, k0)
    per = min(b - a, 2 * k + 1)  # starts at one scale, at most
    pos = np.empty(4 * per, np.int64)
    code = np.empty(4 * per, np.int64)
    pre = np.empty((4 * per, 4))
    off = np.empty(65, np.int64)
    lad_s = np.empty(64)
    lad_id = np.empty(64, np.int64)
    off[0] = 0
    n_lad = 0
    # the grid, the min/max scale first: each scale's runs galloped to, and kept
    pts = search_grid(s_lo, s_hi, s_mm, grid)
    for u in range(-1, pts.size):
        if u >= 0 and pts[u] == s_mm:
            continue
        s = s_mm if u < 0 else pts[u]
        if pos.size < off[n_lad] + per:
            pos = grow_int(pos, 2 * pos.size + per)
            code = grow_int(code, 2 * code.size + per)
            pre = grow_rows(pre, 2 * pre.shape[0] + per)
        off[n_lad + 1] = starts_at(x, a, b, rec, k0, s, k, pos, code, pre, off[n_lad], -1,
                                   -1, -1, -1)
        n_runs = point_runs(pos, code, pre, off[n_lad], off[n_lad + 1], b, g_end, rlo, rhi,
                            rf)
        best, best_s, best_z = _evaluate(rlo, rhi, rf, n_runs, s, qmin, qmax, z0, z1, best,
                                         best_s, best_z, cum, lb, arg)
        _ladder_insert(lad_s, lad_id, n_lad, _first_not_below(lad_s, 0, n_lad, s), s, n_lad)
        n_lad += 1
    # the heap of boxes, lowest bound first
    h_key, h_s1, h_s2, h_za, h_zb, size = heap_of(h_key, h_s1, h_s2, h_za, h_zb, pts, z0, z1)
    boxes = 0
    proven = 1.0
    while size > 0:
        go, s1, s2, za, zb, threshold, proven = next_box(h_key, h_s1, h_s2, h_za, h_zb, size,
                                                         best, eps, floor, boxes, max_boxes)
        size -= 1
        if not go:
            break
        boxes += 1
        mid = split_scale(s1, s2)
        at = _first_not_below(lad_s, 0, n_lad, s1)
        kept = at + 1 < n_lad and lad_s[at] == s1 and lad_s[at + 1] == s2
        if kept:
            i1, i2 = lad_id[at], lad_id[at + 1]
            o1, e1, o2, e2 = off[i1], off[i1 + 1], off[i2], off[i2 + 1]
            n_runs = box_runs(x, a, b, rec, k0, s1, s2, pos, code, pre, o1, e1, o2, e2,
                              g_end, rlo, rhi, rf)
        else:  # an end beyond the ladder's room: the row searched, as before the ladder
            o1, e1, o2, e2 = -1, -1, -1, -1
            n_runs = runs_search(x, a, b, rec, k0, s1, s2, k, rlo, rhi, rf)
        z_bounds(rlo, rhi, rf, n_runs, s1, s2, qmin, qmax, za, zb, cum, lb, arg)
        lo_z, hi_z, low = box_zero_points(rlo, rhi, n_runs, qmin, qmax, za, zb, lb, threshold)
        if hi_z < lo_z:
            continue
        # a box with no float32 scale strictly inside is done (its ends were evaluated)
        if not s1 < mid < s2:
            continue
        keep = kept and n_lad < ladder_scales and off[n_lad] + per <= ladder_entries
        o = off[n_lad]  # a scale not kept is written past the kept ones, and forgotten
        if pos.size < o + per:
            pos = grow_int(pos, 2 * pos.size + per)
            code = grow_int(code, 2 * code.size + per)
            pre = grow_rows(pre, 2 * pre.shape[0] + per)
        e = starts_at(x, a, b, rec, k0, mid, k, pos, code, pre, o, o1, e1, o2, e2)
        n_runs = point_runs(pos, code, pre, o, e, b, g_end, rlo, rhi, rf)
        z_bounds(rlo, rhi, rf, n_runs, mid, mid, qmin, qmax, lo_z, hi_z, cum, lb, arg)
        for t in range(hi_z - lo_z + 1):
            if lb[t] < best:
                best, best_s, best_z = lb[t], mid, lo_z + t
        if keep:
            lad_s, lad_id, off = ladder_room(lad_s, lad_id, off, n_lad)
            off[n_lad + 1] = e
            _ladder_insert(lad_s, lad_id, n_lad, at + 1, mid, n_lad)
            n_lad += 1
        h_key, h_s1, h_s2, h_za, h_zb, size = heap_halves(h_key, h_s1, h_s2, h_za, h_zb, size,
                                                          low, s1, mid, s2, lo_z, hi_z)
    put_optimum(out, x, a, b, best, best_s, best_z, k, qmin, qmax, z0, proven, boxes)


@_jit
def rows_optimum(values, starts, rec, rec_starts, search, rows, qmin, qmax, z_fixed, s_lo,
                 s_hi, s_mm, eps, floor, grid, max_boxes, sweep_crossings, out):
    """The MSE optimum of each sorted row ``rows[e]`` of ``values`` (rows at ``starts``) into
    ``out[e]``, with that row's ``s_lo[e]``, ``s_hi[e]``, ``s_mm[e]`` and ``floor[e]``:
    :func:`long_row_optimum` where ``search[e]`` (its block prefix sums ``rec`` from
    ``rec_starts``), else :func:`unit_optimum` (walked)."""
    longest = 0
    for e in range(rows.size):
        if not search[e]:
            longest = max(longest, starts[rows[e] + 1] - starts[rows[e]])
    scratch = new_scratch(qmin, qmax, longest)
    for e in range(rows.size):
        r = rows[e]
        if search[e]:
            long_row_optimum(values, starts[r], starts[r + 1], rec, rec_starts[r], qmin, qmax,
                             z_fixed, s_lo[e], s_hi[e], s_mm[e], eps, floor[e], grid,
                             max_boxes, out[e], scratch, LADDER_ENTRIES, LADDER_SCALES)
        else:
            unit_optimum(values, starts[r], starts[r + 1], qmin, qmax, z_fixed, s_lo[e],
                         s_hi[e], s_mm[e], eps, floor[e], grid, max_boxes, sweep_crossings,
                         out[e], scratch)
