"""llama.cpp's 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), one block at a time,
as ``quantize_row_*_ref`` in ggml-quants.c computes them, operation for operation in float32.

Also the shared scalar helpers of the GGUF kernels: ggml's float32 <-> float16 conversions
(``ggml_compute_fp32_to_fp16`` and back, bit for bit: round to nearest even, inf beyond 65504)
and ``nearest_int``, the float trick k-quants round with (``fval + 1.5 * 2^23`` rounded in
float32, then the mantissa bits: ties to even, and the same bits as the C code for any finite
value, including the ones its debug assertion would refuse).

Every function here works in float32 on purpose: a float64 intermediate, a fused
multiply-add or a reordered sum would change the last bit of a scale and then a code.
The block quantizers take the block's 32 float32 values and write its bytes into ``y``;
they return nothing.
"""

from __future__ import annotations

import math

import numpy as np

from quantscope.core.formats.elements import bits_float32, float32_bits
from quantscope.core.kernels.jit_cache import njit

_f32 = np.float32
_kernel = njit(nogil=True, error_model="numpy", inline="always")
#: ggml's float16 conversion constants: 2^112, 2^-110, 2^-112.
_TO_INF = np.float32(2.0 ** 112)
_TO_ZERO = np.float32(2.0 ** -110)
_EXP_SCALE = np.float32(2.0 ** -112)
#: ``nearest_int``'s magic, 1.5 * 2^23; the largest float32.
_MAGIC = np.float32(12582912.0)
_FLT_MAX = np.float32(np.finfo(np.float32).max)


@_kernel
def fp32_to_fp16(f):
    """ggml's float32 -> float16 bits (the FP16 library's branch-free rounding)."""
    base = (_f32(abs(f)) * _TO_INF) * _TO_ZERO
    w = np.int64(float32_bits(_f32(f)))
    shl1_w = (w + w) & 0xFFFFFFFF
    sign = w & 0x80000000
    bias = shl1_w & 0xFF000000
    if bias < 0x71000000:
        bias = 0x71000000
    base = bits_float32((bias >> 1) + 0x07800000) + base
    bits = np.int64(float32_bits(_f32(base)))
    nonsign = ((bits >> 13) & 0x7C00) + (bits & 0x0FFF)
    return (sign >> 16) | (0x7E00 if shl1_w > 0xFF000000 else nonsign)


@_kernel
def fp16_to_fp32(h):
    """ggml's float16 bits -> float32 (exact)."""
    w = np.int64(h) << 16
    sign = w & 0x80000000
    two_w = (w + w) & 0xFFFFFFFF
    normalized = bits_float32((two_w >> 4) + (0xE0 << 23)) * _EXP_SCALE
    denormalized = bits_float32((two_w >> 17) | (126 << 23)) - _f32(0.5)
    body = np.int64(float32_bits(_f32(denormalized))) if two_w < (1 << 27) else np.int64(
        float32_bits(_f32(normalized)))
    return bits_float32(sign | body)


@_kernel
def put_half(y, at, f) -> None:
    """float32 ``f`` stored as little-endian float16 at byte ``at`` of ``y``."""
    h = fp32_to_fp16(f)
    y[at] = h & 0xFF
    y[at + 1] = (h >> 8) & 0xFF


@_kernel
def get_half(y, at):
    """The little-endian float16 at byte ``at`` of ``y`` as float32."""
    return fp16_to_fp32(np.int64(y[at]) | (np.int64(y[at + 1]) << 8))


@_kernel
def nearest_int(fval) -> int:
    """ggml's ``nearest_int``: ``fval + 12582912.f`` in float32, then its low mantissa bits."""
    val = _f32(_f32(fval) + _MAGIC)
    i = np.int64(float32_bits(val))
    return (i & 0x007FFFFF) - 0x00400000


@_kernel
def _signed_max(x):
    """The element of largest magnitude, the first of them (its sign kept)."""
    amax = _f32(0.0)
    mx = _f32(0.0)
    for j in range(x.size):
        v = x[j]
        if amax < abs(v):
            amax = _f32(abs(v))
            mx = v
    return mx


@_kernel
def _min_max(x):
    lo = _FLT_MAX
    hi = -_FLT_MAX
    for j in range(x.size):
        v = x[j]
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    return lo, hi


@_kernel
def quantize_q4_0(x, y) -> None:
    """Q4_0: ``d = max / -8`` (the signed element of largest magnitude), codes
    ``min(15, trunc(x / d + 8.5))``; bytes: fp16 d, 16 bytes of nibbles (low: elements 0-15)."""
    d = _signed_max(x) / _f32(-8.0)
    inv = _f32(1.0) / d if d != 0 else _f32(0.0)
    put_half(y, 0, d)
    for j in range(16):
        a = min(15, int(x[j] * inv + _f32(8.5)))
        b = min(15, int(x[j + 16] * inv + _f32(8.5)))
        y[2 + j] = a | (b << 4)


@_kernel
def quantize_q4_1(x, y) -> None:
    """Q4_1: ``d = (max - min) / 15``, fp16 d and min, codes ``min(15, trunc((x - min) / d
    + 0.5))``."""
    lo, hi = _min_max(x)
    d = (hi - lo) / _f32(15.0)
    inv = _f32(1.0) / d if d != 0 else _f32(0.0)
    put_half(y, 0, d)
    put_half(y, 2, lo)
    for j in range(16):
        a = min(15, int((x[j] - lo) * inv + _f32(0.5)))
        b = min(15, int((x[j + 16] - lo) * inv + _f32(0.5)))
        y[4 + j] = a | (b << 4)


@_kernel
def quantize_q5_0(x, y) -> None:
    """Q5_0: ``d = max / -16``, codes ``min(31, trunc(x / d + 16.5))``; bytes: fp16 d, the 32
    fifth bits (uint32, little-endian), the low nibbles."""
    d = _signed_max(x) / _f32(-16.0)
    inv = _f32(1.0) / d if d != 0 else _f32(0.0)
    put_half(y, 0, d)
    qh = np.int64(0)
    for j in range(16):
        a = min(31, int(x[j] * inv + _f32(16.5)))
        b = min(31, int(x[j + 16] * inv + _f32(16.5)))
        y[6 + j] = (a & 0x0F) | ((b & 0x0F) << 4)
        qh |= ((a & 0x10) >> 4) << j
        qh |= ((b & 0x10) >> 4) << (j + 16)
    for k in range(4):
        y[2 + k] = (qh >> (8 * k)) & 0xFF


@_kernel
def quantize_q5_1(x, y) -> None:
    """Q5_1: ``d = (max - min) / 31``, fp16 d and min, codes ``trunc((x - min) / d + 0.5)``."""
    lo, hi = _min_max(x)
    d = (hi - lo) / _f32(31.0)
    inv = _f32(1.0) / d if d != 0 else _f32(0.0)
    put_half(y, 0, d)
    put_half(y, 2, lo)
    qh = np.int64(0)
    for j in range(16):
        a = int((x[j] - lo) * inv + _f32(0.5)) & 0xFF
        b = int((x[j + 16] - lo) * inv + _f32(0.5)) & 0xFF
        y[8 + j] = (a & 0x0F) | ((b & 0x0F) << 4)
        qh |= ((a & 0x10) >> 4) << j
        qh |= ((b & 0x10) >> 4) << (j + 16)
    for k in range(4):
        y[4 + k] = (qh >> (8 * k)) & 0xFF


@_kernel
def quantize_q8_0(x, y) -> None:
    """Q8_0: ``d = amax / 127``, codes ``roundf(x / d)`` (half away from zero)."""
    amax = _f32(0.0)
    for j in range(32):
        amax = max(amax, _f32(abs(x[j])))
    d = amax / _f32(127.0)
    inv = _f32(1.0) / d if d != 0 else _f32(0.0)
    put_half(y, 0, d)
    for j in range(32):
        v = _f32(x[j] * inv)
        # roundf: |v| + 0.5 is exact in float64 for any float32 below 2^24
        r = math.copysign(math.floor(abs(np.float64(v)) + 0.5), v)
        y[2 + j] = np.int64(r) & 0xFF
