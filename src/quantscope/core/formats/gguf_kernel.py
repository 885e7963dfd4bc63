"""The compiled loops over many GGUF blocks: encode float32 blocks to llama.cpp's bytes,
decode bytes to values or codes, and the exact report of stored blocks against a tensor.

Each loop takes a range of blocks (``[n_blocks, block]`` floats, ``[n_blocks, type_size]``
bytes), so the caller splits a tensor of any size into shares for the engine's threads
(:func:`quantscope.core.kernels.parallel.parallel`) and nothing larger than one block's
scratch is allocated per call.

The loops here inline the encoders and searches of :mod:`~quantscope.core.formats.gguf_legacy`,
:mod:`~quantscope.core.formats.gguf_kquants` and :mod:`~quantscope.core.formats.gguf_lanes`,
yet Numba's on-disk cache keys each loop by the text of its own file only: a change there
reaches the cached loops of this file when this file changes too (the lanes' float ``rint``
trials did so).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.gguf_decode import decode_block, legacy_values
from quantscope.core.formats.gguf_kquants import (
    CHUNK_BLOCKS,
    block_codes,
    fit_chunk,
    lane_scratch,
    quantize_q2_k,
    quantize_q3_k,
    quantize_q4_k,
    quantize_q5_k,
    quantize_q6_k,
    sub_block_shape,
)
from quantscope.core.formats.gguf_legacy import (
    quantize_q4_0,
    quantize_q4_1,
    quantize_q5_0,
    quantize_q5_1,
    quantize_q8_0,
)
from quantscope.core.formats.gguf_types import ENCODE, MEASURE, SCREEN
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.unit_columns import unit_columns
from quantscope.core.kernels.unit_totals import store_unit

_jit = njit(nogil=True, error_model="numpy")


@njit(nogil=True, error_model="numpy", inline="always")
def _block_scratch(n, levels):
    """A block's codes, values and their bounds (``n`` each), and the codes-used stamps of
    :func:`_report_block`, reused block after block."""
    return (np.zeros(n, np.int64), np.zeros(n, np.float32), np.zeros(n, np.float32),
            np.zeros(n, np.float32), np.full(levels, -1, np.int64))


@njit(nogil=True, error_model="numpy", inline="always")
def _encode_legacy(t, x, y) -> None:
    """Block ``x`` of legacy ggml type ``t`` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) into bytes ``y``."""
    if t == 2:
        quantize_q4_0(x, y)
    elif t == 3:
        quantize_q4_1(x, y)
    elif t == 6:
        quantize_q5_0(x, y)
    elif t == 7:
        quantize_q5_1(x, y)
    else:
        quantize_q8_0(x, y)


@njit(nogil=True, error_model="numpy", inline="always")
def _screen_block(t, x, y, c, v, lo, hi, acc) -> None:
    """Block ``x`` against the values its bytes ``y`` store: each element's ``(x − x̂)²``, the
    report's own term (:func:`_report_block`), added into ``acc`` at its position in the block
    (no chain of dependent additions, so the loop vectorises; NaN or inf carries through)."""
    if t < 10:
        legacy_values(t, y, v)  # a legacy block's values alone: a third of its decoding
    else:
        decode_block(t, y, c, v, lo, hi)
    for k in range(x.size):
        d = np.float64(x[k]) - np.float64(v[k])
        acc[k] += d * d


@njit(nogil=True, error_model="numpy", inline="always")
def _after_encode(t, x, y, i, mode, levels, c, v, lo, hi, stamp, hist, out_f, out_i,
                  acc) -> None:
    """What ``mode`` adds to block ``i``, just encoded into ``y``, while it is in the cache."""
    if mode == MEASURE:
        _report_block(t, x, y, i, levels, c, v, lo, hi, stamp, hist, out_f, out_i)
    elif mode == SCREEN:
        _screen_block(t, x, y, c, v, lo, hi, acc)


@njit(nogil=True, error_model="numpy", inline="always")
def _encode(t, xb, out, mode, levels, out_f, out_i, hist) -> float:
    """Blocks ``xb[i]`` (float32, finite) of ggml type ``t`` into bytes ``out[i]``; each
    block then measured against its bytes (``mode`` :data:`MEASURE`, :func:`_report_block`)
    or its squared errors summed (:data:`SCREEN`: the sum is returned), as soon as its bytes
    are written, while the block is still in the cache."""
    n = xb.shape[1]
    c, v, lo, hi, stamp = _block_scratch(n, levels)
    acc = np.zeros(n, np.float64)
    L = np.zeros(256, np.int64)
    if t < 10:  # no sub-block search to share between blocks
        if mode == ENCODE:
            # the encoding alone: a loop as short as the encoders (one that held the report
            # too took a fifth longer for Q4_0)
            for i in range(xb.shape[0]):
                _encode_legacy(t, xb[i], out[i])
            return 0.0
        if mode == SCREEN:  # a loop of its own, as short (the report's made this one slower)
            for i in range(xb.shape[0]):
                _encode_legacy(t, xb[i], out[i])
                _screen_block(t, xb[i], out[i], c, v, lo, hi, acc)
            return acc.sum()
        for i in range(xb.shape[0]):
            x = xb[i]
            y = out[i]
            _encode_legacy(t, x, y)
            _report_block(t, x, y, i, levels, c, v, lo, hi, stamp, hist, out_f, out_i)
        return 0.0
    lanes = lane_scratch()
    per = sub_block_shape(t)[1]
    for c0 in range(0, xb.shape[0], CHUNK_BLOCKS):
        c1 = min(c0 + CHUNK_BLOCKS, xb.shape[0])
        fit_chunk(t, xb[c0:c1], lanes)
        for b in range(c1 - c0):
            block_codes(t, lanes, (c1 - c0) * per, b, L)
            x = xb[c0 + b]
            y = out[c0 + b]
            scales = lanes[4][per * b:per * (b + 1)]
            mins = lanes[5][per * b:per * (b + 1)]
            if t == 10:
                quantize_q2_k(x, y, L, scales, mins)
            elif t == 11:
                quantize_q3_k(x, y, L, scales)
            elif t == 12:
                quantize_q4_k(x, y, L, scales, mins)
            elif t == 13:
                quantize_q5_k(x, y, L, scales, mins)
            else:
                quantize_q6_k(x, y, L, scales)
            _after_encode(t, x, y, c0 + b, mode, levels, c, v, lo, hi, stamp, hist, out_f,
                          out_i, acc)
    return acc.sum()


def encode_blocks(t, xb, out) -> None:
    """Blocks ``xb[i]`` (float32, finite, read-only: :mod:`quantscope.core.kernels.read_only`)
    of ggml type ``t`` into bytes ``out[i]``: :func:`encode_report_blocks` without its report,
    the one compiled loop of both (every encoder of every type is in it: a second loop for
    the encoding alone was some 20 s of CPU more on a machine's first run, for the same
    bytes)."""
    encode_report_blocks(t, xb, out, ENCODE, 1, _NO_UNITS_F, _NO_UNITS_I, _NO_HIST)


#: The report's outputs a loop without a report hands :func:`encode_report_blocks`, never
#: written: in the layout of a report's own
#: (:func:`~quantscope.core.kernels.unit_columns.unit_columns`).
_NO_UNITS_F = unit_columns(1, 6)
_NO_UNITS_I = unit_columns(1, 4, np.int64)
_NO_HIST = np.zeros(1, np.int64)


@_jit
def encode_report_blocks(t, xb, out, mode, levels, out_f, out_i, hist) -> float:
    """Blocks ``xb[i]`` (float32, finite) of ggml type ``t`` into bytes ``out[i]``, and with
    ``mode`` :data:`MEASURE` :func:`report_blocks` in the same pass: each block encoded, then
    measured against the bytes just written (the same totals as a later
    :func:`report_blocks`, bit for bit), instead of a second pass that reads the tensor and
    the bytes again and decodes every block from memory. With :data:`SCREEN`, only ``Σ (x −
    x̂)²`` over the blocks (in any order), returned; else 0."""
    return _encode(t, xb, out, mode, levels, out_f, out_i, hist)


@_jit
def decode_blocks(t, yb, vals, codes, want_codes) -> None:
    """Bytes ``yb[i]`` of type ``t`` to values ``vals[i]`` (and codes ``codes[i]``, uint8,
    when ``want_codes``)."""
    n = vals.shape[1]
    c = np.zeros(n, np.int64)
    lo = np.zeros(n, np.float32)
    hi = np.zeros(n, np.float32)
    for i in range(yb.shape[0]):
        decode_block(t, yb[i], c, vals[i], lo, hi)
        if want_codes:
            for k in range(n):
                codes[i, k] = c[k]


@njit(nogil=True, error_model="numpy", inline="always")
def _sub_block(t) -> int:
    """Elements that share one scale (and minimum) in a block of type ``t``: a k-quant's
    sub-block, a whole legacy block."""
    return sub_block_shape(t)[0] if t >= 10 else 32


@njit(nogil=True, error_model="numpy", inline="always")
def _report_block(t, x, y, i, levels, c, v, lo, hi, stamp, hist, out_f, out_i) -> None:
    """Block ``x`` against the values its bytes ``y`` store, into unit ``i`` of ``out_f`` /
    ``out_i`` (see :func:`report_blocks`); ``c``, ``v``, ``lo``, ``hi`` and ``stamp`` are
    scratch. Sub-block by sub-block, each one's clipping edges found once, and a code's
    first use in the block counted without a branch (one that went either way on a third of
    the elements cost more than the rest of the loop)."""
    n = x.size
    sub = _sub_block(t)
    decode_block(t, y, c, v, lo, hi)
    rnd = 0.0
    clip = 0.0
    worst = 0.0
    sig = 0.0
    xmin = np.inf
    xmax = -np.inf
    below = 0
    above = 0
    used = 0
    for s0 in range(0, n, sub):
        a = np.float64(lo[s0])
        b = np.float64(hi[s0])
        bot = min(a, b)
        top = max(a, b)
        half = (top - bot) / (2.0 * (levels - 1))
        below_edge = bot - half
        above_edge = top + half
        for k in range(s0, s0 + sub):
            xk = np.float64(x[k])
            d = xk - np.float64(v[k])
            e2 = d * d
            if xk < below_edge:
                below += 1
                clip += e2
            elif xk > above_edge:
                above += 1
                clip += e2
            else:
                rnd += e2
            worst = max(worst, abs(d))
            sig += xk * xk
            xmin = min(xmin, xk)
            xmax = max(xmax, xk)
            code = c[k]
            hist[code] += 1
            used += stamp[code] != i
            stamp[code] = i
    store_unit(out_f, out_i, i, rnd, clip, worst, sig, xmin, xmax, n, below, above, used)


@_jit
def report_blocks(t, xb, yb, levels, out_f, out_i, hist) -> None:
    """Block ``i`` of ``xb`` against the values stored in ``yb[i]``: into ``out_f[i]``
    (rounding error, clipping error, max |error|, Σx², min, max; float64 sums over float32
    values) and ``out_i[i]`` (n, clipped below, clipped above, codes used), codes counted in
    ``hist``. An element is clipped when it lies more than half a step beyond the block's
    lowest or highest value (every code of a block is one step apart)."""
    n = xb.shape[1]
    c, v, lo, hi, stamp = _block_scratch(n, levels)
    for i in range(xb.shape[0]):
        _report_block(t, xb[i], yb[i], i, levels, c, v, lo, hi, stamp, hist, out_f, out_i)


@_jit
def value_span(t, yb):
    """The lowest and highest value any block of ``yb`` can represent (its codes' extremes,
    over every sub-block): the window a tensor's histogram spans."""
    n = 256 if t >= 10 else 32
    c = np.zeros(n, np.int64)
    v = np.zeros(n, np.float32)
    lo = np.zeros(n, np.float32)
    hi = np.zeros(n, np.float32)
    bot = np.inf
    top = -np.inf
    for i in range(yb.shape[0]):
        decode_block(t, yb[i], c, v, lo, hi)
        for k in range(n):
            a = np.float64(lo[k])
            b = np.float64(hi[k])
            bot = min(bot, a, b)
            top = max(top, a, b)
    return bot, top
