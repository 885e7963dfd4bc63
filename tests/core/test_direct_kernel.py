"""The compiled one-pass quantize, dequantize and per-tensor analysis must give the NumPy passes'
results: the same codes, counts, clips and maximum error bit for bit, the same error sums to
float64 roundoff, under every rounding rule and arithmetic."""

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantscope.core import analyze, dequantize, quantize
from quantscope.core.qparams import QuantParams
from quantscope.core.sorted_kernel import ARITHMETIC_CODES
from quantscope.core.validate import EngineValueError

QUANTIZE = sys.modules["quantscope.core.quantize"]


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
