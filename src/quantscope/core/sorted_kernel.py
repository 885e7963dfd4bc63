"""The compiled inner loop of :func:`quantscope.core.sorted_stats.evaluate`.

One evaluation (a row, a scale, a zero point) needs ``levels + 1`` threshold searches in its
sorted row and a few floating-point operations per code. In NumPy that work is spread over
one ``searchsorted`` call per row and a dozen ``[evaluations, levels]`` temporaries, which for
4096 rows of 4096 elements costs more than a pass over the data. Here it is one loop, compiled
by Numba, that releases the GIL (the window's thread keeps painting while it runs).

Exactness rests on :func:`code_of`, the direct pass's quantization rule written out for one
float32 element: float32 division or multiplication (or the float64-emulated fused
multiply-add), then half-to-even or half-away rounding, exactly as
:func:`quantscope.core.quantize.quantize_codes_float` does it. The tests compare the two on
every tie and on random bit patterns. Thresholds are first estimated in float64, then
corrected with :func:`code_of` so that they split the row exactly where the direct pass does.
"""

from __future__ import annotations

import numba
import numpy as np

#: ``arithmetic`` names as the kernel's integer codes.
ARITHMETIC_CODES = {"divide": 0, "multiply": 1, "fma": 2}
#: Fix-up moves allowed per threshold before an evaluation is reported unsettled (never seen:
#: each move skips a whole run of equal values, and codes are monotone in the value).
MAX_FIX_MOVES = 64
_EPS = float(np.finfo(np.float64).eps)

_jit = numba.njit(cache=True, nogil=True, error_model="numpy")


@_jit
def code_of(x: np.float32, s: np.float32, inv: np.float32, z: np.int32, arithmetic: int,
            half_away: bool) -> np.float32:
    """The unclamped code of one float32 element (a float32 integer), by the direct rule."""
    if arithmetic == 0:
        v = np.float32(x / s)
    elif arithmetic == 1:
        v = np.float32(x * inv)
    else:  # one rounding of x * inv + z, emulated in float64 (x * inv is exact there)
        v = np.float32(np.float64(x) * np.float64(inv) + np.float64(z))
    if half_away:
        t = np.float32(np.trunc(v))
        if abs(np.float32(v - t)) >= np.float32(0.5):
            t = np.float32(t + (np.float32(1.0) if v > 0 else np.float32(-1.0)))
        v = t
    else:
        v = np.float32(np.rint(v))
    if arithmetic != 2:
        v = np.float32(v + np.float32(z))
    return v


@_jit
def _lower_bound(values, lo: int, hi: int, needle) -> int:
    """First position in ``values[lo:hi]`` whose value is not below ``needle`` (NaN sorts last,
    as in ``np.searchsorted``)."""
    if needle != needle:
        return hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < needle:
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def _gallop(values, lo: int, hi: int, needle) -> int:
    """:func:`_lower_bound` for a needle expected just after ``lo``: steps of 1, 2, 4, ... then
    a binary search in the last step. Consecutive thresholds are a code apart, a few elements
    in a row of thousands, so this takes a handful of predictable steps where a binary search
    over the row takes a dozen unpredictable ones."""
    if needle != needle:
        return hi
    if lo >= hi or not values[lo] < needle:
        return lo
    bound = 1
    while lo + bound < hi and values[lo + bound] < needle:
        bound *= 2
    return _lower_bound(values, lo + bound // 2 + 1, min(lo + bound, hi), needle)


@_jit
def _upper_bound(values, lo: int, hi: int, needle) -> int:
    """First position in ``values[lo:hi]`` whose value is above ``needle``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] <= needle:
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def evaluate_rows(values, starts, prefix, bound1, bound2, row, scale, inv_scale, zero_point,
                  qmin: int, qmax: int, arithmetic: int, half_away: bool, has_inv: bool,
                  walk_below: int, want_counts: bool, hist, out_f, out_i) -> None:
    """Statistics of each evaluation ``e``: row ``row[e]`` quantized with ``scale[e]``,
    ``zero_point[e]`` (and ``inv_scale[e]`` if ``has_inv``).

    Rows shorter than ``walk_below`` are walked element by element (:func:`_walk_row`, no
    prefix sums needed); longer ones are split at their code thresholds (:func:`_search_row`).
    ``out_f[e]`` receives (rounding error, clipping error, their two error bounds, max |error|,
    Σx², min, max); ``out_i[e]`` (elements, clipped below, clipped above, codes used, settled:
    1 if every threshold was placed, else 0 and the evaluation must be redone element by
    element). With ``want_counts``, every evaluation's code counts (clipped ones at the ends)
    are added to ``hist`` and its codes used are counted.
    """
    for e in range(row.size):
        r = row[e]
        a = starts[r]
        b = starts[r + 1]
        s = scale[e]
        z = zero_point[e]
        inv = inv_scale[e] if has_inv else np.float32(np.float32(1.0) / s)
        out_i[e, :] = 0
        out_f[e, :] = 0.0
        out_i[e, 0] = b - a
        out_i[e, 4] = 1
        if b == a:
            continue
        if b - a < walk_below:
            _walk_row(values, a, b, s, inv, z, qmin, qmax, arithmetic, half_away, want_counts,
                      hist, e, out_f, out_i)
        else:
            _search_row(values, a, b, r, prefix, bound1[r], bound2[r], s, inv, z, qmin, qmax,
                        arithmetic, half_away, has_inv, want_counts, hist, e, out_f, out_i)
            out_f[e, 5] = ((prefix[b + r, 2] - prefix[a + r, 2])
                           + (prefix[b + r, 3] - prefix[a + r, 3]))
        out_f[e, 6] = values[a]
        out_f[e, 7] = values[b - 1]


@_jit
def _walk_row(values, a, b, s, inv, z, qmin, qmax, arithmetic, half_away, want_counts, hist,
              e, out_f, out_i) -> None:
    """The direct pass on one short row: each element's code, error and square, summed in
    float64 (a row of n elements sums to within n units of roundoff, which is the bound given).
    The row is sorted, so its codes come in runs: one histogram update per run."""
    lo = np.float32(qmin)
    hi = np.float32(qmax)
    round_err = 0.0
    clip_err = 0.0
    max_abs = 0.0
    sig = 0.0
    below = 0
    above = 0
    run_code = qmin
    run = 0
    used = 0
    for i in range(a, b):
        x = values[i]
        c = code_of(x, s, inv, z, arithmetic, half_away)
        cl = min(max(c, lo), hi)
        xhat = np.float64(np.float32(np.float32(cl - np.float32(z)) * s))
        x64 = np.float64(x)
        d = x64 - xhat
        d2 = d * d
        if c < lo:
            below += 1
            clip_err += d2
        elif c > hi:
            above += 1
            clip_err += d2
        else:
            round_err += d2
        max_abs = max(max_abs, abs(d))
        sig += x64 * x64
        code = int(cl)
        if code != run_code or run == 0:
            if run and want_counts:
                hist[run_code - qmin] += run
            used += 1
            run_code = code
            run = 0
        run += 1
    if want_counts:
        hist[run_code - qmin] += run
    n = b - a
    out_f[e, 0] = round_err
    out_f[e, 1] = clip_err
    out_f[e, 2] = n * _EPS * round_err
    out_f[e, 3] = n * _EPS * clip_err
    out_f[e, 4] = max_abs
    out_i[e, 3] = used
    out_f[e, 5] = sig
    out_i[e, 1] = below
    out_i[e, 2] = above
    out_i[e, 3] = used


@_jit
def _search_row(values, a, b, r, prefix, b1, b2, s, inv, z, qmin, qmax, arithmetic, half_away,
                has_inv, want_counts, hist, e, out_f, out_i) -> None:
    """One long row split at its code thresholds; each interval's error from the prefix sums
    ``Σx² − 2·x̂·Σx + n·x̂²`` with its rounding bound (see :mod:`quantscope.core.sorted_stats`)."""
    levels = qmax - qmin + 1
    step = np.float64(s) if not has_inv else 1.0 / np.float64(inv)
    lo_edge = a  # start of the current interval (interval 0 is clipped below)
    round_err = 0.0
    clip_err = 0.0
    round_bound = 0.0
    clip_bound = 0.0
    max_abs = 0.0
    used = 0
    pending = 0  # elements of code qmin so far: the clipped-below ones count as qmin
    for j in range(levels + 2):
        if j <= levels:  # threshold j: the first element whose code is >= qmin + j
            k = np.float32(qmin + j)
            est = np.float32((np.float64(qmin + j) - z - 0.5) * step)
            p = _gallop(values, lo_edge, b, est)
            moves = 0
            while True:
                if p > a and code_of(values[p - 1], s, inv, z, arithmetic, half_away) >= k:
                    p = _lower_bound(values, a, p, values[p - 1])
                elif p < b and code_of(values[p], s, inv, z, arithmetic, half_away) < k:
                    p = _upper_bound(values, p, b, values[p])
                else:
                    break
                moves += 1
                if moves > MAX_FIX_MOVES:
                    out_i[e, 4] = 0
                    break
            hi_edge = p
        else:
            hi_edge = b
        # interval [lo_edge, hi_edge) holds code qmin + j - 1 (clipped ones at the ends)
        code = qmin if j == 0 else (qmax if j == levels + 1 else qmin + j - 1)
        cnt = hi_edge - lo_edge
        if cnt > 0:
            xhat = np.float64(np.float32(np.float32(code - z) * s))
            h = hi_edge + r
            g = lo_edge + r
            s1 = (prefix[h, 0] - prefix[g, 0]) + (prefix[h, 1] - prefix[g, 1])
            s2 = (prefix[h, 2] - prefix[g, 2]) + (prefix[h, 3] - prefix[g, 3])
            cross = xhat * s1
            nx2 = cnt * (xhat * xhat)
            err = max(s2 - 2.0 * cross + nx2, 0.0)
            bound = _EPS * (2.5 * s2 + 6.0 * abs(cross) + nx2)
            bound += cnt * (b2 + 2.0 * abs(xhat) * b1)
            worst = max(abs(np.float64(values[lo_edge]) - xhat),
                        abs(np.float64(values[hi_edge - 1]) - xhat))
            max_abs = max(max_abs, worst)
            if j == 0 or j == levels + 1:
                clip_err += err
                clip_bound += bound
            else:
                round_err += err
                round_bound += bound
        # code counts: interval 0 joins code qmin, the last interval joins code qmax
        pending += cnt
        if j != 0 and j != levels:
            if pending:
                used += 1
                if want_counts:
                    hist[code - qmin] += pending
            pending = 0
        if j == 0:
            out_i[e, 1] = cnt
        elif j == levels + 1:
            out_i[e, 2] = cnt
        lo_edge = hi_edge
    out_f[e, 0] = round_err
    out_f[e, 1] = clip_err
    out_f[e, 2] = round_bound
    out_f[e, 3] = clip_bound
    out_f[e, 4] = max_abs
    out_i[e, 3] = used
