"""View data agrees with the engine's reports: windows, per-channel tables, unit histograms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams, params_from_range
from quantscope.core.labs.explain import (
    channel_table,
    clip_threshold,
    clip_window,
    threshold_sides,
    unit_histogram,
    unit_values,
)
from quantscope.core.stats.sweep import clip_sweep_curve, window_for_threshold
from quantscope.core.tensors.validate import EngineValueError


def test_clip_window_symmetric_and_asymmetric():
    p = params_from_range(-2.0, 3.0, symmetric=True)
    lo, hi = clip_window(p)
    assert hi == pytest.approx(3.0, rel=1e-7) and lo == -hi
    assert clip_threshold(p) == hi
    a = params_from_range(-1.0, 3.0, symmetric=False)
    lo, hi = clip_window(a)
    assert lo == pytest.approx(-1.0, abs=float(a.scale)) and hi == pytest.approx(3.0, abs=float(
        a.scale))
    assert hi - lo == pytest.approx(255 * float(a.scale))
    with pytest.raises(EngineValueError, match="per-tensor"):
        clip_window(choose_qparams(np.ones((2, 2), np.float32), granularity="channel"))


@pytest.fixture(scope="module")
def weight() -> np.ndarray:
    rng = np.random.default_rng(5)
    w = rng.normal(size=(16, 96)).astype(np.float32)
    w[3, 10] = 9.0  # an outlier channel
    w[11, :] *= 0.01  # a tiny-range channel
    return w


def test_channel_table_matches_the_report(weight):
    params = choose_qparams(weight, granularity="channel", axis=0)
    rep = analyze(weight, params)
    t = channel_table(rep)
    assert len(t) == 16 and t.kind == "channel"
    np.testing.assert_array_equal(t.worst[:5], rep.per_channel.worst(5))
    assert t.outliers.tolist() == [3]
    np.testing.assert_array_equal(t.scale, params.scale.astype(np.float64))
    assert t.row(3)["outlier"] is True and t.row(3)["x_max"] == 9.0
    assert channel_table(rep, threshold=100.0).outliers.size == 0
    with pytest.raises(EngineValueError):
        channel_table(analyze(weight, choose_qparams(weight)))


@pytest.mark.parametrize("symmetric", [True, False])
def test_unit_histogram_agrees_with_the_per_channel_report(weight, symmetric):
    # a manual window that clips: the histogram's clip counts must be the report's
    params = choose_qparams(weight, granularity="channel", axis=0, symmetric=symmetric)
    params = params.with_(scale=(params.scale * np.float32(0.5)).astype(np.float32))
    rep = analyze(weight, params)
    for unit in (0, 3, 11):
        h = unit_histogram(weight, params, unit)
        assert h.counts.sum() == weight.shape[1]
        assert h.codes_used == rep.per_channel.codes_used[unit]
        assert h.clipped_below == rep.per_channel.clipped_below[unit]
        assert h.clipped_above == rep.per_channel.clipped_above[unit]
        assert h.edges.size == params.levels + 1
        np.testing.assert_allclose(np.diff(h.edges), h.scale)
        # every value lies in the bucket of its code (unclipped values)
        vals = weight[unit]
        q = params.quantize(weight)[unit].astype(np.int64)
        kept = (vals >= h.edges[0]) & (vals <= h.edges[-1])
        k = q[kept] - params.qmin
        assert np.all(h.edges[k] <= vals[kept] + 1e-6 * h.scale)
        assert np.all(vals[kept] <= h.edges[k + 1] + 1e-6 * h.scale)


def test_group_units_are_the_engine_groups():
    x = np.arange(2 * 10, dtype=np.float32).reshape(2, 10)
    params = choose_qparams(x, granularity="group", axis=1, group_size=4)
    # per-group array [2, 3]; C order: unit 4 is row 1, block 1 -> x[1, 4:8]
    np.testing.assert_array_equal(unit_values(x, params, 4), x[1, 4:8])
    np.testing.assert_array_equal(unit_values(x, params, 5), x[1, 8:10])  # ragged tail
    rep = analyze(x, params)
    h = unit_histogram(x, params, 5)
    assert h.codes_used == rep.per_channel.codes_used[5]
    with pytest.raises(EngineValueError, match="out of range"):
        unit_values(x, params, 6)


def test_unit_values_along_last_axis():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    params = choose_qparams(x, granularity="channel", axis=-1)
    np.testing.assert_array_equal(unit_values(x, params, 2), x[:, 2])


def _one_outlier(n: int = 50_000) -> np.ndarray:
    x = np.random.default_rng(11).normal(size=n).astype(np.float32)
    x[17] = 24.8
    return x


@pytest.mark.parametrize("symmetric", [True, False])
def test_sweep_points_are_the_panes_numbers_for_that_manual_clip(symmetric):
    from quantscope.state import ExplorerState

    x = _one_outlier()
    sweep = clip_sweep_curve(lambda p: analyze(x, p), x_min=float(x.min()), x_max=24.8,
                             symmetric=symmetric, points=40, refine=0)
    assert sweep.thresholds.size == 40 and sweep.thresholds[-1] == pytest.approx(24.8)
    state = ExplorerState()
    state.set_tensor(x)
    pane = "symmetric/tensor" if symmetric else "asymmetric/tensor"
    for k in (3, 20, 39):
        state.update_settings(method="manual", manual_clip=sweep.window(sweep.thresholds[k]))
        rep = state.compute()[pane]
        assert rep.mse == sweep.mse[k]
        assert rep.rounding_mse == sweep.rounding_mse[k]
        assert rep.clipping_mse == sweep.clipping_mse[k]
        assert rep.sqnr_db == sweep.sqnr_db[k]


def test_one_outlier_sweep_shows_the_trade_off():
    # 400k values: clipping the one outlier to ~4 costs (24.8 - 4)^2 / 4e5 = 0.001 of MSE,
    # less than the 0.003 of rounding that min/max scaling pays on every value
    x = _one_outlier(400_000)
    sweep = clip_sweep_curve(lambda p: analyze(x, p), x_min=float(x.min()), x_max=24.8,
                             symmetric=True, points=50)
    # min/max (the last point) clips nothing; the best clip is far inside, near the bulk
    assert sweep.clipping_mse[-1] == 0
    # (the normal bulk reaches ~4.8, so the best clip sits between the bulk and the outlier)
    assert 4.8 < sweep.best_threshold < 0.5 * 24.8
    assert sweep.mse[sweep.best] < 0.5 * sweep.mse[-1]
    # rounding error grows with the window, clipping error shrinks (coarse trend)
    assert sweep.rounding_mse[-1] > 5 * sweep.rounding_mse[sweep.best]
    assert sweep.clipping_mse[0] > 100 * sweep.clipping_mse[sweep.best]
    # the refinement found a point at least as good as every grid point
    assert sweep.mse[sweep.best] == sweep.mse.min()
    assert np.all(np.diff(sweep.thresholds) > 0)


def test_window_for_threshold_clips_only_beyond_the_threshold():
    assert window_for_threshold(5.0, -1.0, 10.0) == (-1.0, 5.0)  # the real minimum stays
    assert window_for_threshold(0.5, -1.0, 10.0) == (-0.5, 0.5)
    assert window_for_threshold(2.0, -4.0, 1.0) == (-2.0, 1.0)
    assert window_for_threshold(3.0, 0.5, 10.0) == (0.0, 3.0)  # the range holds 0
    assert window_for_threshold(1.0, 0.0, 0.0) == (-1.0, 1.0)
    assert threshold_sides(-0.17, 24.8) == "clips x>t, x<−t if t<0.17"
    assert threshold_sides(0.0, 3.0) == "clips x>t"


def test_sweep_reports_progress_and_stops_when_asked():
    from quantscope.errors import Cancelled

    x = _one_outlier(2000)
    seen: list[float] = []
    clip_sweep_curve(lambda p: analyze(x, p), x_min=float(x.min()), x_max=24.8,
                     symmetric=True, points=40, refine=8, progress=seen.append)
    assert seen[0] == 0 and all(0 <= f < 1 for f in seen) and seen == sorted(seen)
    calls = []

    def stop_after_five():
        calls.append(1)
        return len(calls) > 5

    with pytest.raises(Cancelled):
        clip_sweep_curve(lambda p: analyze(x, p), x_min=float(x.min()), x_max=24.8,
                         symmetric=True, points=40, should_stop=stop_after_five)
    assert len(calls) == 6  # stopped at once, not after the whole grid


def test_mse_ticks_are_the_decades_inside_the_positive_values():
    x = _one_outlier(5000)
    sweep = clip_sweep_curve(lambda p: analyze(x, p), x_min=float(x.min()), x_max=24.8,
                             symmetric=True, points=20, refine=0)
    d = sweep.mse_ticks()
    positive = np.concatenate([sweep.rounding_mse, sweep.clipping_mse, sweep.mse])
    positive = positive[positive > 0]
    assert len(d) >= 2 and all(float(v).is_integer() for v in d)
    # the first and last decades inside the range, none outside it
    assert 10.0 ** (d[0] - 1) < positive.min() <= 10.0 ** d[0]
    assert 10.0 ** d[-1] <= positive.max() < 10.0 ** (d[-1] + 1)
    assert d == [float(k) for k in range(int(d[0]), int(d[-1]) + 1)]


def test_mse_ticks_of_less_than_two_decades_are_1_2_5_steps_inside():
    x = _one_outlier(5000)
    sweep = clip_sweep_curve(lambda p: analyze(x, p), x_min=float(x.min()), x_max=24.8,
                             symmetric=True, points=20, refine=0)
    narrow = dataclasses.replace(sweep, rounding_mse=np.full_like(sweep.mse, 0.0015),
                                 clipping_mse=np.full_like(sweep.mse, 0.0),
                                 mse=np.linspace(0.0015, 0.06, sweep.mse.size))
    ticks = narrow.mse_ticks()
    assert np.allclose(10.0 ** np.array(ticks), [0.002, 0.005, 0.01, 0.02, 0.05])
