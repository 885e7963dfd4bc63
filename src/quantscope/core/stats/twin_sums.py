"""The running sums the NumPy twins of the compiled loops share
(:mod:`quantscope.core.stats.loop_twins`, :mod:`quantscope.core.stats.format_twins` and the
others): the double-double running sum of ``block_sums._step``, step by step, the last
searched row's prefix sums, kept for the next report of the same row, and a unit's plain sums
and extremes as a loop's scan over it forms them."""

from __future__ import annotations

import numpy as np


def running_sums(start_hi: float | np.ndarray, start_lo: float | np.ndarray,
                 terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The double-double running sum of ``terms`` (last axis) from ``(start_hi, start_lo)``:
    ``hi`` and ``lo`` after each step (``block_sums._step``, step by step)."""
    shape = (*terms.shape[:-1], 1)
    first_hi = np.broadcast_to(np.asarray(start_hi, np.float64)[..., None], shape)
    first_lo = np.broadcast_to(np.asarray(start_lo, np.float64)[..., None], shape)
    hi = np.cumsum(np.concatenate([first_hi, terms], axis=-1), axis=-1)
    prev, cur = hi[..., :-1], hi[..., 1:]
    bv = cur - prev
    av = cur - bv
    av = prev - av
    bv = terms - bv
    err = av + bv
    lo = np.cumsum(np.concatenate([first_lo, err], axis=-1), axis=-1)
    return cur, lo[..., 1:]


#: The longest row whose prefix sums :func:`row_prefixes` keeps for the next report (about 36
#: bytes an element while the twins serve; :func:`forget_prefixes` lets them go).
KEEP_PREFIXES_MAX = 1 << 21
#: ``(row, prefixes)`` of the last row searched (see :func:`row_prefixes`).
_kept: list[tuple[np.ndarray, list[np.ndarray]]] = []


def row_prefixes(x: np.ndarray, x64: np.ndarray) -> list[np.ndarray]:
    """The double-double running sums of ``x`` and ``x²`` (hi and lo each, from 0), as the
    compiled records hold them. A sweep reports the same row under hundreds of scales: the
    last row's sums are kept, with a copy of the row, and served again while its values are
    the same bits (a comparison costs a small part of the sums)."""
    x = np.ascontiguousarray(x)
    if _kept:
        row, pre = _kept[0]
        if (row.dtype == x.dtype and row.shape == x.shape
                and np.array_equal(row.view(np.uint8), x.view(np.uint8))):  # bit for bit
            return pre
    zero = np.zeros(1)
    h1, l1 = running_sums(zero, zero, x64[None, :])
    h2, l2 = running_sums(zero, zero, (x64 * x64)[None, :])
    pre = [np.concatenate([[0.0], t[0]]) for t in (h1, l1, h2, l2)]
    _kept.clear()
    if x.size <= KEEP_PREFIXES_MAX:
        _kept.append((x.copy(), pre))
    return pre


def forget_prefixes() -> None:
    """Let the kept row and its prefix sums go (the twins step aside)."""
    _kept.clear()


def sums_in_order(terms: np.ndarray) -> np.ndarray:
    """Each row's sum, added left to right as a loop's ``total += term`` (``np.cumsum`` along
    a row accumulates in order; ``np.sum`` would add in pairs)."""
    if terms.shape[1] == 0:
        return np.zeros(terms.shape[0])
    return np.cumsum(terms, axis=1)[:, -1]


def first_extremes(x64: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's least and largest value as a loop's ``lo = min(lo, x)`` / ``hi = max(hi, x)``
    scan keeps them: the first of equal values, so a zero's sign is the first zero's
    (``np.min`` may give either)."""
    rows = np.arange(x64.shape[0])
    return x64[rows, np.argmin(x64, axis=1)], x64[rows, np.argmax(x64, axis=1)]


def store_units(out_f, out_i, hist, x64: np.ndarray, dev: np.ndarray, below: np.ndarray,
                above: np.ndarray, codes: np.ndarray, levels: int) -> None:
    """What a report loop's scan over each unit (a row of ``x64``, float64) leaves
    (``unit_totals.store_unit``'s columns): rounding and clipping error (the squared errors
    ``dev`` of elements clipped ``below`` or ``above`` are clipping error) and Σx², each
    added in order; the largest |error|; the first least and largest value; the elements,
    those clipped, and how many of the ``levels`` codes the unit uses, counted into ``hist``."""
    e2 = dev * dev
    clipped = below | above
    out_f[:, 0] = sums_in_order(np.where(clipped, 0.0, e2))
    out_f[:, 1] = sums_in_order(np.where(clipped, e2, 0.0))
    out_f[:, 2] = np.max(np.abs(dev), axis=1, initial=0.0)
    out_f[:, 3] = sums_in_order(x64 * x64)
    out_f[:, 4], out_f[:, 5] = first_extremes(x64)  # a unit is never empty
    n, size = x64.shape
    seen = np.zeros((n, levels), np.int64)
    np.add.at(seen, (np.repeat(np.arange(n), size), codes.ravel()), 1)
    out_i[:, 0] = size
    out_i[:, 1] = below.sum(axis=1)
    out_i[:, 2] = above.sum(axis=1)
    out_i[:, 3] = np.count_nonzero(seen, axis=1)
    hist += seen.sum(axis=0)
