"""The engine's pick among the search's float32 scale and its two neighbours, proven from the
scale's runs (``neighbour_pick``), is the three-evaluation rule's wherever it is given -- for
every rounding and arithmetic the presets use, on rows with values on and beside rounding
ties -- and the search's results with it are those of evaluating all three."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.kernels import mse_bound as mb
from quantscope.core.kernels.neighbour_pick import KAPPA, neighbour_pick
from quantscope.core.stats import mse_search as ms
from quantscope.core.stats.prepared import prepare

# the pick's loop called here on its own (the app runs it inside rows_optimum, compiled with
# it): versions of its own, compiled once per cache
pytestmark = pytest.mark.compiles("the engine pick's loop on its own")

RULES = [(r, a) for r in ("half_even", "half_away")
         for a in ("divide", "multiply", "fma", "multiply_add", "divide64")]
LENGTH = 512


def _rows(s_tie: float) -> np.ndarray:
    """Rows of :data:`LENGTH` values: LLM channels (outliers at both ends), groups at other
    spreads, and rows whose values sit on rounding ties of the scale ``s_tie`` (``(m + 1/2)·s``
    exactly) or a float32 step or two beside them, or just beyond the pick's margin."""
    rng = np.random.default_rng(11)
    rows = []
    for spread in (0.02, 0.05, 1.0, 3e-3):
        for _ in range(6):
            v = rng.standard_normal(LENGTH) * spread
            v[:3] *= 10
            rows.append(v)
    m = rng.integers(-60, 60, LENGTH).astype(np.float64)
    tie = (m + 0.5) * s_tie
    rows.append(tie)
    for steps in (1, 2, -1, -2):
        rows.append(np.nextafter(tie.astype(np.float32), np.float32(np.sign(steps) * np.inf))
                    if abs(steps) == 1 else
                    np.nextafter(np.nextafter(tie.astype(np.float32),
                                              np.float32(np.sign(steps) * np.inf)),
                                 np.float32(np.sign(steps) * np.inf)))
    for f in (0.5, 2.0, 40.0):  # half the margin, twice it, well beyond it (y ~ 60)
        rows.append(tie * (1 + f * KAPPA * 1.5 * np.sign(m + 0.5)))
    return np.stack([np.asarray(r, np.float64) for r in rows]).astype(np.float32)


def _kernel_picks(x: np.ndarray, s: float, z: int, qmin: int, qmax: int) -> float:
    k = qmax - qmin + 1
    pre = np.empty((x.size + 1, 4))
    mb.unit_prefix(x, 0, x.size, pre)
    pos, code = np.empty(x.size + 1, np.int64), np.empty(x.size + 1, np.int64)
    n = mb.codes_at(x, 0, x.size, s, k, pos, code, 0, *mb.code_scratch(x.size))
    return neighbour_pick(x, 0, x.size, pre, pos, code, 0, n, s, z, qmin, qmax)


@pytest.mark.parametrize("bits", [8, 4, 2])
def test_a_proven_pick_is_the_three_evaluation_rules_for_every_rule(bits):
    s_tie = 2.0**-7
    data = _rows(s_tie)
    rows = prepare(data).layout(0, None)
    values = [rows.values[rows.starts[r]:rows.starts[r + 1]] for r in range(rows.n_rows)]
    outcomes = {-1.0: 0, 0.0: 0, 1.0: 0}
    unproven = np.zeros(rows.n_rows, np.int64)
    cases = 0
    for symmetric in (False, True):
        qmin, qmax = (-(2 ** (bits - 1)) + symmetric, 2 ** (bits - 1) - 1)
        s_mm = ms.minmax_scales(rows, qmin, qmax, symmetric)
        zs = [0] if symmetric else [qmin, -1, 0, qmax // 2]
        found = ms.mse_search(rows, qmin=qmin, qmax=qmax, symmetric=symmetric)
        trials = [(found.scale.astype(np.float64), found.zero_point.astype(np.int64))]
        for f in (0.93, 0.97, 0.99, 1.0, 1.02):
            scales = np.float32(s_mm * f).astype(np.float64)
            scales[-8:] = s_tie  # the tie rows at their own scale
            trials += [(scales, np.full(rows.n_rows, z, np.int64)) for z in zs]
        for scales, zz in trials:
            got = np.array([_kernel_picks(values[r], scales[r], zz[r], qmin, qmax)
                            for r in range(rows.n_rows)])
            for rounding, arithmetic in RULES:
                chosen, _, _ = ms._engine_pick(rows, scales, zz, np.full(rows.n_rows, np.nan),
                                               (qmin, qmax, rounding, arithmetic))
                s32 = scales.astype(np.float32)
                want = np.sign(chosen.astype(np.float64) - s32.astype(np.float64))
                proven = np.isfinite(got)
                assert np.array_equal(got[proven], want[proven]), (rounding, arithmetic)
            for g in got[proven]:
                outcomes[g] += 1
            unproven += ~proven
            cases += 1
    # rows whose values sit on ties, a float32 step or two beside them or within half the
    # margin are never proven; the ordinary rows mostly are, each outcome many times
    assert (unproven[-8:-2] >= cases - 2).all()  # (but at the search's own scales)
    assert unproven[:-8].sum() < 0.1 * cases * (rows.n_rows - 8)
    assert min(outcomes.values()) > (10 if bits == 8 else 0)


def test_an_element_on_a_tie_or_within_the_margin_leaves_the_pick_unproven():
    s = 2.0**-7
    m = np.arange(-20, 20, dtype=np.float64)
    base = np.sort((m + 0.5) * s + 0.25 * s)  # a quarter code from every tie: proven
    assert np.isfinite(_kernel_picks(base.astype(np.float32), s, 0, -128, 127))
    for d in (0.0, 0.5, -0.5):  # on a tie; half the margin above and below it
        x = base.copy()
        y = 7.5
        x[27] = (y + d * KAPPA * (abs(y) + 1.0)) * s  # code 7's run ends on it
        x = np.sort(x.astype(np.float32))
        assert np.isnan(_kernel_picks(x, s, 0, -128, 127)), d
        # the zero point widens the margin of a fused arithmetic: 100 codes more
        assert np.isnan(_kernel_picks(x, s, 100, -128, 127)) or d == 0.0


def test_the_search_with_proven_picks_gives_the_three_evaluation_rules_results():
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((96, 1024)) * 0.02).astype(np.float32)
    w[:, rng.choice(1024, 3, replace=False)] *= 10
    rows = prepare(w).layout(0, None)
    seen = {}

    def spy(rows, s, z, proven, rule):
        seen["args"] = (s, z, proven)
        return pick(rows, s, z, proven, rule)

    pick = ms._engine_pick
    for symmetric in (False, True):
        qmin, qmax = (-127 if symmetric else -128), 127
        for rounding, arithmetic in (("half_even", "divide"), ("half_away", "multiply_add")):
            rule = (qmin, qmax, rounding, arithmetic)
            try:
                ms._engine_pick = spy
                found = ms.mse_search(rows, qmin=qmin, qmax=qmax, symmetric=symmetric,
                                      rounding=rounding, arithmetic=arithmetic)
            finally:
                ms._engine_pick = pick
            s, z, proven = seen["args"]
            assert np.isfinite(proven).mean() > 0.8  # most rows proven, none evaluated
            assert np.isnan(found.known).sum() == np.isfinite(proven).sum()
            scale, zp, error = pick(rows, s, z, np.full(rows.n_rows, np.nan), rule)
            assert np.array_equal(found.scale, scale) and np.array_equal(found.zero_point, zp)
            assert np.array_equal(found.error, error)  # evaluated now, the report's
            assert not np.isnan(found.known).any()


def test_the_output_column_of_the_pick_is_the_loops():
    assert ms.OUT_PICK == mb.OUT_PICK
    out = ms.result_rows(3)
    assert out.shape == (3, mb.OUT_PICK + 1) and np.isnan(out[:, mb.OUT_PICK]).all()
