"""The prepared path must give the direct pass's report: identical counts, metrics within 1e-9."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantscope.core import analyze, choose_qparams, params_from_range
from quantscope.core.calibration.runtimes import RUNTIMES
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.stats import sorted_stats
from quantscope.core.stats.prepared import clip_sweep, prepare
from quantscope.core.stats.sweep import mse_optimal_windows
from quantscope.core.tensors.validate import ARITHMETIC_RULES, EngineValueError

REL = 1e-9
#: SQNR is 10·log10 of a ratio of sums: 1e-9 relative on the sums is this many dB, absolute
#: (SQNR near 0 dB has no meaningful relative error).
SQNR_DB = 10 * np.log10(1 + 2 * REL)
METRICS = ("mse", "rounding_mse", "clipping_mse", "signal_power")
EXACT = ("n", "n_nonfinite", "clipped_below", "clipped_above", "codes_used", "max_abs_error")


@pytest.fixture(autouse=True, params=["search", "walk"])
def kernel_path(request, monkeypatch):
    """Every test runs through both ways the kernel treats a row, forced for all rows: split
    at its code thresholds by binary search, and walked element by element."""
    monkeypatch.setattr(sorted_stats, "WALK_PER_LEVEL", 0 if request.param == "search" else 1 << 40)
    return request.param


def assert_same(direct, fast):
    np.testing.assert_array_equal(fast.code_histogram, direct.code_histogram)
    for name in EXACT:
        assert getattr(fast, name) == getattr(direct, name), name
    for name in METRICS:
        np.testing.assert_allclose(getattr(fast, name), getattr(direct, name), rtol=REL, atol=0,
                                   err_msg=name)
    np.testing.assert_allclose(fast.sqnr_db, direct.sqnr_db, rtol=0, atol=SQNR_DB)
    if direct.per_channel is None:
        assert fast.per_channel is None
        return
    for name in ("n", "clipped_below", "clipped_above", "codes_used", "max_abs_error", "x_min",
                 "x_max"):
        np.testing.assert_array_equal(getattr(fast.per_channel, name),
                                      getattr(direct.per_channel, name), err_msg=name)
    for name in ("mse", "rounding_mse", "clipping_mse"):
        np.testing.assert_allclose(getattr(fast.per_channel, name),
                                   getattr(direct.per_channel, name), rtol=REL, atol=0,
                                   err_msg=name)
    np.testing.assert_allclose(fast.per_channel.sqnr_db, direct.per_channel.sqnr_db, rtol=0,
                               atol=SQNR_DB)


RULES = st.sampled_from(["half_even", "half_away"])
ARITH = st.sampled_from(ARITHMETIC_RULES)


@st.composite
def tensors_and_params(draw):
    """A small tensor, many of whose values sit exactly on rounding boundaries, and parameters."""
    rows = draw(st.integers(1, 5))
    cols = draw(st.integers(1, 40))
    bits = draw(st.sampled_from([2, 4, 8]))
    symmetric = draw(st.booleans())
    scale = np.float32(draw(st.floats(1e-3, 10.0, allow_nan=False, allow_infinity=False)))
    zp_max = 0 if symmetric else (1 << (bits - 1)) - 1
    zp = draw(st.integers(-zp_max, zp_max))
    k = np.array(draw(st.lists(st.integers(-140, 140), min_size=rows * cols,
                               max_size=rows * cols)), np.float64)
    kind = draw(st.lists(st.sampled_from(["tie", "grid", "free", "near"]), min_size=rows * cols,
                         max_size=rows * cols))
    free = np.array(draw(st.lists(st.floats(-3, 3), min_size=rows * cols, max_size=rows * cols)))
    x = np.empty(rows * cols, np.float32)
    for i, kd in enumerate(kind):
        if kd == "tie":  # (k + 0.5) * scale: exactly on a rounding boundary, or one ulp off
            x[i] = np.float32((k[i] + 0.5) * np.float64(scale))
        elif kd == "grid":
            x[i] = np.float32(k[i]) * scale
        elif kd == "near":
            v = np.float32((k[i] + 0.5) * np.float64(scale))
            x[i] = np.nextafter(v, np.float32(np.inf) if free[i] > 0 else np.float32(-np.inf))
        else:
            x[i] = np.float32(free[i] * scale * 2 ** (bits - 1))
    if draw(st.booleans()):
        bad = draw(st.lists(st.integers(0, x.size - 1), max_size=3))
        for j, b in enumerate(bad):
            x[b] = [np.nan, np.inf, -np.inf][j % 3]
    x = x.reshape(rows, cols)
    gran = draw(st.sampled_from(["tensor", "channel", "group"]))
    axis = draw(st.sampled_from([0, 1, -1]))
    group = draw(st.integers(1, 7))
    qmin, qmax = (-(1 << (bits - 1)) + int(symmetric), (1 << (bits - 1)) - 1)
    shape = {"tensor": (), "channel": (x.shape[axis],)}.get(gran)
    if gran == "group":
        shape = list(x.shape)
        shape[axis] = -(-x.shape[axis] // group)
        shape = tuple(shape)
    jitter = np.asarray(draw(st.lists(st.sampled_from([1.0, 0.5, 2.0, 1.0000001]),
                                      min_size=1, max_size=1)))[0]
    scales = np.full(shape, scale * np.float32(jitter), np.float32)
    arithmetic = draw(ARITH)
    inv = None
    if arithmetic != "divide" and draw(st.booleans()):
        # a runtime's own multiplier (TensorRT: float32(127 / amax)), one ulp off 1 / scale
        inv = np.nextafter(np.float32(1.0) / scales, np.float32(draw(st.sampled_from([0, 1e9]))))
    params = QuantParams(scales, np.full(shape, zp, np.int32), qmin, qmax,
                         axis=None if gran == "tensor" else axis,
                         group_size=group if gran == "group" else None, symmetric=symmetric,
                         rounding=draw(RULES), arithmetic=arithmetic, inv_scale=inv)
    return x, params


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors_and_params())
def test_prepared_report_equals_direct(case):
    x, params = case
    with np.errstate(all="ignore"):
        direct = analyze(x, params)
    assert_same(direct, prepare(x).analyze(params))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["tensor", "channel"]), st.booleans(),
       RULES, ARITH)
def test_random_tensors_with_chosen_params(seed, gran, symmetric, rounding, arithmetic):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((8, 300)) * rng.uniform(0.01, 100)).astype(np.float32)
    p = choose_qparams(x, symmetric=symmetric, granularity=gran, axis=1, rounding=rounding,
                       arithmetic=arithmetic)
    p = p.with_(scale=p.scale * np.float32(rng.uniform(0.3, 1.2)))  # clip some
    assert_same(analyze(x, p), prepare(x).analyze(p))


def test_ties_decided_by_the_direct_rule():
    """fbgemm's case: multiply gives 127.5 -> 128 where divide gives 127.49999 -> 127."""
    x = np.array([0.273939937, -0.273939937, 0.5, 1.5], np.float32)
    for arithmetic in ARITHMETIC_RULES:
        for zp in (0, 3):
            p = QuantParams(np.float32(0.00214854861), zp, -128, 127, arithmetic=arithmetic)
            assert_same(analyze(x, p), prepare(x).analyze(p))
    many = np.repeat(np.float32(2.5), 1000)  # a thousand values on one half-way point
    for rounding in ("half_even", "half_away"):
        p = QuantParams(np.float32(1.0), 0, -128, 127, rounding=rounding)
        rep = prepare(many).analyze(p)
        assert rep.code_histogram[128 + (2 if rounding == "half_even" else 3)] == 1000


def test_edge_tensors():
    for x in (np.zeros(0, np.float32), np.float32(3.0), np.full(7, np.nan, np.float32),
              np.array([np.inf, -np.inf, 1.0], np.float32), np.zeros((3, 0), np.float32)):
        p = QuantParams(np.float32(0.1), 0, -127, 127)
        with np.errstate(all="ignore"):
            assert_same(analyze(x, p), prepare(x).analyze(p))
    x = np.ones((4, 5), np.float32)
    pc = choose_qparams(x, granularity="channel", axis=1)
    assert_same(analyze(x, pc), prepare(x).analyze(pc))
    with pytest.raises(EngineValueError):
        prepare(np.float32(1.0)).analyze(pc)


def test_large_tensor_takes_the_sorted_path_and_agrees():
    rng = np.random.default_rng(1)
    x = rng.standard_t(3, size=(64, 4096)).astype(np.float32)
    for gran in ("tensor", "channel"):
        p = choose_qparams(x, symmetric=False, granularity=gran, axis=0, method="minmax")
        assert_same(analyze(x, p), prepare(x).analyze(p))


@given(st.integers(0, 2**32 - 1), st.floats(0, 100), st.booleans())
@settings(max_examples=60, deadline=None)
def test_percentile_is_numpys(seed, q, absolute):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(rng.integers(1, 200)).astype(np.float32)
    x[rng.integers(0, x.size)] = np.nan
    ref_data = x[np.isfinite(x)].astype(np.float64)
    ref_data = np.abs(ref_data) if absolute else ref_data
    got = prepare(x).percentile(q, absolute=absolute)
    if ref_data.size:
        assert got == np.percentile(ref_data, q)


def test_percentile_per_channel_and_errors():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 50)).astype(np.float32)
    got = prepare(x).percentile(99.0, absolute=True, axis=0)
    np.testing.assert_array_equal(got, np.percentile(np.abs(x).astype(np.float64), 99.0, axis=1))
    for bad in (-1, 101, np.nan):
        with pytest.raises(EngineValueError):
            prepare(x).percentile(bad)


@pytest.mark.parametrize("symmetric", [True, False])
def test_clip_sweep_points_are_exact_reports(symmetric):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(5000) + (0 if symmetric else 1.5)).astype(np.float32)
    sw = clip_sweep(x, symmetric=symmetric, points=25)
    assert sw.fraction[-1] == 1.0 and sw.mse.shape == (25,)
    for i in (0, 7, 24):
        p = params_from_range(sw.lower[i], sw.upper[i], symmetric=symmetric)
        rep = analyze(x, p)
        np.testing.assert_allclose(sw.rounding_mse[i], rep.rounding_mse, rtol=REL, atol=0)
        np.testing.assert_allclose(sw.clipping_mse[i], rep.clipping_mse, rtol=REL, atol=0)
        np.testing.assert_allclose(sw.sqnr_db[i], rep.sqnr_db, rtol=0, atol=SQNR_DB)
    assert sw.best == int(np.argmin(sw.mse))
    # the trade-off: clipping error shrinks and rounding error grows as the window widens
    assert sw.clipping_mse[0] > sw.clipping_mse[-1] == 0.0
    assert sw.rounding_mse[0] < sw.rounding_mse[-1]
    with pytest.raises(EngineValueError):
        clip_sweep(x, symmetric=symmetric, fractions=[0.0, 0.5])


@pytest.mark.parametrize("symmetric", [True, False])
def test_mse_optimal_never_worse_than_minmax(symmetric):
    rng = np.random.default_rng(4)
    x = rng.standard_t(4, size=(3, 3000)).astype(np.float32)
    rows = prepare(x).layout(0, None)
    lo, hi = mse_optimal_windows(rows, symmetric=symmetric)
    best = params_from_range(lo, hi, symmetric=symmetric, axis=0)
    minmax = choose_qparams(x, symmetric=symmetric, granularity="channel", axis=0)
    b, m = analyze(x, best).per_channel, analyze(x, minmax).per_channel
    assert (b.mse <= m.mse).all()
    # 4-bit Laplace data: min/max spends the 15 levels on rare tails, the optimum clips them
    # (Banner et al. 2019 report ~2-3x lower MSE for the analytic clip at 4 bits)
    x = rng.laplace(size=(3, 3000)).astype(np.float32)
    lo, hi = mse_optimal_windows(prepare(x).layout(0, None), symmetric=symmetric, bits=4)
    best = params_from_range(lo, hi, symmetric=symmetric, bits=4, axis=0)
    minmax = choose_qparams(x, symmetric=symmetric, bits=4, granularity="channel", axis=0)
    b, m = analyze(x, best).per_channel, analyze(x, minmax).per_channel
    assert (b.mse < 0.8 * m.mse).all()


def test_sweeps_of_degenerate_tensors_do_not_crash():
    for x in (np.zeros(0, np.float32), np.full(5, np.nan, np.float32), np.ones(7, np.float32)):
        for symmetric in (True, False):
            sw = clip_sweep(x, symmetric=symmetric, points=5)
            assert np.isfinite(sw.mse).all() and (sw.mse >= 0).all()
            assert np.isfinite(sw.scale).all() and (sw.scale > 0).all()
    assert np.isnan(clip_sweep(np.zeros(0, np.float32), symmetric=True).sqnr_db).all()


@pytest.mark.parametrize("axis, group", [(None, None), (0, None), (1, None), (1, 3)])
def test_min_max_from_the_sorted_rows_equals_a_pass(axis, group):
    from quantscope.core.schemes.qparams import unit_min_max

    x = np.random.default_rng(8).standard_normal((5, 7)).astype(np.float32)
    x[1, :] = np.nan  # an empty channel along axis 0
    x[3, 2] = np.inf
    x[0, 4] = -7.5
    lo, hi = prepare(x).min_max(axis, group)
    ref_lo, ref_hi, _ = unit_min_max(x, axis, group)
    np.testing.assert_array_equal(lo, ref_lo)
    np.testing.assert_array_equal(hi, ref_hi)
    assert lo.shape == ref_lo.shape


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_runtime_presets_give_the_same_params_with_a_prepared_tensor(runtime):
    x = np.random.default_rng(9).standard_normal((16, 40)).astype(np.float32)
    dynamic = runtime == "onnxruntime-dynamic"  # DynamicQuantizeLinear: asymmetric, per tensor
    for granularity in ("tensor",) if dynamic else ("tensor", "channel"):
        kw = dict(runtime=runtime, symmetric=not dynamic, granularity=granularity, axis=0)
        a, b = choose_qparams(x, **kw), choose_qparams(x, prepared=prepare(x), **kw)
        np.testing.assert_array_equal(a.scale, b.scale)
        np.testing.assert_array_equal(a.zero_point, b.zero_point)


def test_warm_up_loads_every_compiled_loop_the_reports_use(monkeypatch):
    """A session's first percentile or per-channel report must not stall loading one."""
    from quantscope.core.kernels import block_sums, radix_sort, sorted_kernel
    from quantscope.core.stats import prepared

    monkeypatch.setattr(prepared, "_warmed_up", False)
    prepared.warm_up()
    for loop in (sorted_kernel.evaluate_rows, sorted_kernel.abs_order_stats,
                 sorted_kernel.row_sums_of_squares, radix_sort._count, radix_sort._scatter,
                 block_sums.build_range, block_sums.build_rows):
        assert loop.signatures, loop


def test_evaluations_hand_the_compiled_loop_one_layout_however_they_are_shared():
    """One evaluation, one share of many, several shares: Numba compiles a loop once per
    memory layout of its arguments (about 8 s each on a machine's first run), so every way of
    sharing the evaluations hands it the same one."""
    from quantscope.core.kernels import sorted_kernel

    rng = np.random.default_rng(3)
    x = rng.standard_normal((600, 700)).astype(np.float32)
    p = prepare(x)
    for axis, group in ((None, None), (0, None), (1, None), (1, 64), (1, 7)):
        params = choose_qparams(x, granularity="tensor" if axis is None else
                                ("group" if group else "channel"), axis=axis,
                                group_size=group, symmetric=False)
        got = p.analyze(params)
        assert got.code_histogram.sum() == x.size
    layouts = {tuple(a.layout for a in sig if hasattr(a, "layout"))
               for sig in sorted_kernel.evaluate_rows.signatures}
    assert len(layouts) == 1, layouts
