"""Block and group formats on tensors with more blocks than a per-channel layout may have:
no cap on groups, the reports exact, and a layout with too many groups streamed instead of
sorted (the same numbers as the direct pass)."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams, prepare
from quantscope.core.stats import prepared as prepared_module
from quantscope.core.tensors.layout import param_shape
from quantscope.core.tensors.validate import MAX_UNITS, EngineValueError


def test_an_llm_weight_has_its_groups_and_a_huge_per_channel_layout_is_still_refused():
    assert param_shape((14336, 4096), -1, 16) == (14336, 256)
    assert param_shape((10**9,), 0, 16) == (62_500_000,)
    with pytest.raises(EngineValueError, match="channel quantization here needs"):
        param_shape((MAX_UNITS + 1,), 0, None)


@pytest.fixture(scope="module")
def many_blocks():
    """1.2M rows of 3 values: one block per row in every block format, more blocks than the
    per-channel limit, yet only 3.6M elements."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((MAX_UNITS + 150_000, 3), dtype=np.float32)
    x[::9973] *= 40.0  # outliers in some blocks
    return x


@pytest.mark.parametrize("name", ["nvfp4", "mxfp4", "nf4", "int4_g32"])
def test_more_blocks_than_the_old_cap_report_exactly(name, many_blocks):
    x = many_blocks
    p = choose_qparams(x, format=name)
    assert np.asarray(p.scale).size == x.shape[0] > MAX_UNITS
    r = analyze(x, p)
    xhat = p.dequantize(p.quantize(x)).astype(np.float64)
    sse = np.sum((x.astype(np.float64) - xhat) ** 2)
    assert r.mse * r.n == pytest.approx(sse, rel=1e-12)
    assert r.max_abs_error == np.abs(x.astype(np.float64) - xhat).max()
    assert r.per_channel is not None and r.per_channel.n.size == x.shape[0]
    assert int(r.code_histogram.sum()) == x.size


def test_a_layout_with_too_many_groups_is_streamed_with_the_direct_numbers(monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 256), dtype=np.float32)
    x[5, 17] = 30.0
    sorted_prep = prepare(x)
    monkeypatch.setattr(prepared_module, "LAYOUT_MAX_UNITS", 100)  # 64·8 groups are "many"
    prep = prepare(x)
    for symmetric in (True, False):
        p = choose_qparams(x, format="int4_g32", symmetric=symmetric, prepared=prep)
        assert all(k[1] is None for k in prep._layouts)  # no per-group layout sorted
        streamed = prep.analyze(p)
        assert prep.analyze(p) is streamed  # kept for these parameters
        direct = analyze(x, p)
        assert streamed.mse == direct.mse and streamed.sqnr_db == direct.sqnr_db
        assert np.array_equal(streamed.code_histogram, direct.code_histogram)
        lo, hi = prep.min_max(-1, 32)
        lo_s, hi_s = sorted_prep.min_max(-1, 32)
        assert np.array_equal(lo, lo_s) and np.array_equal(hi, hi_s)
        other = p.with_(zero_point=np.clip(p.zero_point + 1, p.qmin, p.qmax))
        assert prep.analyze(other) is not streamed
        assert prep.analyze(other).mse == analyze(x, other).mse


@pytest.mark.parametrize("shape, block", [((64, 100), 16), ((3, 5, 33), 32), ((9, 16), 16),
                                          ((1000, 3), 64)])
def test_the_compiled_block_amax_is_numpys_finite_range(shape, block):
    """Ragged last blocks, NaN and ±inf left out, a row of NaN only (amax 0), as the range
    rule of the engine (``unit_min_max``) gives it."""
    from quantscope.core.formats.catalog import block_amax
    from quantscope.core.schemes.qparams import unit_min_max

    rng = np.random.default_rng(block)
    x = rng.standard_normal(shape).astype(np.float32)
    if x.size:
        x.flat[::17] = np.nan
        x.flat[5 % x.size] = np.inf
        x.flat[9 % x.size] = -np.inf
        x.reshape(-1, shape[-1])[0, :block] = np.nan
    lo, hi, _ = unit_min_max(x, -1, block)
    want = np.maximum(-lo, hi).astype(np.float32)
    got = block_amax(x, -1, block)
    assert got.shape == want.shape and np.array_equal(got, want)
