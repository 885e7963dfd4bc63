"""The direct pass of a block format whose elements are a small floating-point grid (MXFP4,
MXFP6, NVFP4), on a saturating cast: the totals of
:func:`quantscope.core.formats.format_kernel.direct_rows`, bit for bit, in loops shaped for
rows of 16 or 32 elements.

``direct_rows`` walks a row in three loops over chunks of up to 1024 elements; a block format's
row is one block, so each loop ran 16 times between the set-ups and the tails of its vector
code, with a histogram stamp per code: NVFP4's pass over a Llama MLP weight took 12 ns per
element on one thread. Here (5.5 ns, ``tests/core/test_float_blocks.py`` holds the totals
equal)

* the row length is a constant of the compiled loop (16 and 32 have copies of their own);
* the first loop forms each element's error, slot and order key, no sum carried. The
  rounding adds 2^23 quanta of the value's binade (the quantum of ``2^emin`` below it) and
  takes them away: the float32 sum keeps the nearest multiple of the quantum, ties to the
  even one, which is the cast's rounding (``_round_flat``: the bits rounded to nearest even
  above ``2^emin``, ``rint`` of the exactly scaled value below). It works on the magnitude and
  applies the sign after: the grid is symmetric and so is rounding to nearest even;
* the second loop takes what no order changes: the counts, the codes used (one 64-bit mask
  per block, not a stamp per code), the largest error (non-negative float64 values order as
  their bits do) and the extremes (by order keys of the float32 values; where one is zero,
  by the row's own order, as ``min`` keeps the first of -0.0 and +0.0). The histogram counts
  in four lanes, so equal codes in a row wait on no common counter;
* the third forms the sums in the row's order, the same terms added in the same order as in
  ``direct_rows`` (so the same bits); with no element clipped every clipping term is +0.0
  and the clipping sum stays +0.0.

Only finite positive scales and multipliers take this pass
(:func:`quantscope.core.stats.format_stats.takes_float_blocks`): a NaN scaled value has no
code, and ``direct_rows`` keeps its own answer for it.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.elements import bits_float32, float32_bits
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.sorted_kernel import bits_float64, float64_bits
from quantscope.core.kernels.unit_totals import store_unit

_jit = njit(nogil=True, error_model="numpy")
@njit(nogil=True, error_model="numpy", inline="always")
def _popcount(m) -> int:
    """Set bits of a non-negative 64-bit integer (SWAR)."""
    m = m - ((m >> 1) & 0x5555555555555555)
    m = (m & 0x3333333333333333) + ((m >> 2) & 0x3333333333333333)
    m = (m + (m >> 4)) & 0x0F0F0F0F0F0F0F0F
    return (m * 0x0101010101010101) >> 56


@njit(nogil=True, error_model="numpy", inline="always")
def _order_key(v) -> int:
    """An integer that orders float32 values as their values do (-0.0 just below +0.0)."""
    u = np.int64(np.int32(float32_bits(v)))
    return u ^ ((u >> 31) & 0x7FFFFFFF)


@njit(nogil=True, error_model="numpy", inline="always")
def _of_key(k) -> float:
    """The float32 of :func:`_order_key` ``k`` (the map is its own inverse)."""
    return bits_float32(k ^ ((k >> 31) & 0x7FFFFFFF))


@_jit
def _rows(x2d, scale, inv_scale, use_inv, mbits, emin, emax, max_finite, levels, hist, out_f,
          out_i, width) -> None:
    """:func:`float_block_rows` for one multiplier rule and row width. A loop of its own, not
    inlined: :func:`float_block_rows` passes ``use_inv`` and the widths 16 and 32 as
    constants, which Numba types as literals, so each combination is compiled once as a
    function whose loops know them; inlining the six copies into the caller gave the same
    loops for about 40 % more compile time (Numba copies and re-types each inlined body). It
    runs once per call, so the call costs nothing measurable."""
    dbuf = np.empty(width, np.float64)
    abs_d = np.empty(width, np.int64)
    slots = np.empty(width, np.int32)
    lo_key = np.empty(width, np.int32)
    hi_key = np.empty(width, np.int32)
    lanes = 4  # histograms side by side: equal codes in a row wait on no common counter
    hists = np.zeros((lanes, levels + 1), np.int64)
    z0 = levels >> 1
    spare = levels
    top = levels - 1
    mf = np.float32(max_finite)
    dsh = 23 - mbits
    two_emin = np.float32(bits_float32(np.int64(emin + 127) << 23))
    to_ulp = bits_float32(np.int64(dsh + 127) << 23)  # 2^(23 - mbits)
    big = bits_float32(np.int64(emax + 2 + 127) << 23)  # rounds beyond max_finite
    k_normal = (126 + emin) << mbits
    k_sub = k_normal + (1 << mbits)
    inf32 = np.float32(np.inf)
    key_inf = _order_key(inf32)
    key_ninf = _order_key(-inf32)
    for r in range(x2d.shape[0]):
        x = x2d[r]
        s = scale[r]
        inv = inv_scale[r]
        sf = np.float32(s)
        for k in range(width):  # each element's error, slot and order: no sum carried
            xv = x[k]
            fin = xv - xv == 0
            xz = xv if fin else np.float32(0.0)
            q = np.float32(xz * inv) if use_inv else np.float32(xz / s)
            # round |q| to the grid, unbounded above: adding 2^23 quanta of its binade (the
            # quantum of 2^emin below it) leaves the nearest multiple of the quantum, ties to
            # the even one -- the cast's rounding; beyond big every value clips
            a = min(abs(q), big)
            binade = max(bits_float32(float32_bits(a) & 0x7F800000), two_emin)
            ulps = np.float32(binade * to_ulp)
            rr = np.float32(np.float32(a + ulps) - ulps)
            clipped = rr > mf
            rc = min(rr, mf)
            # the magnitude's code: its bits above the kept mantissa, counted from 2^emin (a
            # value below 2^emin counted by its bits once 2^emin is added)
            sub = rc < two_emin
            t = np.float32(rc + two_emin) if sub else rc
            c = np.int32((float32_bits(t) >> dsh) - (k_sub if sub else k_normal))
            neg = q < 0
            xhat = np.float32(np.float32(-rc if neg else rc) * sf)
            d = np.float64(xz) - np.float64(xhat)
            dbuf[k] = d
            abs_d[k] = np.int64(float64_bits(abs(d)))  # non-negative: ordered as integers
            slot = (-1 if neg else -2) if clipped else (z0 - c if neg else z0 + c)
            slots[k] = slot if fin else spare
            key = _order_key(xv)
            lo_key[k] = key if fin else key_inf
            hi_key[k] = key if fin else key_ninf
        # order-free totals: counts, codes used, the largest error, the extremes
        n = 0
        below = 0
        above = 0
        mask = np.int64(0)
        worst_bits = np.int64(0)
        lo_k = key_inf
        hi_k = key_ninf
        for k in range(width):
            slot = np.int64(slots[k])
            n += np.int64(slot != spare)
            below += np.int64(slot == -1)
            above += np.int64(slot == -2)
            m = 0 if slot == -1 else (top if slot == -2 else slot)
            mask |= np.int64(1) << m
            worst_bits = max(worst_bits, abs_d[k])
            lo_k = min(lo_k, np.int64(lo_key[k]))
            hi_k = max(hi_k, np.int64(hi_key[k]))
        for k in range(width):
            slot = np.int64(slots[k])
            m = 0 if slot == -1 else (top if slot == -2 else slot)
            hists[k % lanes, m] += 1
        lo = _of_key(lo_k)
        hi = _of_key(hi_k)
        if lo == 0 or hi == 0:  # -0.0 and +0.0 tie: the first in the row's order, as min does
            lo = inf32
            hi = -inf32
            for k in range(width):
                xv = x[k]
                fin = xv - xv == 0
                lo = min(lo, xv if fin else inf32)
                hi = max(hi, xv if fin else -inf32)
        # the sums in the row's order, as direct_rows forms them
        rnd = 0.0
        clip = 0.0
        sig = 0.0
        if below + above == 0:  # no clipped element: every clipping term is +0.0
            for k in range(width):
                xv = x[k]
                x64 = np.float64(xv) if xv - xv == 0 else 0.0
                sig += x64 * x64
                d = dbuf[k]
                rnd += d * d
        else:
            for k in range(width):
                xv = x[k]
                x64 = np.float64(xv) if xv - xv == 0 else 0.0
                sig += x64 * x64
                d = dbuf[k]
                e2 = d * d
                clipped = slots[k] < 0
                clip += e2 if clipped else 0.0
                rnd += 0.0 if clipped else e2
        used = _popcount(mask & ~(np.int64(1) << spare))
        store_unit(out_f, out_i, r, rnd, clip, bits_float64(worst_bits), sig, np.float64(lo),
                   np.float64(hi), n, below, above, used)
    for j in range(lanes):
        for m in range(levels + 1):
            hist[m] += hists[j, m]


@_jit
def float_block_rows(x2d, scale, inv_scale, use_inv, mbits, emin, emax, max_finite, levels,
                     hist, out_f, out_i) -> None:
    """Row ``r`` of ``x2d`` (a block) quantized with ``scale[r]`` (multiplied by
    ``inv_scale[r]`` if ``use_inv``) to a floating-point grid of ``levels`` values, saturating:
    ``direct_rows``'s totals into ``out_f[r]``, ``out_i[r]`` and ``hist`` (whose last slot,
    ``hist[levels]``, counts the non-finite elements, for the caller to drop). The rows and
    scales it takes: :func:`quantscope.core.stats.format_stats.takes_float_blocks`."""
    width = x2d.shape[1]
    if use_inv:
        if width == 16:
            _rows(x2d, scale, inv_scale, True, mbits, emin, emax, max_finite, levels, hist,
                  out_f, out_i, 16)
        elif width == 32:
            _rows(x2d, scale, inv_scale, True, mbits, emin, emax, max_finite, levels, hist,
                  out_f, out_i, 32)
        else:
            _rows(x2d, scale, inv_scale, True, mbits, emin, emax, max_finite, levels, hist,
                  out_f, out_i, width)
        return
    if width == 16:
        _rows(x2d, scale, inv_scale, False, mbits, emin, emax, max_finite, levels, hist,
              out_f, out_i, 16)
    elif width == 32:
        _rows(x2d, scale, inv_scale, False, mbits, emin, emax, max_finite, levels, hist,
              out_f, out_i, 32)
    else:
        _rows(x2d, scale, inv_scale, False, mbits, emin, emax, max_finite, levels, hist,
              out_f, out_i, width)
