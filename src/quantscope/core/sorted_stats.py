"""Exact quantization statistics from sorted values and prefix sums (the engine of
:mod:`quantscope.core.fast`).

For a fixed tensor, an element gets code ``k`` exactly when it lies between two thresholds, and
the squared error of the elements of code ``k`` is ``Σx² − 2·x̂_k·Σx + n·x̂_k²``. So once each
row (the tensor, or one channel) is sorted and its prefix sums of ``x`` and ``x²`` are built,
one evaluation (a scale and zero point for one row) costs ``levels + 1`` binary searches and a
few vector operations instead of a pass over the row.

Exactness, as the direct pass :func:`quantscope.core.analyze.analyze` defines it:

* thresholds: the code of an element is a monotone function of its value under every rounding
  rule and arithmetic, so the elements with code ``< k`` are a prefix of the sorted row. A
  float64 estimate of the threshold gives a float32 needle (float32, so ``searchsorted`` never
  converts the whole array to float64), and then the two elements beside each found position
  are re-quantized with the direct rule itself; a wrong side moves the position past all equal
  values. Ties on the rounding boundary, float32 division, the reciprocal arithmetics and
  half-away rounding are therefore decided by the very code that decides them in the direct
  pass;
* sums: prefix sums are double-double (a float64 running sum plus the float64 running sum of
  its exact rounding errors), so an interval sum is accurate relative to itself, not to the
  tensor total. The remaining cancellation in ``Σx² − 2x̂Σx + nx̂²`` is bounded a posteriori;
  an evaluation whose bound exceeds :data:`REL_TOL` of its error (nearly exact data, e.g.
  values on the grid) is recomputed element by element from its sorted row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantscope.core.quantize import quantize_codes_float

#: Relative accuracy guaranteed for the error sums (the contract with the direct pass is 1e-9).
REL_TOL = 1e-10
_EPS = float(np.finfo(np.float64).eps)
#: Rounds a fix-up of the thresholds may take before the evaluation is done element by element.
_MAX_FIX_ROUNDS = 64


def dd_prefix(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Double-double prefix sums of float64 ``v``: ``hi[i] + lo[i]`` ≈ ``sum(v[:i])`` exactly.

    ``np.cumsum`` adds strictly left to right, so each step's rounding error is recovered with
    Knuth's TwoSum from the stored running sums, and the errors are summed on their own.
    """
    hi = np.empty(v.size + 1)
    hi[0] = 0.0
    np.cumsum(v, out=hi[1:])
    prev = hi[:-1]
    b_virtual = hi[1:] - prev
    err = (prev - (hi[1:] - b_virtual)) + (v - b_virtual)
    lo = np.empty_like(hi)
    lo[0] = 0.0
    np.cumsum(err, out=lo[1:])
    return hi, lo


def _interval_sum(hi: np.ndarray, lo: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sum of the values at sorted positions ``[a, b)`` from double-double prefix sums."""
    return (hi[b] - hi[a]) + (lo[b] - lo[a])


@dataclass(frozen=True, eq=False)
class SortedRows:
    """Finite values of each row sorted ascending, rows concatenated, with prefix sums.

    Row ``r`` is ``values[starts[r]:starts[r + 1]]``; rows are units (the tensor, a channel or
    a group) in the C order of the parameter arrays. ``p1`` and ``p2`` are double-double prefix
    sums of ``x`` and ``x²`` over the concatenation (length ``values.size + 1``).
    """

    values: np.ndarray
    starts: np.ndarray
    p1: tuple[np.ndarray, np.ndarray]
    p2: tuple[np.ndarray, np.ndarray]
    n_nonfinite: int

    @property
    def n_rows(self) -> int:
        return self.starts.size - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    @classmethod
    def from_rows(cls, rows: list[tuple[np.ndarray, np.ndarray]], n_units: int) -> SortedRows:
        """Build from ``(unit_index, x2d)`` pairs: row ``i`` of ``x2d`` is unit ``unit_index[i]``."""
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
        v64 = values.astype(np.float64)
        p1 = dd_prefix(v64)
        np.multiply(v64, v64, out=v64)  # exact: a float32 squared has at most 48 bits
        p2 = dd_prefix(v64)
        return cls(values, starts, p1, p2, n_bad)


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
    counts: np.ndarray | None  # [evaluations, levels] code counts, clipped ones included


def _codes(x: np.ndarray, s: np.ndarray, z: np.ndarray, rule: tuple) -> np.ndarray:
    """Unclamped codes of ``x`` by the direct pass's own rule (float32 integers)."""
    qmin, qmax, rounding, arithmetic = rule
    return quantize_codes_float(np.ascontiguousarray(x, np.float32), s, z, qmin, qmax, rounding,
                                arithmetic)


def find_thresholds(rows: SortedRows, row: np.ndarray, s: np.ndarray, z: np.ndarray,
                    rule: tuple) -> np.ndarray | None:
    """Positions ``T[e, j]`` of the first element of row ``row[e]`` whose code is ``>= qmin + j``.

    Returns ``[E, levels + 1]`` global positions (``T[:, 0]`` ends the clipped-below elements,
    ``T[:, -1]`` starts the clipped-above ones), or None if the fix-up did not settle (never
    seen; the caller then evaluates element by element).
    """
    qmin, qmax = rule[0], rule[1]
    k = np.arange(qmin, qmax + 2, dtype=np.float64)
    s64 = s.astype(np.float64)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        est = ((k[None, :] - z[:, None] - 0.5) * s64).astype(np.float32)
    values, starts = rows.values, rows.starts
    pos = np.empty(est.shape, np.intp)
    order = np.argsort(row, kind="stable")
    bounds = np.searchsorted(row[order], np.arange(rows.n_rows + 1))
    for r in np.flatnonzero(np.diff(bounds)):
        e = order[bounds[r]:bounds[r + 1]]
        a, b = starts[r], starts[r + 1]
        pos[e] = np.searchsorted(values[a:b], est[e], side="left") + a
    lo = starts[row][:, None]
    hi = starts[row + 1][:, None]
    kk = np.broadcast_to(k.astype(np.float32)[None, :], est.shape)
    ss = np.broadcast_to(s[:, None], est.shape)
    zz = np.broadcast_to(z[:, None], est.shape)
    check = np.ones(est.shape, bool)
    for _ in range(_MAX_FIX_ROUNDS):
        idx = np.flatnonzero(check)
        if idx.size == 0:
            return pos
        p = pos.ravel()[idx]
        lo_i, hi_i = np.broadcast_to(lo, est.shape).ravel()[idx], np.broadcast_to(
            hi, est.shape).ravel()[idx]
        kv, sv, zv = kk.ravel()[idx], ss.ravel()[idx], zz.ravel()[idx]
        has_left = p > lo_i
        has_right = p < hi_i
        left_val = values[np.where(has_left, p - 1, 0)] if values.size else np.zeros(p.size)
        right_val = values[np.where(has_right, p, 0)] if values.size else np.zeros(p.size)
        go_left = has_left & (_codes(left_val, sv, zv, rule) >= kv)
        go_right = has_right & (_codes(right_val, sv, zv, rule) < kv)
        moved = go_left | go_right
        check[:] = False
        if not moved.any():
            return pos
        for i in np.flatnonzero(moved):
            flat = idx[i]
            a, b = lo_i[i], hi_i[i]
            if go_left[i]:
                new = np.searchsorted(values[a:b], left_val[i], side="left") + a
            else:
                new = np.searchsorted(values[a:b], right_val[i], side="right") + a
            pos.ravel()[flat] = new
            check.ravel()[flat] = True
    return None


def evaluate(rows: SortedRows, row: np.ndarray, scale, zero_point, rule: tuple,
             *, want_counts: bool = True) -> EvalStats:
    """Exact statistics of quantizing row ``row[e]`` with ``scale[e]``, ``zero_point[e]``.

    ``rule`` is ``(qmin, qmax, rounding, arithmetic)``. Matches the direct pass on the same
    elements: identical counts, clip counts and maximum error, sums within :data:`REL_TOL`.
    """
    qmin, qmax = rule[0], rule[1]
    row = np.asarray(row, np.intp)
    s = np.asarray(scale, np.float32).reshape(-1)
    z = np.asarray(zero_point, np.int32).reshape(-1)
    s, z = np.broadcast_to(s, row.shape), np.broadcast_to(z, row.shape)
    start, end = rows.starts[row], rows.starts[row + 1]
    pos = find_thresholds(rows, row, s, z, rule)
    if pos is None:
        return _evaluate_elementwise(rows, row, s, z, rule, want_counts)
    # Interval boundaries: [start, T0, T1, ..., T_levels, end]; interval 0 is clipped below
    # (dequantized to qmin), the last is clipped above (qmax); between them code qmin + j.
    edges = np.concatenate([start[:, None], pos, end[:, None]], axis=1)
    a, b = edges[:, :-1], edges[:, 1:]
    n_int = b - a
    codes = np.concatenate([[qmin], np.arange(qmin, qmax + 1), [qmax]]).astype(np.float32)
    xhat = ((codes[None, :] - z[:, None]).astype(np.float32) * s[:, None]).astype(np.float64)
    s1 = _interval_sum(*rows.p1, a, b)
    s2 = _interval_sum(*rows.p2, a, b)
    cross = xhat * s1
    nx2 = n_int * (xhat * xhat)
    err = s2 - 2.0 * cross + nx2
    np.maximum(err, 0.0, out=err)
    bound = 4.0 * _EPS * (s2 + 2.0 * np.abs(cross) + nx2)
    values = rows.values
    nonempty = n_int > 0
    if values.size:
        first = values[np.where(nonempty, a, 0)].astype(np.float64)
        last = values[np.where(nonempty, b - 1, 0)].astype(np.float64)
        worst = np.maximum(np.abs(first - xhat), np.abs(last - xhat))
        max_abs = np.max(np.where(nonempty, worst, 0.0), axis=1)
    else:
        max_abs = np.zeros(row.size)
    round_err = err[:, 1:-1].sum(axis=1)
    clip_err = err[:, 0] + err[:, -1]
    round_bound = bound[:, 1:-1].sum(axis=1)
    clip_bound = bound[:, 0] + bound[:, -1]
    shaky = (round_bound > REL_TOL * round_err) | (clip_bound > REL_TOL * clip_err)
    n = end - start
    if shaky.any():
        redo = np.flatnonzero(shaky)
        exact = _evaluate_elementwise(rows, row[redo], s[redo], z[redo], rule, False)
        round_err[redo] = exact.round_err
        clip_err[redo] = exact.clip_err
    counts = None
    if want_counts:
        counts = n_int[:, 1:-1].copy()
        counts[:, 0] += n_int[:, 0]
        counts[:, -1] += n_int[:, -1]
    nz = n > 0
    return EvalStats(
        n=n, round_err=round_err, clip_err=clip_err, below=n_int[:, 0], above=n_int[:, -1],
        max_abs=max_abs, sig=_interval_sum(*rows.p2, start, end),
        x_min=np.where(nz, values[np.where(nz, start, 0)] if values.size else 0.0, 0.0),
        x_max=np.where(nz, values[np.where(nz, end - 1, 0)] if values.size else 0.0, 0.0),
        counts=counts,
    )


def _evaluate_elementwise(rows: SortedRows, row: np.ndarray, s: np.ndarray, z: np.ndarray,
                          rule: tuple, want_counts: bool) -> EvalStats:
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
        v = _codes(x, s[e], z[e], rule)
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
    return EvalStats(counts=counts, **stats, **ints)
