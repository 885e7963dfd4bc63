"""Decoding llama.cpp's blocks: each element's stored code and its value, as
``dequantize_row_*`` in ggml-quants.c computes it (float32, the C code's order of operations),
and the values of the lowest and highest code of the element's (sub-)block, from which the
reports tell clipped elements from rounded ones.

Codes are the unsigned stored integers: Q8_0's int8 ``q`` as ``q + 128`` (0..255), Q3_K's
low two bits plus its mask bit as ``0..7`` (value ``code - 4``), Q6_K's six bits ``0..63``
(value ``code - 32``), the others as stored.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.gguf_kquants import scale_min_k4
from quantscope.core.formats.gguf_legacy import get_half
from quantscope.core.kernels.jit_cache import njit

_f32 = np.float32
_kernel = njit(nogil=True, error_model="numpy")


@_kernel
def _span(vals_lo, vals_hi, lo, hi, a, b) -> None:
    for k in range(a, b):
        lo[k] = vals_lo
        hi[k] = vals_hi


@_kernel
def decode_legacy(t, y, codes, vals, lo, hi) -> None:
    """Q4_0 (t=2), Q4_1 (3), Q5_0 (6), Q5_1 (7), Q8_0 (8): one 32-element block."""
    _legacy(t, y, codes, vals, lo, hi, True)


@njit(nogil=True, error_model="numpy", inline="always")
def legacy_values(t, y, vals) -> None:
    """:func:`decode_legacy`'s values alone (no codes, no bounds: the error screen's need)."""
    _legacy(t, y, vals, vals, vals, vals, False)


@njit(nogil=True, error_model="numpy", inline="always")
def _legacy(t, y, codes, vals, lo, hi, full) -> None:
    """:func:`decode_legacy`, its codes and bounds written only if ``full`` (a constant where
    this is inlined, so the other branch is not compiled in)."""
    d = get_half(y, 0)
    if t == 8:
        for j in range(32):
            q = np.int64(y[2 + j])
            q = q - 256 if q > 127 else q
            if full:
                codes[j] = q + 128
            vals[j] = _f32(q) * d
        if full:
            _span(_f32(-128.0) * d, _f32(127.0) * d, lo, hi, 0, 32)
        return
    m = get_half(y, 2) if t == 3 or t == 7 else _f32(0.0)
    qs = 2 if t == 2 else (4 if t == 3 else (6 if t == 6 else 8))
    qh = np.int64(0)
    if t == 6 or t == 7:
        at = 2 if t == 6 else 4
        qh = (np.int64(y[at]) | (np.int64(y[at + 1]) << 8) | (np.int64(y[at + 2]) << 16)
              | (np.int64(y[at + 3]) << 24))
    five = t == 6 or t == 7
    offset = 0 if (t == 3 or t == 7) else (16 if five else 8)
    top = 31 if five else 15
    for j in range(16):
        a = np.int64(y[qs + j] & 0x0F)
        b = np.int64(y[qs + j] >> 4)
        if five:
            a |= ((qh >> j) << 4) & 0x10
            b |= (qh >> (j + 12)) & 0x10
        if full:
            codes[j] = a
            codes[j + 16] = b
        if offset:
            vals[j] = _f32(a - offset) * d
            vals[j + 16] = _f32(b - offset) * d
        else:
            vals[j] = _f32(a) * d + m
            vals[j + 16] = _f32(b) * d + m
    if not full:
        return
    if offset:
        _span(_f32(-offset) * d, _f32(top - offset) * d, lo, hi, 0, 32)
    else:
        _span(m, _f32(top) * d + m, lo, hi, 0, 32)


@_kernel
def decode_q2_k(y, codes, vals, lo, hi) -> None:
    d = get_half(y, 80)
    dmin = get_half(y, 82)
    for half in range(2):
        for shift_k in range(4):
            for part in range(2):
                s = 8 * half + 2 * shift_k + part
                sc = y[s]
                dl = d * _f32(sc & 0xF)
                ml = dmin * _f32(sc >> 4)
                base = 128 * half + 32 * shift_k + 16 * part
                for q in range(16):
                    c = np.int64((y[16 + 32 * half + 16 * part + q] >> (2 * shift_k)) & 3)
                    codes[base + q] = c
                    vals[base + q] = dl * _f32(c) - ml
                _span(dl * _f32(0.0) - ml, dl * _f32(3.0) - ml, lo, hi, base, base + 16)


@_kernel
def _q3_scales(y) -> np.ndarray:
    """The 16 signed 6-bit scales of a Q3_K block (``dequantize_row_q3_K``'s unpacking)."""
    out = np.empty(16, np.int64)
    for j in range(16):
        if j < 8:
            low = np.int64(y[96 + j]) & 0xF
        else:
            low = np.int64(y[96 + j - 8]) >> 4
        high = (np.int64(y[96 + 8 + j % 4]) >> (2 * (j // 4))) & 3
        out[j] = (low | (high << 4)) - 32
    return out


@_kernel
def decode_q3_k(y, codes, vals, lo, hi) -> None:
    d_all = get_half(y, 108)
    scales = _q3_scales(y)
    for half in range(2):
        for shift_k in range(4):
            for part in range(2):
                s = 8 * half + 2 * shift_k + part
                dl = d_all * _f32(scales[s])
                base = 128 * half + 32 * shift_k + 16 * part
                mask_bit = 1 << (4 * half + shift_k)
                for q in range(16):
                    el = 16 * part + q
                    c = np.int64((y[32 + 32 * half + el] >> (2 * shift_k)) & 3)
                    if y[el] & mask_bit:
                        c += 4
                    codes[base + q] = c
                    vals[base + q] = dl * _f32(c - 4)
                _span(dl * _f32(-4.0), dl * _f32(3.0), lo, hi, base, base + 16)


@_kernel
def decode_q45_k(five, y, codes, vals, lo, hi) -> None:
    """Q4_K (``five`` False) and Q5_K: ``d·sc·q - dmin·m`` per 32-element sub-block."""
    d = get_half(y, 0)
    dmin = get_half(y, 2)
    qs = 48 if five else 16
    top = 31 if five else 15
    for k in range(4):
        for part in range(2):
            sc, m = scale_min_k4(2 * k + part, y, 4)
            d1 = d * _f32(sc)
            m1 = dmin * _f32(m)
            base = 64 * k + 32 * part
            for q in range(32):
                c = np.int64((y[qs + 32 * k + q] >> (4 * part)) & 0xF)
                if five and (y[16 + q] >> (2 * k + part)) & 1:
                    c += 16
                codes[base + q] = c
                vals[base + q] = d1 * _f32(c) - m1
            _span(d1 * _f32(0.0) - m1, d1 * _f32(top) - m1, lo, hi, base, base + 32)


@_kernel
def decode_q6_k(y, codes, vals, lo, hi) -> None:
    d = get_half(y, 208)
    for half in range(2):
        ql = 64 * half
        qh = 128 + 32 * half
        for q in range(32):
            for k in range(4):
                low = (y[ql + q + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF
                c = np.int64(low | (((y[qh + q] >> (2 * k)) & 3) << 4))
                s = np.int64(y[192 + 8 * half + q // 16 + 2 * k])
                s = s - 256 if s > 127 else s
                el = 128 * half + 32 * k + q
                codes[el] = c
                dl = d * _f32(s)
                vals[el] = dl * _f32(c - 32)
                lo[el] = dl * _f32(-32.0)
                hi[el] = dl * _f32(31.0)


@_kernel
def decode_block(t, y, codes, vals, lo, hi) -> None:
    """One block of ggml type ``t`` (see :data:`quantscope.core.formats.gguf.GGUF_TYPES`)."""
    if t == 10:
        decode_q2_k(y, codes, vals, lo, hi)
    elif t == 11:
        decode_q3_k(y, codes, vals, lo, hi)
    elif t == 12:
        decode_q45_k(False, y, codes, vals, lo, hi)
    elif t == 13:
        decode_q45_k(True, y, codes, vals, lo, hi)
    elif t == 14:
        decode_q6_k(y, codes, vals, lo, hi)
    else:
        decode_legacy(t, y, codes, vals, lo, hi)
