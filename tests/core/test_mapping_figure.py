"""The worked example of the figures: the seeds' numbers for x = [-1, 0, 0.5, 3], and a cast
without clamp wrapping 200 to -56."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import params_from_range
from quantscope.core.labs.mapping import (
    DEFAULT_VALUES,
    MAX_VALUES,
    cast_without_clamp,
    map_values,
    parse_values,
)
from quantscope.core.tensors.validate import EngineValueError


def test_the_seed_example_symmetric_and_asymmetric():
    sym, asym = map_values(DEFAULT_VALUES)
    assert sym.scale == pytest.approx(3 / 127, rel=1e-7) and sym.zero_point == 0
    assert sym.codes.tolist() == [-42, 0, 21, 127]
    assert sym.unreachable == ((-128, -43),)  # codes symmetric can never use here
    assert asym.scale == pytest.approx(4 / 255, rel=1e-7) and asym.zero_point == -64
    assert asym.codes.tolist() == [-128, -64, -32, 127]
    assert asym.unreachable == ()
    for m in (sym, asym):  # dequantized values and errors are the engine's
        np.testing.assert_array_equal(m.dequantized, m.params.dequantize(
            m.params.quantize(np.asarray(DEFAULT_VALUES, np.float32))).astype(np.float64))
        np.testing.assert_allclose(m.errors, m.dequantized - np.asarray(DEFAULT_VALUES))
        assert m.max_error == pytest.approx(np.abs(m.errors).max())
        assert m.max_error <= m.scale / 2 + 1e-7  # nothing clipped: half a step at most
    assert sym.errors[0] == pytest.approx(-42 * 3 / 127 + 1, abs=1e-6)
    assert asym.max_error < sym.max_error  # the zero point buys resolution here


def test_cast_without_clamp_wraps_and_flips_the_sign():
    r = cast_without_clamp([20.0, 1.0, -20.0], 0.1)
    assert r.unclamped.tolist() == [200, 10, -200]
    assert r.clamped.tolist() == [127, 10, -128]
    assert r.wrapped.tolist() == [-56, 10, 56]
    np.testing.assert_array_equal(r.wrapped, r.unclamped.astype(np.int8))  # what naive code does
    assert r.clamped_back[0] == pytest.approx(12.7, rel=1e-6)
    assert r.wrapped_back[0] == pytest.approx(-5.6, rel=1e-6)
    assert r.wrap_count == 2 and r.sign_flips == 2
    params = params_from_range(-12.8, 12.7, symmetric=False)
    assert params.quantize(np.float32([20.0]))[0] == 127  # the engine saturates


def test_values_typed_or_pasted_and_refused_clearly():
    assert parse_values("[-1, 0, 0.5, 3]").tolist() == [-1.0, 0.0, 0.5, 3.0]
    assert parse_values("−1; 2\n3 4").tolist() == [-1.0, 2.0, 3.0, 4.0]
    with pytest.raises(EngineValueError, match="'x' is not a number"):
        parse_values("1, x, 3")
    with pytest.raises(EngineValueError, match=f"at most {MAX_VALUES}"):
        parse_values(" ".join(["1"] * (MAX_VALUES + 1)))
    with pytest.raises(EngineValueError, match="finite"):
        parse_values("1 inf")
    with pytest.raises(EngineValueError, match="at least one"):
        parse_values("  ")
    with pytest.raises(EngineValueError, match="scale"):
        cast_without_clamp([1.0], 0.0)
