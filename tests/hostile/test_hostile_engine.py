"""The engine API under hostile and odd arguments: a typed error that names the argument
(``EngineValueError`` / ``EngineTypeError``), or a result -- never a raw NumPy error, a
RuntimeWarning on valid data, a wrapped integer or an allocation out of proportion.

A committed corpus of the cases found so far, then hypothesis drawing arguments of every
wrong type and size for the public functions.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hostile_support import bounded, hostile_settings, record
from hypothesis import given
from hypothesis import strategies as st

import quantscope as qs
from quantscope.core.tensors.validate import EngineTypeError, EngineValueError

F = float(np.finfo(np.float32).max)
X = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)


def _channel(shape=(4, 4)):
    return qs.choose_qparams(np.ones(shape, np.float32), granularity="channel", axis=0)


#: (name, call, error type, a word the message must hold: the argument's name)
CORPUS = [
    ("group_size=0", lambda: qs.QuantParams(np.ones(8, np.float32), np.zeros(8, np.int32),
                                            axis=0, group_size=0),
     EngineValueError, "group_size"),
    ("scale/zero_point shapes differ", lambda: qs.QuantParams(
        np.ones(8, np.float32), np.zeros(4, np.int32), axis=0), EngineValueError, "zero_point"),
    ("Prepared.analyze, params of another shape",
     lambda: qs.prepare(X).analyze(_channel()), EngineValueError, "scale"),
    ("analyze, params of another shape", lambda: qs.analyze(X, _channel()),
     EngineValueError, "scale"),
    ("dequantize int64 beyond int32", lambda: qs.dequantize(np.array([2**40]), 1.0),
     EngineValueError, "codes"),
    ("scale past FLT_MAX (float32 inf)",
     lambda: qs.dequantize(np.zeros(1, np.int64), 3.4028235677973366e38),
     EngineValueError, "scale"),
    ("dequantize, codes minus zero_point beyond int32",
     lambda: qs.dequantize(np.zeros(1, np.int8), 1.0, -(2**31)), EngineValueError,
     "zero_point"),
    ("dequantize, a bool scale", lambda: qs.dequantize(np.zeros(1, np.int8), True),
     EngineTypeError, "scale"),
    ("dequantize float codes", lambda: qs.dequantize(np.array([1.5]), 1.0),
     EngineTypeError, "codes"),
    ("dequantize float zero point", lambda: qs.dequantize(np.array([1]), 1.0, 0.5),
     EngineTypeError, "zero_point"),
    ("clip_sweep points=10**9", lambda: qs.clip_sweep(X, symmetric=True, points=10**9),
     EngineValueError, "points"),
    ("clip_sweep points=2.5", lambda: qs.clip_sweep(X, symmetric=True, points=2.5),
     EngineTypeError, "points"),
    ("bits=2.5", lambda: qs.choose_qparams(X, bits=2.5), EngineTypeError, "bits"),
    ('bits="8"', lambda: qs.choose_qparams(X, bits="8"), EngineTypeError, "bits"),
    ("bits=None", lambda: qs.choose_qparams(X, bits=None), EngineTypeError, "bits"),
    ("bits=9", lambda: qs.code_range(9, symmetric=True), EngineValueError, "bits"),
    ("axis=1.5", lambda: qs.choose_qparams(X, granularity="channel", axis=1.5),
     EngineTypeError, "axis"),
    ("axis=True", lambda: qs.quantize(X, np.ones(8), axis=True), EngineTypeError, "axis"),
    ("qmin=nan", lambda: qs.quantize(X, 0.1, qmin=float("nan")), EngineTypeError, "qmin"),
    ("qmin=None", lambda: qs.QuantParams(np.float32(1), np.int32(0), qmin=None),
     EngineTypeError, "qmin"),
    ('group_size="4"', lambda: qs.choose_qparams(X, granularity="group", group_size="4"),
     EngineTypeError, "group_size"),
    ('scale="abc"', lambda: qs.quantize(X, "abc"), EngineTypeError, "scale"),
    ("ragged x", lambda: qs.choose_qparams([[1.0], [1.0, 2.0]]), EngineTypeError, "x"),
    ("granularity list", lambda: qs.choose_qparams(X, granularity=["tensor"]),
     EngineValueError, "granularity"),
    ("rounding None", lambda: qs.quantize(X, 0.1, rounding=None), EngineValueError,
     "rounding"),
]


@pytest.mark.parametrize(("name", "call", "error", "word"), CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus_gives_a_typed_error_naming_the_argument(name, call, error, word):
    with warnings.catch_warnings(), bounded(seconds=20):
        warnings.simplefilter("error")
        with pytest.raises(error) as caught:
            call()
    message = str(caught.value)
    assert word in message and "\n" not in message, message
    record(refused=True)


def test_group_longer_than_the_axis_costs_no_more_than_one_group():
    """A group of 10^6 along an axis of 100 is one group of 100: no 10^8-entry expansion."""
    x = np.random.default_rng(1).standard_normal((100, 100)).astype(np.float32)
    with bounded(limit=8 << 20, seconds=20):
        p = qs.choose_qparams(x, granularity="group", group_size=10**6, axis=1)
        codes = p.quantize(x)
        values = p.dequantize(codes)
        report = qs.analyze(x, p)
    whole_rows = qs.choose_qparams(x, granularity="group", group_size=100, axis=1)
    np.testing.assert_array_equal(codes, whole_rows.quantize(x))
    assert values.shape == x.shape and report.sqnr_db == qs.analyze(x, whole_rows).sqnr_db


@pytest.mark.parametrize("values", [
    [-F, F], [-F, 0.5 * F], [-0.5 * F, F], [0.0, F], [-F, 0.0], [-F, -F, F, F, 0.0],
    [F * 0.999, -F * 0.998, 1.0],
])
@pytest.mark.parametrize("symmetric", [True, False])
def test_ranges_near_flt_max_give_finite_honest_numbers_without_warnings(values, symmetric):
    """Every code of the chosen parameters dequantizes to a finite value, so the error is what
    rounding and clipping cost -- a few steps at most, never an infinite one."""
    x = np.array(values, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = qs.choose_qparams(x, symmetric=symmetric)
        direct, fast = qs.analyze(x, p), qs.prepare(x).analyze(p)
        grid = p.dequantize(np.arange(p.qmin, p.qmax + 1))
    assert np.isfinite(grid).all()
    scale = float(p.scale)
    for r in (direct, fast):
        assert r.sqnr_db > 30, r.sqnr_db  # inf when every value lands on a code
        assert r.max_abs_error <= scale * 1.0001
        # a clipped element lies at most one step beyond the grid: the half step of the
        # window's edge, plus what lowering the scale to keep the end codes finite cost
        assert r.clipping_mse * x.size <= r.clipped_fraction * x.size * scale**2 * 1.0001
    assert direct.clipped_fraction == fast.clipped_fraction


# -- hypothesis ---------------------------------------------------------------------------------
junk = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
    st.lists(st.integers(-3, 3), max_size=3), st.just(np.float32(2.5)), st.just(np.int64(3)),
    st.just(object()), st.just(np.array([1, 2])),
)


@hostile_settings(ci=150)
@given(bits=junk, axis=junk, group_size=junk, granularity=st.sampled_from(
    ["tensor", "channel", "group"]), symmetric=st.booleans())
def test_choose_and_analyze_with_junk_arguments(bits, axis, group_size, granularity, symmetric):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            p = qs.choose_qparams(X, bits=bits, axis=axis, group_size=group_size,
                                  granularity=granularity, symmetric=symmetric)
        except (EngineValueError, EngineTypeError) as exc:
            assert "\n" not in str(exc)
            record(refused=True)
            return
        record(refused=False)
        r = qs.analyze(X, p)
        assert r.n == X.size and r.codes_used >= 1


@hostile_settings(ci=150)
@given(codes=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=8),
       scale=junk, zero_point=junk)
def test_dequantize_with_junk(codes, scale, zero_point):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            values = qs.dequantize(np.array(codes, np.int64), scale, zero_point)
        except (EngineValueError, EngineTypeError) as exc:
            assert "\n" not in str(exc)
            record(refused=True)
            return
        record(refused=False)
    q = np.array(codes, np.int64)
    expected = (q - np.asarray(zero_point, np.int64)).astype(np.float64) * np.float32(
        np.asarray(scale, np.float64))
    np.testing.assert_allclose(values, expected.astype(np.float32), rtol=1e-6)


finite32 = st.floats(-F, F, width=32, allow_subnormal=True)


@hostile_settings(ci=100)
@given(values=st.lists(finite32, min_size=1, max_size=40), symmetric=st.booleans(),
       bits=st.integers(2, 8))
def test_any_finite_float32_tensor_gives_finite_numbers_and_no_warning(values, symmetric, bits):
    x = np.array(values, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = qs.choose_qparams(x, symmetric=symmetric, bits=bits)
        direct, fast = qs.analyze(x, p), qs.prepare(x).analyze(p)
    assert not np.isnan(direct.sqnr_db) or not np.any(x)
    assert direct.sqnr_db > -np.inf and np.isfinite(direct.mse)
    assert direct.clipped_fraction == fast.clipped_fraction
    assert direct.codes_used == fast.codes_used
    record(refused=False)
