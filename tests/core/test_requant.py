"""Requantization against an independent Python-int transcription of TFLite/gemmlowp's C++.

The reference functions below are written from the C++ text (truncating division, int32
wrap of ``x * (1 << left_shift)``, ``frexp`` + ``std::round``) with exact Python integers and
Fractions; the engine uses different formulations (arithmetic shifts, numpy frexp), so an
agreement is evidence, not a tautology.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from quantscope.core.labs.requant import (
    INT32_MAX,
    INT32_MIN,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    requantize_ruy,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)
from quantscope.errors import QuantscopeError

# ----------------------------------------------------------------- reference (Python ints)


def to_int32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def c_div(a: int, b: int) -> int:
    """C++ integer division: truncation toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def ref_srdhm(a: int, b: int) -> int:
    overflow = a == b and a == INT32_MIN
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else (1 - (1 << 30))
    high = to_int32(c_div(ab + nudge, 1 << 31))
    return INT32_MAX if overflow else high


def ref_rdbpot(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def ref_mbqm(x: int, m: int, shift: int) -> int:
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    return ref_rdbpot(ref_srdhm(to_int32(x * (1 << left)), m), right)


def ref_mbqm_single(x: int, m: int, shift: int) -> int:
    total = 31 - shift
    return to_int32((x * m + (1 << (total - 1))) >> total)


def ref_quantize_multiplier(d: float) -> tuple[int, int]:
    if d == 0.0:
        return 0, 0
    q, shift = math.frexp(d)
    exact = Fraction(q) * 2**31
    q_fixed = math.floor(exact + Fraction(1, 2))  # std::round, q > 0: half away from zero
    assert q_fixed <= 2**31
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        shift, q_fixed = 0, 0
    return q_fixed, shift


int32s = st.one_of(
    st.integers(INT32_MIN, INT32_MAX),
    st.sampled_from([INT32_MIN, INT32_MIN + 1, -1, 0, 1, INT32_MAX - 1, INT32_MAX]),
    st.integers(-(2**20), 2**20),
)
multipliers = st.one_of(
    st.integers(0, INT32_MAX),
    st.integers(2**30, INT32_MAX),
    st.sampled_from([0, 1, 2**30, 2**31 - 1, INT32_MAX]),
)
shifts = st.integers(-31, 30)


# ----------------------------------------------------------------- scalar rules


@settings(max_examples=300, deadline=None)
@given(a=int32s, b=int32s)
@example(a=INT32_MIN, b=INT32_MIN)
@example(a=INT32_MIN, b=INT32_MAX)
@example(a=-(2**30), b=1)  # product/2^31 = -0.5: ties go toward +inf
@example(a=2**30, b=1)
def test_srdhm_matches_cxx(a: int, b: int) -> None:
    got = saturating_rounding_doubling_high_mul(np.int32(a), np.int32(b))
    assert int(got) == ref_srdhm(a, b)


def test_srdhm_saturates_only_int32_min_squared() -> None:
    assert int(saturating_rounding_doubling_high_mul(INT32_MIN, INT32_MIN)) == INT32_MAX
    assert int(saturating_rounding_doubling_high_mul(INT32_MIN, INT32_MIN + 1)) == INT32_MAX
    assert int(saturating_rounding_doubling_high_mul(INT32_MIN, INT32_MAX)) == INT32_MIN + 1


@settings(max_examples=300, deadline=None)
@given(x=int32s, e=st.integers(0, 31))
@example(x=-3, e=1)  # -1.5 -> -2, half away from zero
@example(x=3, e=1)
@example(x=INT32_MIN, e=31)
@example(x=INT32_MAX, e=31)
def test_rounding_divide_by_pot_matches_cxx(x: int, e: int) -> None:
    assert int(rounding_divide_by_pot(np.int32(x), e)) == ref_rdbpot(x, e)


@settings(max_examples=300, deadline=None)
@given(x=int32s, e=st.integers(0, 31))
def test_rounding_divide_by_pot_is_half_away_from_zero(x: int, e: int) -> None:
    exact = Fraction(x, 2**e)
    expected = math.floor(abs(exact) + Fraction(1, 2)) * (1 if x >= 0 else -1)
    assert int(rounding_divide_by_pot(np.int32(x), e)) == expected


@settings(max_examples=400, deadline=None)
@given(x=int32s, m=multipliers, shift=shifts)
@example(x=INT32_MIN, m=INT32_MAX, shift=0)
@example(x=INT32_MIN, m=2**30, shift=1)  # left shift wraps INT32_MIN << 1 to 0
@example(x=2**30, m=INT32_MAX, shift=2)  # 2^32 wraps to 0
@example(x=-1, m=2**30, shift=-31)
def test_multiply_by_quantized_multiplier_matches_cxx(x: int, m: int, shift: int) -> None:
    got = multiply_by_quantized_multiplier(np.int32(x), m, shift)
    assert got.dtype == np.int32
    assert int(got) == ref_mbqm(x, m, shift)
    single = multiply_by_quantized_multiplier(np.int32(x), m, shift, single_rounding=True)
    assert int(single) == ref_mbqm_single(x, m, shift)


def ref_ruy(x: int, m: int, shift: int) -> int:
    """ruy's x86 kernels (kernel_avx512.cc, apply_multiplier and rounding_right_shift), with
    Python ints: the left shift wraps in int32, ``(x*m + 2^30) >> 31``, then
    ``(r + nudge) >> e`` unless ``r > INT32_MAX - nudge``, where the kernel stores
    ``1 << (31 - e)``."""
    left, e = max(shift, 0), max(-shift, 0)
    x = int(wrap_int32(np.int64(x) << left))
    r = (x * m + (1 << 30)) >> 31
    nudge = (1 << (e - 1)) if e > 0 else 0
    return (1 << (31 - e)) if r > INT32_MAX - nudge else (r + nudge) >> e


@settings(max_examples=400, deadline=None)
@given(x=int32s, m=multipliers, shift=shifts)
@example(x=INT32_MAX, m=INT32_MAX, shift=0)  # r = INT32_MAX - 1 + ..., no nudge at e = 0
@example(x=INT32_MAX, m=INT32_MAX, shift=-1)  # r + nudge passes INT32_MAX: the guard
@example(x=-5, m=2**30, shift=-1)  # first step -2.5 rounds up to -2, then -1
def test_ruy_requantization_matches_its_kernel(x: int, m: int, shift: int) -> None:
    assert int(requantize_ruy(np.int32(x), m, shift)) == ref_ruy(x, m, shift)


def test_ruy_rounds_ties_up_where_gemmlowp_rounds_them_away() -> None:
    """-10 · 2^30 / 2^31 = -5 exactly, then -5 / 2 = -2.5: ruy gives -2, gemmlowp -3; -5 is
    -2.5 after the first step already, which ruy rounds up to -2, then -1."""
    m, shift = 2**30, -1
    assert int(requantize_ruy(np.int32(-10), m, shift)) == -2
    assert int(multiply_by_quantized_multiplier(np.int32(-10), m, shift)) == -3
    assert int(requantize_ruy(np.int32(-5), m, shift)) == -1


@settings(max_examples=200, deadline=None)
@given(x=st.integers(-(2**24), 2**24), m=st.integers(2**30, INT32_MAX), shift=st.integers(-31, 0))
def test_double_rounding_is_within_one_of_exact(x: int, m: int, shift: int) -> None:
    """The two roundings may differ from one exact rounding by at most one code; the single
    rounding path is the exact round-half-up of x * m * 2^(shift - 31)."""
    exact = Fraction(x * m, 2 ** (31 - shift))
    single = int(multiply_by_quantized_multiplier(np.int32(x), m, shift, single_rounding=True))
    assert single == math.floor(exact + Fraction(1, 2))
    double = int(multiply_by_quantized_multiplier(np.int32(x), m, shift))
    assert abs(double - single) <= 1


def test_vectorized_per_channel_broadcast_matches_scalar() -> None:
    rng = np.random.default_rng(7)
    acc = rng.integers(INT32_MIN, INT32_MAX, size=(13, 6), endpoint=True, dtype=np.int64)
    acc[0, :] = INT32_MIN
    acc[1, :] = INT32_MAX
    m = rng.integers(0, INT32_MAX, size=6, endpoint=True).astype(np.int32)
    shift = np.array([-31, -12, -1, 0, 3, 30], dtype=np.int32)
    got, wraps = multiply_by_quantized_multiplier(acc, m, shift, return_shift_overflows=True)
    expected = np.array(
        [[ref_mbqm(int(acc[i, j]), int(m[j]), int(shift[j])) for j in range(6)] for i in range(13)]
    )
    np.testing.assert_array_equal(got, expected)
    shifted = [int(acc[i, j]) << max(int(shift[j]), 0) for i in range(13) for j in range(6)]
    assert wraps == sum(v != to_int32(v) for v in shifted)
    assert wraps > 0


# ----------------------------------------------------------------- QuantizeMultiplier


positive_doubles = st.floats(
    min_value=0.0, max_value=2.0**29, allow_nan=False, allow_infinity=False
)


@settings(max_examples=400, deadline=None)
@given(d=st.one_of(positive_doubles, st.floats(2.0**-40, 2.0**-20), st.floats(0.25, 4.0)))
@example(d=1.0)
@example(d=1.0 - 2.0**-40)  # rounds to 2^31 -> halved, shift + 1
@example(d=0.5 - 2.0**-40)
@example(d=2.0**-32)  # shift -31: kept
@example(d=2.0**-33)  # shift -32: flushed to zero
@example(d=2.0**-32 * (1 - 2.0**-40))  # rounds up into shift -31
@example(d=0.0)
@example(d=5e-324)
def test_quantize_multiplier_matches_cxx(d: float) -> None:
    m, shift = quantize_multiplier(d)
    assert isinstance(m, int) and isinstance(shift, int)
    assert (m, shift) == ref_quantize_multiplier(d)
    if m:
        assert 2**30 <= m <= INT32_MAX
        # the Q31 form is within half a unit of its last bit of the real multiplier
        assert abs(Fraction(m) * Fraction(2) ** (shift - 31) - Fraction(d)) <= Fraction(2) ** (
            shift - 32
        )


def test_quantize_multiplier_edge_cases_named() -> None:
    assert quantize_multiplier(1.0) == (2**30, 1)
    assert quantize_multiplier(1.0 - 2.0**-40) == (2**30, 1)
    assert quantize_multiplier(0.5) == (2**30, 0)
    assert quantize_multiplier(2.0**-33) == (0, 0)
    assert quantize_multiplier(2.0**-32) == (2**30, -31)
    assert quantize_multiplier(0.0) == (0, 0)
    # single rounding saturates shifts above 30
    assert quantize_multiplier(2.0**31, single_rounding=True) == (INT32_MAX, 30)
    assert quantize_multiplier(2.0**31) == (2**30, 32)


def test_quantize_multiplier_vectorized_equals_scalar() -> None:
    rng = np.random.default_rng(3)
    d = np.concatenate([rng.uniform(1e-6, 2.0, 500), [0.0, 1.0, 1 - 2.0**-40, 2.0**-33, 2.0**-32]])
    m, shift = quantize_multiplier(d)
    assert m.dtype == np.int32 and shift.dtype == np.int32 and m.shape == d.shape
    expected = [ref_quantize_multiplier(float(v)) for v in d]
    assert list(zip(m.tolist(), shift.tolist(), strict=True)) == expected


@pytest.mark.parametrize("bad", [-1e-3, float("nan"), float("inf")])
def test_quantize_multiplier_refuses_bad_input(bad: float) -> None:
    with pytest.raises(QuantscopeError, match="finite and >= 0"):
        quantize_multiplier(bad)
    with pytest.raises(ValueError):
        quantize_multiplier(np.array([0.5, bad]))


def test_multiply_refuses_out_of_range_inputs() -> None:
    with pytest.raises(QuantscopeError, match="shift must lie"):
        multiply_by_quantized_multiplier(np.int32(5), 2**30, 31)
    with pytest.raises(QuantscopeError, match="shift must lie"):
        multiply_by_quantized_multiplier(np.int32(5), 2**30, -32)
    with pytest.raises(QuantscopeError, match="outside int32"):
        multiply_by_quantized_multiplier(np.int64(2**31), 2**30, 0)
    with pytest.raises(QuantscopeError, match="multiplier_q31"):
        multiply_by_quantized_multiplier(np.int32(5), -1, 0)
    with pytest.raises(TypeError):
        multiply_by_quantized_multiplier(np.float32(5.0), 2**30, 0)
    with pytest.raises(QuantscopeError, match="exponent"):
        rounding_divide_by_pot(np.int32(5), 32)


def test_wrap_int32() -> None:
    values = np.array([2**31, -(2**31) - 1, 2**32 + 5, -7], dtype=np.int64)
    np.testing.assert_array_equal(wrap_int32(values), [to_int32(int(v)) for v in values])


@settings(max_examples=200, deadline=None)
@given(x=st.integers(-(2**24), 2**24), m=st.integers(2**30, INT32_MAX), shift=st.integers(-31, 0))
@example(x=-3 * 2**12, m=5 * 2**28, shift=-10)  # -7.5 exactly: -8 away from zero, -7 up
def test_single_rounding_with_ties_away_is_the_exact_rounding(x: int, m: int, shift: int) -> None:
    """LiteRT's reference kernels: one rounding of x * m * 2^(shift - 31), ties away from 0."""
    exact = Fraction(x * m, 2 ** (31 - shift))
    away = int(multiply_by_quantized_multiplier(np.int32(x), m, shift, single_rounding=True,
                                                ties="away"))
    want = math.floor(abs(exact) + Fraction(1, 2))
    assert away == (want if exact >= 0 else -want)
