"""NumPy twins of torchao int4's compiled loops (:mod:`quantscope.core.formats.torchao_kernel`):
the same parameters, codes, values and report, bit for bit.

``quantscope report --format torchao_int4_g128`` on a machine's first run compiled these loops
before it printed a line. Written a second time here with the same signatures, they serve
behind :mod:`quantscope.core.kernels.compiled` while the loops are compiled in another process
(:func:`quantscope.core.stats.loop_twins.install`).

Why they agree to the last bit:

* every step is one float32 operation and one rounding to bfloat16, element-wise: NumPy's
  float32 arithmetic is IEEE single precision as the loop's, and the rounding is the same
  integer arithmetic on the float32 bits (``uint32`` wraps alike);
* a group's sums run in its order (``np.cumsum`` along the group accumulates left to right);
  an element of the other kind adds ``+0.0`` to a sum of squares that starts at ``+0.0``,
  which changes no bit;
* its least and largest value and largest error are the loop's ``min``/``max`` scans, which
  keep the first of equal values: the sign of a zero is the first zero's.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.stats.twin_sums import store_units

#: torchao's default ``eps`` and the middle code (``torchao_kernel.BF16_TINY``, ``MID``).
BF16_TINY = np.float32(2.0 ** -126)
MID = np.float32(8.0)
QMAX = 15
#: Elements a report takes at once: bounds its temporaries.
CHUNK_ELEMENTS = 1 << 20


def bf16(v) -> np.ndarray:
    """``torchao_kernel.bf16``: float32 ``v`` rounded to bfloat16 (nearest, ties to even)."""
    u = np.asarray(v, np.float32).view(np.uint32)
    with np.errstate(over="ignore"):
        r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(
            0xFFFF0000)
    return r.astype(np.uint32).view(np.float32)


def _f32(op, a, b) -> np.ndarray:
    with np.errstate(all="ignore"):
        return op(np.asarray(a, np.float32), np.asarray(b, np.float32))


def group_params(xg, scale, zero) -> None:
    """``torchao_kernel.group_params``: each group's scale and zero point."""
    if xg.shape[0] == 0:
        return
    v = bf16(xg)
    lo, hi = v.min(axis=1), v.max(axis=1)  # the sign of a zero range does not reach them
    s = np.maximum(bf16(_f32(np.divide, bf16(_f32(np.subtract, hi, lo)), np.float32(QMAX))),
                   BF16_TINY)
    scale[:] = s
    zero[:] = bf16(_f32(np.add, lo, bf16(_f32(np.multiply, s, MID))))


def _codes(xg, s, low) -> np.ndarray:
    """Unclamped codes: ``rint(bf16(bf16(bf16(x) - low) / s))`` (float32, per group)."""
    q = bf16(_f32(np.divide, bf16(_f32(np.subtract, bf16(xg), low[:, None])), s[:, None]))
    return np.rint(q)


def _low(s, z) -> np.ndarray:
    return bf16(_f32(np.subtract, z, bf16(_f32(np.multiply, s, MID))))


def group_codes(xg, scale, zero, out) -> None:
    """``torchao_kernel.group_codes``: the codes 0..15 of each group."""
    s, z = np.asarray(scale, np.float32), np.asarray(zero, np.float32)
    out[...] = np.clip(_codes(xg, s, _low(s, z)), 0, QMAX).astype(np.uint8)


def _values(q, s, z) -> np.ndarray:
    """``bf16(bf16((q - 8) · s) + z)`` of codes ``q`` (float32 values)."""
    return bf16(_f32(np.add, bf16(_f32(np.multiply, (q - 8).astype(np.float32), s)), z))


def group_values(codes, scale, zero, out) -> None:
    """``torchao_kernel.group_values``: the dequantized values of each group's codes."""
    s = np.asarray(scale, np.float32)[:, None]
    z = np.asarray(zero, np.float32)[:, None]
    out[...] = _values(np.asarray(codes, np.int64), s, z)


def group_report(xg, scale, zero, out_f, out_i, hist) -> None:
    """``torchao_kernel.group_report``: each group's totals against torchao's values of its
    own codes, groups a chunk at a time."""
    n, g = xg.shape
    step = max(1, CHUNK_ELEMENTS // max(g, 1))
    for a in range(0, n, step):
        b = min(a + step, n)
        _report(xg[a:b], np.asarray(scale[a:b], np.float32), np.asarray(zero[a:b], np.float32),
                out_f[a:b], out_i[a:b], hist)


def _report(xg, s, z, out_f, out_i, hist) -> None:
    raw = _codes(xg, s, _low(s, z))
    q = np.clip(raw, 0, QMAX).astype(np.int64)
    vals = _values(np.arange(QMAX + 1)[None, :], s[:, None], z[:, None]).astype(np.float64)
    x64 = xg.astype(np.float64)
    d = x64 - np.take_along_axis(vals, q, axis=1)
    store_units(out_f, out_i, hist, x64, d, raw < 0, raw > QMAX, q, QMAX + 1)


#: What :func:`quantscope.core.stats.loop_twins.install` adds behind ``compiled``, by name.
TWINS = {"group_params": group_params, "group_codes": group_codes,
         "group_values": group_values, "group_report": group_report}
