"""The sweep of one box of scales (:func:`quantscope.core.formats.grid_bound.grid_sweep`)
against a sweep of every piece of the box.

The sweep passes most of a box on bucket sums: a bucket is passed when its bound reaches the
caller's best error or the least error of the pieces between buckets. Passing a bucket that
held the box's least error, or finding another scale of the same error first, would change
the search's pick; these tests compare the sweep with a reference that visits every piece
of the box in order of scale (its codes by a binary search, its error by the direct sum)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_format_mse import _sample, outlier_clusters

from quantscope.core.formats.catalog import element_of
from quantscope.core.formats.grid_bound import box_crossings, grid_runs, grid_sweep, new_scratch
from quantscope.core.stats.format_mse import FLOOR, grid_format

pytestmark = pytest.mark.compiles("the sweep of one box, called alone: the search calls it "
                                  "inside its own loop")


def _grid(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    et = element_of(name)
    return (np.ascontiguousarray(et.values, np.float64),
            np.ascontiguousarray(et.midpoints, np.float64), grid_format(et))


def _sweep(x: np.ndarray, name: str, s1: float, s2: float, best: float):
    """The engine's sweep of ``[s1, s2]`` on sorted ``x``: (found, error, scale, bound, the
    error at ``s1``)."""
    vals, mids, fmt = _grid(name)
    rlo, rhi, rf = new_scratch(vals.size)[:3]
    n = grid_runs(x, 0, x.size, np.zeros((1, 4)), 0, np.zeros(1, np.float32), 0, False, s1, s2,
                  vals, mids, fmt, rlo, rhi, rf)
    ne = max(box_crossings(rlo, rhi, rf, n), 1)
    ev = [np.empty(ne) for _ in range(3)]
    out = np.full(4, -1.0)
    found = grid_sweep(x, 0, rlo, rhi, rf, n, s1, s2, vals, mids, best, *ev, out)
    return found, out[0], out[1], out[2], out[3]


def _errors(x: np.ndarray, vals: np.ndarray, mids: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The error at each scale of ``s``: each element at the grid value nearest ``x / s``."""
    xs = x.astype(np.float64)
    v = vals[np.searchsorted(mids, xs[None, :] / s[:, None])]
    return np.sum((xs[None, :] - s[:, None] * v) ** 2, axis=1)


def _reference(x: np.ndarray, name: str, s1: float, s2: float):
    """Every piece of ``[s1, s2]``, largest scales first: (the float32 scales of the box
    beside each piece's vertex in that order, their errors, the least error over real
    scales)."""
    vals, mids, _ = _grid(name)
    xs = x.astype(np.float64)
    b = (xs[:, None] / mids[None, :])[(xs[:, None] > 0) == (mids[None, :] > 0)]
    b = np.unique(b[(b > s1) & (b < s2)])[::-1]
    edges = np.concatenate([[s2], b, [s1]])
    hi, lo = edges[:-1], edges[1:]
    v = vals[np.searchsorted(mids, xs[None, :] / (0.5 * (lo + hi))[:, None])]
    q1 = v @ xs
    q2 = np.sum(v * v, axis=1)
    vertex = np.clip(np.divide(q1, q2, out=hi.copy(), where=q2 > 0), lo, hi)
    q0 = float(xs @ xs)
    infimum = float(np.min(q0 - 2 * vertex * q1 + vertex * vertex * q2))
    f = vertex.astype(np.float32)
    cands = np.stack([np.nextafter(f, np.float32(np.inf)), f,
                      np.nextafter(f, np.float32(0))], axis=1).astype(np.float64)
    ok = (cands >= lo[:, None]) & (cands <= hi[:, None]) & (cands >= s1) & (cands <= s2)
    scales = cands[ok]  # piece by piece, each piece's from its largest
    return scales, _errors(x, vals, mids, scales), infimum


def _rows() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    bench = rng.standard_normal(1500).astype(np.float32)
    bench[:4] *= 10  # a bench weight's row: four inputs ten times larger
    return {"query row 0": _sample("layer0_query_weight")[0],
            "outlier clusters": outlier_clusters(11), "bench-like row": bench}


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp6_e3m2", "fp4_e2m1"])
def test_the_sweep_finds_the_least_error_of_every_piece(name):
    """With nothing to beat (the pieces between buckets alone prune), with a best just above
    the box's least error and with one just below: the least error and its scale, the
    bound below every real scale's error, and nothing reported when nothing beats the best.
    The sweep's errors are quadratics in the scale, each a difference of sums as large as
    Σx²: they agree with the direct sums to the search's own allowance for that rounding
    (``FLOOR · Σx²``)."""
    mx = element_of(name).max_finite
    vals, mids, _ = _grid(name)
    for label, x in _rows().items():
        x = np.sort(np.ascontiguousarray(x, np.float32))
        room = FLOOR * float(x.astype(np.float64) @ x)
        s_mm = float(np.float32(np.abs(x).max() / mx))
        for s1, s2 in ((s_mm, 1.4 * s_mm), (1.4 * s_mm, 2 * s_mm), (0.5 * s_mm, 1.01 * s_mm)):
            s1, s2 = float(np.float32(s1)), float(np.float32(s2))
            _, errs, infimum = _reference(x, name, s1, s2)
            least = float(errs.min())
            at_s1 = _errors(x, vals, mids, np.array([s1]))[0]
            for best in (np.inf, least * (1 + 1e-6)):
                found, err, s, bound, low_end = _sweep(x, name, s1, s2, best)
                assert found, (label, s1, s2, best)
                assert abs(low_end - at_s1) <= room, (label, s1, s2)
                assert abs(err - least) <= room, (label, s1, s2)
                # the scale is the least error's (of errors equal to that rounding, either)
                assert _errors(x, vals, mids, np.array([s]))[0] <= least + room
                assert bound <= infimum + room, (label, s1, s2)
            found, err, s, bound, low_end = _sweep(x, name, s1, s2, least * (1 - 1e-6))
            assert not found and err == -1.0 and s == -1.0, (label, s1, s2)
            assert abs(low_end - at_s1) <= room, (label, s1, s2)
            assert bound <= infimum + room


def test_of_equal_errors_the_largest_scale_is_found():
    """Values on the grid at every power-of-two scale: the error is exactly zero at each one
    in the box (and its pieces' sums are exact), and the sweep finds the largest, as a sweep
    of every piece from the top does -- also where the smaller one lies between buckets and
    the larger inside one."""
    x = np.sort(np.array([0.75, 1.0, -1.25, 1.5, -0.875, 0.5, 1.125, -1.5] * 40,
                         np.float32))
    scales, errs, _ = _reference(x, "fp8_e4m3", 2.0 ** -8 * 0.9, 2.0 ** -6 * 0.9)
    zero = scales[errs == 0.0]
    assert zero.size >= 2 and zero[0] == 2.0 ** -7  # the reference: both, the larger first
    for best in (np.inf, 1.0):
        found, err, s, _, _ = _sweep(x, "fp8_e4m3", 2.0 ** -8 * 0.9, 2.0 ** -6 * 0.9, best)
        assert found and err == 0.0 and s == 2.0 ** -7


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp6_e2m3", "fp4_e2m1"])
def test_a_walked_rows_runs_are_its_codes_and_their_running_sums(name):
    """A walked row's runs for a box (or one scale): each the longest stretch of one pair of
    codes at the box's ends (the number of midpoints below ``x · (1/s)``), its count and its
    sums the left-to-right float64 sums of its elements, bit for bit."""
    vals, mids, fmt = _grid(name)
    mx = element_of(name).max_finite
    for label, x in _rows().items():
        x = np.sort(np.ascontiguousarray(x, np.float32))
        xs = x.astype(np.float64)
        s_mm = float(np.float32(np.abs(x).max() / mx))
        for s1, s2 in ((s_mm, s_mm), (s_mm, 2 * s_mm), (0.7 * s_mm, 0.71 * s_mm)):
            s1, s2 = float(np.float32(s1)), float(np.float32(s2))
            rlo, rhi, rf = new_scratch(vals.size)[:3]
            n = grid_runs(x, 0, x.size, np.zeros((1, 4)), 0, np.zeros(1, np.float32), 0, False,
                          s1, s2, vals, mids, fmt, rlo, rhi, rf)
            c1 = np.searchsorted(mids, xs * (1.0 / s1))
            c2 = np.searchsorted(mids, xs * (1.0 / s2))
            lo, hi = np.minimum(c1, c2), np.maximum(c1, c2)
            ends = np.flatnonzero((np.diff(lo) != 0) | (np.diff(hi) != 0)) + 1
            edges = np.concatenate([[0], ends, [x.size]])
            assert n == edges.size - 1, (label, s1, s2)
            for r in range(n):
                p, q = int(edges[r]), int(edges[r + 1])
                sx = sxx = 0.0
                for v in xs[p:q]:
                    sx += v
                    sxx += v * v
                assert (rlo[r], rhi[r], rf[r, 0]) == (lo[p], hi[p], q - p), (label, r)
                assert rf[r, 1] == sx and rf[r, 2] == sxx, (label, r)


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp4_e2m1"])
def test_a_long_rows_runs_galloped_on_its_sample_are_its_walked_runs(name):
    """A row searched on its prefix sums finds each run's end on its sample (every
    ``SAMPLE``-th value) and then within one stretch of the row: the same runs -- codes and
    counts -- as a walk of the row, their sums the same to rounding, for boxes of several
    widths and a row that starts inside a longer array (its own sample after another's)."""
    from quantscope.core.formats.grid_bound import SAMPLE
    from quantscope.core.stats.prepared import prepare

    vals, mids, fmt = _grid(name)
    g = np.load(Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources"
                / "samples" / "layer0_ffn_gelu_activations.npy").astype(np.float32)
    first = np.sort(g.reshape(-1)[:3001])
    row = np.sort(g.reshape(-1)[5000:45000])
    values = np.concatenate([first, row])
    rec = prepare(row).layout(None, None).build_sums()
    k_rec = np.zeros((rec.records.shape[0] + 7, 4))
    k_rec[7:] = rec.records  # the row's records after another's
    smp = np.concatenate([first[::SAMPLE], row[::SAMPLE]])
    a, m0 = first.size, -(-first.size // SAMPLE)
    s_mm = float(np.float32(np.abs(row).max() / element_of(name).max_finite))
    for s1, s2 in ((s_mm, s_mm), (0.7 * s_mm, 0.71 * s_mm), (0.5 * s_mm, s_mm),
                   (s_mm, 2 * s_mm)):
        s1, s2 = float(np.float32(s1)), float(np.float32(s2))
        got = new_scratch(vals.size)[:3]
        n = grid_runs(values, a, values.size, k_rec, 7, smp, m0, True, s1, s2, vals, mids, fmt,
                      *got)
        want = new_scratch(vals.size)[:3]
        m = grid_runs(values, a, values.size, np.zeros((1, 4)), 0, smp, 0, False, s1, s2, vals,
                      mids, fmt, *want)
        assert n == m > 1, (s1, s2)
        assert np.array_equal(got[0][:n], want[0][:n]) and np.array_equal(got[1][:n],
                                                                           want[1][:n])
        assert np.array_equal(got[2][:n, 0], want[2][:n, 0])
        scale = np.abs(want[2][:n, 1:3]).sum(axis=0)
        assert np.all(np.abs(got[2][:n, 1:3] - want[2][:n, 1:3]) <= 1e-12 * scale)
