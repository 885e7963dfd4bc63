"""NumPy twins of the GGUF loops (:mod:`quantscope.core.formats.gguf_kernel`) for Q8_0 blocks:
the same bytes, values, codes and report, bit for bit.

``quantscope report --format gguf_q8_0`` on a machine's first run compiled the GGUF loops
(every block type's encoder and decoder in one loop) before it printed a line. Q8_0, llama.cpp's
plainest type, is written here a second time, whole blocks at once, with the loops' signatures;
the other types (``t`` not 8: the k-quants' searches and the legacy 4- and 5-bit types) are
handed to the compiled loops unchanged (:func:`quantscope.core.kernels.compiled.loop`).

Why they agree to the last bit:

* every step is the loop's float32 operation (NumPy's float32 arithmetic is IEEE single
  precision as the loop's), and ggml's float16 conversions are the same integer arithmetic
  on the float32 bits, element-wise;
* a block's maximum |x| is exact in any order; ``roundf`` is the loop's
  ``copysign(floor(|v| + 0.5), v)`` in float64;
* a block's sums run in its order and its extremes keep the first of equal values
  (:func:`~quantscope.core.stats.twin_sums.sums_in_order`,
  :func:`~quantscope.core.stats.twin_sums.first_extremes`).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.gguf_types import MEASURE, SCREEN
from quantscope.core.kernels import compiled
from quantscope.core.stats.twin_sums import first_extremes, store_units

#: ggml's type number of Q8_0, its block and its bytes per block (fp16 d, 32 int8 codes).
Q8_0 = 8
BLOCK = 32
#: ggml's float16 conversion constants: 2^112, 2^-110, 2^-112 (``gguf_legacy``'s).
_TO_INF = np.float32(2.0 ** 112)
_TO_ZERO = np.float32(2.0 ** -110)
_EXP_SCALE = np.float32(2.0 ** -112)
#: Blocks a report takes at once: bounds its temporaries.
CHUNK_BLOCKS = 1 << 15


def _float32(bits: np.ndarray) -> np.ndarray:
    """``elements.bits_float32``: the low 32 bits as a float32."""
    return (np.asarray(bits, np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def _bits(f: np.ndarray) -> np.ndarray:
    return np.asarray(f, np.float32).view(np.uint32).astype(np.int64)


def fp32_to_fp16(f: np.ndarray) -> np.ndarray:
    """``gguf_legacy.fp32_to_fp16`` element-wise: float16 bits (int64)."""
    with np.errstate(over="ignore"):
        base = (np.abs(f).astype(np.float32) * _TO_INF) * _TO_ZERO
    w = _bits(f)
    shl1_w = (w + w) & 0xFFFFFFFF
    sign = w & 0x80000000
    bias = np.maximum(shl1_w & 0xFF000000, 0x71000000)
    with np.errstate(over="ignore"):
        base = _float32((bias >> 1) + 0x07800000) + base
    bits = _bits(base)
    nonsign = ((bits >> 13) & 0x7C00) + (bits & 0x0FFF)
    return (sign >> 16) | np.where(shl1_w > 0xFF000000, 0x7E00, nonsign)


def fp16_to_fp32(h: np.ndarray) -> np.ndarray:
    """``gguf_legacy.fp16_to_fp32`` element-wise (exact)."""
    w = np.asarray(h, np.int64) << 16
    sign = w & 0x80000000
    two_w = (w + w) & 0xFFFFFFFF
    normalized = _float32((two_w >> 4) + (0xE0 << 23)) * _EXP_SCALE
    denormalized = _float32((two_w >> 17) | (126 << 23)) - np.float32(0.5)
    body = np.where(two_w < (1 << 27), _bits(denormalized), _bits(normalized))
    return _float32(sign | body)


def _encode_q8_0(xb: np.ndarray, out: np.ndarray) -> None:
    """``gguf_legacy.quantize_q8_0`` of each block: fp16 ``d = amax / 127``, then
    ``roundf(x · (1/d))`` as int8."""
    amax = np.max(np.abs(xb), axis=1, initial=np.float32(0.0)).astype(np.float32)
    d = amax / np.float32(127.0)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
    h = fp32_to_fp16(d)
    out[:, 0] = h & 0xFF
    out[:, 1] = (h >> 8) & 0xFF
    with np.errstate(over="ignore", invalid="ignore"):
        v = (xb * inv[:, None]).astype(np.float32)
    r = np.copysign(np.floor(np.abs(v.astype(np.float64)) + 0.5), v)
    out[:, 2:] = (r.astype(np.int64) & 0xFF).astype(np.uint8)


def _decode_q8_0(yb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``gguf_decode.decode_legacy`` for Q8_0: codes (0..255), values (float32) and each
    block's scale ``d``."""
    d = fp16_to_fp32(yb[:, 0].astype(np.int64) | (yb[:, 1].astype(np.int64) << 8))
    q = yb[:, 2:].view(np.int8).astype(np.int64)
    vals = q.astype(np.float32) * d[:, None]
    return q + 128, vals, d


def _report(xb, yb, levels: int, out_f, out_i, hist) -> None:
    """``gguf_kernel._report_block`` of each Q8_0 block (one sub-block of 32)."""
    codes, vals, d = _decode_q8_0(yb)
    a = (np.float32(-128.0) * d).astype(np.float64)
    b = (np.float32(127.0) * d).astype(np.float64)
    bot, top = np.minimum(a, b), np.maximum(a, b)  # the edges are compared with, not stored
    half = (top - bot) / (2.0 * (levels - 1))
    below_edge, above_edge = (bot - half)[:, None], (top + half)[:, None]
    x64 = xb.astype(np.float64)
    below = x64 < below_edge
    store_units(out_f, out_i, hist, x64, x64 - vals.astype(np.float64), below,
                ~below & (x64 > above_edge), codes, levels)


def _chunks(n: int):
    for a in range(0, n, CHUNK_BLOCKS):
        yield a, min(a + CHUNK_BLOCKS, n)


def encode_blocks(t, xb, out) -> None:
    """``gguf_kernel.encode_blocks``: Q8_0 here, other types by the compiled loop."""
    if t != Q8_0:
        compiled.loop("encode_blocks")(t, xb, out)
        return
    for a, b in _chunks(xb.shape[0]):
        _encode_q8_0(xb[a:b], out[a:b])


def encode_report_blocks(t, xb, out, mode, levels, out_f, out_i, hist) -> float:
    """``gguf_kernel.encode_report_blocks``: each block encoded, then, by ``mode``, measured
    against its bytes or its squared errors summed (Q8_0 here, other types by the compiled
    loop)."""
    if t != Q8_0:
        return compiled.loop("encode_report_blocks")(t, xb, out, mode, levels, out_f, out_i,
                                                     hist)
    error = 0.0
    for a, b in _chunks(xb.shape[0]):
        _encode_q8_0(xb[a:b], out[a:b])
        if mode == MEASURE:
            _report(xb[a:b], out[a:b], levels, out_f[a:b], out_i[a:b], hist)
        elif mode == SCREEN:
            d = xb[a:b].astype(np.float64) - _decode_q8_0(out[a:b])[1].astype(np.float64)
            error += float(np.sum(d * d))
    return error


def report_blocks(t, xb, yb, levels, out_f, out_i, hist) -> None:
    """``gguf_kernel.report_blocks``: each block against the values its bytes store (Q8_0
    here, other types by the compiled loop)."""
    if t != Q8_0:
        compiled.loop("report_blocks")(t, xb, yb, levels, out_f, out_i, hist)
        return
    for a, b in _chunks(xb.shape[0]):
        _report(xb[a:b], yb[a:b], levels, out_f[a:b], out_i[a:b], hist)


def decode_blocks(t, yb, vals, codes, want_codes) -> None:
    """``gguf_kernel.decode_blocks``: values (and codes) of each block's bytes."""
    if t != Q8_0:
        compiled.loop("decode_blocks")(t, yb, vals, codes, want_codes)
        return
    for a, b in _chunks(yb.shape[0]):
        c, v, _ = _decode_q8_0(yb[a:b])
        vals[a:b] = v
        if want_codes:
            codes[a:b] = c


def value_span(t, yb):
    """``gguf_kernel.value_span``: the lowest and highest value any block can represent, as
    its scan keeps them (the first of equal values: ``min``/``max`` over each block's two
    ends in turn)."""
    if t != Q8_0:
        return compiled.loop("value_span")(t, yb)
    if yb.shape[0] == 0:
        return np.inf, -np.inf
    _, _, d = _decode_q8_0(yb)
    ends = np.stack([(np.float32(-128.0) * d), (np.float32(127.0) * d)], axis=1)
    bot, top = first_extremes(ends.astype(np.float64).reshape(1, -1))
    return float(bot[0]), float(top[0])


#: What :func:`quantscope.core.stats.loop_twins.install` adds behind ``compiled``, by name.
TWINS = {"encode_blocks": encode_blocks, "encode_report_blocks": encode_report_blocks,
         "report_blocks": report_blocks, "decode_blocks": decode_blocks,
         "value_span": value_span}
