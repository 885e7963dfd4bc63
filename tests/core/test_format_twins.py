"""The NumPy twins of a format report's compiled loops give the same numbers, bit for bit."""

import dataclasses

import numpy as np
import pytest

from quantscope.core import choose_qparams
from quantscope.core.formats.catalog import FORMATS, FormatParams, format_kind
from quantscope.core.kernels import compiled, radix_sort
from quantscope.core.stats import format_twins, loop_twins
from quantscope.core.stats.format_stats import analyze_format, element_edges
from quantscope.core.stats.prepared import prepare
from quantscope.io.samples import sample_path

ELEMENT_FORMATS = [n for n in FORMATS if format_kind(n) == "element"]
BLOCK_FORMATS = [n for n in FORMATS if format_kind(n) in ("mx", "nvfp4", "nf4")]
_TOTALS = ("n", "round_err", "clip_err", "max_abs", "below", "above", "sig", "codes", "x_min",
           "x_max", "hist")


def _bits(a) -> np.ndarray:
    """An array's bytes: equal bits, NaN and -0.0 included, compare equal."""
    return np.ascontiguousarray(a).view(np.uint8)


def _same_reports(a, b, what) -> None:
    assert a.summary() == b.summary(), what
    for name in _TOTALS:
        assert np.array_equal(_bits(getattr(a.unit_totals, name)),
                              _bits(getattr(b.unit_totals, name))), (name, what)


def _edge_values(name: str) -> np.ndarray:
    """Scaled values on every boundary of the element type, on both float32 neighbours of
    each, and on every representable value (ties, exact values), for scale 1."""
    et = choose_qparams(np.linspace(-1, 1, 64, dtype=np.float32)[None, :], format=name).element
    edges = element_edges(et).astype(np.float32)
    return np.concatenate([edges, np.nextafter(edges, np.float32(np.inf)),
                           np.nextafter(edges, np.float32(-np.inf)),
                           et.values.astype(np.float32)])


def _tensors(name: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    heavy = rng.standard_t(2, (24, 3000)).astype(np.float32)  # rows searched per channel
    heavy[2, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    heavy[5, :] = 0.0
    ties = np.resize(_edge_values(name), (8, 4096)) * np.float32(0.5)  # on the boundaries
    rng.shuffle(ties, axis=1)
    return {"demo": np.load(sample_path("gelu_activations")), "heavy": heavy, "ties": ties}


def _element_params(x: np.ndarray, name: str):
    for gran, axis in (("tensor", None), ("channel", 0), ("channel", 1)):
        p = choose_qparams(np.nan_to_num(x, nan=0, posinf=0, neginf=0), format=name,
                           granularity=gran, axis=axis)
        yield p
        # a scale that clips, by the non-saturating cast too (its rows are walked)
        shrunk = np.asarray(p.scale, np.float32) * np.float32(0.3)
        yield dataclasses.replace(p, scale=shrunk, inv_scale=None)
        yield dataclasses.replace(p, scale=shrunk, inv_scale=None, saturate=False)
        if p.inv_scale is None:  # multiplied by a reciprocal, as some runtimes do
            yield dataclasses.replace(p, inv_scale=(np.float32(1) / np.asarray(
                p.scale, np.float32)).astype(np.float32))


@pytest.mark.parametrize("name", ELEMENT_FORMATS)
def test_element_format_reports_are_the_compiled_ones(name):
    """Per tensor (a long row, searched) and per channel (short rows walked, long ones
    searched), saturating and not, on a prepared tensor and by the direct pass."""
    for label, x in _tensors(name).items():
        params = list(_element_params(x, name))
        prep = prepare(x)
        compiled_reports = [(prep.analyze(p), analyze_format(x, p)) for p in params]
        loop_twins.install()
        try:
            assert compiled.sorted_rows is format_twins.sorted_rows
            twin_prep = prepare(x)
            twin_reports = [(twin_prep.analyze(p), analyze_format(x, p)) for p in params]
        finally:
            loop_twins.remove()
        for p, (a, b), (c, d) in zip(params, twin_reports, compiled_reports, strict=True):
            what = (label, p.granularity, p.axis, p.saturate, p.inv_scale is not None)
            _same_reports(a, c, ("prepared", *what))
            _same_reports(b, d, ("direct", *what))


@pytest.mark.parametrize("name", BLOCK_FORMATS)
def test_block_format_reports_are_the_compiled_ones(name):
    x = _tensors(name)
    for label, t in x.items():
        params = [choose_qparams(t, format=name)]
        if name != "nf4":
            params.append(choose_qparams(t, format=name, method="mse"))
        compiled_reports = [analyze_format(t, p) for p in params]
        loop_twins.install()
        try:
            twin_reports = [analyze_format(t, p) for p in params]
        finally:
            loop_twins.remove()
        for a, b in zip(twin_reports, compiled_reports, strict=True):
            _same_reports(a, b, (label, a.params.method))


def test_a_search_that_gives_up_walks_as_the_loop_does():
    """Rows whose searched sums cannot be trusted (every element exact: no rounding error to
    compare the bound with) are walked by both."""
    from quantscope.core.formats import format_kernel

    x = np.resize(FormatParams("fp8_e4m3", np.float32(1)).element.values,
                  (4, 5000)).astype(np.float32)
    p = choose_qparams(x, format="fp8_e4m3", granularity="channel", axis=0)
    exact = dataclasses.replace(p, scale=np.ones_like(p.scale))
    for params in (p, exact):
        ref = prepare(x).analyze(params)
        loop_twins.install()
        try:
            _same_reports(prepare(x).analyze(params), ref, params.scale[:1])
        finally:
            loop_twins.remove()
    assert format_kernel._MAX_MOVES == format_twins._MAX_MOVES


def test_the_twin_sort_is_the_radix_sort_bit_for_bit():
    rng = np.random.default_rng(9)
    x = rng.standard_normal(300_000).astype(np.float32)
    x[::7] = 0.0
    x[::11] = -0.0
    x[::13] = np.nan
    x[5::17] = np.inf
    x[6::19] = -np.inf
    x[::23] = np.float32(1e-42)  # subnormal
    seen = []
    ref, ref_bad = radix_sort.sort_finite(x)
    got, bad = format_twins.sort_finite(x, seen.append)
    assert bad == ref_bad and seen and seen[-1] == 1.0
    assert np.array_equal(_bits(got), _bits(ref))


def test_the_twin_block_maxima_are_the_compiled_ones():
    from quantscope.core.kernels import block_max

    x = np.random.default_rng(4).standard_t(3, (37, 300)).astype(np.float32)
    x[1, :40] = np.nan  # a block with no finite value
    x[2, 3:9] = [np.inf, -np.inf, -0.0, 0.0, 3e38, -1e-44]
    for block in (16, 32, 7):
        assert np.array_equal(_bits(format_twins.block_abs_max(x, block)),
                              _bits(block_max.block_abs_max(x, block)))
