"""A block format's parameters chosen a slice of rows at a time equal the whole tensor's, field
for field, and so do the screened best formats (quantscope.state.row_slices); a llama.cpp
type's slices, measured as they are encoded, join into its exact report."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from quantscope.core.stats import format_sweep as fs
from quantscope.core.stats.gguf_stats import analyze_gguf
from quantscope.errors import QuantscopeError
from quantscope.state import Settings
from quantscope.state import formats as formats_module
from quantscope.state.choices import FormatChoice
from quantscope.state.formats import (
    SLICES,
    best_formats,
    candidates,
    format_pane_params,
    format_point,
    point_specs,
    report_point,
)
from quantscope.state.row_slices import GgufSliceScreen, RowSliceScreen, row_local

SETTINGS = dataclasses.replace(Settings(), axis=0)


def _tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    g = (rng.standard_normal((37, 512)) * rng.lognormal(0, 1, (37, 1))).astype(np.float32)
    z = g.copy()
    z[3] = 0.0  # a zero row, and zero blocks in every row
    z[:, 256:320] = 0.0
    o = g.copy()
    o[30, 7] = 1e4  # one loud block in the last slice
    ties = (rng.integers(-256, 257, (16, 256)) / np.float32(32)).astype(np.float32)
    return {"gaussian_rows": g, "zeros": z, "outlier": o, "ties": ties,
            "positive": np.abs(g)}


TENSORS = _tensors()
SLICED = sorted({str(s) for bits in (8, 4) for s in candidates(bits, True)
                 if row_local(FormatChoice(s), TENSORS["gaussian_rows"], SETTINGS, SLICES)})


def _same(a, b) -> bool:
    """Two parameter sets equal field for field (arrays by dtype, shape and value)."""
    if type(a) is not type(b):
        return False
    for f in dataclasses.fields(a):
        u, v = getattr(a, f.name), getattr(b, f.name)
        if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
            u, v = np.asarray(u), np.asarray(v)
            if u.dtype != v.dtype or u.shape != v.shape or not np.array_equal(
                    u.view(np.uint8) if u.dtype.kind == "V" else u,
                    v.view(np.uint8) if v.dtype.kind == "V" else v, equal_nan=True):
                return False
        elif u != v:
            return False
    return True


def test_the_sliced_formats_are_the_block_formats_chosen_block_by_block():
    assert {"mxfp4", "nf4", "int4_g32", "gptq_int4_g128", "awq_int4_g128",
            "torchao_int4_g64", "gguf_q4_k", "gguf_q8_0", "mxfp8_e4m3"} <= set(SLICED)
    x = TENSORS["gaussian_rows"]
    for spec in ("nvfp4", "int8/channel", "fp8_e4m3/tensor", "fp4_e2m1/channel"):
        assert not row_local(FormatChoice(spec), x, SETTINGS, SLICES)  # whole-tensor figures
    assert not row_local(FormatChoice("mxfp4"), x[:4], SETTINGS, SLICES)  # fewer rows
    assert not row_local(FormatChoice("mxfp4"), x, dataclasses.replace(SETTINGS, method="mse"),
                         SLICES)


@pytest.mark.parametrize("name", sorted(TENSORS))
@pytest.mark.parametrize("spec", SLICED)
def test_stacked_slice_parameters_are_the_whole_tensors(name, spec):
    x = TENSORS[name]
    if spec not in map(str, point_specs(x, (spec,))):
        pytest.skip(f"{spec} has no whole blocks in rows of {x.shape[-1]}")
    whole = format_pane_params(x, spec, SETTINGS)
    screen = RowSliceScreen(x, SLICES, lambda rows: format_pane_params(rows, spec, SETTINGS))
    stacked = screen.params()
    assert _same(stacked, whole), spec
    choice = FormatChoice(spec)
    assert format_point(x, None, choice, stacked) == format_point(x, None, choice, whole)
    # the slices' squared errors add up to the whole's (the same terms, another order)
    total = sum(screen.slice_sum(k, SLICES) for k in range(SLICES))
    want = fs.error_sum(x, whole)
    assert abs(total - want) <= 4 * x.size * 2.0 ** -53 * want


@pytest.mark.parametrize("name", sorted(TENSORS))
def test_best_formats_with_sliced_parameters_equal_the_unsliced_screen(name, monkeypatch):
    x = np.tile(TENSORS[name], (1 + formats_module.SCREEN_MIN // TENSORS[name].size, 1))
    assert x.size >= formats_module.SCREEN_MIN  # screened
    got = best_formats(x, SETTINGS, per_channel=True)
    monkeypatch.setattr(formats_module, "row_local", lambda *a: False)
    assert got == best_formats(x, SETTINGS, per_channel=True)


def test_a_refused_slice_raises_the_whole_tensors_refusal():
    x = TENSORS["gaussian_rows"].copy()
    x[30, 5] = np.inf  # in the last slice only

    def choose(rows):
        if not np.isfinite(rows).all():
            raise QuantscopeError(f"{rows.shape[0]} rows refused")
        return format_pane_params(rows, "mxfp4", SETTINGS)

    screen = RowSliceScreen(x, SLICES, choose)
    screen.slice_sum(0, SLICES)  # a sound slice
    with pytest.raises(QuantscopeError, match=r"^37 rows refused"):
        screen.params()


GGUF = [s for s in SLICED if s.startswith("gguf_")]


def _same_report(a, b) -> bool:
    """Two reports equal in every figure, the per-block columns included, bit for bit."""
    for f in ("n", "n_nonfinite", "mse", "rounding_mse", "clipping_mse", "sqnr_db",
              "max_abs_error", "clipped_below", "clipped_above", "codes_used", "signal_power"):
        u, v = getattr(a, f), getattr(b, f)
        if not (u == v or (u != u and v != v)):
            return False
    ta, tb = a.unit_totals, b.unit_totals
    return (np.array_equal(a.code_histogram, b.code_histogram)
            and vars(ta).keys() == vars(tb).keys()
            and all(np.array_equal(np.asarray(v), np.asarray(vars(tb)[k]), equal_nan=True)
                    for k, v in vars(ta).items()))


@pytest.mark.parametrize("likely_after", [None, 0, 3])
@pytest.mark.parametrize("name", sorted(TENSORS))
@pytest.mark.parametrize("spec", GGUF)
def test_a_gguf_screens_slices_join_into_the_whole_tensors_blocks_and_report(
        name, spec, likely_after):
    """Slices screened by their decoded values, then (named the likeliest best after
    ``likely_after`` slices) measured as they are encoded: the joined blocks and report are
    the whole tensor's either way."""
    x = TENSORS[name]
    if spec not in map(str, point_specs(x, (spec,))):
        pytest.skip(f"{spec} has no whole blocks in rows of {x.shape[-1]}")
    whole = format_pane_params(x, spec, SETTINGS)
    screen = GgufSliceScreen(x, SLICES, spec, lambda: format_pane_params(x, spec, SETTINGS))
    if likely_after is not None:
        for k in range(likely_after):
            screen.slice_sum(k, SLICES)
        screen.likely_best()
        screen.slice_sum(SLICES - 1, SLICES)
    params, report = screen.point_params()
    assert _same(params, whole), spec
    assert _same_report(report, analyze_gguf(x, whole)), spec
    choice = FormatChoice(spec)
    assert report_point(choice, params, report, x.size) == format_point(x, None, choice, whole)
    # each slice's sum is its blocks' exact terms: together the whole's, in another order
    total = sum(screen.slice_sum(k, SLICES) for k in range(SLICES))
    want = fs.error_sum(x, whole)
    assert abs(total - want) <= 4 * x.size * 2.0 ** -53 * want


def test_a_gguf_screen_refuses_as_the_pane_does():
    x = TENSORS["gaussian_rows"].copy()
    x[30, 5] = np.nan  # in the last slice only
    with pytest.raises(QuantscopeError) as whole:
        format_pane_params(x, "gguf_q8_0", SETTINGS)
    screen = GgufSliceScreen(x, SLICES, "gguf_q8_0",
                             lambda: format_pane_params(x, "gguf_q8_0", SETTINGS))
    screen.slice_sum(0, SLICES)  # a sound slice
    with pytest.raises(QuantscopeError) as sliced:
        screen.point_params()
    assert str(sliced.value) == str(whole.value)


def test_a_gguf_screen_reports_an_overflowed_scale_as_the_report_refuses_it():
    x = np.full((16, 256), 1e38, np.float32)  # fp16 block scales overflow
    x[:, ::2] = -1e38
    whole = format_pane_params(x, "gguf_q4_0", SETTINGS)
    with pytest.raises(QuantscopeError) as direct:
        analyze_gguf(x, whole)
    screen = GgufSliceScreen(x, SLICES, "gguf_q4_0",
                             lambda: format_pane_params(x, "gguf_q4_0", SETTINGS))
    assert not math.isfinite(screen.slice_sum(0, SLICES))  # the screen must let it decide
    with pytest.raises(QuantscopeError) as sliced:
        screen.point_params()
    assert str(sliced.value) == str(direct.value)
