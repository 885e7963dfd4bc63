"""The compiled loop behind a format's error screen (:mod:`quantscope.core.stats.format_sweep`).

:func:`screen_rows` forms each element's squared error exactly as the direct pass does
(:func:`quantscope.core.formats.format_kernel.direct_rows` on a saturating cast: the same
rounding, the same clamp to ``±max_finite``, the same ``x̂ = float32(float32(r) · scale)``), and
only that: no histogram, no codes used, no clip counts, no minimum or maximum. The terms are
the direct pass's to the bit; their sum is formed in whatever order vectorises
(:func:`~quantscope.core.kernels.sorted_kernel._sum_in_any_order`), so it lies within ``n``
units of roundoff of the direct pass's sum of the same ``n`` non-negative terms -- close enough
to tell which formats cannot be a tensor's best, at a fraction of a full report's cost.
:func:`screen_int_rows` does the same for integer codes with a scale and zero point (int8,
INT4 groups, GPTQ's and AWQ's rules), by the direct rule of
:mod:`quantscope.core.kernels.direct_kernel`; :func:`diff_sum_sq` for formats whose values
come decoded (llama.cpp's blocks: ``x̂`` is the decoded float32 value, as its report has it).
"""

from __future__ import annotations

import math

import numpy as np

from quantscope.core.formats.elements import KIND_FLOAT, KIND_INT, KIND_LUT
from quantscope.core.formats.format_kernel import _round_flat, _scaled
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.sorted_kernel import _sum_in_any_order, code_of

_jit = njit(nogil=True, error_model="numpy")
#: Terms formed before their sum joins the total (the scratch stays in L1).
CHUNK = 1024


@njit(nogil=True, error_model="numpy", inline="always")
def _squares(x, s, inv, use_inv, kind, mbits, emin, step, max_finite, lut_mid, lut_val,
             out, at) -> None:
    """``out[at + k]`` = the squared error of ``x[k]`` under one scale (0 for NaN and inf),
    the direct pass's terms (``_walk_saturating``'s first loop): no branch, no reduction, so
    this loop vectorises."""
    sf = np.float32(s)
    for k in range(x.size):
        xv = x[k]
        fin = xv - xv == 0
        xz = xv if fin else np.float32(0.0)
        r = _round_flat(_scaled(xz, s, inv, use_inv), kind, mbits, emin, step, lut_mid,
                        lut_val)
        clipped = abs(r) > max_finite
        r = math.copysign(max_finite, r) if clipped else r
        d = np.float64(xz) - np.float64(np.float32(np.float32(r) * sf))
        out[at + k] = d * d if fin else 0.0


@njit(nogil=True, error_model="numpy", inline="always")
def _screen(x2d, r0, r1, c0, c1, scale, inv_scale, use_inv, kind, mbits, emin, step,
            max_finite, lut_mid, lut_val) -> float:
    buf = np.empty(CHUNK, np.float64)
    total = 0.0
    width = c1 - c0
    if width >= CHUNK or r1 - r0 <= 1:  # long rows (a tensor, a channel), or one row
        for r in range(r0, r1):
            for a in range(c0, c1, CHUNK):
                b = min(a + CHUNK, c1)
                _squares(x2d[r, a:b], scale[r], inv_scale[r], use_inv, kind, mbits, emin,
                         step, max_finite, lut_mid, lut_val, buf, 0)
                total += _sum_in_any_order(buf[:b - a])
        return total
    # short rows (blocks of 16-256), whole (c0 = 0, c1 = the width): a chunk of rows as one
    # flat loop, each element's scale beside it (a loop per row of 32 ran at a sixth of a long
    # row's speed)
    per = max(1, CHUNK // max(width, 1))
    flat = x2d.reshape(x2d.size)
    sb = np.empty(CHUNK, np.float32)
    ib = np.empty(CHUNK, np.float32)
    for g in range(r0, r1, per):
        h = min(g + per, r1)
        m = (h - g) * width
        for r in range(g, h):
            sb[(r - g) * width:(r - g + 1) * width] = scale[r]
            ib[(r - g) * width:(r - g + 1) * width] = inv_scale[r]
        _squares_each(flat[g * width:g * width + m], sb, ib, use_inv, kind, mbits, emin, step,
                      max_finite, lut_mid, lut_val, buf)
        total += _sum_in_any_order(buf[:m])
    return total


@njit(nogil=True, error_model="numpy", inline="always")
def _squares_each(x, sb, ib, use_inv, kind, mbits, emin, step, max_finite, lut_mid, lut_val,
                  out) -> None:
    """:func:`_squares` with element ``k``'s scale ``sb[k]`` (multiplier ``ib[k]``)."""
    for k in range(x.size):
        xv = x[k]
        s = sb[k]
        fin = xv - xv == 0
        xz = xv if fin else np.float32(0.0)
        r = _round_flat(_scaled(xz, s, ib[k], use_inv), kind, mbits, emin, step, lut_mid,
                        lut_val)
        clipped = abs(r) > max_finite
        r = math.copysign(max_finite, r) if clipped else r
        d = np.float64(xz) - np.float64(np.float32(np.float32(r) * s))
        out[k] = d * d if fin else 0.0


@_jit
def screen_rows(x2d, r0, r1, c0, c1, scale, inv_scale, use_inv, kind, mbits, emin, step,
                max_finite, lut_mid, lut_val) -> float:
    """``Σ d²`` over ``x2d[r0:r1, c0:c1]``, row ``r`` quantized with ``scale[r]`` (multiplied
    by ``inv_scale[r]`` if ``use_inv``) by a saturating cast; NaN and inf weigh 0. One copy of
    the loop per kind and multiplier, as in ``direct_rows``, so the loop holds no branch on
    them."""
    if kind == KIND_FLOAT:
        if use_inv:
            return _screen(x2d, r0, r1, c0, c1, scale, inv_scale, True, KIND_FLOAT, mbits,
                           emin, step, max_finite, lut_mid, lut_val)
        return _screen(x2d, r0, r1, c0, c1, scale, inv_scale, False, KIND_FLOAT, mbits, emin,
                       step, max_finite, lut_mid, lut_val)
    if kind == KIND_INT:
        return _screen(x2d, r0, r1, c0, c1, scale, inv_scale, use_inv, KIND_INT, mbits, emin,
                       step, max_finite, lut_mid, lut_val)
    return _screen(x2d, r0, r1, c0, c1, scale, inv_scale, use_inv, KIND_LUT, mbits, emin, step,
                   max_finite, lut_mid, lut_val)


@njit(nogil=True, error_model="numpy", inline="always")
def _int_squares(x, s, z, qmin, qmax, half_away, out, at) -> None:
    """``out[at + k]`` = the squared error of ``x[k]`` under an integer scale and zero point
    by the divide rule (0 for NaN and inf): the direct pass's terms
    (:func:`~quantscope.core.kernels.sorted_kernel.code_of`, the clamp, ``x̂ =
    float32(float32(code − z) · s)``)."""
    zf = np.float32(z)
    cmin = np.float32(qmin)
    cmax = np.float32(qmax)
    for k in range(x.size):
        xv = x[k]
        fin = xv - xv == 0
        xz = xv if fin else np.float32(0.0)
        v = code_of(xz, s, s, z, 0, half_away)
        c = cmin if v < cmin else (cmax if v > cmax else v)
        d = np.float64(xz) - np.float64(np.float32(np.float32(c - zf) * s))
        out[at + k] = d * d if fin else 0.0


@njit(nogil=True, error_model="numpy", inline="always")
def _screen_int(x2d, r0, r1, c0, c1, scale, zero_point, qmin, qmax, half_away) -> float:
    buf = np.empty(CHUNK, np.float64)
    total = 0.0
    width = c1 - c0
    if width >= CHUNK or r1 - r0 <= 1:
        for r in range(r0, r1):
            for a in range(c0, c1, CHUNK):
                b = min(a + CHUNK, c1)
                _int_squares(x2d[r, a:b], scale[r], zero_point[r], qmin, qmax, half_away,
                             buf, 0)
                total += _sum_in_any_order(buf[:b - a])
        return total
    per = max(1, CHUNK // max(width, 1))
    for g in range(r0, r1, per):
        h = min(g + per, r1)
        for r in range(g, h):
            _int_squares(x2d[r, c0:c1], scale[r], zero_point[r], qmin, qmax, half_away, buf,
                         (r - g) * width)
        total += _sum_in_any_order(buf[:(h - g) * width])
    return total


@_jit
def screen_int_rows(x2d, r0, r1, c0, c1, scale, zero_point, qmin, qmax, half_away) -> float:
    """``Σ d²`` over ``x2d[r0:r1, c0:c1]``, row ``r`` quantized to integer codes
    ``qmin..qmax`` with ``scale[r]`` and ``zero_point[r]`` by the divide rule, rounding half
    away from zero if ``half_away`` (else half to even); NaN and inf weigh 0."""
    if half_away:
        return _screen_int(x2d, r0, r1, c0, c1, scale, zero_point, qmin, qmax, True)
    return _screen_int(x2d, r0, r1, c0, c1, scale, zero_point, qmin, qmax, False)


@_jit
def diff_sum_sq(x, v, lo, hi) -> float:
    """``Σ (x − v)²`` in float64 over flat float32 ``x[lo:hi]`` and ``v[lo:hi]``, in any
    order; NaN or inf anywhere makes it NaN or inf (the caller's sign to take the exact
    path, which refuses them)."""
    buf = np.empty(CHUNK, np.float64)
    total = 0.0
    for a in range(lo, hi, CHUNK):
        b = min(a + CHUNK, hi)
        for k in range(a, b):
            d = np.float64(x[k]) - np.float64(v[k])
            buf[k - a] = d * d
        total += _sum_in_any_order(buf[:b - a])
    return total


@_jit
def finite_sum_sq(x, lo, hi) -> float:
    """``Σ x²`` in float64 over the finite elements of flat ``x[lo:hi]``, in any order."""
    buf = np.empty(CHUNK, np.float64)
    total = 0.0
    for a in range(lo, hi, CHUNK):
        b = min(a + CHUNK, hi)
        for k in range(a, b):
            xv = x[k]
            x64 = np.float64(xv) if xv - xv == 0 else 0.0
            buf[k - a] = x64 * x64
        total += _sum_in_any_order(buf[:b - a])
    return total
