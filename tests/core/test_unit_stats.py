"""Each unit's statistics, computed in pieces over the engine's threads, are the numbers the
whole-column NumPy formulas give, bit for bit, whatever the split."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.kernels.parallel import PARALLEL_MIN
from quantscope.core.stats import report
from quantscope.core.stats.report import UnitTotals, sqnr_db, unit_stats


def _totals(m: int, seed: int) -> UnitTotals:
    """Units that hit every rule: empty ones, exact ones (error 0 -> inf dB, a -0.0 largest
    error), silent ones with error (-inf dB), NaN sums, and ordinary ones."""
    r = np.random.default_rng(seed)
    t = UnitTotals(m, 16)
    t.n[:] = r.integers(0, 4, m)
    t.round_err[:] = np.where(r.random(m) < 0.1, 0.0, r.random(m) * 1e-3)
    t.round_err[r.random(m) < 0.01] = np.nan
    t.clip_err[:] = np.where(r.random(m) < 0.7, 0.0, r.random(m))
    t.sig[:] = np.where(r.random(m) < 0.2, 0.0, r.random(m) * 5)
    t.max_abs[:] = r.choice([-0.0, 0.0, 0.25, 3.0], m)
    t.x_min[:] = r.standard_normal(m)
    t.x_max[:] = r.standard_normal(m)
    return t


def _whole_columns(t: UnitTotals) -> dict[str, np.ndarray]:
    err = t.round_err + t.clip_err
    with np.errstate(invalid="ignore", divide="ignore"):
        nn = np.maximum(t.n, 1)
        return {"mse": err / nn, "rounding_mse": t.round_err / nn,
                "clipping_mse": t.clip_err / nn, "sqnr_db": sqnr_db(t.sig, err),
                "max_abs_error": t.max_abs + 0.0, "x_min": np.where(t.n > 0, t.x_min, 0.0),
                "x_max": np.where(t.n > 0, t.x_max, 0.0)}


@pytest.mark.parametrize("m", [1, 1000, PARALLEL_MIN + 12_345, 3 * report.UNIT_PIECE + 7])
def test_unit_stats_are_the_whole_column_formulas_bit_for_bit(m):
    t = _totals(m, m)
    got = unit_stats(t)
    for name, want in _whole_columns(t).items():
        have = getattr(got, name)
        assert have.dtype == want.dtype and have.shape == want.shape, name
        assert have.tobytes() == want.tobytes(), name
    if m >= 1000:  # every rule met
        assert np.isneginf(got.sqnr_db).any() and np.isposinf(got.sqnr_db).any()
        assert np.isnan(got.sqnr_db).any() and (got.x_min == 0).any()
    assert not np.signbit(got.max_abs_error[t.max_abs == 0]).any()  # -0.0 made 0.0
    assert got.n is t.n and got.codes_used is t.codes  # counts are the totals themselves


def test_small_pieces_split_the_same(monkeypatch):
    t = _totals(PARALLEL_MIN + 999, 7)
    whole = unit_stats(t)
    monkeypatch.setattr(report, "UNIT_PIECE", 1000)  # many pieces per thread, a short last one
    pieces = unit_stats(t)
    for name in _whole_columns(t):
        assert getattr(pieces, name).tobytes() == getattr(whole, name).tobytes(), name


@pytest.mark.parametrize("m", [1, 1000, PARALLEL_MIN + 12_345])
def test_columns_formed_when_first_read_are_the_eager_ones(m):
    t = _totals(m, m + 1)
    lazy = report.UnitStats.of_totals(t)
    assert "sqnr_db" not in vars(lazy)  # nothing formed yet
    assert lazy.n is t.n and lazy.clipped_below is t.below and lazy.codes_used is t.codes
    eager = unit_stats(t)
    assert lazy.x_max.tobytes() == eager.x_max.tobytes()  # one read forms them all
    assert set(report.FORMED) <= set(vars(lazy))
    for name in report.FORMED:
        assert getattr(lazy, name).tobytes() == getattr(eager, name).tobytes(), name
    assert lazy.worst(3).tolist() == eager.worst(3).tolist()
    with pytest.raises(AttributeError):
        lazy.no_such_column  # noqa: B018


def test_a_report_keeps_its_largest_error_without_the_column():
    """The report's largest error is the largest of the units' (each -0.0 made 0.0), as the
    formed column gives it."""
    t = _totals(5000, 3)
    t.n[:] = np.maximum(t.n, 1)
    t.max_abs[:] = np.where(t.max_abs > 0, t.max_abs, -0.0)
    from quantscope.core.schemes.qparams import QuantParams

    p = QuantParams(scale=np.ones(5000, np.float32), zero_point=np.zeros(5000, np.int32),
                    axis=0)
    r = report.build_report(p, t, int(t.n.sum()))
    assert r.max_abs_error == float(unit_stats(t).max_abs_error.max())
    t.max_abs[:] = -0.0
    r = report.build_report(p, t, int(t.n.sum()))
    assert r.max_abs_error == 0.0 and not np.signbit(r.max_abs_error)
