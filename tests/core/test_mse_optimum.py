"""method="mse" returns the optimum of the exact MSE over the whole (scale, zero point) space:
compared with an exhaustive search (every zero point at each of a few hundred scales, exact
evaluations; bench/mse_optimum.py) on real tensors, per tensor and per channel, symmetric and
asymmetric. The table for every bundled tensor is printed by that script."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams, params_from_range
from quantscope.core.stats.mse_search import mse_optimal_params
from quantscope.core.stats.prepared import prepare

_BENCH = Path(__file__).resolve().parents[2] / "bench" / "mse_optimum.py"
_spec = importlib.util.spec_from_file_location("mse_optimum_bench", _BENCH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

TOL_DB = 0.01


def db(signal: float, err: float) -> float:
    return 10 * np.log10(signal / err)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("name", ["output_activations", "bf16 attention.self.query.bias"])
def test_per_tensor_optimum_within_a_hundredth_of_a_db_of_brute_force(name, symmetric):
    x = bench.real_tensors()[name]
    prep = prepare(x)
    rows = prep.layout(None, None)
    qmin, qmax = (-127, 127) if symmetric else (-128, 127)
    _, _, brute = bench.brute_force(rows, qmin=qmin, qmax=qmax, symmetric=symmetric,
                                    n_scales=120)
    p = choose_qparams(x, symmetric=symmetric, method="mse", prepared=prep)
    rep = analyze(x, p)
    assert rep.sqnr_db >= db(rows.sumsq[0], brute[0]) - TOL_DB
    # the parameters are the search's own, and the engine's rules reproduce them exactly
    s, z, err = mse_optimal_params(rows, qmin=qmin, qmax=qmax, symmetric=symmetric)
    assert p.scale == s[0] and p.zero_point == z[0]
    assert rep.mse * x.size == pytest.approx(err[0], rel=1e-8)


@pytest.mark.parametrize("symmetric", [False, True])
def test_per_channel_optimum_within_a_hundredth_of_a_db_of_brute_force(symmetric,
                                                                      query_weight):
    w = query_weight[:24]
    prep = prepare(w)
    rows = prep.layout(0, None)
    qmin, qmax = (-127, 127) if symmetric else (-128, 127)
    _, _, brute = bench.brute_force(rows, qmin=qmin, qmax=qmax, symmetric=symmetric,
                                    n_scales=150)
    p = choose_qparams(w, symmetric=symmetric, method="mse", granularity="channel", axis=0,
                       prepared=prep)
    ours = analyze(w, p).per_channel.mse * w.shape[1]
    np.testing.assert_array_less(db(rows.sumsq, brute) - TOL_DB, db(rows.sumsq, ours))


def test_asymmetric_windows_reach_past_the_data_and_beat_the_shrinking_search(
        gelu_activations):
    """The old search only shrank the min/max window; the optimum may place the window's end
    beyond the data's minimum (GELU's -0.17 here) to put the grid where the values are."""
    x = gelu_activations
    prep = prepare(x)
    p = choose_qparams(x, symmetric=False, method="mse", prepared=prep)
    lower = float(p.scale) * (p.qmin - int(p.zero_point))
    assert lower < float(x.min())
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    shrunk = [prep.analyze(params_from_range(f * lo, f * hi, symmetric=False)).mse
              for f in np.linspace(0.005, 1.0, 300)]  # the old search's family of windows
    assert prep.analyze(p).mse <= min(shrunk)
