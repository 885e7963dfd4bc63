"""The fused pass must give the direct pass's figures: identical counts, SQNR within 1e-9."""

import ml_dtypes
import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams, params_from_range
from quantscope.core.kernels.fused_kernel import symmetric_scale
from quantscope.core.stats import fused as fused_mod
from quantscope.core.stats.fused import FusedPass, FusedRules, figures_of, suggest
from quantscope.core.tensors.validate import EngineValueError

SQNR_DB = 10 * np.log10(1 + 2e-9)  # 1e-9 relative on the sums (as tests/core/test_prepared.py)
RNG = np.random.default_rng(17)
DTYPES = [np.float32, ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3fn,
          ml_dtypes.float8_e5m2]


def _direct(x, axis, rules: FusedRules):
    xf = np.asarray(x, np.float32)
    kw = dict(symmetric=True, bits=rules.bits, narrow_range=rules.narrow_range,
              rounding=rules.rounding)
    with np.errstate(invalid="ignore"):  # the direct pass meets inf on purpose here
        pt = analyze(xf, choose_qparams(xf, **kw))
        pc = (analyze(xf, choose_qparams(xf, granularity="channel", axis=axis, **kw))
              if axis is not None and xf.ndim >= 2 else None)
    return xf, pt, pc


def _assert_figures(x, axis, rules: FusedRules | None = None):
    rules = rules or FusedRules()
    f = figures_of(x, axis, rules)
    xf, pt, pc = _direct(x, axis, rules)
    assert (f.n, f.n_nonfinite) == (pt.n, pt.n_nonfinite)
    assert f.clipped_fraction == pt.clipped_fraction
    assert abs(f.per_tensor_db - pt.sqnr_db) <= SQNR_DB or f.per_tensor_db == pt.sqnr_db
    finite = np.abs(xf[np.isfinite(xf)])
    assert f.max_abs == (finite.max() if finite.size else 0.0)
    if pc is None:
        assert f.per_channel_db is None and f.outlier_channels is None
        return f
    assert abs(f.per_channel_db - pc.sqnr_db) <= SQNR_DB or f.per_channel_db == pc.sqnr_db
    big = np.moveaxis(np.where(np.isfinite(xf), np.abs(xf), 0) >= rules.outlier_threshold,
                      axis, 0)
    assert f.channels == big.shape[0]
    assert f.outlier_channels == int(big.reshape(big.shape[0], -1).any(axis=1).sum())
    return f


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("axis", [0, -1, 2, None])
def test_every_stored_dtype_and_axis_matches_the_direct_pass(dtype, axis):
    x = (RNG.standard_t(3, size=(40, 6, 30)) * 0.7).astype(dtype)
    x[5, 1, 3] = 9.0  # one outlier channel on every axis
    _assert_figures(x, axis)


@pytest.mark.parametrize("rules", [FusedRules(bits=4), FusedRules(narrow_range=False),
                                   FusedRules(rounding="half_away", bits=3),
                                   FusedRules(outlier_threshold=0.5)])
@pytest.mark.parametrize("axis", [0, 1])
def test_rules_bits_range_rounding_threshold(rules, axis):
    x = (RNG.standard_normal((64, 48)) * np.linspace(0.1, 3, 48)).astype(ml_dtypes.bfloat16)
    _assert_figures(x, axis, rules)
    _assert_figures(x.astype(np.float32), axis, rules)


def test_ties_nonfinite_zero_rows_and_tiny_ranges():
    x = np.zeros((6, 8), np.float32)
    x[0] = np.arange(8) - 3.5  # half-way codes under every scale
    x[1, :3] = [np.nan, np.inf, -np.inf]
    x[2] = 1e-40  # a subnormal range: the engine's scale falls back to 1
    x[3] = [np.nan] * 8  # a channel with nothing finite
    x[4, 0] = 6.0  # exactly the threshold counts
    for dtype in (np.float32, ml_dtypes.bfloat16):
        for rounding in ("half_even", "half_away"):
            f = _assert_figures(x.astype(dtype), 0, FusedRules(rounding=rounding))
            assert f.n_nonfinite == 11 and f.outlier_channels == 1
            _assert_figures(x.astype(dtype), -1, FusedRules(rounding=rounding))


def test_all_zero_tensor_is_exact_and_all_nan_has_no_finite_values():
    f = figures_of(np.zeros((4, 4), ml_dtypes.bfloat16), 0)
    assert f.per_tensor_db == f.per_channel_db == np.inf and f.gain_db == 0.0
    f = figures_of(np.full((3, 3), np.nan, np.float32), 0)
    assert f.n == 0 and np.isnan(f.per_tensor_db) and f.suggested == "-"


def test_chunks_in_any_order_and_from_threads(monkeypatch):
    """A tensor split over many chunks, processed in reverse and concurrently, gives the same
    figures as in one piece (rows and columns, histogram and second pass alike)."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(fused_mod, "CHUNK_ELEMENTS", 700)
    x = (RNG.standard_normal((90, 50)) * np.exp(RNG.standard_normal((90, 1)))).astype(
        ml_dtypes.bfloat16)
    for dtype, axis in [(ml_dtypes.bfloat16, 0), (np.float32, 0), (ml_dtypes.bfloat16, -1),
                        (np.float32, -1)]:
        xs = x.astype(dtype)
        p = FusedPass(xs.shape, np.dtype(dtype).name, axis)
        assert len(p.chunks) > 5
        flat = xs.reshape(-1).view(p.raw_dtype)
        order = list(reversed(range(len(p.chunks))))

        def feed(step, p=p, flat=flat):
            return lambda i: step(i, flat[slice(*p.chunks[i])])

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(feed(p.first), order))
            if p.needs_second_pass:
                p.prepare_second()
                list(pool.map(feed(p.second), order))
        got, whole = p.result(), _assert_figures(xs, axis)
        assert abs(got.per_tensor_db - whole.per_tensor_db) <= SQNR_DB
        assert abs(got.per_channel_db - whole.per_channel_db) <= SQNR_DB


def test_kernel_scale_rule_is_params_from_range_bit_for_bit():
    amax = np.concatenate([np.abs(RNG.standard_normal(2000)) * 10.0 ** RNG.integers(-40, 38,
                                                                                     2000),
                           [0.0, 1e-45, 1.1754944e-38 * 126, 1.1754944e-38 * 127, 3.4e38]])
    amax = amax.astype(np.float32).astype(np.float64)
    for bits in (2, 4, 8):
        qsym = (1 << (bits - 1)) - 1
        expected = params_from_range(-amax, amax, symmetric=True, bits=bits).scale
        got = np.array([symmetric_scale(a, qsym) for a in amax], np.float32)
        np.testing.assert_array_equal(got, expected)


def test_refuses_middle_axis_wrong_chunks_and_bad_rules():
    with pytest.raises(EngineValueError, match="first or last axis"):
        FusedPass((4, 5, 6), "float32", 1)
    p = FusedPass((4, 5), "bfloat16", 0)
    with pytest.raises(EngineValueError, match="must be 20 elements of uint16"):
        p.first(0, np.zeros(20, np.float32))
    with pytest.raises(EngineValueError, match="outlier threshold"):
        FusedPass((4, 5), "float32", 0, FusedRules(outlier_threshold=0))
    with pytest.raises(EngineValueError, match="bits"):
        FusedPass((4, 5), "float32", 0, FusedRules(bits=9))


def test_suggestion():
    assert suggest(40.0, 41.0, 0) == "per-tensor"
    assert suggest(30.0, 40.0, 0) == "per-channel"
    assert suggest(12.0, 15.0, 3) == "fp16 outliers"
    assert suggest(12.0, 15.0, 0) == "keep 16-bit"
    assert suggest(15.0, None, None, bits=4) == "per-tensor"  # the floor follows the bits
