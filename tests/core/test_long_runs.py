"""A long row's search from its ladder of evaluated scales: a scale's runs found between two
other scales' runs are the ones a search of the whole row finds, a box's runs merged from its
ends' are ``runs_search``'s -- counts, sums and two-code bounds to the bit -- and a ladder too
small to keep every scale (boxes then search the row) changes nothing of the result."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.kernels import long_runs as lr
from quantscope.core.kernels import mse_bound as mb
from quantscope.core.kernels.block_sums import prefix_at
from quantscope.core.stats import mse_search
from quantscope.core.stats.prepared import prepare

# the long row's loops, each called here on its own (the app runs them inside rows_optimum,
# compiled with it): versions of their own, compiled once per cache
pytestmark = pytest.mark.compiles("the long row search's loops on their own")


def _rows(kind: str):
    """One long sorted row with its prefix records."""
    rng = np.random.default_rng(5)
    if kind == "weight":  # a bulk and a few far larger values, both signs
        x = rng.standard_normal(60_000) * 0.02
        x[rng.choice(x.size, 40, replace=False)] *= 12
    elif kind == "ties":  # multiples of 1/8 (rounding ties at many scales), runs of equals
        x = np.concatenate([np.round(rng.standard_normal(50_000) * 8) / 8, np.zeros(700)])
    else:  # one sign, far from 0
        x = 3.0 + np.abs(rng.standard_normal(40_000))
    rows = prepare(x.astype(np.float32)).layout(None, None)
    rows.sumsq  # noqa: B018 -- built before the search, as mse_search does
    return rows


def _codes(bits: int, symmetric: bool) -> tuple[int, int]:
    half = 1 << (bits - 1)
    return (-half + 1 if symmetric else -half), half - 1


def _buffers(qmin: int, qmax: int, n: int):
    k = qmax - qmin + 1
    per = min(n, 2 * k + 1)
    return (np.empty(8 * per, np.int64), np.empty(8 * per, np.int64), np.empty((8 * per, 4)),
            mb.new_scratch(qmin, qmax)[:3])


def _runs(rlo, rhi, rf, n):
    return rlo[:n].tobytes(), rhi[:n].tobytes(), rf[:n].tobytes()


@pytest.mark.parametrize("kind", ["weight", "ties", "positive"])
@pytest.mark.parametrize("bits", [8, 4, 2])
def test_ladder_runs_are_the_searched_runs(kind, bits):
    rows = _rows(kind)
    x, rec, n = rows.values, rows.records, rows.values.size
    qmin, qmax = _codes(bits, symmetric=False)
    k = qmax - qmin + 1
    s0 = float(mse_search.minmax_scales(rows, qmin, qmax, False)[0])
    pos, code, pre, (rlo, rhi, rf) = _buffers(qmin, qmax, n)
    g_end = prefix_at(x, 0, n, rec, 0)
    for lo_f, hi_f in [(0.5, 1.2), (0.97, 1.0), (0.999, 1.001), (1 - 1e-6, 1.0), (0.02, 0.03)]:
        s1, s2 = float(np.float32(s0 * lo_f)), float(np.float32(s0 * hi_f))
        e1 = lr.starts_at(x, 0, n, rec, 0, s1, k, pos, code, pre, 0, -1, -1, -1, -1)
        e2 = lr.starts_at(x, 0, n, rec, 0, s2, k, pos, code, pre, e1, -1, -1, -1, -1)
        for s, o, e in ((s1, 0, e1), (s2, e1, e2)):  # a scale's own runs
            got = lr.point_runs(pos, code, pre, o, e, n, g_end, rlo, rhi, rf)
            mine = _runs(rlo, rhi, rf, got)
            want = lr.runs_search(x, 0, n, rec, 0, s, s, k, rlo, rhi, rf)
            assert mine == _runs(rlo, rhi, rf, want)
        got = lr.box_runs(x, 0, n, rec, 0, s1, s2, pos, code, pre, 0, e1, e1, e2, g_end, rlo,
                          rhi, rf)
        mine = _runs(rlo, rhi, rf, got)
        want = lr.runs_search(x, 0, n, rec, 0, s1, s2, k, rlo, rhi, rf)
        assert mine == _runs(rlo, rhi, rf, want), (lo_f, hi_f)
        # a scale between them, its runs found between theirs: the whole row's search's
        mid = float(np.float32(np.sqrt(s1 * s2)))
        e3 = lr.starts_at(x, 0, n, rec, 0, mid, k, pos, code, pre, e2, 0, e1, e1, e2)
        e4 = lr.starts_at(x, 0, n, rec, 0, mid, k, pos, code, pre, e3, -1, -1, -1, -1)
        assert e4 - e3 == e3 - e2
        for col in (pos, code, pre):
            assert col[e2:e3].tobytes() == col[e3:e4].tobytes()


def _optimum(rows, bits, symmetric, entries, scales):
    qmin, qmax = _codes(bits, symmetric)
    s0 = mse_search.minmax_scales(rows, qmin, qmax, symmetric)
    out = np.zeros(5)
    z_fixed = mse_search.symmetric_zero_point(qmin, qmax) if symmetric else qmin - 1
    mb.long_row_optimum(rows.values, 0, rows.values.size, rows.records, 0, qmin, qmax, z_fixed,
                        max(mse_search.F_MIN * s0[0], mse_search._TINY32),
                        mse_search.S_MAX * s0[0], float(np.float32(s0[0])), mse_search.EPS,
                        mse_search.FLOOR * rows.sumsq[0], mse_search.GRID,
                        mse_search.MAX_BOXES, out, mb.new_scratch(qmin, qmax), entries, scales)
    return out


@pytest.mark.parametrize("bits,symmetric", [(8, False), (4, True), (2, False)])
def test_a_ladder_without_room_gives_the_same_optimum(bits, symmetric):
    rows = _rows("weight")
    full = _optimum(rows, bits, symmetric, lr.LADDER_ENTRIES, lr.LADDER_SCALES)
    assert full[3] == 1.0 and full[4] > 20  # proven, after boxes enough to fill a small ladder
    for entries, scales in [(0, 0), (4 * (2 << bits), 1 << 20), (1 << 20, 12)]:
        assert _optimum(rows, bits, symmetric, entries, scales).tobytes() == full.tobytes()
