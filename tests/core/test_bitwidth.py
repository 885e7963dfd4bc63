"""SQNR against bit width: ~6.02 dB per bit when only rounding remains, and the curve is
exactly the reports of the per-width parameters."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams
from quantscope.core.labs.bitwidth import DB_PER_BIT, BitwidthCurve, bitwidth_curve, sqnr_vs_bits
from quantscope.core.tensors.validate import EngineValueError


@pytest.fixture(scope="module")
def uniform() -> np.ndarray:
    return np.random.default_rng(7).uniform(-1, 1, 200_000).astype(np.float32)


@pytest.mark.parametrize("symmetric", [True, False])
def test_uniform_follows_the_rounding_noise_law(uniform, symmetric):
    curve = sqnr_vs_bits(uniform, symmetric=symmetric, narrow_range=False)
    assert curve.bits.tolist() == [2, 3, 4, 5, 6, 7, 8]
    # uniform on [-1, 1] with step d: signal power 1/3, rounding noise d^2/12, so
    # SQNR = 20 log10(2 / d); symmetric d = 1/(2^(b-1) - 1), asymmetric d = 2/(2^b - 1)
    b = curve.bits.astype(np.float64)
    step = 1 / (2 ** (b - 1) - 1) if symmetric else 2 / (2**b - 1)
    theory = 20 * np.log10(2 / step)
    assert np.all(np.abs(curve.sqnr_db - theory) < 0.05), curve.sqnr_db - theory
    # hence about 6.02 dB per bit once the step is small against the range
    assert abs(curve.sqnr_db[-1] - curve.sqnr_db[-2] - DB_PER_BIT) < 0.1
    assert abs(curve.db_per_bit() - DB_PER_BIT) < 1.0


def test_curve_is_exactly_the_per_width_reports(uniform):
    x = uniform.reshape(400, 500)
    curve = sqnr_vs_bits(x, granularity="channel", axis=0, bits=[4, 8, 6])
    assert curve.bits.tolist() == [4, 6, 8]
    for b, sq, mse in zip(curve.bits, curve.sqnr_db, curve.mse, strict=True):
        rep = analyze(x, choose_qparams(x, granularity="channel", axis=0, bits=int(b)))
        assert sq == rep.sqnr_db
        assert mse == rep.mse


def test_outlier_tensor_falls_below_the_line():
    rng = np.random.default_rng(2)
    x = rng.normal(size=100_000).astype(np.float32)
    x[0] = 100.0
    curve = sqnr_vs_bits(x)
    ideal = sqnr_vs_bits(np.clip(x, -5, 5))
    # at 2-3 bits both round nearly everything to 0; from 4 bits the outlier costs > 5 dB
    assert np.all(curve.sqnr_db[2:] < ideal.sqnr_db[2:] - 5)
    assert curve.db_per_bit() < ideal.db_per_bit()


def test_custom_callables_are_used():
    calls: list[int] = []
    x = np.linspace(-1, 1, 1001, dtype=np.float32)

    def params_for_bits(b):
        calls.append(b)
        return choose_qparams(x, bits=b, symmetric=False)

    curve = bitwidth_curve(params_for_bits, lambda p: analyze(x, p), bits=[2, 3])
    assert calls == [2, 3]
    assert isinstance(curve, BitwidthCurve)
    assert set(curve.to_dict()) == {"bits", "sqnr_db", "mse", "rounding_mse", "clipping_mse"}
    np.testing.assert_allclose(curve.mse, curve.rounding_mse + curve.clipping_mse, rtol=1e-14)


@pytest.mark.parametrize("bad", [[1, 2], [9], []])
def test_bad_widths_are_refused(bad):
    with pytest.raises(EngineValueError, match=r"2\.\.8"):
        sqnr_vs_bits(np.ones(4, np.float32), bits=bad)


def test_ideal_line_passes_through_its_anchor():
    from quantscope.core.labs.bitwidth import ideal_line

    line = ideal_line([2, 8], 8, 40.0)
    assert line[1] == 40.0
    assert line[0] == pytest.approx(40.0 - 6 * DB_PER_BIT)
