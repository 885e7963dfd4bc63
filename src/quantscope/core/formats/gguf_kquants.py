"""llama.cpp's k-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), one 256-element super-block at a
time, as ``quantize_row_*_ref`` in ggml-quants.c computes them without an importance matrix.

Each super-block is cut into sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or 32 (Q4_K, Q5_K). A search
per sub-block picks its scale (and, for the types with a minimum, its minimum):
``make_qkx2_quants`` tries ``nstep + 1`` inverse scales around ``nmax / (max - min)`` and keeps
the weighted least-squares fit with the smallest weighted error; ``make_qx_quants`` and
``make_q3_quants`` fit a symmetric scale to ``x²``-weighted codes. All three run on every
sub-block of a chunk of super-blocks at once (:mod:`~quantscope.core.formats.gguf_lanes`).
The sub-block scales and minimums are then themselves quantized (4, 6 or 8 bits) against fp16
super-block scales, and the codes recomputed from the stored scales, so every code is
consistent with what a decoder reads.

Every operation is float32 in the C code's order (a float64 intermediate or a fused
multiply-add changes which candidate wins). ``L`` is int64 scratch of the super-block's
length; the searches run first over a chunk of super-blocks (:func:`fit_chunk`), then each
block's function writes its bytes into ``y``.
"""

from __future__ import annotations

import math

import numpy as np

from quantscope.core.formats.gguf_lanes import (
    SCRATCH_ROWS,
    q3_lanes,
    qkx2_lanes,
    qx_rmse1_lanes,
)
from quantscope.core.formats.gguf_legacy import get_half, nearest_int, put_half
from quantscope.core.kernels.jit_cache import njit

_f32 = np.float32
_kernel = njit(nogil=True, error_model="numpy")
#: ggml's GROUP_MAX_EPS: a sub-block whose amax is below it is all zeros.
_GROUP_MAX_EPS = np.float32(1e-15)


#: Super-blocks whose sub-blocks are searched together (128 or 256 lanes: long enough for
#: whole vectors, few enough that the transposed values, weights and codes, 16 KiB each, stay
#: near the core; measured 10-20 % less processor time per element than 64 super-blocks).
CHUNK_BLOCKS = 16


@_kernel
def lane_scratch():
    """The scratch of the lane searches (:mod:`~quantscope.core.formats.gguf_lanes`) over
    :data:`CHUNK_BLOCKS` super-blocks: the chunk transposed (values, weights, codes), each
    lane's state, the scales and minimums found, and the codes and lane numbers of the lanes
    Q3_K's later sweeps gather."""
    m = 256 * CHUNK_BLOCKS
    return (np.zeros(m, np.float32), np.zeros(m, np.float32), np.zeros(m, np.int32),
            np.zeros((SCRATCH_ROWS, 16 * CHUNK_BLOCKS), np.float32),
            np.zeros(16 * CHUNK_BLOCKS, np.float32), np.zeros(16 * CHUNK_BLOCKS, np.float32),
            np.zeros(m, np.int32), np.zeros(16 * CHUNK_BLOCKS, np.int32))


@_kernel
def sub_block_shape(t):
    """(elements per sub-block, sub-blocks per super-block) of k-quant type ``t``."""
    return (32, 8) if t == 12 or t == 13 else (16, 16)


@_kernel
def fit_chunk(t, xb, lanes) -> None:
    """The sub-block searches of super-blocks ``xb`` (at most :data:`CHUNK_BLOCKS`) of k-quant
    type ``t``, all sub-blocks as lanes: their scales (and minimums)
    into ``lanes[4]`` (``lanes[5]``), lane ``per · b + j`` for sub-block ``j`` of block ``b``,
    and codes into ``lanes[2]`` as ``[n, lanes]``."""
    xs, ws, ls, st, scales, mins, lw, idx = lanes
    n, per = sub_block_shape(t)
    nl = xb.shape[0] * per
    xt = xs[:n * nl].reshape(n, nl)
    wt = ws[:n * nl].reshape(n, nl)
    Lt = ls[:n * nl].reshape(n, nl)
    for b in range(xb.shape[0]):
        for j in range(per):
            for i in range(n):
                xt[i, per * b + j] = xb[b, n * j + i]
    if t == 14:
        qx_rmse1_lanes(n, nl, 32, xt, Lt, st, scales)
        return
    if t == 11:
        q3_lanes(n, nl, 4, xt, Lt, wt, lw[:n * nl].reshape(n, nl), idx, st, scales)
        return
    if t == 10:  # Q2_K: weights |x|, absolute error
        for i in range(n):
            for j in range(nl):
                wt[i, j] = _f32(abs(xt[i, j]))
        qkx2_lanes(n, nl, 3, xt, wt, Lt, _f32(-0.5), _f32(0.1), 15, True, st, scales,
                   mins)
        return
    # Q4_K / Q5_K: weights sqrt(mean x²) + |x|, x² summed in element order (row 16 is free
    # again once the weights are formed: qkx2_lanes keeps each lane's least value there)
    av_x = st[16]
    for j in range(nl):
        av_x[j] = _f32(0.0)
    for i in range(n):
        for j in range(nl):
            av_x[j] += xt[i, j] * xt[i, j]
    for j in range(nl):
        av_x[j] = _f32(math.sqrt(np.float64(av_x[j] / _f32(32.0))))  # sqrtf: rounded once
    for i in range(n):
        for j in range(nl):
            wt[i, j] = av_x[j] + _f32(abs(xt[i, j]))
    if t == 12:
        qkx2_lanes(n, nl, 15, xt, wt, Lt, _f32(-1.0), _f32(0.1), 20, False, st, scales,
                   mins)
    else:
        qkx2_lanes(n, nl, 31, xt, wt, Lt, _f32(-0.5), _f32(0.1), 15, False, st, scales,
                   mins)


@_kernel
def block_codes(t, lanes, nl, b, L) -> None:
    """Block ``b``'s codes from the chunk's search (``nl`` lanes) into ``L``, in element
    order."""
    n, per = sub_block_shape(t)
    Lt = lanes[2][:n * nl].reshape(n, nl)
    for j in range(per):
        for i in range(n):
            L[n * j + i] = Lt[i, per * b + j]


@_kernel
def _largest(scales, mins, count):
    """The largest of the first ``count`` sub-block scales and of their minimums (0 if none
    is positive), scanned in sub-block order as the C code does."""
    max_scale = _f32(0.0)
    max_min = _f32(0.0)
    for j in range(count):
        if scales[j] > max_scale:
            max_scale = scales[j]
        if mins[j] > max_min:
            max_min = mins[j]
    return max_scale, max_min


@_kernel
def _pack_2bit(L, y, at) -> None:
    """Four 2-bit codes a byte: byte ``l`` of each 128 holds elements l, l+32, l+64, l+96."""
    for j in range(0, 256, 128):
        for q in range(32):
            y[at + j // 4 + q] = (L[j + q] | (L[j + q + 32] << 2) | (L[j + q + 64] << 4)
                                  | (L[j + q + 96] << 6))


@_kernel
def quantize_q2_k(x, y, L, scales, mins) -> None:
    """Q2_K: 16 sub-blocks of 16, 2-bit codes, 4-bit scales and mins (``make_qkx2_quants``
    weighted by ``|x|``, absolute error: ``scales``, ``mins`` and the codes in ``L`` from
    :func:`fit_chunk`); bytes: scales (min << 4 | scale), codes, d, dmin."""
    max_scale, max_min = _largest(scales, mins, 16)
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
def quantize_q3_k(x, y, L, scales) -> None:
    """Q3_K: 16 sub-blocks of 16, 3-bit codes (low 2 bits + a high-bit mask), signed 6-bit
    scales (``make_q3_quants``: ``scales`` and the codes in ``L`` from :func:`fit_chunk`);
    bytes: hmask, codes, 12 bytes of scales, d."""
    amax = _f32(0.0)
    max_scale = _f32(0.0)
    for j in range(16):
        s = scales[j]
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
def scale_min_k4(j, y, at):
    """``get_scale_min_k4``: the 6-bit scale and min of sub-block ``j`` from the 12 bytes at
    ``at``."""
    if j < 4:
        return y[at + j] & 63, y[at + j + 4] & 63
    return ((y[at + j + 4] & 0xF) | ((y[at + j - 4] >> 6) << 4),
            (y[at + j + 4] >> 4) | ((y[at + j] >> 6) << 4))


@_kernel
def _k4_scales(x, y, L, scales, mins, nmax) -> None:
    """Q4_K / Q5_K up to the final codes in ``L``: the eight fits' scales and mins (from
    :func:`fit_chunk`) quantized to 6 bits and packed into bytes 4-15, fp16 d and dmin into
    bytes 0-3."""
    max_scale, max_min = _largest(scales, mins, 8)
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
def quantize_q4_k(x, y, L, scales, mins) -> None:
    """Q4_K: 8 sub-blocks of 32, 4-bit codes, 6-bit scales and mins (``make_qkx2_quants``,
    21 trials); bytes: d, dmin, 12 bytes of scales and mins, codes (nibbles, low = the first
    32 of each 64)."""
    _k4_scales(x, y, L, scales, mins, 15)
    for j in range(0, 256, 64):
        for q in range(32):
            y[16 + j // 2 + q] = L[j + q] | (L[j + q + 32] << 4)


@_kernel
def quantize_q5_k(x, y, L, scales, mins) -> None:
    """Q5_K: Q4_K's layout with 5-bit codes (16 trials): the fifth bits in 32 bytes before
    the nibbles, bit ``2k`` / ``2k + 1`` for the two halves of the k-th 64 elements."""
    _k4_scales(x, y, L, scales, mins, 31)
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
def quantize_q6_k(x, y, L, scales) -> None:
    """Q6_K: 16 sub-blocks of 16, 6-bit codes, signed 8-bit scales (``make_qx_quants``:
    ``scales`` and the codes in ``L`` from :func:`fit_chunk`); bytes: low nibbles (128), high
    2 bits (64), scales (16), d."""
    max_scale = _f32(0.0)
    max_abs = _f32(0.0)
    for j in range(16):
        s = scales[j]
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
