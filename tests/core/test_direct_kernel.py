"""The compiled one-pass quantize, dequantize and per-tensor analysis must give the NumPy passes'
results: the same codes, counts, clips and maximum error bit for bit, the same error sums to
float64 roundoff, under every rounding rule and arithmetic."""

import functools
import itertools
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantscope.core import analyze, dequantize, quantize
from quantscope.core.kernels.read_only import read_only
from quantscope.core.kernels.sorted_kernel import ARITHMETIC_CODES
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.tensors.validate import EngineTypeError, EngineValueError

QUANTIZE = sys.modules["quantscope.core.schemes.quantize"]

#: Unsigned and wider codes (uint8, int16, ...): versions of the direct loops that the API
#: compiles on their first use; the compile-ahead makes the int8 ones only.
CODES_OF_OTHER_TYPES = "codes of other integer types than int8, not compiled ahead"



def both(monkeypatch, fn):
    """``fn()`` by the NumPy passes, then by the compiled ones (forced for every size)."""
    monkeypatch.setattr(QUANTIZE, "COMPILED_MIN", 1 << 62)
    with np.errstate(all="ignore"):
        slow = fn()
    monkeypatch.setattr(QUANTIZE, "COMPILED_MIN", 0)
    with np.errstate(all="ignore"):
        fast = fn()
    return slow, fast


@st.composite
def cases(draw):
    n = draw(st.integers(1, 3000))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    bits = draw(st.sampled_from([2, 4, 8]))
    signed = draw(st.booleans())
    qmin, qmax = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    scale = np.float32(draw(st.floats(1e-3, 10.0)))
    zp = draw(st.integers(qmin, qmax))
    k = rng.integers(-300, 300, n).astype(np.float64)
    kind = rng.integers(0, 4, n)
    x = np.where(kind == 0, (k + 0.5) * np.float64(scale),  # on the rounding boundary
                 np.where(kind == 1, k * np.float64(scale), rng.standard_normal(n) * 50 * scale))
    x = x.astype(np.float32)
    near = kind == 3  # one ulp beside a boundary
    x[near] = np.nextafter(((k[near] + 0.5) * np.float64(scale)).astype(np.float32),
                           np.float32(np.inf))
    if draw(st.booleans()):
        x[rng.integers(0, n, 3)] = np.array([np.nan, np.inf, -np.inf], np.float32)
    arithmetic = draw(st.sampled_from(sorted(ARITHMETIC_CODES)))
    inv = None
    if arithmetic != "divide" and draw(st.booleans()):
        inv = np.nextafter(np.float32(1) / scale, np.float32(draw(st.sampled_from([0, 1e9]))))
    rounding = draw(st.sampled_from(["half_even", "half_away"]))
    return x, QuantParams(scale, np.int32(zp), qmin, qmax, rounding=rounding,
                          arithmetic=arithmetic, inv_scale=inv)


@pytest.mark.compiles(CODES_OF_OTHER_TYPES)
@settings(max_examples=150, deadline=None)
@given(cases())
def test_compiled_quantize_and_analyze_equal_the_numpy_passes(case):
    x, p = case
    with pytest.MonkeyPatch.context() as mp:
        slow, fast = both(mp, lambda: quantize(x, p.scale, p.zero_point, qmin=p.qmin,
                                               qmax=p.qmax, rounding=p.rounding,
                                               arithmetic=p.arithmetic, inv_scale=p.inv_scale,
                                               nonfinite="saturate"))
        np.testing.assert_array_equal(fast, slow)
        assert fast.dtype == slow.dtype
        dq_slow, dq_fast = both(mp, lambda: dequantize(slow, p.scale, p.zero_point))
        np.testing.assert_array_equal(dq_fast, dq_slow)
        r_slow, r_fast = both(mp, lambda: analyze(x, p))
    np.testing.assert_array_equal(r_fast.code_histogram, r_slow.code_histogram)
    for name in ("n", "n_nonfinite", "clipped_below", "clipped_above", "codes_used",
                 "max_abs_error"):
        assert getattr(r_fast, name) == getattr(r_slow, name), name
    for name in ("mse", "rounding_mse", "clipping_mse", "signal_power"):
        np.testing.assert_allclose(getattr(r_fast, name), getattr(r_slow, name), rtol=1e-12,
                                   atol=0, err_msg=name)


def test_compiled_quantize_raises_on_nonfinite_like_the_numpy_pass(monkeypatch):
    monkeypatch.setattr(QUANTIZE, "COMPILED_MIN", 0)
    x = np.zeros(100, np.float32)
    x[42] = np.inf
    with pytest.raises(EngineValueError, match=r"1 non-finite value.*index \(42,\)"):
        quantize(x, 0.1)


def test_a_large_tensor_takes_the_compiled_pass_on_every_core():
    x = np.random.default_rng(0).standard_normal(1 << 18).astype(np.float32)
    q = quantize(x, np.float32(0.02), 3)
    ref = np.clip(np.rint(x / np.float32(0.02)) + 3, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(q, ref)
    np.testing.assert_array_equal(dequantize(q, np.float32(0.02), 3),
                                  (q.astype(np.int32) - 3).astype(np.float32) * np.float32(0.02))


def _shares_of(n: int) -> list[tuple[int, int]]:
    """Unaligned shares: a loop's block starts off every multiple of its block size."""
    cuts = sorted({0, n, 1, 1023, 1025, n // 3, n // 3 + 7, n - 5})
    return [(a, b) for a, b in itertools.pairwise(cuts) if a < b]


@pytest.mark.compiles(CODES_OF_OTHER_TYPES)
@pytest.mark.parametrize("scale", [1e-40, 1.5 * 2.0**-126, 1e-30, 0.37, 3.0, 3e37, 3.4e38])
@pytest.mark.parametrize("signed", [True, False])
def test_the_fused_product_path_gives_each_rules_codes_at_any_scale(scale, signed):
    """The lines form codes from ``fma(x, inv, z)`` away from rounding boundaries and take each
    arithmetic's own rule near them: every element on, or one to three ulps beside, a boundary
    up to far past the clamp, and random bit patterns, get the rule's codes -- also where the
    divide's ``1/s`` is subnormal or overflows (then every line divides)."""
    rng = np.random.default_rng(11)
    s = np.float32(scale)
    qmin, qmax = (-128, 127) if signed else (0, 255)
    k = rng.integers(-700, 700, 6000).astype(np.float64) + 0.5
    with np.errstate(over="ignore"):  # past float32's range at the largest scales: ±inf
        edge = (k * np.float64(s)).astype(np.float32)
        spread = rng.standard_normal(3000).astype(np.float32) * 200 * s
        inv = np.float32(1) / s
    beside = edge.view(np.int32) + rng.integers(-3, 4, edge.size).astype(np.int32)
    bits = rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([edge, beside.view(np.float32), bits, spread])
    rules = [("divide", None)] + [(a, i) for a in ("multiply", "fma", "multiply_add")
                                  for i in (None, np.nextafter(inv, np.float32(np.inf)))
                                  if np.isfinite(inv) and inv > 0]
    for (arithmetic, inv_scale), zp, rounding in itertools.product(
            rules, (qmin, (qmin + qmax) // 2, qmax), ("half_even", "half_away")):
        with pytest.MonkeyPatch.context() as mp:
            run = functools.partial(quantize, x, s, zp, qmin=qmin, qmax=qmax, rounding=rounding,
                                    arithmetic=arithmetic, inv_scale=inv_scale,
                                    nonfinite="saturate")
            slow, fast = both(mp, run)
        np.testing.assert_array_equal(fast, slow, err_msg=f"{arithmetic} {zp} {rounding}")


@pytest.mark.parametrize("source", ["random", "gelu", "weight"])
def test_every_share_of_the_compiled_loops_equals_the_numpy_pass_on_it(source, gelu_activations,
                                                                       query_weight):
    """The loops index each share from its own start (``lo`` > 0, not a block multiple):
    codes, the non-finite flag, dequantized values and the analysis of every share equal the
    NumPy passes on that share alone."""
    from quantscope.core.kernels import direct_kernel as dk

    rng = np.random.default_rng(5)
    x = {"random": rng.standard_normal(5000).astype(np.float32) * 3,
         "gelu": gelu_activations.reshape(-1)[:5000].copy(),
         "weight": query_weight.reshape(-1)[:5000].copy()}[source]
    x[4000] = np.nan  # non-finite values in a later share only
    x[4321] = -np.inf
    s = np.float32(np.abs(x[np.isfinite(x)]).max() / 100)  # some elements clip
    z = np.int32(-7)
    p = QuantParams(s, z, -128, 127)
    q = np.empty(x.size, np.int8)
    deq = np.empty(x.size, np.float32)
    xr = read_only(x)  # the tensor as quantize_flat and analyze_flat hand it to the loops
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(QUANTIZE, "COMPILED_MIN", 1 << 62)
        for lo, hi in _shares_of(x.size):
            inv = np.float32(np.float32(1) / s)
            bad = dk.quantize_range(xr, lo, hi, s, inv, z, -128, 127, 0, False, q)
            part = x[lo:hi]
            np.testing.assert_array_equal(q[lo:hi], quantize(part, s, z, nonfinite="saturate"))
            assert bool(bad) == (not np.isfinite(part).all()), (lo, hi)
            dk.dequantize_range(q, lo, hi, s, z, deq, False)
            np.testing.assert_array_equal(deq[lo:hi], dequantize(q[lo:hi], s, z))
            hist = np.zeros(256, np.int64)
            out_f, out_i = np.zeros(4), np.zeros(3, np.int64)
            dk.analyze_range(xr, lo, hi, s, inv, z, -128, 127, 0, False, hist, out_f, out_i)
            ref = analyze(part, p)
            np.testing.assert_array_equal(hist, ref.code_histogram)
            assert (out_i[0], out_i[1], out_i[2]) == (ref.n, ref.clipped_below,
                                                      ref.clipped_above)
            assert out_f[3] == ref.max_abs_error
            n = max(ref.n, 1)
            np.testing.assert_allclose(out_f[:3] / n, [ref.rounding_mse, ref.clipping_mse,
                                                       ref.signal_power], rtol=1e-12, atol=0)


def test_a_fresh_output_faulted_in_block_by_block_equals_the_numpy_pass(monkeypatch):
    """A fresh output's pages are faulted in a block ahead of the shares that fill it: with
    blocks that end mid-page and a last short one, every value is the NumPy pass's."""
    from quantscope.core.kernels import direct_kernel as dk

    monkeypatch.setattr(dk, "TOUCH_BLOCK", 12_345)
    rng = np.random.default_rng(3)
    q = rng.integers(-128, 128, 300_001).astype(np.int8)
    monkeypatch.setattr(QUANTIZE, "COMPILED_MIN", 1 << 62)
    slow = dequantize(q, 0.05, -3)
    monkeypatch.setattr(QUANTIZE, "COMPILED_MIN", 0)
    fast = dequantize(q, 0.05, -3)
    assert np.array_equal(fast.view(np.int32), slow.view(np.int32))


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("shape", [(), (5,), (3, 70_001)])
def test_dequantize_into_a_buffer_equals_a_fresh_output(monkeypatch, compiled, shape):
    monkeypatch.setattr(QUANTIZE, "COMPILED_MIN", 0 if compiled else 1 << 62)
    rng = np.random.default_rng(7)
    q = rng.integers(-128, 128, shape).astype(np.int8)
    buf = np.full(shape, np.nan, np.float32)
    fresh = dequantize(q, np.float32(0.0173), -5)
    got = dequantize(q, np.float32(0.0173), -5, out=buf)
    assert got is buf
    assert np.array_equal(fresh.view(np.int32), buf.view(np.int32))


def test_dequantize_into_a_buffer_per_channel_equals_a_fresh_output():
    q = np.arange(-60, 60, dtype=np.int8).reshape(4, 30)
    scale = np.array([0.5, 0.25, 3.0, 1e-3], np.float32)
    zp = np.array([0, 1, -2, 3], np.int8)
    buf = np.empty(q.shape, np.float32)
    p = QuantParams(scale, zp, -128, 127, axis=0)
    assert p.dequantize(q, out=buf) is buf
    assert np.array_equal(dequantize(q, scale, zp, axis=0), buf)


@pytest.mark.parametrize("out, message", [
    ([0.0] * 6, "out must be a NumPy array"),
    (np.zeros(6, np.float64), "out must be float32"),
    (np.zeros(5, np.float32), r"out has shape \(5,\), the codes \(6,\)"),
    (np.zeros(12, np.float32)[::2], "writeable C-contiguous"),
])
def test_dequantize_refuses_an_unusable_out(out, message):
    with pytest.raises((EngineValueError, EngineTypeError), match=message):
        dequantize(np.zeros(6, np.int8), 1.0, out=out)


def test_dequantize_refuses_an_out_that_overlaps_the_codes():
    raw = np.zeros(24, np.uint8)
    with pytest.raises(EngineValueError, match="overlaps the codes"):
        dequantize(raw[:6].view(np.int8), 1.0, out=raw.view(np.float32))


@pytest.mark.compiles(CODES_OF_OTHER_TYPES)
@pytest.mark.parametrize("dtype, zero_point", [
    (np.int8, -128), (np.uint8, 255), (np.int16, -32768), (np.uint16, 0),
    (np.int32, 200), (np.int32, -200), (np.uint32, 100)])
def test_compiled_dequantize_equals_the_numpy_pass_at_the_ends_of_int32(monkeypatch, dtype,
                                                                         zero_point):
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -(2**31) + 256), min(int(info.max), 2**31 - 1 - 256)
    q = np.linspace(lo, hi, 5000).astype(dtype)
    q[:4] = [lo, hi, lo + 1, hi - 1]
    scale = np.float32(3.0517578e-05)
    slow, fast = both(monkeypatch, lambda: dequantize(q, scale, zero_point))
    assert np.array_equal(slow.view(np.int32), fast.view(np.int32))


@pytest.mark.compiles(CODES_OF_OTHER_TYPES)
@pytest.mark.parametrize("fresh", [False, True])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32])
def test_dequantize_range_by_lines_equals_the_plain_rule_at_any_alignment(dtype, fresh):
    """The 64-byte lines written by non-temporal stores (into a reused buffer), the elements
    before and after them, and the plain stores into a fresh output give
    ``float32(float32(int32(q) − z) · s)`` bit for bit, and nothing outside."""
    from quantscope.core.kernels import direct_kernel as dk

    rng = np.random.default_rng(11)
    info = np.iinfo(dtype)
    q = rng.integers(max(info.min, -2**30), min(info.max, 2**30), 1000,
                     dtype=np.int64).astype(dtype)
    s = np.float32(0.0173)
    for z in (0, -5, 77):
        for lo, hi in ((0, 1000), (3, 997), (5, 9), (0, 0), (17, 500)):
            ref = s * (q[lo:hi].astype(np.int32) - np.int32(z)).astype(np.float32)
            for offset in (0, 1, 3):
                out = np.empty(1003, np.float32)[offset:offset + 1000]
                out[:] = np.nan
                dk.dequantize_range(q, lo, hi, s, np.int32(z), out, fresh)
                assert np.array_equal(out[lo:hi].view(np.int32), ref.view(np.int32))
                assert np.isnan(out[:lo]).all() and np.isnan(out[hi:]).all()


def test_the_nonfinite_flag_finds_every_nan_and_inf_and_nothing_else():
    """The flag ORs the bits of ``x − x``: one NaN or ±inf at any lane of a line or in the
    last few elements is found; the largest finite floats, subnormals and signed zeros are
    not."""
    from quantscope.core.kernels import direct_kernel as dk

    rng = np.random.default_rng(5)
    edge = np.array([np.finfo(np.float32).max, -np.finfo(np.float32).max,
                     np.finfo(np.float32).smallest_subnormal, -0.0, 0.0], np.float32)
    s, inv, z = np.float32(0.5), np.float32(2.0), np.int32(0)
    for n in (*range(1, 70), 1023, 1024):
        block = rng.standard_normal(n).astype(np.float32)
        block[rng.integers(0, n, min(n, 5))] = edge[:min(n, 5)]
        q = np.empty(n, np.int8)
        assert not dk.quantize_range(read_only(block), 0, n, s, inv, z, -128, 127, 0, False,
                                     q), n
        for pos in {0, n // 2, n - 1, 15 % n, 16 % n}:
            for bad in (np.nan, np.inf, -np.inf):
                hit = block.copy()
                hit[pos] = bad
                assert dk.quantize_range(read_only(hit), 0, n, s, inv, z, -128, 127, 0, False,
                                         q), (n, pos)
    assert not dk.quantize_range(read_only(np.zeros(0, np.float32)), 0, 0, s, inv, z, -128, 127,
                                 0, False, np.zeros(0, np.int8))
