"""analyze: the exact rounding/clipping split against an independent element-by-element
computation, on hand-worked cases, real tensors and random ones."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from quantscope import QuantParams, analyze, choose_qparams, dequantize, quantize

f32 = np.float32


def reference(x: np.ndarray, p: QuantParams) -> dict:
    """Element by element, the definitions of the report written out plainly."""
    x = x.astype(f32)
    unclamped = np.rint(x.astype(f32) / np.float32(p.scale)) + int(p.zero_point)
    q = p.quantize(x)
    xhat = p.dequantize(q).astype(np.float64)
    e2 = (x.astype(np.float64) - xhat) ** 2
    clipped = (unclamped < p.qmin) | (unclamped > p.qmax)
    n = x.size
    return {
        "rounding_mse": e2[~clipped].sum() / n,
        "clipping_mse": e2[clipped].sum() / n,
        "below": int((unclamped < p.qmin).sum()),
        "above": int((unclamped > p.qmax).sum()),
        "hist": np.bincount(q.ravel().astype(int) - p.qmin, minlength=p.levels),
        "max": np.sqrt(e2.max()),
        "sqnr": 10 * np.log10((x.astype(np.float64) ** 2).sum() / e2.sum()),
    }


def check_against_reference(x, p):
    r = analyze(x, p)
    ref = reference(x, p)
    assert r.clipped_below == ref["below"] and r.clipped_above == ref["above"]
    np.testing.assert_array_equal(r.code_histogram, ref["hist"])
    assert r.codes_used == np.count_nonzero(ref["hist"])
    assert r.rounding_mse == pytest.approx(ref["rounding_mse"], rel=1e-12, abs=1e-300)
    assert r.clipping_mse == pytest.approx(ref["clipping_mse"], rel=1e-12, abs=1e-300)
    assert r.mse == pytest.approx(r.rounding_mse + r.clipping_mse, rel=1e-15)
    assert r.max_abs_error == pytest.approx(ref["max"], rel=1e-12)
    return r


def test_scale_point_one_is_exact_up_to_float32():
    x = np.array([-1.0, 0.0, 1.0], f32)
    r = check_against_reference(x, QuantParams(f32(0.1), 0))
    assert r.codes_used == 3 and r.clipped_fraction == 0


def test_saturation_is_all_clipping_error():
    x = np.array([200.0, -200.0, 1.0], f32)
    r = check_against_reference(x, QuantParams(f32(1.0), 0))
    assert (r.clipped_below, r.clipped_above) == (1, 1)
    assert r.rounding_mse == 0.0
    assert r.clipping_mse == pytest.approx((73.0**2 + 72.0**2) / 3)
    assert r.max_abs_error == 73.0


def test_rounding_to_the_edge_code_is_not_clipping():
    # 127.4 rounds to 127: inside the window, so its 0.4 of error is rounding error.
    r = analyze(np.array([127.4, -127.4], f32), QuantParams(f32(1.0), 0, qmin=-127, qmax=127))
    assert r.clipped_below == r.clipped_above == 0
    assert r.rounding_mse == (float(f32(127.4)) - 127.0) ** 2


def test_all_zero_tensor_is_exact():
    r = analyze(np.zeros((4, 4), f32), choose_qparams(np.zeros((4, 4), f32)))
    assert r.mse == 0 and r.sqnr_db == np.inf and r.codes_used == 1


def test_one_outlier_collapses_small_values_to_code_zero():
    x = np.concatenate([np.linspace(-0.05, 0.05, 1001, dtype=f32), [100.0]]).astype(f32)
    p = choose_qparams(x, symmetric=True)
    q = p.quantize(x)
    assert (q[:-1] == 0).all() and q[-1] == 127
    r = check_against_reference(x, p)
    assert r.codes_used == 2 and r.clipping_mse == 0


def test_nonfinite_are_excluded_and_counted():
    x = np.array([1.0, np.nan, -1.0, np.inf, 0.25], f32)
    p = QuantParams(f32(0.5), 0)
    r = analyze(x, p)
    clean = analyze(np.array([1.0, -1.0, 0.25], f32), p)
    assert r.n == 3 and r.n_nonfinite == 2
    assert r.mse == clean.mse and r.codes_used == clean.codes_used
    np.testing.assert_array_equal(r.code_histogram, clean.code_histogram)


def test_empty_tensor_report():
    r = analyze(np.zeros(0, f32), QuantParams(f32(1.0), 0))
    assert r.n == 0 and r.mse == 0 and r.codes_used == 0 and np.isnan(r.sqnr_db)


@pytest.mark.parametrize("symmetric", [True, False])
def test_real_activations_per_tensor(gelu_activations, symmetric):
    p = choose_qparams(gelu_activations, symmetric=symmetric)
    r = check_against_reference(gelu_activations, p)
    assert r.n == gelu_activations.size
    # The 24.8 outlier wastes the buckets: far fewer than 256 codes are used.
    assert r.codes_used < 100


@pytest.mark.parametrize("symmetric", [True, False])
def test_per_channel_units_match_row_by_row(query_weight, symmetric):
    w = query_weight
    p = choose_qparams(w, symmetric=symmetric, granularity="channel", axis=0)
    r = analyze(w, p)
    for i in (0, 17, 383):
        row = QuantParams(p.scale[i], p.zero_point[i], p.qmin, p.qmax, symmetric=symmetric)
        ri = analyze(w[i], row)
        assert r.per_channel.mse[i] == pytest.approx(ri.mse, rel=1e-12)
        assert r.per_channel.codes_used[i] == ri.codes_used
        assert r.per_channel.sqnr_db[i] == pytest.approx(ri.sqnr_db, rel=1e-12)
    q = p.quantize(w)
    xhat = p.dequantize(q).astype(np.float64)
    assert r.mse == pytest.approx(((w - xhat) ** 2).mean(), rel=1e-12)
    assert r.sqnr_db > analyze(w, choose_qparams(w, symmetric=symmetric)).sqnr_db


def test_per_group_totals_match_elementwise():
    rng = np.random.default_rng(1)
    w = (rng.standard_t(3, size=(7, 300)) * rng.uniform(0.1, 3, size=(7, 1))).astype(f32)
    p = choose_qparams(w, granularity="group", axis=1, group_size=128)
    p = p.with_(scale=p.scale * f32(0.6))  # force clipping in every group
    r = analyze(w, p)
    q = p.quantize(w)
    e2 = (w.astype(np.float64) - p.dequantize(q)) ** 2
    assert r.mse == pytest.approx(e2.mean(), rel=1e-12)
    assert r.per_channel.n.tolist() == [128, 128, 44] * 7
    assert r.clipped_below + r.clipped_above > 0
    np.testing.assert_array_equal(r.code_histogram,
                                  np.bincount(q.ravel().astype(int) + 127, minlength=255))


@settings(max_examples=150, deadline=None)
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=40),
                    elements=st.floats(-1e3, 1e3, allow_nan=False, width=32)),
       shrink=st.floats(0.05, 1.5), symmetric=st.booleans())
def test_random_split_matches_reference(x, shrink, symmetric):
    p = choose_qparams(x, symmetric=symmetric)
    p = p.with_(scale=np.maximum(p.scale * f32(shrink), f32(1e-6)))
    check_against_reference(x, p)


def test_large_tensor_blocks_agree_with_quantize():
    rng = np.random.default_rng(2)
    x = rng.laplace(size=300_001).astype(f32)  # several blocks and a ragged end
    p = choose_qparams(x, symmetric=False).with_(scale=f32(0.01))
    r = analyze(x, p)
    q = quantize(x, p.scale, p.zero_point, qmin=p.qmin, qmax=p.qmax)
    np.testing.assert_array_equal(r.code_histogram,
                                  np.bincount(q.astype(int) + 128, minlength=256))
    e2 = (x.astype(np.float64) - dequantize(q, p.scale, p.zero_point)) ** 2
    assert r.mse == pytest.approx(e2.mean(), rel=1e-12)


def test_an_exact_tensor_reports_a_largest_error_of_plus_zero():
    """Integers on the grid quantize exactly: the largest error is 0.0, never -0.0 (which
    ``report --json`` would print as ``-0.0``), per tensor and per channel."""
    import math

    from quantscope.core import analyze, choose_qparams

    x = np.linspace(-127, 127, 255).round().astype(np.float32).reshape(1, -1)
    for granularity in ("tensor", "channel"):
        p = choose_qparams(x, symmetric=True, granularity=granularity, axis=0, bits=8)
        r = analyze(x, p)
        assert r.sqnr_db == math.inf
        assert math.copysign(1.0, r.max_abs_error) == 1.0
        if r.per_channel is not None:
            assert np.all(np.copysign(1.0, r.per_channel.max_abs_error) == 1.0)


@pytest.mark.parametrize(("granularity", "extra"), [("channel", {"axis": 0}),
                                                   ("group", {"axis": 1, "group_size": 96})])
def test_per_unit_direct_pass_on_several_threads_is_one_threads_bit_for_bit(
        monkeypatch, granularity, extra):
    """The direct per-channel and per-group pass shares its blocks of rows between threads:
    every per-unit sum and the histogram equal those of one thread walking every row (a ragged
    last group included), and more than one share really ran."""
    from quantscope.core.stats import analyze as analyze_mod

    rng = np.random.default_rng(4)
    x = (rng.standard_normal((700, 1000)) * rng.uniform(0.1, 3, (700, 1))).astype(f32)
    p = choose_qparams(x, symmetric=False, granularity=granularity, bits=4, **extra)
    seen = []
    real_parallel = analyze_mod.parallel

    def counting(fn, argsets):
        seen.append(len(argsets))
        return real_parallel(fn, argsets)

    monkeypatch.setattr(analyze_mod, "parallel", counting)
    monkeypatch.setattr(analyze_mod, "shares", lambda n: [(0, n // 3), (n // 3, n - 7),
                                                          (n - 7, n)])
    many = analyze(x, p)
    assert max(seen) == 3
    monkeypatch.setattr(analyze_mod, "shares", lambda n: [(0, n)])
    one = analyze(x, p)
    for name in ("n", "round_err", "clip_err", "max_abs", "below", "above", "sig", "codes",
                 "x_min", "x_max", "hist"):
        np.testing.assert_array_equal(getattr(many.unit_totals, name),
                                      getattr(one.unit_totals, name), err_msg=name)
