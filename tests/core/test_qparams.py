"""Scale and zero-point rules: hand-worked examples and the 0.0-is-exact property."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from quantscope import QuantParams, choose_qparams, code_range, params_from_range

f32 = np.float32


def test_symmetric_example_by_hand():
    x = np.array([-1.0, 0.0, 0.5, 3.0], f32)
    p = choose_qparams(x, symmetric=True)
    assert (p.qmin, p.qmax) == (-127, 127)
    assert p.scale == f32(3.0 / 127) and int(p.zero_point) == 0
    q = p.quantize(x)
    # -1/0.023622 = -42.33 -> -42; 0.5/0.023622 = 21.17 -> 21; 3 -> 127.
    assert q.tolist() == [-42, 0, 21, 127]
    err = np.abs(p.dequantize(q) - x)
    assert err.max() == pytest.approx(abs(-42 * f32(3 / 127) + 1), rel=1e-6)
    assert err.max() <= p.scale / 2


def test_asymmetric_example_by_hand():
    x = np.array([-1.0, 0.0, 0.5, 3.0], f32)
    p = choose_qparams(x, symmetric=False)
    assert (p.qmin, p.qmax) == (-128, 127)
    assert p.scale == f32(4.0 / 255)
    # zero point = round(-128 - (-1) / (4/255)) = round(-64.25) = -64
    assert int(p.zero_point) == -64
    q = p.quantize(x)
    assert q.tolist() == [-128, -64, -32, 127]
    assert p.dequantize(q)[1] == 0.0


def test_narrow_and_full_range():
    assert code_range(8, symmetric=True) == (-127, 127)
    assert code_range(8, symmetric=True, narrow_range=False) == (-128, 127)
    assert code_range(8, symmetric=False) == (-128, 127)
    assert code_range(4, symmetric=False, signed=False) == (0, 15)
    p = choose_qparams(np.array([-2.0, 1.0], f32), narrow_range=False)
    assert (p.qmin, p.qmax) == (-128, 127) and p.scale == f32(2 / 127)
    with pytest.raises(ValueError, match="bits"):
        code_range(9, symmetric=True)


@pytest.mark.parametrize("x", [np.zeros(5, f32), np.zeros(0, f32)])
@pytest.mark.parametrize("symmetric", [True, False])
def test_degenerate_range_gives_unit_scale(x, symmetric):
    p = choose_qparams(x, symmetric=symmetric)
    assert p.scale == 1.0 and int(p.zero_point) == 0


def test_all_positive_range_widens_to_zero():
    p = params_from_range(2.0, 4.0, symmetric=False)
    assert p.scale == f32(4.0 / 255) and int(p.zero_point) == -128


def test_nonfinite_values_do_not_stretch_the_range():
    x = np.array([1.0, -2.0, np.inf, np.nan], f32)
    p = choose_qparams(x)
    assert p.scale == f32(2.0 / 127)


def test_per_channel_axes(query_weight):
    w = query_weight
    p0 = choose_qparams(w, granularity="channel", axis=0)
    assert p0.scale.shape == (384,) and p0.axis == 0
    np.testing.assert_array_equal(p0.scale, (np.abs(w).max(axis=1) / 127).astype(f32))
    p1 = choose_qparams(w, granularity="channel", axis=-1)
    np.testing.assert_array_equal(p1.scale, (np.abs(w).max(axis=0) / 127).astype(f32))


def test_per_group_shapes_and_ragged_tail():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(6, 10)).astype(f32)
    p = choose_qparams(w, granularity="group", axis=1, group_size=4)
    assert p.scale.shape == (6, 3)
    np.testing.assert_array_equal(p.scale[:, 2], (np.abs(w[:, 8:]).max(axis=1) / 127).astype(f32))
    with pytest.raises(ValueError, match="group_size"):
        choose_qparams(w, granularity="group", axis=1)


def test_quantparams_validates_itself():
    with pytest.raises(ValueError, match="scale"):
        QuantParams(np.float32(0), np.int32(0))
    with pytest.raises(ValueError, match="zero_point"):
        QuantParams(np.float32(1), np.int32(200))
    p = QuantParams(np.float32(0.5), np.int32(3), qmin=0, qmax=255, symmetric=False)
    assert p.bits == 8 and p.granularity == "tensor" and p.levels == 256


def test_zero_dim_tensor_per_channel_is_refused():
    with pytest.raises(ValueError, match="0-d"):
        choose_qparams(np.float32(1.0), granularity="channel")


ranges = st.floats(-1e5, 1e5, allow_nan=False, width=32)


@settings(max_examples=300, deadline=None)
@given(a=ranges, b=ranges, bits=st.integers(2, 8), signed=st.booleans(),
       rounding=st.sampled_from(["half_even", "half_away"]))
def test_zero_is_exact_under_every_asymmetric_params(a, b, bits, signed, rounding):
    lo, hi = min(a, b), max(a, b)
    p = params_from_range(lo, hi, symmetric=False, bits=bits, signed=signed, rounding=rounding)
    q = p.quantize(np.zeros(3, f32))
    assert (q.astype(int) == int(p.zero_point)).all()
    assert (p.dequantize(q) == 0.0).all()
    assert p.qmin <= int(p.zero_point) <= p.qmax


@settings(max_examples=200, deadline=None)
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=20),
                    elements=st.floats(-1e4, 1e4, allow_nan=False, width=32)),
       symmetric=st.booleans())
def test_minmax_params_clip_at_most_a_half_step_tie(x, symmetric):
    """Min/max leaves nothing outside the window, except a value whose x / scale lands exactly
    on a .5 tie at the window's edge (e.g. [-9990, 9990] asymmetric: -127.5 and 127.5 cannot
    both round inward with an integer zero point); its error is still at most half a step."""
    from quantscope import analyze

    p = choose_qparams(x, symmetric=symmetric)
    r = analyze(x, p)
    if r.clipped_below or r.clipped_above:
        ulp = float(np.spacing(np.abs(x).max()))  # float32 rounding of the dequantized value
        assert r.max_abs_error <= float(p.scale) * 0.5 + ulp
    unclamped = np.rint(x / p.scale) + int(p.zero_point)
    beyond = (unclamped < p.qmin) | (unclamped > p.qmax)
    assert (np.abs(x[beyond] / p.scale) % 1 == 0.5).all()


def test_minmax_tie_example_found_by_hypothesis():
    x = np.array([9990.0, -9990.0], f32)
    p = choose_qparams(x, symmetric=False)
    q = p.quantize(x)
    assert q.tolist() == [127, -128]  # -9990 sits on the -127.5 tie and is clipped below
    # Half a step, plus the float32 rounding of the dequantized value (one ulp at 10029).
    assert np.abs(p.dequantize(q) - x).max() <= p.scale / 2 + np.spacing(f32(10029))
