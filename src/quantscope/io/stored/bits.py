"""Unpacking the integer codes that quantized checkpoints pack into int32 and uint8 words.

Each package packs differently, and reading one layout as another gives plausible-looking
garbage, so each layout is its own function:

* compressed-tensors ``pack_to_int32``: every row is one little-endian bit stream, element
  ``i`` at bit ``i * bits`` (32 elements fill exactly ``bits`` words, none wasted), stored
  as the code plus ``2**(bits-1)``;
* GPTQ: ``32 // bits`` codes per int32 down the *input* dimension (rows of ``qweight``),
  code ``k`` of a word at bit ``k * bits``; ``qzeros`` packs along its columns the same way;
* AWQ (GEMM): ``32 // bits`` codes per int32 along the *output* dimension, in the
  interleaved order [0, 2, 4, 6, 1, 3, 5, 7]: nibble ``k`` holds column ``ORDER[k]``;
* two 4-bit codes per byte: compressed-tensors' NVFP4 puts the first element in the low
  nibble, bitsandbytes in the high one.
"""

from __future__ import annotations

import numpy as np

#: AWQ's GEMM packing: nibble k of a word holds output column AWQ_ORDER[k] of its eight.
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def dense_words(bits: int, columns: int) -> int:
    """int32 words compressed-tensors packs ``columns`` codes of ``bits`` into."""
    return -(-columns * bits // 32)


def unpack_dense(words: np.ndarray, bits: int, columns: int) -> np.ndarray:
    """compressed-tensors' dense packing, per row: (rows, words) int32 -> (rows, columns)
    unsigned codes as int16 (the ``2**(bits-1)`` offset still in)."""
    rows = words.shape[0]
    raw = np.ascontiguousarray(words).astype("<i4", copy=False).view(np.uint8).reshape(rows, -1)
    if bits == 8:
        return raw[:, :columns].astype(np.int16)
    if bits == 4:
        out = np.empty((rows, raw.shape[1] * 2), np.int16)
        out[:, 0::2] = raw & 0x0F
        out[:, 1::2] = raw >> 4
        return out[:, :columns]
    stream = np.unpackbits(raw, axis=1, bitorder="little")[:, :columns * bits]
    weights = (1 << np.arange(bits)).astype(np.int16)
    return (stream.reshape(rows, columns, bits).astype(np.int16) * weights).sum(
        axis=2, dtype=np.int16)


def unpack_along(words: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """GPTQ / AWQ style: ``32 // bits`` codes per int32 word, code ``k`` at bit ``k * bits``,
    spread along ``axis`` (0: each word holds consecutive rows; 1: consecutive columns).
    Returns unsigned codes as int16 (before any AWQ reordering)."""
    per = 32 // bits
    u = np.ascontiguousarray(words).astype("<i4", copy=False).view("<u4")
    shifts = (np.arange(per, dtype=np.uint32) * bits)
    mask = np.uint32((1 << bits) - 1)
    if axis == 0:
        codes = (u[:, None, :] >> shifts[None, :, None]) & mask  # (words, per, cols)
        return codes.reshape(u.shape[0] * per, u.shape[1]).astype(np.int16)
    codes = (u[:, :, None] >> shifts[None, None, :]) & mask  # (rows, words, per)
    return codes.reshape(u.shape[0], u.shape[1] * per).astype(np.int16)


def awq_reorder(codes: np.ndarray) -> np.ndarray:
    """Undo AWQ's interleave: (rows, columns) in nibble order -> in column order."""
    rows, cols = codes.shape
    out = np.empty_like(codes)
    grouped = codes.reshape(rows, cols // 8, 8)
    target = out.reshape(rows, cols // 8, 8)
    for k, column in enumerate(AWQ_ORDER):
        target[:, :, column] = grouped[:, :, k]
    return out


def nibbles(raw: np.ndarray, *, low_first: bool) -> np.ndarray:
    """Two 4-bit codes per byte, flattened in element order (uint8 values 0-15)."""
    flat = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    out = np.empty(flat.size * 2, np.uint8)
    first, second = (flat & 0x0F, flat >> 4) if low_first else (flat >> 4, flat & 0x0F)
    out[0::2], out[1::2] = first, second
    return out
