"""A NumPy twin of the integer MSE search's compiled loop (``mse_bound.rows_optimum``) for long
rows: the same scale, zero point, error, proof flag and box count, bit for bit.

On a machine's first run the branch and bound of :mod:`quantscope.core.kernels.mse_bound` (with
:mod:`quantscope.core.kernels.mse_sweep`) is the one loop a ``--screenshot`` of the demo still
compiled: half a minute on two idle cores, for the trade-off curve's "best" (the per-tensor
optimum of both schemes). Its result is the best scale the search *evaluated* -- within
``eps`` of the optimum, not necessarily the float32 argmin, since a flat basin's neighbouring
scales differ by less than that -- so a different exact algorithm could pick a neighbouring
scale. This twin therefore takes the same steps: the same starting grid, the same heap of
boxes popped in the same order (:func:`_heap_push` and :func:`_heap_pop` are ``box_heap``'s
sift-up and sift-down, whose order among equal keys a library heap would not keep), the same
bound of each box, the same float64 expressions in the same order.

Only the per-box work is written differently, as whole-array steps instead of one element or
run at a time, each giving the compiled loop's very values:

* a row's codes at one scale, ``clamp(rint(x · (1/s)))``, are monotone in the sorted values,
  so its runs start where the code first exceeds each value: a binary search per code,
  all codes at once (:func:`_runs_at`); a box's runs start where either end's do (the same
  union ``runs_between`` takes), and the gallop of ``runs_search`` finds exactly those starts;
* the sums of a run are differences of the row's double-double running sums at its ends, each
  carried from its block record as ``block_sums.prefix_at`` does (:func:`_prefixes`; the twins'
  :func:`~quantscope.core.stats.twin_sums.running_sums`, step by step, padded with zeros, which
  change neither part of a sum that is never ``-0.0``);
* the zero points' bounds (``z_bounds``) take each zero point's four run pointers by
  ``searchsorted`` on the runs' codes (monotone, as the compiled pointers that only move
  forward), and running sums over runs by ``np.cumsum`` (sequential, as the loop's);
* a strict "less than the best so far" scan over zero points keeps the first least value, as
  ``np.argmin`` does.

Rows shorter than ``mse_search.SEARCH_ROWS`` (walked by the loop, settled by sweeps) and calls
with more than :data:`MAX_TWIN_ROWS` rows go to the compiled loop itself
(:func:`quantscope.core.kernels.compiled.loop`): the twin is a stand-in for the first run's
per-tensor optimum, some twenty times slower per box than the loop (the demo tensor's
optimum: 35-65 ms of processor time per scheme against 2 ms).
"""

from __future__ import annotations

import math

import numpy as np

from quantscope.core.kernels import compiled
from quantscope.core.stats.twin_sums import KEEP_PREFIXES_MAX, row_prefixes, running_sums

#: Elements per prefix-sum record (``block_sums.BLOCK``; a test holds the two equal).
BLOCK = 128
#: The most rows one call serves here; a call with more is the compiled loop's (the search
#: hands each of its 32 shares of rows to a call: more than this are ~100 long rows, whose
#: search by the twin would take about as long as compiling the loop).
MAX_TWIN_ROWS = 4
#: How far (relative) either side of ``(m + 1/2)·s`` the first element of code above ``m`` is
#: looked for before the whole row is (the product ``x · (1/s)`` is off by an ulp or two).
NEAR = 1e-6
_TINY = float(np.finfo(np.float64).tiny)


def rows_optimum(values, starts, rec, rec_starts, search, rows, qmin, qmax, z_fixed, s_lo, s_hi,
                 s_mm, eps, floor, grid, max_boxes, sweep_crossings, out) -> None:
    """``mse_bound.rows_optimum`` in NumPy for searched rows (module doc); anything else is
    handed to the compiled loop, arguments unchanged."""
    if rows.size > MAX_TWIN_ROWS or not np.all(search):
        compiled.loop("rows_optimum")(values, starts, rec, rec_starts, search, rows, qmin, qmax,
                                      z_fixed, s_lo, s_hi, s_mm, eps, floor, grid, max_boxes,
                                      sweep_crossings, out)
        return
    for e in range(rows.size):
        r = int(rows[e])
        _Unit(values, int(starts[r]), int(starts[r + 1]), rec, int(rec_starts[r]), int(qmin),
              int(qmax)).optimum(int(z_fixed), float(s_lo[e]), float(s_hi[e]), float(s_mm[e]),
                                 float(eps), float(floor[e]), grid, int(max_boxes), out[e])


def _f32(v: float) -> float:
    """``np.float64(np.float32(v))``."""
    return float(np.float32(v))


class _Unit:
    """One sorted row ``values[a:b]`` with its block records from ``rec[k0]``, searched for
    codes ``[qmin, qmax]`` (``mse_bound.long_row_optimum``)."""

    def __init__(self, values, a: int, b: int, rec, k0: int, qmin: int, qmax: int) -> None:
        self.x, self.a, self.b, self.rec, self.k0 = values, a, b, rec, k0
        self.qmin, self.qmax = qmin, qmax
        self.k = qmax - qmin + 1
        self.runs: dict[float, np.ndarray] = {}  # scale -> where its runs start
        # the row's running sums at every position, when they fit (else carried per position)
        self.sums = (row_prefixes(values[a:b], values[a:b].astype(np.float64))
                     if b - a <= KEEP_PREFIXES_MAX else None)

    # -- codes and runs -----------------------------------------------------------------------
    def _codes(self, pos: np.ndarray, inv: float) -> np.ndarray:
        """``run_ends._code`` of the elements at ``pos``."""
        r = np.rint(self.x[pos].astype(np.float64) * inv)
        return np.clip(r, -self.k, self.k).astype(np.int64)

    def _first(self, lo: np.ndarray, hi: np.ndarray, holds) -> np.ndarray:
        """For each entry, the first position in ``[lo, hi)`` where ``holds(values, entry)``
        (false, then true along the sorted row), else ``hi``: a binary search, all at once."""
        lo, hi = lo.copy(), hi.copy()
        idx = np.arange(lo.size)
        while True:
            act = np.flatnonzero(lo < hi)
            if act.size == 0:
                return lo
            mid = (lo[act] + hi[act]) >> 1
            ok = holds(self.x[mid].astype(np.float64), idx[act])
            hi[act] = np.where(ok, mid, hi[act])
            lo[act] = np.where(ok, lo[act], mid + 1)

    def _runs_at(self, s: float) -> np.ndarray:
        """Where the runs of one code start at scale ``s`` (``runs_search(s, s)``'s starts)."""
        starts = self.runs.get(s)
        if starts is not None:
            return starts
        inv = 1.0 / s
        ends = self._codes(np.array([self.a, self.b - 1]), inv)
        m = np.arange(ends[0], ends[1], dtype=np.int64)  # each code some element exceeds
        # the first element of code above m lies near (m + 1/2)·s: a binary search between
        # bounds a little either side, each checked (else the whole row)
        t = (m + 0.5) * s
        lo = self._above(t - np.abs(t) * NEAR - _TINY, self.a, self.b)
        hi = self._above(t + np.abs(t) * NEAR + _TINY, self.a, self.b)

        def above_m(v: np.ndarray, i: np.ndarray) -> np.ndarray:
            return np.clip(np.rint(v * inv), -self.k, self.k) > m[i]

        every = np.arange(m.size)
        before = np.maximum(lo - 1, self.a)
        bad = ((lo > self.a) & above_m(self.x[before].astype(np.float64), every)) | (
            (hi < self.b) & ~above_m(self.x[np.minimum(hi, self.b - 1)].astype(np.float64),
                                     every))
        lo[bad], hi[bad] = self.a, self.b
        starts = np.unique(np.concatenate([[self.a], self._first(lo, hi, above_m)]))
        self.runs[s] = starts
        return starts

    def _above(self, t: np.ndarray, lo, hi) -> np.ndarray:
        """``sorted_kernel._upper_bound``: the first position in ``[lo, hi)`` whose value is above
        ``t`` (float64), else ``hi``. Above ``t`` is above the largest value of the row's type
        not above it: one search in the row's own type, exact."""
        d = _toward(t, self.x.dtype, -np.inf)
        return np.clip(self.a + np.searchsorted(self.x[self.a:self.b], d, "right"), lo, hi)

    def _not_below(self, t: np.ndarray, lo, hi) -> np.ndarray:
        """``run_ends._first_not_below``: the first position in ``[lo, hi)`` whose value is
        at least ``t``, else ``hi`` (as :meth:`_above`)."""
        u = _toward(t, self.x.dtype, np.inf)
        return np.clip(self.a + np.searchsorted(self.x[self.a:self.b], u, "left"), lo, hi)

    def _prefixes(self, pos: np.ndarray) -> np.ndarray:
        """``block_sums.prefix_at`` of each position: (Σx hi, Σx lo, Σx² hi, Σx² lo) rows,
        looked up in the row's running sums or carried on from the block records."""
        if self.sums is not None:
            return np.stack([t[pos - self.a] for t in self.sums], axis=1)
        q = (pos - self.a) // BLOCK
        base = self.rec[self.k0 + q]
        left = pos - self.a - q * BLOCK  # elements carried on from the record
        width = int(left.max()) if pos.size else 0
        if width == 0:
            return base.copy()
        col = np.arange(width)
        take = col[None, :] < left[:, None]
        at = np.where(take, (self.a + q * BLOCK)[:, None] + col[None, :], 0)
        v = np.where(take, self.x[at].astype(np.float64), 0.0)
        h1, l1 = running_sums(base[:, 0], base[:, 1], v)
        h2, l2 = running_sums(base[:, 2], base[:, 3], v * v)
        return np.stack([h1[:, -1], l1[:, -1], h2[:, -1], l2[:, -1]], axis=1)

    def _box_runs(self, s1: float, s2: float):
        """``runs_search`` of the box ``[s1, s2]``: each run's lower and upper code and its
        count, Σx, Σx² and two-code bound."""
        p = np.union1d(self._runs_at(s1), self._runs_at(s2))
        q = np.append(p[1:], self.b)
        c1 = self._codes(p, 1.0 / s1)
        c2 = self._codes(p, 1.0 / s2)
        rlo, rhi = np.minimum(c1, c2), np.maximum(c1, c2)
        two = np.flatnonzero(rhi == rlo + 1)
        vl, vh = rlo[two].astype(np.float64), rhi[two].astype(np.float64)
        hi_lo = np.maximum(s1 * vl, s2 * vl)
        lo_hi = np.minimum(s1 * vh, s2 * vh)
        gap = np.flatnonzero(hi_lo < lo_hi)  # among the two-code runs
        g_lo, g_hi = hi_lo[gap], lo_hi[gap]
        centre = 0.5 * (g_lo + g_hi)
        gp, gq = p[two[gap]], q[two[gap]]
        p1 = self._above(g_lo, gp, gq)
        pm = self._above(centre, p1, gq)
        p2 = self._not_below(g_hi, pm, gq)
        pre = self._prefixes(np.concatenate([p, [self.b], p1, pm, p2]))
        n, ng = p.size, gap.size
        at_p, at_q = pre[:n], pre[1:n + 1]
        at_1, at_m, at_2 = (pre[n + 1 + i * ng:n + 1 + (i + 1) * ng] for i in range(3))
        sx, sxx = _dd(at_p, at_q)
        sx1, sxx1 = _dd(at_1, at_m)
        sx2, sxx2 = _dd(at_m, at_2)
        bound = 0.0 + (sxx1 - 2.0 * g_lo * sx1 + g_lo * g_lo * (pm - p1))
        bound = bound + (sxx2 - 2.0 * g_hi * sx2 + g_hi * g_hi * (p2 - pm))
        lb = np.zeros(n)
        lb[two[gap]] = np.maximum(bound, 0.0)
        return rlo, rhi, (q - p).astype(np.float64), sx, sxx, np.maximum(lb, 0.0)

    # -- bounds per zero point ----------------------------------------------------------------
    def _z_bounds(self, runs, s1: float, s2: float, za: int, zb: int) -> np.ndarray:
        """``mse_bound.z_bounds``: each zero point's bound over the box, ``za`` to ``zb``."""
        rlo, rhi, cnt, sx, sxx, two_lb = runs
        one = rlo == rhi
        m = rlo.astype(np.float64)
        zero = np.zeros(1)
        cum = [np.concatenate([zero, np.cumsum(t)]) for t in (
            cnt, sx, sxx, np.where(one, sxx, 0.0), np.where(one, m * sx, 0.0),
            np.where(one, m * m * cnt, 0.0), np.where(rhi == rlo + 1, two_lb, 0.0))]
        n = rlo.size
        z = np.arange(za, zb + 1, dtype=np.int64)
        lo_code, hi_code = self.qmin - z, self.qmax - z
        below = np.searchsorted(rhi, lo_code, "left")
        inner = np.searchsorted(rlo, lo_code, "left")
        inner_end = np.searchsorted(rhi, hi_code, "right")
        above = np.searchsorted(rlo, hi_code, "right")
        e_lo, e_hi = lo_code.astype(np.float64), hi_code.astype(np.float64)
        nb, sxb, sxxb = cum[0][below], cum[1][below], cum[2][below]
        na = cum[0][n] - cum[0][above]
        sxa = cum[1][n] - cum[1][above]
        sxxa = cum[2][n] - cum[2][above]
        q0 = sxxb + sxxa
        q1 = e_lo * sxb + e_hi * sxa
        q2 = e_lo * e_lo * nb + e_hi * e_hi * na
        has = inner_end > inner
        q0 = np.where(has, q0 + (cum[3][inner_end] - cum[3][inner]), q0)
        q1 = np.where(has, q1 + (cum[4][inner_end] - cum[4][inner]), q1)
        q2 = np.where(has, q2 + (cum[5][inner_end] - cum[5][inner]), q2)
        t = np.where(has, cum[6][inner_end] - cum[6][inner], 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            vertex = np.minimum(np.maximum(q1 / q2, s1), s2)
        s = np.where(q2 > 0.0, vertex, np.where(q1 > 0.0, s2, s1))
        return q0 - 2.0 * q1 * s + q2 * s * s + t

    # -- the search ---------------------------------------------------------------------------
    def optimum(self, z_fixed: int, s_lo: float, s_hi: float, s_mm: float, eps: float,
                floor: float, grid, max_boxes: int, out) -> None:
        """``mse_bound.long_row_optimum`` of this searched row into ``out`` (error, scale, zero
        point, proven, boxes)."""
        qmin, qmax = self.qmin, self.qmax
        z0, z1 = (z_fixed, z_fixed) if z_fixed >= qmin else (qmin, qmax)
        best, best_s, best_z = math.inf, s_mm, z0
        pts = np.empty(grid.size + 3)
        pts[0], pts[1], pts[2] = _f32(s_lo), _f32(s_hi), s_mm
        for i in range(grid.size):
            pts[i + 3] = min(max(_f32(s_mm * float(grid[i])), pts[0]), pts[1])
        pts = np.unique(pts)  # mse_bound's small_unique: the same values in the same order
        for s in pts.tolist():
            lb = self._z_bounds(self._box_runs(s, s), s, s, z0, z1)
            t = _first_below(lb, best)
            if t >= 0:
                best, best_s, best_z = float(lb[t]), s, z0 + t
        heap: list[tuple[float, float, float, int, int]] = []
        for i in range(pts.size - 1):
            _heap_push(heap, (-math.inf, float(pts[i]), float(pts[i + 1]), z0, z1))
        boxes = 0
        proven = 1.0
        while heap:
            key, s1, s2, za, zb = _heap_pop(heap)
            threshold = best * (1.0 - eps) - floor
            if key >= threshold:
                break
            if boxes >= max_boxes:
                proven = 0.0
                break
            boxes += 1
            runs = self._box_runs(s1, s2)
            lb = self._z_bounds(runs, s1, s2, za, zb)
            alive = np.flatnonzero(lb < threshold)
            if alive.size == 0:
                continue
            lo_z, hi_z = za + int(alive[0]), za + int(alive[-1])
            low = float(np.min(lb[alive]))
            f = _free_zero_point(runs[0], runs[1], qmin, qmax, za, zb, lb)
            if f >= za:
                low = float(lb[f - za])
                if low >= threshold:
                    continue
                lo_z, hi_z = f, f
            mid = _f32(math.sqrt(s1 * s2))
            if not s1 < mid < s2:
                mid = _f32(0.5 * (s1 + s2))
            if not s1 < mid < s2:
                continue  # no float32 scale inside: its ends were evaluated
            lb = self._z_bounds(self._box_runs(mid, mid), mid, mid, lo_z, hi_z)
            t = _first_below(lb, best)
            if t >= 0:
                best, best_s, best_z = float(lb[t]), mid, lo_z + t
            _heap_push(heap, (low, s1, mid, lo_z, hi_z))
            _heap_push(heap, (low, mid, s2, lo_z, hi_z))
        out[0] = max(best, 0.0)
        out[1] = best_s
        out[2] = self._lowest_alike(best_s, best_z, z0)
        out[3] = proven
        out[4] = boxes

    def _lowest_alike(self, s: float, z: int, z0: int) -> int:
        """``mse_bound._lowest_alike``: the lowest zero point with zero point ``z``'s errors."""
        if self.b <= self.a:
            return z
        c_lo, c_hi = self._codes(np.array([self.a, self.b - 1]), 1.0 / s).tolist()
        if not (self.qmin <= c_lo + z and c_hi + z <= self.qmax):
            return z
        return max(self.qmin - c_lo, z0)


def _toward(t: np.ndarray, dtype, direction: float) -> np.ndarray:
    """Each of ``t`` rounded to ``dtype`` toward ``direction`` (-inf: the largest value not
    above it; +inf: the least not below it)."""
    with np.errstate(over="ignore"):
        f = t.astype(dtype)
    wrong = f.astype(np.float64) > t if direction < 0 else f.astype(np.float64) < t
    return np.where(wrong, np.nextafter(f, dtype.type(direction)), f)


def _dd(g: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``long_runs._dd`` of rows of prefixes: ``(Σx, Σx²)`` from ``g`` to ``h``."""
    return ((h[:, 0] - g[:, 0]) + (h[:, 1] - g[:, 1]),
            (h[:, 2] - g[:, 2]) + (h[:, 3] - g[:, 3]))


def _first_below(lb: np.ndarray, best: float) -> int:
    """Where a scan keeping each value strictly below the best so far ends: the first least
    value of ``lb`` when it is below ``best``, else -1."""
    below = lb < best
    if not below.any():
        return -1
    return int(np.argmin(np.where(below, lb, np.inf)))


def _free_zero_point(rlo, rhi, qmin: int, qmax: int, za: int, zb: int, lb) -> int:
    """``mse_bound._free_zero_point``: the zero point of ``[za, zb]`` that clamps nothing in the
    box with the highest bound (the first such), or ``za − 1``."""
    if rlo.size == 0:
        return za - 1
    f_lo = max(qmin - int(rlo[0]), za)
    f_hi = min(qmax - int(rhi[-1]), zb)
    if f_hi < f_lo:
        return za - 1
    return f_lo + int(np.argmax(lb[f_lo - za:f_hi - za + 1]))


def _heap_push(heap: list, box: tuple) -> None:
    """``box_heap.heap_push``: sift up from the end, stopping at a parent whose key is not
    above the new one's."""
    heap.append(box)
    i = len(heap) - 1
    key = box[0]
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent][0] <= key:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = box


def _heap_pop(heap: list) -> tuple:
    """``box_heap.heap_pop``: the root, the last entry sifted down from the top in its place."""
    root = heap[0]
    last = heap.pop()
    size = len(heap)
    if size == 0:
        return root
    key = last[0]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and heap[c + 1][0] < heap[c][0]:
            c += 1
        if key <= heap[c][0]:
            break
        heap[i] = heap[c]
        i = c
    heap[i] = last
    return root
