"""Exact quantization statistics from sorted values (the engine of :mod:`quantscope.core.fast`).

For a fixed tensor, an element gets code ``k`` exactly when it lies between two thresholds, so
in a sorted row the elements of one code are one interval. A long row (the whole tensor, or a
channel with many elements per code) is split by ``levels + 1`` binary searches, and each
interval's squared error ``Σx² − 2·x̂_k·Σx + n·x̂_k²`` comes from the row's prefix sums of ``x``
and ``x²``: a report costs O(levels · log n) instead of a pass over the row. A shorter row is
walked: each element's code, its squared error, and the places where the code changes (see
:mod:`quantscope.core.sorted_kernel`, which does both, compiled).

Exactness, as the direct pass :func:`quantscope.core.analyze.analyze` defines it:

* thresholds: the code of an element is a monotone function of its value under every rounding
  rule and arithmetic. A searched threshold is estimated in float64 and corrected with the
  direct rule itself (the elements beside the found position are re-quantized); a walked row
  quantizes every element by that rule. So ties on the rounding boundary, float32 division,
  the reciprocal arithmetics and half-away rounding are decided by the very rule that decides
  them in the direct pass;
* sums: prefix sums are double-double (a float64 running sum plus the float64 running sum of
  its exact rounding errors), so an interval sum is accurate relative to itself, not to the
  tensor total. The remaining cancellation in ``Σx² − 2x̂Σx + nx̂²`` is bounded a posteriori;
  an evaluation whose bound exceeds :data:`REL_TOL` of its error (nearly exact data, e.g.
  values on the grid) is recomputed element by element from its sorted row. A walked row sums
  ``(x − x̂)²`` directly: no cancellation, n units of roundoff at most.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from quantscope.core.quantize import quantize_codes_float

#: Relative accuracy guaranteed for the error sums (the contract with the direct pass is 1e-9).
REL_TOL = 5e-10
_EPS = float(np.finfo(np.float64).eps)


#: Rows with fewer elements than this per code boundary are walked; longer ones are split by
#: binary search with prefix sums (see :mod:`quantscope.core.sorted_kernel`). Measured on
#: 4096x4096 normal values, one thread, same process (ms, search / walk): 16 per boundary
#: (channels of 4096 at 8 bits) 129 / 48; 64 (groups of 1024 at 4 bits) 68 / 50; 128 (groups
#: of 2048 at 4 bits) 38 / 43; 256 (channels at 4 bits) 25 / 52.
WALK_PER_LEVEL = 96

#: Elements per block when building prefix sums (blocks stay in cache; no full-size temporaries).
_BLOCK = 1 << 13


def dd_prefix_rows(vals: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Double-double prefix sums of each row of ``vals`` [R, L] and of its squares.

    ``out`` is [R, L + 1, 4]: ``out[r, i, 0] + out[r, i, 1]`` is ``sum(v[r, :i])`` and
    ``out[r, i, 2] + out[r, i, 3]`` is ``sum(v[r, :i] ** 2)``. Each row's running sum is taken
    strictly left to right (``np.cumsum`` along the row on tiles that start with the carried
    sum, so tiling changes nothing), every step's rounding error is recovered exactly with
    Knuth's TwoSum, and the errors are summed on their own. Tiles are assembled in cache and
    written once, contiguously. ``v`` is float64 (squares are exact: a float32 squared has 48
    bits at most).

    Returns, per row, ``u · max|lo|`` for ``x`` and for ``x²``: the difference of two ``lo``
    entries ``n`` positions apart is off by at most ``n`` times that (one rounding per step of
    the error sum), so the bound of an interval's sum is local to the interval.
    """
    n_rows, length = vals.shape
    u = _EPS / 2
    out[:, 0, :] = 0.0
    bounds = np.zeros((2, n_rows))
    if length == 0 or n_rows == 0:
        return bounds[0], bounds[1]
    cols = min(length, _BLOCK)
    per = max(1, _BLOCK // cols)
    buf = np.empty((per, cols + 1))
    run = np.empty((per, cols + 1))
    t1 = np.empty((per, cols))
    t2 = np.empty((per, cols))
    tile = np.empty((per, cols, 4))
    for r0 in range(0, n_rows, per):
        r1 = min(r0 + per, n_rows)
        nr = r1 - r0
        for c0 in range(0, length, cols):
            c1 = min(c0 + cols, length)
            m = c1 - c0
            b, rn, tl = buf[:nr, :m + 1], run[:nr, :m + 1], tile[:nr, :m]
            v, prev, cur = b[:, 1:], rn[:, :-1], rn[:, 1:]
            bv, av = t1[:nr, :m], t2[:nr, :m]
            for k in (0, 2):
                if k:
                    np.multiply(vals[r0:r1, c0:c1], vals[r0:r1, c0:c1], out=v,
                                dtype=np.float64)
                else:
                    v[...] = vals[r0:r1, c0:c1]
                b[:, 0] = out[r0:r1, c0, k]
                np.cumsum(b, axis=1, out=rn)
                np.subtract(cur, prev, out=bv)  # TwoSum(prev, v) = (cur, error)
                np.subtract(cur, bv, out=av)
                np.subtract(prev, av, out=av)
                np.subtract(v, bv, out=bv)
                np.add(av, bv, out=v)
                tl[:, :, k] = cur
                b[:, 0] = out[r0:r1, c0, k + 1]
                np.cumsum(b, axis=1, out=rn)
                tl[:, :, k + 1] = cur
                np.maximum(bounds[k // 2, r0:r1], np.abs(cur).max(axis=1),
                           out=bounds[k // 2, r0:r1])
            out[r0:r1, c0 + 1:c1 + 1, :] = tl
    return bounds[0] * u, bounds[1] * u


@dataclass(frozen=True, eq=False)
class SortedRows:
    """Finite values of each row sorted ascending, rows concatenated, with prefix sums.

    Row ``r`` is ``values[starts[r]:starts[r + 1]]``; rows are units (the tensor, a channel or
    a group) in the C order of the parameter arrays. ``prefix[p + r]`` holds the double-double
    prefix sums ``(hi, lo)`` of ``x`` and then of ``x²`` of row ``r`` up to (excluding) global
    position ``p``: each row starts from zero (so a row of tiny values next to a row of huge
    ones keeps its precision), and one record of four floats is one gather. ``bound1`` and
    ``bound2`` (per row) times an interval's length bound the absolute error of its sums of
    ``x`` and ``x²``. The prefix sums (32 bytes per element) are built on first use: a layout
    that only serves percentiles, or whose reports go the direct way, never pays for them.
    """

    values: np.ndarray
    starts: np.ndarray
    n_nonfinite: int

    @functools.cached_property
    def _sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n_rows, starts, values = self.n_rows, self.starts, self.values
        count = np.diff(starts)
        prefix = np.empty((values.size + n_rows, 4))
        bound1, bound2 = np.zeros(n_rows), np.zeros(n_rows)
        if n_rows and (count == count[0]).all():  # equal rows: tiles of whole rows
            bound1, bound2 = dd_prefix_rows(values.reshape(n_rows, -1),
                                            prefix.reshape(n_rows, -1, 4))
        else:
            for r in range(n_rows):
                a, b = starts[r], starts[r + 1]
                b1, b2 = dd_prefix_rows(values[a:b].reshape(1, -1),
                                        prefix[a + r:b + r + 1].reshape(1, -1, 4))
                bound1[r], bound2[r] = b1[0], b2[0]
        return prefix, bound1, bound2

    def build_sums(self) -> SortedRows:
        """Build the prefix sums now (they are otherwise built on first use); returns self."""
        _ = self._sums
        return self

    @functools.cached_property
    def sumsq(self) -> np.ndarray:
        """Σx² of each row (float64; what a walked row reports as its signal)."""
        from quantscope.core.sorted_kernel import row_sums_of_squares

        out = np.empty(self.n_rows)
        row_sums_of_squares(self.values, self.starts, out)
        return out

    @property
    def prefix(self) -> np.ndarray:
        return self._sums[0]

    @property
    def bound1(self) -> np.ndarray:
        return self._sums[1]

    @property
    def bound2(self) -> np.ndarray:
        return self._sums[2]

    @property
    def n_rows(self) -> int:
        return self.starts.size - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    @classmethod
    def from_rows(cls, rows: list[tuple[np.ndarray, np.ndarray]], n_units: int) -> SortedRows:
        """Build from ``(unit_index, x2d)`` pairs: row ``i`` of ``x2d`` is one unit."""
        parts, counts, units, n_bad = [], [], [], 0
        for index, x2d in rows:
            srt = np.sort(x2d, axis=1)
            fin = np.isfinite(srt)
            if fin.all():
                parts.append(srt.ravel())
                counts.append(np.full(srt.shape[0], srt.shape[1], np.int64))
            else:
                n_bad += int(fin.size - np.count_nonzero(fin))
                parts.append(srt[fin])
                counts.append(np.count_nonzero(fin, axis=1).astype(np.int64))
            units.append(np.asarray(index, np.intp))
        values = np.concatenate(parts) if parts else np.empty(0, np.float32)
        count = np.concatenate(counts) if counts else np.empty(0, np.int64)
        unit = np.concatenate(units) if units else np.empty(0, np.intp)
        if not np.array_equal(unit, np.arange(n_units)):  # put rows in unit order
            old_start = np.concatenate([[0], np.cumsum(count)[:-1]])
            order = np.argsort(unit, kind="stable")
            count = count[order]
            new_start = np.concatenate([[0], np.cumsum(count)[:-1]])
            gather = np.repeat(old_start[order] - new_start, count) + np.arange(values.size)
            values = values[gather]
        starts = np.concatenate([[0], np.cumsum(count)]).astype(np.intp)
        return cls(values, starts, n_bad)

    def sums(self, a: np.ndarray, b: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(Σx, Σx²)`` over sorted positions ``[a, b)`` of row ``row``."""
        d = self.gather(b + row) - self.gather(a + row)
        return d[..., 0] + d[..., 1], d[..., 2] + d[..., 3]

    def gather(self, positions: np.ndarray) -> np.ndarray:
        """``prefix[positions]`` (shape ``positions.shape + (4,)``), fetched as 32-byte records:
        numpy gathers one opaque record much faster than a row of four floats."""
        rec = self.prefix.view(np.dtype("V32")).reshape(-1)
        return rec[positions].view(np.float64).reshape((*np.shape(positions), 4))


@dataclass(frozen=True, eq=False)
class EvalStats:
    """Statistics of evaluations (one scale and zero point applied to one row each)."""

    n: np.ndarray
    round_err: np.ndarray
    clip_err: np.ndarray
    below: np.ndarray
    above: np.ndarray
    max_abs: np.ndarray
    sig: np.ndarray
    x_min: np.ndarray
    x_max: np.ndarray
    codes_used: np.ndarray  # per evaluation
    hist: np.ndarray | None  # [levels] code counts of all evaluations, clipped ones included


def _codes(x: np.ndarray, s: np.ndarray, z: np.ndarray, rule: tuple, inv=None) -> np.ndarray:
    """Unclamped codes of ``x`` by the direct pass's own rule (float32 integers)."""
    qmin, qmax, rounding, arithmetic = rule
    return quantize_codes_float(np.ascontiguousarray(x, np.float32), s, z, qmin, qmax, rounding,
                                arithmetic, inv_scale=inv)


def evaluate(rows: SortedRows, row: np.ndarray, scale, zero_point, rule: tuple,
             *, want_counts: bool = True, inv_scale=None) -> EvalStats:
    """Exact statistics of quantizing row ``row[e]`` with ``scale[e]``, ``zero_point[e]``.

    ``rule`` is ``(qmin, qmax, rounding, arithmetic)``. Matches the direct pass on the same
    elements: identical counts, clip counts and maximum error, sums within :data:`REL_TOL`.
    With ``want_counts=False`` (sweeps, searches) the code counts are left out (``counts``
    None). The work is done by :func:`quantscope.core.sorted_kernel.evaluate_rows`; the
    evaluations whose error bound is too loose (nearly exact data) are redone element by element.
    """
    from quantscope.core.sorted_kernel import ARITHMETIC_CODES, evaluate_rows

    qmin, qmax, rounding, arithmetic = rule
    row = np.ascontiguousarray(row, np.intp).reshape(-1)
    s = np.ascontiguousarray(np.broadcast_to(np.asarray(scale, np.float32).reshape(-1),
                                             row.shape))
    z = np.ascontiguousarray(np.broadcast_to(np.asarray(zero_point, np.int32).reshape(-1),
                                             row.shape))
    inv = None
    if inv_scale is not None:
        inv = np.ascontiguousarray(np.broadcast_to(
            np.asarray(inv_scale, np.float32).reshape(-1), row.shape))
    hist = np.zeros(qmax - qmin + 1, np.int64)
    out_f = np.empty((row.size, 8))
    out_i = np.empty((row.size, 5), np.int64)
    walk_below = WALK_PER_LEVEL * (qmax - qmin + 2)
    if row.size and rows.lengths[row].max() < walk_below:  # every row walked: no sums needed
        prefix, bound1, bound2 = np.empty((0, 4)), np.empty(0), np.empty(0)
    else:
        prefix, bound1, bound2 = rows.prefix, rows.bound1, rows.bound2
    evaluate_rows(rows.values, rows.starts, rows.sumsq, prefix, bound1, bound2, row, s,
                  s if inv is None else inv, z, qmin, qmax, ARITHMETIC_CODES[arithmetic],
                  rounding == "half_away", inv is not None, walk_below, want_counts, hist,
                  out_f, out_i)
    if not out_i[:, 4].all():  # a threshold that would not settle (never seen): redo it all
        return _evaluate_elementwise(rows, row, s, z, rule, want_counts, inv)
    round_err, clip_err = out_f[:, 0], out_f[:, 1]
    shaky = (out_f[:, 2] > REL_TOL * round_err) | (out_f[:, 3] > REL_TOL * clip_err)
    if shaky.any():
        redo = np.flatnonzero(shaky)
        exact = _evaluate_elementwise(rows, row[redo], s[redo], z[redo], rule, False,
                                      None if inv is None else inv[redo])
        round_err[redo] = exact.round_err
        clip_err[redo] = exact.clip_err
    return EvalStats(n=out_i[:, 0], round_err=round_err, clip_err=clip_err, below=out_i[:, 1],
                     above=out_i[:, 2], max_abs=out_f[:, 4], sig=out_f[:, 5],
                     x_min=out_f[:, 6], x_max=out_f[:, 7], codes_used=out_i[:, 3],
                     hist=hist if want_counts else None)


def _evaluate_elementwise(rows: SortedRows, row: np.ndarray, s: np.ndarray, z: np.ndarray,
                          rule: tuple, want_counts: bool, inv=None) -> EvalStats:
    """The direct rule on each element of the rows (the slow, obviously exact fallback)."""
    qmin, qmax = rule[0], rule[1]
    stats = {k: np.zeros(row.size) for k in ("round_err", "clip_err", "max_abs", "sig",
                                             "x_min", "x_max")}
    ints = {k: np.zeros(row.size, np.int64) for k in ("n", "below", "above")}
    counts = np.zeros((row.size, qmax - qmin + 1), np.int64) if want_counts else None
    for e, r in enumerate(row):
        x = rows.values[rows.starts[r]:rows.starts[r + 1]]
        if x.size == 0:
            continue
        v = _codes(x, s[e], z[e], rule, None if inv is None else inv[e])
        below, above = v < qmin, v > qmax
        np.clip(v, qmin, qmax, out=v)
        if counts is not None:
            counts[e] = np.bincount(v.astype(np.intp) - qmin, minlength=qmax - qmin + 1)
        xhat = ((v - z[e]).astype(np.float32) * s[e]).astype(np.float64)
        x64 = x.astype(np.float64)
        e2 = np.square(x64 - xhat)
        clipped = below | above
        stats["round_err"][e] = np.sum(e2, where=~clipped)
        stats["clip_err"][e] = np.sum(e2, where=clipped)
        stats["max_abs"][e] = np.max(np.abs(x64 - xhat))
        stats["sig"][e] = np.dot(x64, x64)
        stats["x_min"][e], stats["x_max"][e] = x64[0], x64[-1]
        ints["n"][e] = x.size
        ints["below"][e] = np.count_nonzero(below)
        ints["above"][e] = np.count_nonzero(above)
    used = np.count_nonzero(counts, axis=1) if counts is not None else np.zeros(row.size, int)
    return EvalStats(**stats, **ints, codes_used=used,
                     hist=counts.sum(axis=0) if counts is not None else None)
