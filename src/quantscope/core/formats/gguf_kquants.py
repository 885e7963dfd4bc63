"""llama.cpp's k-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), one 256-element super-block at a
time, as ``quantize_row_*_ref`` in ggml-quants.c computes them without an importance matrix.

Each super-block is cut into sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or 32 (Q4_K, Q5_K). A search
per sub-block picks its scale (and, for the types with a minimum, its minimum):
``make_qkx2_quants`` tries ``nstep + 1`` inverse scales around ``nmax / (max - min)`` and keeps
the weighted least-squares fit with the smallest weighted error; ``make_qx_quants`` and
``make_q3_quants`` fit a symmetric scale to ``x²``-weighted codes. The sub-block scales and
minimums are then themselves quantized (4, 6 or 8 bits) against fp16 super-block scales, and
the codes recomputed from the stored scales, so every code is consistent with what a decoder
reads.

Every operation is float32 in the C code's order (a float64 intermediate or a fused
multiply-add changes which candidate wins). ``L`` and ``aux`` are int64 scratch of the
super-block's length; the functions write the block's bytes into ``y``.
"""

from __future__ import annotations

import math

import numpy as np

from quantscope.core.formats.gguf_legacy import get_half, nearest_int, put_half
from quantscope.core.kernels.jit_cache import njit

_f32 = np.float32
_kernel = njit(nogil=True, error_model="numpy")
#: ggml's GROUP_MAX_EPS: a sub-block whose amax is below it is all zeros.
_GROUP_MAX_EPS = np.float32(1e-15)


@_kernel
def make_qkx2_quants(n, nmax, x, w, L, aux, rmin, rdelta, nstep, use_mad):
    """Scale and minimum of ``x[:n]`` for codes ``0..nmax`` (codes into ``L``): returns
    ``(scale, the_min)``, the value of code ``l`` being ``scale · l - the_min``."""
    mn = x[0]
    mx = x[0]
    sum_w = w[0]
    sum_x = sum_w * x[0]
    for i in range(1, n):
        if x[i] < mn:
            mn = x[i]
        if x[i] > mx:
            mx = x[i]
        sum_w += w[i]
        sum_x += w[i] * x[i]
    if mn > 0:
        mn = _f32(0.0)
    if mx == mn:
        for i in range(n):
            L[i] = 0
        return _f32(0.0), _f32(-mn)
    iscale = _f32(nmax) / (mx - mn)
    scale = _f32(1.0) / iscale
    best_error = _f32(0.0)
    for i in range(n):
        L[i] = max(0, min(nmax, nearest_int(iscale * (x[i] - mn))))
        diff = scale * _f32(L[i]) + mn - x[i]
        diff = _f32(abs(diff)) if use_mad else diff * diff
        best_error += w[i] * diff
    if nstep < 1:
        return scale, _f32(-mn)
    for step in range(nstep + 1):
        iscale = (rmin + rdelta * _f32(step) + _f32(nmax)) / (mx - mn)
        sum_l = _f32(0.0)
        sum_l2 = _f32(0.0)
        sum_xl = _f32(0.0)
        for i in range(n):
            q = max(0, min(nmax, nearest_int(iscale * (x[i] - mn))))
            aux[i] = q
            lf = _f32(q)
            sum_l += w[i] * lf
            sum_l2 += w[i] * lf * lf
            sum_xl += w[i] * lf * x[i]
        det = sum_w * sum_l2 - sum_l * sum_l
        if det > 0:
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / det
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det
            if this_min > 0:
                this_min = _f32(0.0)
                this_scale = sum_xl / sum_l2
            cur_error = _f32(0.0)
            for i in range(n):
                diff = this_scale * _f32(aux[i]) + this_min - x[i]
                diff = _f32(abs(diff)) if use_mad else diff * diff
                cur_error += w[i] * diff
            if cur_error < best_error:
                for i in range(n):
                    L[i] = aux[i]
                best_error = cur_error
                scale = this_scale
                mn = this_min
    return scale, _f32(-mn)


@_kernel
def _signed_amax(x, n):
    amax = _f32(0.0)
    mx = _f32(0.0)
    for i in range(n):
        ax = _f32(abs(x[i]))
        if ax > amax:
            amax = ax
            mx = x[i]
    return amax, mx


@_kernel
def make_qx_quants_rmse1(n, nmax, x, L):
    """``make_qx_quants(n, nmax, x, L, 1, NULL)``: the ``x²``-weighted symmetric scale over
    19 trial inverse scales; codes ``0..2·nmax - 1`` into ``L``."""
    amax, mx = _signed_amax(x, n)
    if amax < _GROUP_MAX_EPS:
        for i in range(n):
            L[i] = 0
        return _f32(0.0)
    iscale = _f32(-nmax) / mx
    sumlx = _f32(0.0)
    suml2 = _f32(0.0)
    for i in range(n):
        q = max(-nmax, min(nmax - 1, nearest_int(iscale * x[i])))
        L[i] = q + nmax
        w = x[i] * x[i]
        sumlx += w * x[i] * _f32(q)
        suml2 += w * _f32(q) * _f32(q)
    scale = sumlx / suml2 if suml2 != 0 else _f32(0.0)
    best = scale * sumlx
    for t in range(-9, 10):
        if t == 0:
            continue
        iscale = -(_f32(nmax) + _f32(0.1) * _f32(t)) / mx
        sumlx = _f32(0.0)
        suml2 = _f32(0.0)
        for i in range(n):
            q = max(-nmax, min(nmax - 1, nearest_int(iscale * x[i])))
            w = x[i] * x[i]
            sumlx += w * x[i] * _f32(q)
            suml2 += w * _f32(q) * _f32(q)
        if suml2 > 0 and sumlx * sumlx > best * suml2:
            for i in range(n):
                L[i] = nmax + max(-nmax, min(nmax - 1, nearest_int(iscale * x[i])))
            scale = sumlx / suml2
            best = scale * sumlx
    return scale


@_kernel
def make_q3_quants(n, nmax, x, L):
    """``make_q3_quants(n, nmax, x, L, true)``: codes refined one element at a time (at most
    five sweeps) while the ``x²``-weighted fit improves."""
    amax, mx = _signed_amax(x, n)
    if amax < _GROUP_MAX_EPS:
        for i in range(n):
            L[i] = 0
        return _f32(0.0)
    iscale = _f32(-nmax) / mx
    sumlx = _f32(0.0)
    suml2 = _f32(0.0)
    for i in range(n):
        q = max(-nmax, min(nmax - 1, nearest_int(iscale * x[i])))
        L[i] = q
        w = x[i] * x[i]
        sumlx += w * x[i] * _f32(q)
        suml2 += w * _f32(q) * _f32(q)
    for _ in range(5):
        changed = 0
        for i in range(n):
            w = x[i] * x[i]
            lf = _f32(L[i])
            slx = sumlx - w * x[i] * lf
            if slx > 0:
                sl2 = suml2 - w * lf * lf
                new_l = max(-nmax, min(nmax - 1, nearest_int(x[i] * sl2 / slx)))
                if new_l != L[i]:
                    slx += w * x[i] * _f32(new_l)
                    sl2 += w * _f32(new_l) * _f32(new_l)
                    if sl2 > 0 and slx * slx * suml2 > sumlx * sumlx * sl2:
                        L[i] = new_l
                        sumlx = slx
                        suml2 = sl2
                        changed += 1
        if changed == 0:
            break
    for i in range(n):
        L[i] += nmax
    return sumlx / suml2 if suml2 > 0 else _f32(0.0)


@_kernel
def _pack_2bit(L, y, at) -> None:
    """Four 2-bit codes a byte: byte ``l`` of each 128 holds elements l, l+32, l+64, l+96."""
    for j in range(0, 256, 128):
        for q in range(32):
            y[at + j // 4 + q] = (L[j + q] | (L[j + q + 32] << 2) | (L[j + q + 64] << 4)
                                  | (L[j + q + 96] << 6))


@_kernel
def quantize_q2_k(x, y, L, aux, w) -> None:
    """Q2_K: 16 sub-blocks of 16, 2-bit codes, 4-bit scales and mins (``make_qkx2_quants``
    weighted by ``|x|``, absolute error); bytes: scales (min << 4 | scale), codes, d, dmin."""
    scales = np.empty(16, np.float32)
    mins = np.empty(16, np.float32)
    max_scale = _f32(0.0)
    max_min = _f32(0.0)
    for j in range(16):
        xs = x[16 * j:16 * j + 16]
        for q in range(16):
            w[q] = _f32(abs(xs[q]))
        s, m = make_qkx2_quants(16, 3, xs, w, L[16 * j:16 * j + 16], aux, _f32(-0.5),
                                _f32(0.1), 15, True)
        scales[j] = s
        mins[j] = m
        if s > max_scale:
            max_scale = s
        if m > max_min:
            max_min = m
    if max_scale > 0:
        iscale = _f32(15.0) / max_scale
        for j in range(16):
            y[j] = nearest_int(iscale * scales[j]) & 0xFF
        put_half(y, 80, max_scale / _f32(15.0))
    else:
        for j in range(16):
            y[j] = 0
        put_half(y, 80, _f32(0.0))
    if max_min > 0:
        iscale = _f32(15.0) / max_min
        for j in range(16):
            y[j] = (y[j] | (nearest_int(iscale * mins[j]) << 4)) & 0xFF
        put_half(y, 82, max_min / _f32(15.0))
    else:
        put_half(y, 82, _f32(0.0))
    dd = get_half(y, 80)
    dmin = get_half(y, 82)
    for j in range(16):
        d = dd * _f32(y[j] & 0xF)
        if not d:
            continue
        dm = dmin * _f32(y[j] >> 4)
        for q in range(16):
            L[16 * j + q] = max(0, min(3, nearest_int((x[16 * j + q] + dm) / d)))
    _pack_2bit(L, y, 16)


@_kernel
def quantize_q3_k(x, y, L) -> None:
    """Q3_K: 16 sub-blocks of 16, 3-bit codes (low 2 bits + a high-bit mask), signed 6-bit
    scales (``make_q3_quants``); bytes: hmask, codes, 12 bytes of scales, d."""
    scales = np.empty(16, np.float32)
    amax = _f32(0.0)
    max_scale = _f32(0.0)
    for j in range(16):
        s = make_q3_quants(16, 4, x[16 * j:16 * j + 16], L[16 * j:16 * j + 16])
        scales[j] = s
        if _f32(abs(s)) > amax:
            amax = _f32(abs(s))
            max_scale = s
    for k in range(96, 108):
        y[k] = 0
    stored = np.zeros(16, np.int64)
    if max_scale:
        iscale = _f32(-32.0) / max_scale
        for j in range(16):
            q = max(-32, min(31, nearest_int(iscale * scales[j]))) + 32
            stored[j] = q
            if j < 8:
                y[96 + j] = q & 0xF
            else:
                y[96 + j - 8] |= (q & 0xF) << 4
            y[96 + 8 + j % 4] |= (q >> 4) << (2 * (j // 4))
        put_half(y, 108, _f32(1.0) / iscale)
    else:
        put_half(y, 108, _f32(0.0))  # the scale bytes stay zero: stored[j] reads 0
    dd = get_half(y, 108)
    for j in range(16):
        d = dd * _f32(stored[j] - 32)
        if not d:
            continue
        for q in range(16):
            L[16 * j + q] = max(-4, min(3, nearest_int(x[16 * j + q] / d))) + 4
    for k in range(32):
        y[k] = 0
    m = 0
    hm = 1
    for j in range(256):
        if L[j] > 3:
            y[m] |= hm
            L[j] -= 4
        m += 1
        if m == 32:
            m = 0
            hm <<= 1
    _pack_2bit(L, y, 32)


@_kernel
def _sub_block_fit_32(x, L, aux, w, nmax, rmin, nstep, scales, mins):
    """The eight 32-element fits of Q4_K / Q5_K: weights ``sqrt(mean x²) + |x|``; returns
    the largest scale and the largest minimum."""
    max_scale = _f32(0.0)
    max_min = _f32(0.0)
    for j in range(8):
        xs = x[32 * j:32 * j + 32]
        sum_x2 = _f32(0.0)
        for q in range(32):
            sum_x2 += xs[q] * xs[q]
        av_x = _f32(math.sqrt(np.float64(sum_x2 / _f32(32.0))))  # sqrtf: correctly rounded
        for q in range(32):
            w[q] = av_x + _f32(abs(xs[q]))
        s, m = make_qkx2_quants(32, nmax, xs, w, L[32 * j:32 * j + 32], aux, rmin,
                                _f32(0.1), nstep, False)
        scales[j] = s
        mins[j] = m
        if s > max_scale:
            max_scale = s
        if m > max_min:
            max_min = m
    return max_scale, max_min


@_kernel
def scale_min_k4(j, y, at):
    """``get_scale_min_k4``: the 6-bit scale and min of sub-block ``j`` from the 12 bytes at
    ``at``."""
    if j < 4:
        return y[at + j] & 63, y[at + j + 4] & 63
    return ((y[at + j + 4] & 0xF) | ((y[at + j - 4] >> 6) << 4),
            (y[at + j + 4] >> 4) | ((y[at + j] >> 6) << 4))


@_kernel
def _k4_scales(x, y, L, aux, w, nmax, rmin, nstep) -> None:
    """Q4_K / Q5_K up to the final codes in ``L``: fits, 6-bit scales and mins packed into
    bytes 4-15, fp16 d and dmin into bytes 0-3."""
    scales = np.empty(8, np.float32)
    mins = np.empty(8, np.float32)
    max_scale, max_min = _sub_block_fit_32(x, L, aux, w, nmax, rmin, nstep, scales, mins)
    inv_scale = _f32(63.0) / max_scale if max_scale > 0 else _f32(0.0)
    inv_min = _f32(63.0) / max_min if max_min > 0 else _f32(0.0)
    for j in range(8):
        ls = min(63, nearest_int(inv_scale * scales[j]) & 0xFF)
        lm = min(63, nearest_int(inv_min * mins[j]) & 0xFF)
        if j < 4:
            y[4 + j] = ls
            y[4 + j + 4] = lm
        else:
            y[4 + j + 4] = (ls & 0xF) | ((lm & 0xF) << 4)
            y[4 + j - 4] |= (ls >> 4) << 6
            y[4 + j] |= (lm >> 4) << 6
    put_half(y, 0, max_scale / _f32(63.0))
    put_half(y, 2, max_min / _f32(63.0))
    dd = get_half(y, 0)
    dmin = get_half(y, 2)
    for j in range(8):
        sc, m = scale_min_k4(j, y, 4)
        d = dd * _f32(sc)
        if not d:
            continue
        dm = dmin * _f32(m)
        for q in range(32):
            L[32 * j + q] = max(0, min(nmax, nearest_int((x[32 * j + q] + dm) / d)))


@_kernel
def quantize_q4_k(x, y, L, aux, w) -> None:
    """Q4_K: 8 sub-blocks of 32, 4-bit codes, 6-bit scales and mins (``make_qkx2_quants``,
    21 trials); bytes: d, dmin, 12 bytes of scales and mins, codes (nibbles, low = the first
    32 of each 64)."""
    _k4_scales(x, y, L, aux, w, 15, _f32(-1.0), 20)
    for j in range(0, 256, 64):
        for q in range(32):
            y[16 + j // 2 + q] = L[j + q] | (L[j + q + 32] << 4)


@_kernel
def quantize_q5_k(x, y, L, aux, w) -> None:
    """Q5_K: Q4_K's layout with 5-bit codes (16 trials): the fifth bits in 32 bytes before
    the nibbles, bit ``2k`` / ``2k + 1`` for the two halves of the k-th 64 elements."""
    _k4_scales(x, y, L, aux, w, 31, _f32(-0.5), 15)
    for k in range(32):
        y[16 + k] = 0
    m1 = 1
    m2 = 2
    for n in range(0, 256, 64):
        for j in range(32):
            l1 = L[n + j]
            if l1 > 15:
                l1 -= 16
                y[16 + j] |= m1
            l2 = L[n + j + 32]
            if l2 > 15:
                l2 -= 16
                y[16 + j] |= m2
            y[48 + n // 2 + j] = l1 | (l2 << 4)
        m1 <<= 2
        m2 <<= 2


@_kernel
def quantize_q6_k(x, y, L) -> None:
    """Q6_K: 16 sub-blocks of 16, 6-bit codes, signed 8-bit scales (``make_qx_quants``);
    bytes: low nibbles (128), high 2 bits (64), scales (16), d."""
    scales = np.empty(16, np.float32)
    max_scale = _f32(0.0)
    max_abs = _f32(0.0)
    for j in range(16):
        s = make_qx_quants_rmse1(16, 32, x[16 * j:16 * j + 16], L[16 * j:16 * j + 16])
        scales[j] = s
        if _f32(abs(s)) > max_abs:
            max_abs = _f32(abs(s))
            max_scale = s
    if max_abs < _GROUP_MAX_EPS:
        for k in range(210):
            y[k] = 0
        return
    iscale = _f32(-128.0) / max_scale
    put_half(y, 208, _f32(1.0) / iscale)
    for j in range(16):
        y[192 + j] = min(127, nearest_int(iscale * scales[j])) & 0xFF
    dd = get_half(y, 208)
    for j in range(16):
        sc = np.int64(y[192 + j])
        sc = sc - 256 if sc > 127 else sc
        d = dd * _f32(sc)
        if not d:
            continue
        for q in range(16):
            L[16 * j + q] = max(-32, min(31, nearest_int(x[16 * j + q] / d))) + 32
    for j in range(0, 256, 128):
        lo = j // 2
        hi = 128 + j // 4
        for q in range(32):
            a = L[j + q]
            b = L[j + q + 32]
            c = L[j + q + 64]
            e = L[j + q + 96]
            y[lo + q] = (a & 0xF) | ((c & 0xF) << 4)
            y[lo + q + 32] = (b & 0xF) | ((e & 0xF) << 4)
            y[hi + q] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6)
