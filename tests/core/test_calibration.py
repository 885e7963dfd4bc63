"""Range methods: exact percentiles, the exact MSE-optimal clip, ModelOpt's entropy method."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import need
from quantscope.core import analyze, choose_qparams, params_from_range
from quantscope.core.calibration.methods import abs_histogram, entropy_amax
from quantscope.core.tensors.validate import EngineValueError

F32 = np.float32


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(50, 100), st.booleans())
def test_percentile_is_the_exact_order_statistic(seed, p, symmetric):
    rng = np.random.default_rng(seed)
    x = rng.standard_t(3, size=(4, 257)).astype(F32)
    x[1, 3] = np.nan
    fin = x[np.isfinite(x)].astype(np.float64)
    q = choose_qparams(x, symmetric=symmetric, method="percentile", percentile=p)
    if symmetric:
        amax = np.percentile(np.abs(fin), p)
        assert q.scale == params_from_range(-amax, amax, symmetric=True).scale
    else:
        lo, hi = np.percentile(fin, [(100 - p) / 2, 100 - (100 - p) / 2])
        ref = params_from_range(lo, hi, symmetric=False)
        assert (q.scale, q.zero_point) == (ref.scale, ref.zero_point)


def test_percentile_per_channel_and_bad_values():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 300)).astype(F32)
    q = choose_qparams(w, granularity="channel", axis=0, method="percentile", percentile=99.0)
    amax = np.percentile(np.abs(w).astype(np.float64), 99.0, axis=1)
    np.testing.assert_array_equal(q.scale, params_from_range(-amax, amax, symmetric=True).scale)
    full = choose_qparams(w, method="percentile", percentile=100)
    assert full.scale == choose_qparams(w).scale  # the 100th percentile is the maximum
    for bad in (0, -5, 100.5, float("nan")):
        with pytest.raises(EngineValueError):
            choose_qparams(w, method="percentile", percentile=bad)
    with pytest.raises(EngineValueError):
        choose_qparams(w, method="percentile", pct=99)
    with pytest.raises(EngineValueError):
        choose_qparams(w, method="kl")


def _modelopt_entropy(calib_hist, calib_bin_edges, num_bits=8, start_bin=128):
    """ModelOpt's _compute_amax_entropy, loops and all (stride 1, signed), for comparison."""
    bins = calib_hist[:].copy()
    bins[0] = bins[1]
    divergences = []
    nbins = 1 << (num_bits - 1)
    new_density_counts = np.zeros(nbins, dtype=np.float64)
    for i in range(start_bin, len(bins) + 1):
        new_density_counts.fill(0)
        space = np.linspace(0, i, num=nbins + 1)
        digitized_space = np.digitize(range(i), space) - 1
        digitized_space[bins[:i] == 0] = -1
        for idx, digitized in enumerate(digitized_space):
            if digitized != -1:
                new_density_counts[digitized] += bins[idx]
        counter = Counter(digitized_space)
        for key, val in counter.items():
            if key != -1:
                new_density_counts[key] = new_density_counts[key] / val
        new_density = np.zeros(i, dtype=np.float64)
        for idx, digitized in enumerate(digitized_space):
            if digitized != -1:
                new_density[idx] = new_density_counts[digitized]
        reference_density = np.array(bins[: len(digitized_space)], dtype=np.float64)
        reference_density[-1] += np.sum(bins[i:])
        p = reference_density / reference_density.sum()
        q = new_density / new_density.sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(p > 0, np.where(q > 0, p * np.log(p / q), np.inf), 0.0)
        divergences.append(np.sum(terms))
    divergences = np.array(divergences)
    last_argmin = len(divergences) - 1 - np.argmin(divergences[::-1])
    return float(calib_bin_edges[last_argmin + start_bin])


@pytest.mark.parametrize("dist", ["normal", "laplace", "relu"])
def test_entropy_matches_modelopts_loop(dist):
    rng = np.random.default_rng(2)
    x = {"normal": rng.standard_normal(20_000), "laplace": rng.laplace(size=20_000),
         "relu": np.maximum(rng.standard_normal(20_000), 0)}[dist].astype(F32)
    hist, edges = abs_histogram(x, 384)
    ours = entropy_amax(x, num_bins=384, start_bin=128)
    assert ours == _modelopt_entropy(hist, edges)
    # the default 2048 bins land on a bin edge strictly inside the range
    amax = entropy_amax(x)
    edges = abs_histogram(x)[1]
    assert amax in edges and 0 < amax <= np.abs(x).max()
    p = choose_qparams(x, method="entropy")
    assert p.scale == params_from_range(-amax, amax, symmetric=True).scale
    with pytest.raises(EngineValueError):
        choose_qparams(x, method="entropy", symmetric=False)
    with pytest.raises(EngineValueError):
        choose_qparams(x.reshape(100, -1), method="entropy", granularity="channel")


def _modelopt_mse_amax(x, num_bits=8, start_bin=128, num_bins=2048):
    """ModelOpt's _compute_amax_mse on its 2048-bin |x| histogram (bin centres, fake quant)."""
    counts, edges = abs_histogram(x, num_bins)
    centers = ((edges[1:] + edges[:-1]) / 2).astype(F32)
    counts = counts.astype(F32)
    bound = F32((1 << (num_bits - 1)) - 1)
    mses = []
    for i in range(start_bin, len(centers)):
        amax = centers[i]
        scale = bound / amax
        q = np.clip(np.rint(centers * scale), -bound, bound) / scale
        mses.append(np.mean((q - centers) ** 2 * counts))
    return float(centers[start_bin + int(np.argmin(mses))])


@pytest.mark.parametrize("dist", ["normal", "student3", "laplace"])
@pytest.mark.parametrize("bits", [8, 4])
def test_mse_beats_minmax_and_modelopts_mse_calibrator(dist, bits):
    rng = np.random.default_rng(3)
    x = {"normal": rng.standard_normal(50_000), "student3": rng.standard_t(3, 50_000),
         "laplace": rng.laplace(size=50_000)}[dist].astype(F32)
    ours = analyze(x, choose_qparams(x, method="mse", bits=bits)).mse
    minmax = analyze(x, choose_qparams(x, bits=bits)).mse
    amax = _modelopt_mse_amax(x, num_bits=bits)
    theirs = analyze(x, params_from_range(-amax, amax, symmetric=True, bits=bits)).mse
    assert ours <= minmax and ours <= theirs
    asym = analyze(x, choose_qparams(x, method="mse", symmetric=False, bits=bits)).mse
    assert asym <= analyze(x, choose_qparams(x, symmetric=False, bits=bits)).mse


def test_methods_on_edge_tensors():
    cases = [np.zeros(0, F32), np.zeros(5, F32), np.array([3.0], F32), np.full(6, -2.0, F32),
             np.array([np.nan, np.inf, -np.inf], F32), np.array([np.nan, 1.0, -1.0], F32)]
    for method in ("percentile", "mse", "entropy"):
        for x in cases:
            p = choose_qparams(x, method=method)
            assert np.isfinite(p.scale).all() and (p.scale > 0).all(), (method, x)
    # NaN/inf are excluded from the range, whatever the method
    x = np.array([np.nan, np.inf, -1.0, 0.5, 2.0], F32)
    for method in ("percentile", "mse"):
        assert choose_qparams(x, method=method).scale == choose_qparams(x[2:],
                                                                       method=method).scale


@pytest.mark.parametrize("dist", ["normal", "student3"])
def test_mse_never_worse_than_pytorch_histogram_observer(dist):
    torch = need("torch")
    from quantscope.core.schemes.qparams import QuantParams

    rng = np.random.default_rng(8)
    x = {"normal": rng.standard_normal(50_000),
         "student3": rng.standard_t(3, 50_000)}[dist].astype(F32)
    obs = torch.ao.quantization.HistogramObserver(dtype=torch.quint8)
    obs(torch.from_numpy(x))
    scale, zp = obs.calculate_qparams()
    theirs = analyze(x, QuantParams(F32(scale), int(zp), 0, 255, symmetric=False)).mse
    ours = analyze(x, choose_qparams(x, symmetric=False, signed=False, method="mse")).mse
    assert ours <= theirs


def test_prepared_tensor_is_reused_not_sorted_again(monkeypatch):
    """choose_qparams(prepared=...) gives the same parameters without preparing again."""
    from quantscope.core.stats import prepared

    rng = np.random.default_rng(5)
    x = rng.standard_t(3, size=(64, 300)).astype(np.float32)
    prep = prepared.prepare(x)
    expected = {m: choose_qparams(x, method=m, symmetric=False, granularity="channel", axis=0)
                for m in ("percentile", "mse")}

    def refuse(_x):
        raise AssertionError("prepare() called although a Prepared was given")

    monkeypatch.setattr(prepared, "prepare", refuse)
    for method, want in expected.items():
        got = choose_qparams(x, method=method, symmetric=False, granularity="channel", axis=0,
                             prepared=prep)
        np.testing.assert_array_equal(got.scale, want.scale)
        np.testing.assert_array_equal(got.zero_point, want.zero_point)
    got = choose_qparams(x, method="percentile", runtime="onnxruntime", prepared=prep)
    assert got.runtime == "onnxruntime"
    with pytest.raises(ValueError, match="shape"):
        choose_qparams(x[:3], method="percentile", prepared=prep)
