"""The compiled loops of torchao's int4 weight-only rule
(:mod:`~quantscope.core.formats.torchao_int4`).

torchao computes every step on bfloat16 tensors, and PyTorch forms each bfloat16 operation in
float32 and rounds the result to bfloat16 (nearest, ties to even). The loops repeat that
chain operation by operation -- one float32 operation, one rounding -- so the parameters, the
codes and the dequantized values are torchao's to the bit:

* ``_choose_qparams_affine_tinygemm``: ``scale = bf16(bf16(max - min) / 15)``, clamped below
  at bfloat16's smallest normal; ``zero = bf16(min + bf16(scale · 8))``;
* ``_quantize_affine_tinygemm``: ``lo = bf16(zero - scale · 8)``,
  ``q = clamp(round(bf16(bf16(x - lo) / scale)), 0, 15)`` (half to even);
* ``_dequantize_affine_tinygemm`` to the scales' dtype: ``bf16(bf16((q - 8) · scale) + zero)``.

Dividing by 15 and multiplying by float32's ``1/15`` give the same bfloat16 for every
bfloat16 operand (checked over all of them), so PyTorch's choice between the two for a
scalar divisor does not matter. Each loop takes a range of groups (``[n_groups, group]``), so
callers split any tensor into shares for the engine's threads.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.elements import bits_float32, float32_bits
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.unit_totals import store_unit

_jit = njit(nogil=True, error_model="numpy")
#: torchao's default ``eps``: ``torch.finfo(torch.bfloat16).smallest_normal``.
BF16_TINY = np.float32(2.0 ** -126)
#: ``(quant_max + quant_min + 1) / 2`` for codes 0..15.
MID = np.float32(8.0)
QMAX = 15


@njit(nogil=True, error_model="numpy", inline="always")
def bf16(v) -> np.float32:
    """``v`` (float32) rounded to bfloat16, nearest with ties to even, as float32 (finite
    values and infinities; the rule's inputs are finite)."""
    u = np.uint32(float32_bits(np.float32(v)))
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return bits_float32(r)


@njit(nogil=True, error_model="numpy", inline="always")
def _scale_zero(lo, hi):
    """torchao's scale and float zero point of a group with bfloat16 range ``[lo, hi]``."""
    scale = max(bf16(bf16(hi - lo) / np.float32(QMAX)), BF16_TINY)
    zero = bf16(lo + bf16(scale * MID))
    return scale, zero


@njit(nogil=True, error_model="numpy", inline="always")
def _code(xb, low, scale) -> int:
    """The unclamped code of bfloat16 ``xb``: ``round(bf16(bf16(xb - low) / scale))``."""
    return int(np.rint(bf16(bf16(xb - low) / scale)))


@njit(nogil=True, error_model="numpy", inline="always")
def _value(q, scale, zero) -> np.float32:
    """The dequantized value of code ``q``: ``bf16(bf16((q - 8) · scale) + zero)``."""
    return bf16(bf16(np.float32(q - 8) * scale) + zero)


@_jit
def group_params(xg, scale, zero) -> None:
    """Scale and zero point (bfloat16 values as float32) of each group ``xg[i]`` (float32,
    finite), from its values rounded to bfloat16."""
    for i in range(xg.shape[0]):
        x = xg[i]
        lo = bf16(x[0])
        hi = lo
        for k in range(1, x.size):
            v = bf16(x[k])
            lo = min(lo, v)
            hi = max(hi, v)
        scale[i], zero[i] = _scale_zero(lo, hi)


@_jit
def group_codes(xg, scale, zero, out) -> None:
    """The codes 0..15 (uint8) of each group under its ``scale`` and ``zero``."""
    for i in range(xg.shape[0]):
        s = scale[i]
        low = bf16(zero[i] - bf16(s * MID))
        x = xg[i]
        for k in range(x.size):
            out[i, k] = min(max(_code(bf16(x[k]), low, s), 0), QMAX)


@_jit
def group_values(codes, scale, zero, out) -> None:
    """The dequantized values (float32 holding bfloat16) of codes ``codes[i]``."""
    for i in range(codes.shape[0]):
        s = scale[i]
        z = zero[i]
        for k in range(codes.shape[1]):
            out[i, k] = _value(np.int64(codes[i, k]), s, z)


@_jit
def group_report(xg, scale, zero, out_f, out_i, hist) -> None:
    """Each group's totals against torchao's values of its own codes, in one pass:
    ``out_f[i]`` (rounding error, clipping error, max |error|, Σx², min, max) and ``out_i[i]``
    (n, below, above, codes used); ``hist`` counts codes. The error is against ``x`` itself
    (float64), so a float32 tensor's error includes its rounding to bfloat16. An element is
    clipped when its code before the clamp lies outside 0..15."""
    vals = np.empty(QMAX + 1, np.float64)
    seen = np.empty(QMAX + 1, np.int64)
    for i in range(xg.shape[0]):
        s = scale[i]
        z = zero[i]
        low = bf16(z - bf16(s * MID))
        for q in range(QMAX + 1):
            vals[q] = np.float64(_value(q, s, z))
            seen[q] = 0
        x = xg[i]
        rnd = 0.0
        clip = 0.0
        worst = 0.0
        sig = 0.0
        x_lo = np.inf
        x_hi = -np.inf
        below = 0
        above = 0
        for k in range(x.size):
            xv = x[k]
            x64 = np.float64(xv)
            raw = _code(bf16(xv), low, s)
            q = min(max(raw, 0), QMAX)
            d = x64 - vals[q]
            if raw < 0:
                below += 1
                clip += d * d
            elif raw > QMAX:
                above += 1
                clip += d * d
            else:
                rnd += d * d
            worst = max(worst, abs(d))
            sig += x64 * x64
            x_lo = min(x_lo, x64)
            x_hi = max(x_hi, x64)
            seen[q] += 1
        used = 0
        for q in range(QMAX + 1):
            if seen[q]:
                used += 1
                hist[q] += seen[q]
        store_unit(out_f, out_i, i, rnd, clip, worst, sig, x_lo, x_hi, x.size, below, above,
                   used)
