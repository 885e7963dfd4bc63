"""quantize / dequantize: worked examples checked by hand, validation, and property tests for
the rounding and saturation rules."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from quantscope import (
    EngineTypeError,
    EngineValueError,
    dequantize,
    quantize,
    quantize_fp32_to_int8,
)
from quantscope.core.tensors.validate import ARITHMETIC_RULES

f32 = np.float32
finite_f32 = st.floats(-1e6, 1e6, allow_nan=False, width=32)
arrays = hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=9),
                    elements=finite_f32)
scales = st.floats(float(np.float32(1e-4)), 1e3, width=32)


# -- worked examples -----------------------------------------------------------------------

def test_scale_point_one_codes_and_values():
    x = np.array([-1.0, 0.0, 1.0], f32)
    q = quantize(x, 0.1)
    # -1 / 0.1 = -10 exactly in float32, so the codes are exact and the values come back.
    assert q.tolist() == [-10, 0, 10]
    assert q.dtype == np.int8
    np.testing.assert_array_equal(dequantize(q, 0.1), f32(0.1) * np.array([-10, 0, 10], f32))


def test_saturation_never_wraps():
    q = quantize_fp32_to_int8(np.array([200.0, -200.0, 127.4, 127.6, -128.6], f32), 1.0)
    assert q.tolist() == [127, -128, 127, 127, -128]


def test_ties_half_even_and_half_away():
    x = np.array([0.5, 1.5, 2.5, -2.5, -0.5, 3.5], f32)
    assert quantize(x, 1.0).tolist() == [0, 2, 2, -2, 0, 4]
    assert quantize(x, 1.0, rounding="half_away").tolist() == [1, 2, 3, -3, -1, 4]


def test_half_away_is_exact_just_below_a_half():
    # trunc(x + 0.5) would give 1 here, because 0.49999997 + 0.5 rounds up to 1.0 in float32.
    x = np.array([np.nextafter(f32(0.5), f32(0)), -np.nextafter(f32(0.5), f32(0))], f32)
    assert quantize(x, 1.0, rounding="half_away").tolist() == [0, 0]


def test_zero_dim_and_empty_keep_shape():
    q0 = quantize_fp32_to_int8(np.float32(3.3), 1.0)
    assert q0.shape == () and q0.dtype == np.int8 and int(q0) == 3
    qe = quantize_fp32_to_int8(np.zeros((0, 4), f32), 1.0)
    assert qe.shape == (0, 4) and qe.dtype == np.int8


def test_dequantize_widens_before_subtracting_zero_point():
    out = dequantize(np.array([127], np.int8), 0.5, -128, )
    assert out.dtype == np.float32 and out.tolist() == [127.5]


def test_unsigned_codes_are_uint8():
    q = quantize(np.array([-1.0, 0.0, 300.0], f32), 1.0, 10, qmin=0, qmax=255)
    assert q.dtype == np.uint8 and q.tolist() == [9, 10, 255]


def test_low_bit_range_saturates():
    q = quantize(np.array([-9.0, 9.0, 1.2], f32), 1.0, qmin=-8, qmax=7)
    assert q.tolist() == [-8, 7, 1]


def test_float64_float16_bfloat16_convert_to_float32_first():
    # 0.1 is not exact in float32: the float64 value must be rounded to float32 before dividing.
    x64 = np.array([0.30000001192092896 * 5], np.float64)
    assert quantize(x64, 0.1).tolist() == quantize(x64.astype(f32), 0.1).tolist()
    xb = np.array([1.5, -2.25], ml_dtypes.bfloat16)
    assert quantize(xb, 0.25).tolist() == [6, -9]
    assert quantize(np.array([1.5], np.float16), 0.5).tolist() == [3]


def test_multiply_and_divide_disagree_where_fbgemm_says():
    x = np.array([0.273939937], f32)
    scale = f32(0.00214854861)
    assert quantize(x, scale, qmin=0, qmax=255).tolist() == [127]  # 127.499992 -> 127
    assert quantize(x, scale, qmin=0, qmax=255, arithmetic="multiply").tolist() == [128]


# -- validation ------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf, 1e-50])
def test_bad_scale_is_a_value_error(bad):
    with pytest.raises(ValueError, match="scale"):
        quantize(np.ones(3, f32), bad)


@pytest.mark.parametrize("zp", [128, -129, 1.5, True])
def test_bad_zero_point_is_a_value_error(zp):
    with pytest.raises(ValueError, match="zero_point"):
        quantize(np.ones(3, f32), 1.0, zp)


@pytest.mark.parametrize("x", [np.arange(3), np.array([True]), np.array([1j]),
                               np.array([object()], dtype=object)])
def test_non_float_tensor_is_a_type_error(x):
    with pytest.raises(TypeError, match="dtype"):
        quantize(x, 1.0)
    assert issubclass(EngineTypeError, TypeError)


def test_nonfinite_raises_with_count_and_first_index():
    x = np.array([[1.0, 2.0], [np.nan, np.inf]], f32)
    with pytest.raises(EngineValueError, match=r"2 non-finite .* index \(1, 0\)"):
        quantize(x, 1.0)


def test_nonfinite_saturate():
    x = np.array([np.inf, -np.inf, np.nan, 1.0], f32)
    assert quantize(x, 1.0, 3, nonfinite="saturate").tolist() == [127, -128, 3, 4]


def test_unknown_option_names_the_choices():
    with pytest.raises(ValueError, match="half_even"):
        quantize(np.ones(2, f32), 1.0, rounding="nearest")


def test_code_range_must_fit_storage():
    with pytest.raises(ValueError, match="int8"):
        quantize(np.ones(2, f32), 1.0, qmin=-200, qmax=100)


# -- per-channel and per-group ------------------------------------------------------------------

def test_per_channel_scale_shape_is_checked():
    with pytest.raises(ValueError, match="shape"):
        quantize(np.ones((3, 4), f32), np.ones(4, f32), axis=0)


def test_per_group_ragged_last_block():
    x = np.arange(10, dtype=f32).reshape(2, 5)
    scale = np.array([[1.0, 2.0, 4.0], [1.0, 1.0, 0.5]], f32)  # blocks of 2 along axis 1
    q = quantize(x, scale, axis=1, group_size=2)
    expect = np.rint(x / np.repeat(scale, 2, axis=1)[:, :5])
    np.testing.assert_array_equal(q, expect)


@settings(max_examples=60, deadline=None)
@given(x=hnp.arrays(np.float32, st.tuples(st.integers(1, 5), st.integers(1, 7)),
                    elements=finite_f32), data=st.data())
def test_per_channel_equals_per_tensor_row_by_row(x, data):
    scale = np.array(data.draw(st.lists(scales, min_size=x.shape[0], max_size=x.shape[0])), f32)
    zp = np.array(data.draw(st.lists(st.integers(-128, 127), min_size=x.shape[0],
                                     max_size=x.shape[0])), np.int32)
    q = quantize(x, scale, zp, axis=0)
    for i in range(x.shape[0]):
        np.testing.assert_array_equal(q[i], quantize(x[i], scale[i], zp[i]))
    np.testing.assert_array_equal(
        quantize(x.T, scale, zp, axis=-1), q.T)


# -- properties of rounding and saturation ------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(x=arrays, scale=scales, zp=st.integers(-128, 127),
       rounding=st.sampled_from(["half_even", "half_away"]),
       arithmetic=st.sampled_from(ARITHMETIC_RULES))
def test_rounding_and_saturation_rules(x, scale, zp, rounding, arithmetic):
    q = quantize(x, scale, zp, rounding=rounding, arithmetic=arithmetic)
    assert q.shape == x.shape and q.dtype == np.int8
    exact = x.astype(np.float64) / np.float64(f32(scale)) + zp
    # No wraparound: values beyond the range sit at its ends.
    assert (q[exact > 128] == 127).all() and (q[exact < -129] == -128).all()
    # Every unclipped element is within half a step (plus float32 rounding of x / scale).
    inside = (exact > -128.5) & (exact < 127.5)
    xhat = dequantize(q, scale, zp).astype(np.float64)
    err = np.abs(x.astype(np.float64) - xhat)
    tol = f32(scale) * (0.5 + 1e-5) + 1e-6 * np.abs(x)
    assert (err[inside] <= tol[inside]).all()
    # Codes are monotone in x.
    order = np.argsort(x.ravel(), kind="stable")
    assert (np.diff(q.ravel()[order].astype(int)) >= 0).all()


@settings(max_examples=150, deadline=None)
@given(x=arrays, scale=scales, zp=st.integers(-128, 127),
       rounding=st.sampled_from(["half_even", "half_away"]))
def test_quantize_dequantize_quantize_is_idempotent(x, scale, zp, rounding):
    q = quantize(x, scale, zp, rounding=rounding)
    q2 = quantize(dequantize(q, scale, zp), scale, zp, rounding=rounding)
    np.testing.assert_array_equal(q, q2)


@pytest.mark.parametrize("arithmetic", ["multiply", "fma", "multiply_add"])
def test_a_scale_without_a_float32_reciprocal_is_refused_where_it_is_multiplied(arithmetic):
    """1 / scale overflows below ~2.94e-39: x * inf is NaN at x = 0, which has no code."""
    from quantscope.core.schemes.qparams import QuantParams
    from quantscope.core.tensors.validate import SMALLEST_INVERTIBLE_SCALE as smallest

    assert np.isfinite(f32(1) / smallest)
    with np.errstate(over="ignore"):
        assert np.isinf(f32(1) / np.nextafter(smallest, f32(0)))
    x = np.array([0.0, 1e-40, -2e-39], f32)
    tiny = np.nextafter(smallest, f32(0))
    with pytest.raises(ValueError, match="reciprocal overflows"):
        quantize(x, tiny, arithmetic=arithmetic)
    with pytest.raises(ValueError, match="reciprocal overflows"):
        QuantParams(np.array([1.0, tiny], f32), 0, -127, 127, axis=0, arithmetic=arithmetic)
    assert quantize(x, tiny).tolist() == [0, 0, -1]  # dividing needs no reciprocal
    assert quantize(x, smallest, arithmetic=arithmetic).tolist() == [0, 0, -1]
    QuantParams(tiny, 0, -127, 127, inv_scale=f32(1e38), arithmetic=arithmetic)  # given: fine
