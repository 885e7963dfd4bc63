"""Exact quantization statistics from sorted values (the engine of
:mod:`quantscope.core.stats.prepared`).

For a fixed tensor, an element gets code ``k`` exactly when it lies between two thresholds, so
in a sorted row the elements of one code are one interval. A long row (the whole tensor, or a
channel with many elements per code) is split by ``levels + 1`` binary searches, and each
interval's squared error ``Σx² − 2·x̂_k·Σx + n·x̂_k²`` comes from the row's prefix sums of ``x``
and ``x²``: a report costs O(levels · log n) instead of a pass over the row. A shorter row is
walked: each element's code, its squared error, and the places where the code changes (see
:mod:`quantscope.core.kernels.sorted_kernel`, which does both, compiled).

Exactness, as the direct pass :func:`quantscope.core.stats.analyze.analyze` defines it:

* thresholds: the code of an element is a monotone function of its value under every rounding
  rule and arithmetic. A searched threshold is estimated in float64 and corrected with the
  direct rule itself (the elements beside the found position are re-quantized); a walked row
  quantizes every element by that rule. So ties on the rounding boundary, float32 division,
  the reciprocal arithmetics and half-away rounding are decided by the very rule that decides
  them in the direct pass;
* sums: prefix sums are double-double (a float64 running sum plus the float64 running sum of
  its exact rounding errors), so an interval sum is accurate relative to itself, not to the
  tensor total. Only one record per block of sorted values is kept; the prefix at any
  position is recomputed from its block's record by the same operations, bit for bit
  (:mod:`quantscope.core.kernels.block_sums`). The remaining cancellation in ``Σx² − 2x̂Σx + nx̂²``
  is bounded a posteriori; an evaluation whose bound exceeds :data:`REL_TOL` of its error
  (nearly exact data, e.g. values on the grid) is recomputed element by element from its
  sorted row. A walked row sums ``(x − x̂)²`` directly: no cancellation, n units of roundoff
  at most.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quantscope.core.kernels import compiled
from quantscope.core.kernels.unit_columns import unit_columns
from quantscope.core.schemes.quantize import quantize_codes_float

#: Relative accuracy guaranteed for the error sums (the contract with the direct pass is 1e-9).
REL_TOL = 5e-10
_EPS = float(np.finfo(np.float64).eps)


#: Rows with fewer elements than this per code boundary are walked; longer ones are split by
#: binary search with prefix sums (see :mod:`quantscope.core.kernels.sorted_kernel`). Measured on
#: 4096x4096 normal values, one thread, same process (ms, search / walk): 16 per boundary
#: (channels of 4096 at 8 bits) 129 / 48; 64 (groups of 1024 at 4 bits) 68 / 50; 128 (groups
#: of 2048 at 4 bits) 38 / 43; 256 (channels at 4 bits) 25 / 52.
WALK_PER_LEVEL = 96

#: Rows at least this long are sorted by the parallel radix sort (shorter ones, and layouts of
#: many rows, by ``np.sort``, the rows shared between threads).
RADIX_ROWS = 1 << 20

Progress = Callable[[float, str], None]


@dataclass(frozen=True, eq=False)
class SortedRows:
    """Finite values of each row sorted ascending, rows concatenated, with prefix sums.

    Row ``r`` is ``values[starts[r]:starts[r + 1]]``; rows are units (the tensor, a channel or
    a group) in the C order of the parameter arrays. The double-double prefix sums of ``x`` and
    ``x²`` of each row (each row from zero, so a row of tiny values next to a row of huge ones
    keeps its precision) are kept as block records, row ``r``'s from ``rec_starts[r]`` (see
    :mod:`quantscope.core.kernels.block_sums`: 0.25 bytes per element, prefixes at any position bit
    for
    bit those of a full table). ``bound1`` and ``bound2`` (per row) times an interval's length
    bound the absolute error of its sums of ``x`` and ``x²``. The records are built on first
    use: a layout that only serves percentiles, or whose rows are all walked, never pays for
    them.
    """

    values: np.ndarray
    starts: np.ndarray
    n_nonfinite: int

    @functools.cached_property
    def _sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self._build_sums(None)

    def _build_sums(self, progress: Progress | None):
        n_rows, starts, values = self.n_rows, self.starts, self.values
        counts = compiled.n_records(self.lengths)
        rec_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.intp)
        rec = np.empty((int(rec_starts[-1]), 4))
        bounds = np.zeros((n_rows, 2))
        if n_rows == 1:  # one long row: in chunks, with progress
            state, n = np.zeros(6), int(self.lengths[0])
            chunk = compiled.BLOCK << 15
            for lo in range(0, max(n, 1), chunk):
                compiled.build_range(values, 0, lo, min(lo + chunk, n), rec, 0, state)
                if progress:
                    progress(min(lo + chunk, n) / max(n, 1), "prefix sums")
            bounds[0] = state[4:6]
        else:
            from quantscope.core.kernels.parallel import THREADS, parallel

            edges = np.linspace(0, n_rows, min(n_rows, 4 * THREADS) + 1).astype(np.intp)
            parallel(compiled.build_rows, [(values, starts, edges[i], edges[i + 1], rec,
                                            rec_starts, bounds) for i in range(edges.size - 1)])
        u = _EPS / 2
        return rec, rec_starts, bounds[:, 0] * u, bounds[:, 1] * u

    def build_sums(self, progress: Progress | None = None) -> SortedRows:
        """Build the prefix sums now (they are otherwise built on first use); returns self.
        ``progress(fraction, stage)`` is called along the way (raise from it to cancel)."""
        if "_sums" not in self.__dict__:
            self.__dict__["_sums"] = self._build_sums(progress)
        return self

    @functools.cached_property
    def sumsq(self) -> np.ndarray:
        """Σx² of each row (float64; what a walked row reports as its signal)."""
        out = np.empty(self.n_rows)
        compiled.row_sums_of_squares(self.values, self.starts, out)
        return out

    @property
    def records(self) -> np.ndarray:
        """The block records of the prefix sums ([records, 4] float64)."""
        return self._sums[0]

    @property
    def rec_starts(self) -> np.ndarray:
        return self._sums[1]

    @property
    def bound1(self) -> np.ndarray:
        return self._sums[2]

    @property
    def bound2(self) -> np.ndarray:
        return self._sums[3]

    @property
    def n_rows(self) -> int:
        return self.starts.size - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    @property
    def nbytes(self) -> int:
        """Bytes this layout holds (sorted values, and the prefix records once built)."""
        held = self.values.nbytes + self.starts.nbytes
        if "_sums" in self.__dict__:
            held += sum(a.nbytes for a in self._sums)
        return held

    @classmethod
    def from_rows(cls, rows: list[tuple[np.ndarray, np.ndarray]], n_units: int,
                  progress: Progress | None = None) -> SortedRows:
        """Build from ``(unit_index, x2d)`` pairs: row ``i`` of ``x2d`` is one unit.

        One long row (a whole tensor) is sorted by the parallel radix sort, with progress;
        many rows by ``np.sort``, a share of the rows per thread."""
        parts, counts, units, n_bad = [], [], [], 0
        for index, x2d in rows:
            if x2d.shape[0] == 1 and x2d.shape[1] >= RADIX_ROWS:
                report = (lambda f: progress(f, "sorting")) if progress else None
                vals, bad = compiled.sort_finite(x2d.reshape(-1), report)
                n_bad += bad
                parts.append(vals)
                counts.append(np.array([vals.size], np.int64))
            else:
                srt = _sort_rows(x2d)
                fin = np.isfinite(srt)
                if fin.all():
                    parts.append(srt.ravel())
                    counts.append(np.full(srt.shape[0], srt.shape[1], np.int64))
                else:
                    n_bad += int(fin.size - np.count_nonzero(fin))
                    parts.append(srt[fin])
                    counts.append(np.count_nonzero(fin, axis=1).astype(np.int64))
            units.append(np.asarray(index, np.intp))
        values = (parts[0] if len(parts) == 1 else np.concatenate(parts)) if parts \
            else np.empty(0, np.float32)
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

    def histogram(self, edges: np.ndarray, row: int = 0) -> np.ndarray:
        """``np.histogram(row values, bins=edges)[0]``, exactly, by binary searches."""
        out = np.zeros(len(edges) - 1, np.int64)
        compiled.bin_counts(self.values, self.starts[row], self.starts[row + 1],
                            np.asarray(edges), out)
        return out

    def sums(self, a: np.ndarray, b: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(Σx, Σx²)`` over sorted positions ``[a, b)`` (global) of row ``row``, exactly as
        the reports take them from the prefix sums."""
        a, b, row = np.broadcast_arrays(np.asarray(a, np.intp), np.asarray(b, np.intp),
                                        np.asarray(row, np.intp))
        out = np.empty((a.size, 2))
        compiled.interval_sums(self.values, self.starts, self.records, self.rec_starts,
                      np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1),
                      np.ascontiguousarray(row).reshape(-1), out)
        return out[:, 0].reshape(a.shape), out[:, 1].reshape(a.shape)


def _sort_rows(x2d: np.ndarray) -> np.ndarray:
    """``np.sort(x2d, axis=1)``, the rows shared between the cores when there are many (NumPy
    releases the GIL while it sorts)."""
    if x2d.size < RADIX_ROWS or x2d.shape[0] < 2:
        return np.sort(x2d, axis=1)
    from quantscope.core.kernels.parallel import THREADS, parallel

    out = np.empty(x2d.shape, np.float32)
    edges = np.linspace(0, x2d.shape[0], min(x2d.shape[0], THREADS) + 1).astype(np.intp)

    def part(r0: int, r1: int) -> None:
        out[r0:r1] = x2d[r0:r1]
        out[r0:r1].sort(axis=1)

    parallel(part, [(edges[i], edges[i + 1]) for i in range(edges.size - 1)])
    return out


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
             *, want_counts: bool = True, inv_scale=None, redo_loose: bool = True) -> EvalStats:
    """Exact statistics of quantizing row ``row[e]`` with ``scale[e]``, ``zero_point[e]``.

    ``rule`` is ``(qmin, qmax, rounding, arithmetic)``. Matches the direct pass on the same
    elements: identical counts, clip counts and maximum error, sums within :data:`REL_TOL`.
    With ``want_counts=False`` (sweeps, searches) the code counts are left out (``counts``
    None). The work is done by :func:`quantscope.core.kernels.sorted_kernel.evaluate_rows`; the
    evaluations whose error bound is too loose (nearly exact data) are redone element by element
    unless ``redo_loose`` is False (searches, which only rank candidates: each sum is then
    still within its bound, a few 1e-10 of the signal, and the winner is evaluated again).
    """
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
    # each statistic a contiguous column, in the one layout the loop is compiled for
    out_f = unit_columns(row.size, 8, np.float64, zeros=False)
    out_i = unit_columns(row.size, 5, np.int64, zeros=False)
    walk_below = WALK_PER_LEVEL * (qmax - qmin + 2)
    if row.size and rows.lengths[row].max() < walk_below:  # every row walked: no sums needed
        rec, rec_starts = np.empty((0, 4)), np.zeros(rows.n_rows + 1, np.intp)
        bound1, bound2 = np.empty(0), np.empty(0)
    else:
        rec, rec_starts, bound1, bound2 = rows._sums
    parts = _evaluation_shares(rows, row)
    hists = np.zeros((len(parts), hist.size), np.int64)
    inv_e = s if inv is None else inv
    from quantscope.core.kernels.parallel import parallel

    parallel(compiled.evaluate_rows, [
        (rows.values, rows.starts, rows.sumsq, rec, rec_starts, bound1, bound2, row[a:b],
         s[a:b], inv_e[a:b], z[a:b], qmin, qmax, compiled.ARITHMETIC_CODES[arithmetic],
         rounding == "half_away", inv is not None, walk_below, want_counts, hists[k],
         out_f[a:b], out_i[a:b]) for k, (a, b) in enumerate(parts) if b > a])
    hist = hists.sum(axis=0)
    if not out_i[:, 4].all():  # a threshold that would not settle (never seen): redo it all
        return _evaluate_elementwise(rows, row, s, z, rule, want_counts, inv)
    round_err, clip_err = out_f[:, 0], out_f[:, 1]
    shaky = (out_f[:, 2] > REL_TOL * round_err) | (out_f[:, 3] > REL_TOL * clip_err)
    if redo_loose and shaky.any():
        redo = np.flatnonzero(shaky)
        exact = _evaluate_elementwise(rows, row[redo], s[redo], z[redo], rule, False,
                                      None if inv is None else inv[redo])
        round_err[redo] = exact.round_err
        clip_err[redo] = exact.clip_err
    return EvalStats(n=out_i[:, 0], round_err=round_err, clip_err=clip_err, below=out_i[:, 1],
                     above=out_i[:, 2], max_abs=out_f[:, 4], sig=out_f[:, 5],
                     x_min=out_f[:, 6], x_max=out_f[:, 7], codes_used=out_i[:, 3],
                     hist=hist if want_counts else None)


#: Evaluations are shared between the threads when they cover at least this many elements.
PARALLEL_ELEMENTS = 1 << 17


def _evaluation_shares(rows: SortedRows, row: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous ranges of the evaluations, :data:`~quantscope.core.kernels.parallel.
    PIECES_PER_THREAD` per thread, of about equal work (elements of walked rows, or
    evaluations of searched ones), taken by whichever thread is free; one range when there is
    little to do.

    Why pieces, not a range per thread: beside a busy process a thread loses its core for
    a while, and with one range each the other thread then finished early and waited; a
    per-channel change at 16M elements took about twice the wall time for the same CPU
    (p50 80-85 against 40-42 ms, both orders of an interleaved run,
    ``bench/engine_changes.py --load``)."""
    from quantscope.core.kernels.parallel import PIECES_PER_THREAD, THREADS

    if row.size < 2 or THREADS < 2:
        return [(0, row.size)]
    work = np.cumsum(np.minimum(rows.lengths[row], 1 << 14) + 64)
    if work[-1] < PARALLEL_ELEMENTS // 8 and rows.lengths[row].sum() < PARALLEL_ELEMENTS:
        return [(0, row.size)]
    k = THREADS * PIECES_PER_THREAD
    cuts = np.searchsorted(work, work[-1] * np.arange(1, k) / k)
    edges = np.unique(np.concatenate([[0], cuts, [row.size]]))
    return [(int(edges[i]), int(edges[i + 1])) for i in range(edges.size - 1)]


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
