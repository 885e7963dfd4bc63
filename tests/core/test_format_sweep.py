"""The error screen (quantscope.core.stats.format_sweep): the direct pass's terms summed in
another order, so the exact report's error and SQNR lie within its stated bounds; and a large
tensor's best formats through the screen equal every format's exact report compared (the
prepared tensor's report above ``DIRECT_MAX`` elements, as ``quantscope report`` prints it)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from quantscope.core import analyze
from quantscope.core.stats import format_sweep as fs
from quantscope.state import Settings
from quantscope.state.formats import (
    SCREEN_MIN,
    best_formats,
    best_key,
    best_of,
    candidates,
    format_pane_params,
    format_points,
    point_specs,
)
from quantscope.state.pane_rules import DIRECT_MAX, analyze_with
from quantscope.state.source import prepare_tensor

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources" / "samples"


def _tensors() -> dict[str, np.ndarray]:
    """Real MiniLM tensors and constructed ones at the screen's size: ties at half a step of
    every power-of-two grid, zero rows and blocks, a huge outlier, subnormal-sized values, a single
    sign (no NaN: the formats' range rules refuse it, the scan reports that)."""
    gelu = np.load(SAMPLES / "layer0_ffn_gelu_activations.npy").astype(np.float32)
    out = {"minilm_query": np.load(SAMPLES / "layer0_query_weight.npy"),
           "minilm_intermediate": np.load(SAMPLES / "layer0_intermediate_dense_weight.npy"),
           "minilm_gelu": gelu.reshape(-1, gelu.shape[-1])}
    rng = np.random.default_rng(37)
    g = (rng.standard_normal((128, 512)) * rng.lognormal(0, 1, (128, 1))).astype(np.float32)
    out["gaussian_rows"] = g
    # multiples of 1/32 up to 8: under power-of-two scales (MX blocks, and a per-tensor
    # amax of exactly 8) many elements sit exactly halfway between representable values
    out["ties"] = (rng.integers(-256, 257, (256, 256)) / np.float32(32)).astype(np.float32)
    out["ties"][0, 0] = 8.0
    z = g.copy()
    z[5] = 0.0  # a zero channel
    z[:, 64:128] = 0.0  # zero blocks and groups in every row
    out["zeros"] = z
    o = g.copy()
    o[7, 300] = 1e4  # a huge outlier: most of the tensor underflows its per-tensor grids
    out["outlier"] = o
    out["subnormal"] = g * np.float32(1e-39)
    out["positive"] = np.abs(g)
    return out


TENSORS = _tensors()
SETTINGS = dataclasses.replace(Settings(), axis=0)


def test_the_tensors_take_the_screen():
    assert all(x.size >= SCREEN_MIN for x in TENSORS.values())
    assert any(x.size > DIRECT_MAX for x in TENSORS.values())  # some prepared, as report does


def _prepared(x: np.ndarray):
    """``x`` prepared as ``quantscope report`` prepares it, where its reports read the
    preparation (above ``DIRECT_MAX`` elements)."""
    return prepare_tensor(x, SETTINGS, warm=False) if x.size > DIRECT_MAX else None


@pytest.mark.parametrize("name", sorted(TENSORS))
def test_exact_report_lies_within_the_screen_bounds(name):
    x = TENSORS[name]
    signal = fs.signal_sum(x)
    finite = np.isfinite(x)
    assert signal == pytest.approx(float(np.sum(np.where(finite, x, 0).astype(np.float64)
                                                ** 2)), rel=1e-12)
    prepared = _prepared(x)
    screened = 0
    for bits in (8, 4):
        for spec in point_specs(x, candidates(bits)):
            params = format_pane_params(x, spec, SETTINGS)
            assert fs.screenable(params), spec
            report = analyze(x, params)
            tot = report.unit_totals
            exact = float(tot.round_err.sum()) + float(tot.clip_err.sum())
            err = fs.error_sum(x, params)
            # the same terms in another order: within 2n units of roundoff of the sum
            assert abs(err - exact) <= 2 * x.size * 2.0 ** -53 * exact, (spec, err, exact)
            # in slices (rows, or one long row's columns): every term once
            parts = [fs.ErrorScreen(x, params).slice_sum(k, 8) for k in range(8)]
            assert min(parts) >= 0 and abs(sum(parts) - exact) <= 2 * x.size * 2.0 ** -53 * exact
            b = fs.screen_sqnr(x, params, signal, x.size)
            assert b.low <= report.sqnr_db <= b.high, (spec, b, report.sqnr_db)
            # and the prepared tensor's report, what `report` and the window print
            shown = analyze_with(x, prepared, params).sqnr_db
            assert b.low <= shown <= b.high, (spec, b, shown)
            assert b.high - b.low < 1e-6 or b.low == b.high
            screened += 1
    # element formats (10), MX (4), NVFP4 (2), NF4; int8 (2), INT4 g32/64/128, GPTQ (2), AWQ;
    # torchao INT4 (3); llama.cpp's Q8_0, Q4_0, Q4_1 and Q4_K where its blocks fit the rows
    assert screened == 31 + (x.shape[-1] % 256 == 0)


def test_bounds_edges():
    assert fs.bounds(1.0, 0.0, 10) == fs.SqnrBounds(np.inf, np.inf)
    assert fs.bounds(0.0, 1.0, 10) == fs.SqnrBounds(-np.inf, -np.inf)
    b = fs.bounds(100.0, 1.0, 10)
    assert b.low < 20.0 < b.high and b.high - b.low < 1e-6
    assert fs.bounds(1.0, 1.0, 2 ** 52) == fs.SqnrBounds(-np.inf, np.inf)  # no useful bound


def test_a_cast_that_is_not_screened_is_refused():
    x = TENSORS["gaussian_rows"]
    p = format_pane_params(x, "int8/tensor", SETTINGS)
    assert fs.screenable(p) and not fs.screenable(p.with_(arithmetic="multiply"))
    p = dataclasses.replace(format_pane_params(x, "fp8_e4m3/tensor", SETTINGS), saturate=False)
    assert not fs.screenable(p)  # its clipped elements are NaN, no squared error
    with pytest.raises(ValueError, match="not screened"):
        fs.error_sum(x, p)


@pytest.mark.parametrize("name", sorted(TENSORS))
def test_screened_best_equals_every_exact_report_compared(name):
    x = TENSORS[name]
    prepared = _prepared(x)
    skipped = 0
    for per_channel in (True, False):
        got = best_formats(x, SETTINGS, per_channel=per_channel)
        for bits, best in ((8, got.best8), (4, got.best4)):
            every = format_points(x, prepared, SETTINGS, candidates(bits, per_channel),
                                  curve=False)
            assert best == max(every, key=best_key)  # every figure, to the bit
            _, exact = best_of(x, SETTINGS, candidates(bits, per_channel), fs.signal_sum(x))
            assert all(p in every for p in exact)
            skipped += len(every) - len(exact)
    assert skipped > 0  # the screen spared some exact reports


def test_ties_between_screened_formats_go_as_before():
    # FP8 E5M2 and E5M2FNUZ share their grid's finite values up to 57344: on this tensor the
    # two reports are equal, so the tie goes to the earlier format, as comparing all does
    x = TENSORS["gaussian_rows"]
    specs = ("fp8_e5m2fnuz/tensor", "fp8_e5m2/tensor")
    every = format_points(x, None, SETTINGS, specs, curve=False)
    assert every[0].sqnr_db == every[1].sqnr_db
    best, exact = best_of(x, SETTINGS, specs, fs.signal_sum(x))
    assert best == every[0] and len(exact) == 2


@pytest.mark.parametrize("method", ["minmax", "manual"])
@pytest.mark.parametrize("name", sorted(TENSORS))
def test_formats_on_shared_ranges_take_the_engines_parameters(name, method):
    """int8 and the element formats chosen on one memo of the units' min/max (as the format
    search shares it) are the engine's parameters field for field, NaN and inf left out."""
    x = TENSORS[name].copy()
    x[1, 2], x[3, 4] = np.nan, -np.inf  # left out of every range, as the engine does
    settings = dataclasses.replace(SETTINGS, method=method)
    ranges: dict = {}
    specs = [s for bits in (8, 4) for s in candidates(bits, True)
             if s.startswith(("int8/", "fp8_", "fp4_"))]
    assert len(specs) == 12
    for spec in specs:
        shared = format_pane_params(x, spec, settings, ranges=ranges)
        alone = format_pane_params(x, spec, settings)
        assert type(shared) is type(alone), spec
        for f in dataclasses.fields(alone):
            a, b = getattr(shared, f.name), getattr(alone, f.name)
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                assert np.asarray(a).dtype == np.asarray(b).dtype, (spec, f.name)
                assert np.array_equal(a, b), (spec, f.name)
            else:
                assert a == b, (spec, f.name)
    assert set(ranges) == {(None, None), (0, None)}  # one pass per layout, not per format
