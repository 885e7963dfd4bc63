"""A block format's parameters chosen a slice of rows at a time equal the whole tensor's, field
for field, and so do the screened best formats (quantscope.state.row_slices)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from quantscope.core.stats import format_sweep as fs
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
)
from quantscope.state.row_slices import RowSliceScreen, row_local

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
