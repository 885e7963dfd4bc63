"""method="mse" for number formats returns the global minimum of the exact error over every
float32 scale: within 1e-6 (relative) of an exhaustive search over every breakpoint of the
error in the scale range (tests/core/format_exhaustive.py), each error measured by
ml_dtypes' own casts, per tensor and per channel, for FP8, FP6 and FP4, on real MiniLM
tensors and on constructed ones with several basins. The 96-point grid refined around its
best point that this replaced was 0.02-3.5 dB short on them: it never looked above the
min/max scale, where a floating-point grid often does better (the largest element on a value
below the largest, the next ones on grid points), and it refined around one basin."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from format_exhaustive import exhaustive_minimum, true_errors

from quantscope.core import analyze, choose_qparams, prepare
from quantscope.core.formats.catalog import element_of
from quantscope.core.stats.format_mse import format_mse_search

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources" / "samples"
FORMATS = ("fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1")
#: Relative slack against the exhaustive infimum: the search's own 1e-7 plus the float32
#: rounding of each reconstruction, which the exhaustive sweep's real-valued pieces leave out.
REL = 1e-6


def _sample(stem: str) -> np.ndarray:
    x = np.load(SAMPLES / f"{stem}.npy").astype(np.float32)
    return x.reshape(-1, x.shape[-1])


def outlier_clusters(seed: int) -> np.ndarray:
    """A normal bulk with two to four tight clusters of outliers of random size, sign and
    magnitude: every way of clipping or keeping each cluster is a basin of the error."""
    rng = np.random.default_rng(seed)
    parts = [rng.standard_normal(int(rng.integers(300, 1500)))]
    for _ in range(int(rng.integers(2, 5))):
        centre = rng.uniform(4, 80) * rng.choice([-1, 1])
        count = int(rng.integers(1, 25))
        parts.append(centre + rng.standard_normal(count) * rng.uniform(0, 0.5))
    return np.concatenate(parts).astype(np.float32)


def real_cases() -> dict[str, np.ndarray]:
    q, g = _sample("layer0_query_weight"), _sample("layer0_ffn_gelu_activations")
    o = _sample("layer0_output_activations")
    return {"query rows 0-3": q[:4].ravel(), "gelu token 0": g[0], "gelu token 5": g[5],
            "output tokens 0-3": o[:4].ravel()}


def _bracket(x: np.ndarray, name: str) -> tuple[float, float]:
    """The exhaustive sweep's range: from 2^-10 of the min/max scale (far below any optimum
    of these tensors: clipping alone costs more there) to twice it (the search's own top)."""
    s0 = float(np.abs(x).max()) / element_of(name).max_finite
    return s0 * 2.0 ** -10, 2.0 * s0


def _check(x: np.ndarray, name: str, scale: float, label: str) -> float:
    want, _ = exhaustive_minimum(x, name, *_bracket(x, name))
    got = float(true_errors(x, np.array([scale]), name)[0])
    assert got <= want * (1 + REL), (label, name, got / want - 1)
    sig = float(np.sum(np.asarray(x, np.float64) ** 2))
    assert 10 * np.log10(sig / got) >= 10 * np.log10(sig / want) - 1e-3
    return want


@pytest.mark.parametrize("name", FORMATS)
def test_per_tensor_mse_is_the_exhaustive_minimum_on_real_tensors(name):
    for label, x in real_cases().items():
        x = np.ascontiguousarray(x)
        p = choose_qparams(x, format=name, method="mse")
        _check(x, name, float(p.scale), label)
        # the reported error is the same error (the engine's report, ml_dtypes' casts)
        assert analyze(x, p).mse * x.size == pytest.approx(
            float(true_errors(x, p.scale.reshape(1), name)[0]), rel=1e-12)


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp4_e2m1"])
def test_per_channel_mse_is_the_exhaustive_minimum_of_every_channel(name):
    w = _sample("layer0_query_weight")[:6]
    p = choose_qparams(w, format=name, method="mse", granularity="channel", axis=0)
    assert p.scale.shape == (6,)
    for r in range(6):
        _check(w[r], name, float(p.scale[r]), f"row {r}")


#: (format, draw of :func:`outlier_clusters`, how far short the 96-point grid search stopped,
#: dB): optima a little below the min/max scale, in basins too narrow for its grid.
MISSED = (("fp8_e4m3", 11, 0.196), ("fp8_e4m3", 18, 0.324), ("fp6_e3m2", 11, 0.137))


@pytest.mark.parametrize(("name", "seed", "short_db"), MISSED)
def test_basins_the_grid_search_missed_are_found_and_proven(name, seed, short_db):
    x = outlier_clusters(seed)
    found = format_mse_search(prepare(x).layout(None, None), name)
    assert found.proven.all()
    want = _check(x, name, float(found.scale[0]), f"draw {seed}")
    # the optimum lies inside the replaced search's range: it missed the basin, not the range
    # (or, with the same error, its image an octave up: a floating-point grid repeats itself
    # at twice the scale, and the search keeps the first of equal errors it meets)
    s0 = float(np.abs(x).max()) / element_of(name).max_finite
    s = float(found.scale[0])
    if s >= s0:
        s /= 2
        _check(x, name, s, f"draw {seed}, an octave down")
    assert s < s0
    grid = np.geomspace(1.0, 0.05, 96)
    assert 10 * np.log10(true_errors(x, (grid * s0).astype(np.float32), name).min() / want) \
        >= short_db - 1e-3


def test_no_float32_scale_nearby_is_better():
    """An independent check of the pick: every float32 scale within 2,000 ulps of the result,
    each by ml_dtypes' casts; none beats it beyond the float32 rounding of the
    reconstructions."""
    x = _sample("layer0_ffn_gelu_activations")[0]
    for name in ("fp8_e4m3", "fp4_e2m1"):
        s = np.float32(choose_qparams(x, format=name, method="mse").scale)
        bits = s.view(np.int32) + np.arange(-2000, 2001, dtype=np.int32)
        errs = true_errors(x, bits.view(np.float32), name)
        assert errs.min() >= errs[2000] * (1 - REL)


def test_scales_above_twice_the_minmax_scale_are_never_better():
    """Why the search may stop at twice the min/max scale: doubling a scale above it never
    lowers the error (the grid of ``2s`` within the data's range is part of the grid of
    ``s``)."""
    x = _sample("layer0_output_activations")[:2].ravel()
    for name in FORMATS:
        s0 = float(np.abs(x).max()) / element_of(name).max_finite
        base = (s0 * np.geomspace(1.0, 2.0, 200)).astype(np.float32)
        errs = true_errors(x, np.concatenate([base * 2, base * 4]), name)
        assert (errs.reshape(2, -1) >= true_errors(x, base, name) * (1 - 1e-12)).all()


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_a_non_saturating_cast_searches_the_scales_that_stay_finite(name):
    """Without saturation a scale at which the largest element overflows gives inf or NaN
    (an infinite error): the search starts at the smallest float32 scale that keeps every
    element finite (ml_dtypes' cast says where), and is the exhaustive minimum above it."""
    from quantscope.core.stats.format_mse import overflow_floor

    x = real_cases()["gelu token 5"]
    amax = float(np.abs(x).max())
    floor = float(overflow_floor(np.array([amax]), element_of(name))[0])
    below = np.nextafter(np.float32(floor), np.float32(0))
    assert not np.isfinite(true_errors(x, np.array([below]), name, saturate=False)[0])
    assert np.isfinite(true_errors(x, np.array([floor]), name, saturate=False)[0])
    p = choose_qparams(x, format=name, method="mse", saturate=False)
    r = analyze(x, p)
    assert float(p.scale) >= floor and r.clipped_fraction == 0 and np.isfinite(r.mse)
    got = float(true_errors(x, p.scale.reshape(1), name, saturate=False)[0])
    want, _ = exhaustive_minimum(x, name, floor, 2 * amax / element_of(name).max_finite)
    assert got <= want * (1 + REL)


def test_zero_and_empty_units_take_scale_one():
    x = np.zeros((3, 40), np.float32)
    x[1] = np.linspace(-1, 2, 40)
    p = choose_qparams(x, format="fp6_e2m3", method="mse", granularity="channel", axis=0)
    assert p.scale[0] == 1.0 and p.scale[2] == 1.0
    _check(x[1], "fp6_e2m3", float(p.scale[1]), "row 1")


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp6_e3m2"])
def test_units_on_the_grid_at_many_scales_take_one_of_no_error(name):
    """Rows whose values lie on the grid at several scales (error zero at each, a tie among
    them), searched with no evaluation before their range's sweep: one of those scales, error
    zero, proven; a row on no scale's grid (the last) still takes the exhaustive minimum."""
    vals = element_of(name).values
    on = vals[(vals > 0) & (vals <= 4)]
    x = np.stack([np.resize(np.concatenate([on, -on]), 64) * k for k in (1.0, 0.25, 3.0)]
                 + [np.linspace(-1, 2, 64)]).astype(np.float32)
    found = format_mse_search(prepare(x).layout(0, None), name)
    assert found.proven.all()
    for r in range(3):
        assert found.error[r] == 0.0
        assert true_errors(x[r], found.scale[r:r + 1], name)[0] == 0.0
    _check(x[3], name, float(found.scale[3]), "row 3")


def test_a_long_row_searched_in_parts_finds_the_same_optimum(monkeypatch):
    """A tensor's one row is searched in parts of its range side by side (one row's boxes
    are one thread's work): the parts together find what one search finds, and prove it."""
    from quantscope.core.stats import format_mse

    x = real_cases()["gelu token 0"]
    rows = prepare(x).layout(None, None)
    whole = format_mse_search(rows, "fp8_e4m3")
    monkeypatch.setattr(format_mse, "SPLIT_ROWS", 1000)
    parts = format_mse_search(rows, "fp8_e4m3")
    assert parts.proven.all() and whole.proven.all()
    assert parts.error[0] <= whole.error[0] * (1 + 1e-7)
    assert whole.error[0] <= parts.error[0] * (1 + 1e-7)


@pytest.mark.parametrize("name", ["mxfp4", "mxfp6_e3m2", "mxfp8_e4m3", "mxint8"])
def test_mx_mse_takes_each_blocks_best_e8m0_scale_of_all_255(name):
    """MX blocks' scales are E8M0 powers of two: every one of the 255 is tried on every block
    of a real weight (by the engine's quantize and dequantize, whose casts are ml_dtypes' bit
    for bit: tests/core/test_formats.py), and the search's exponent has the least error of
    them all; never worse than the specification's, and better on some blocks."""
    import ml_dtypes

    w = _sample("layer0_query_weight")[:8]
    spec = choose_qparams(w, format=name)
    p = choose_qparams(w, format=name, method="mse")
    assert p.method == "mse" and p.block_scales.dtype == ml_dtypes.float8_e8m0fnu
    blocks = w.reshape(-1, 32).astype(np.float64)
    s = p.scale.reshape(-1).astype(np.float64)
    xhat = p.dequantize(p.quantize(w)).reshape(-1, 32).astype(np.float64)
    got = ((blocks - xhat) ** 2).sum(axis=1)
    e_all = np.arange(-127, 128)
    best = np.full(blocks.shape[0], np.inf)
    for e in e_all:  # every E8M0 scale, each block's error by the engine's own rule
        q = choose_qparams(w, format=name)
        trial = type(q)(name, np.full(q.scale.shape, np.float32(2.0 ** e)), axis=q.axis,
                        group_size=q.group_size, saturate=q.saturate)
        xt = trial.dequantize(trial.quantize(w)).reshape(-1, 32).astype(np.float64)
        best = np.minimum(best, ((blocks - xt) ** 2).sum(axis=1))
    assert (got <= best * (1 + 1e-12)).all()
    base = ((blocks - spec.dequantize(spec.quantize(w)).reshape(-1, 32)) ** 2).sum(axis=1)
    assert (got <= base).all() and (got < base).any()
    assert analyze(w, p).mse * w.size == pytest.approx(got.sum(), rel=1e-9)
    assert np.all(np.log2(s) == np.round(np.log2(s)))


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp4_e2m1"])
def test_a_long_row_on_its_prefix_sums_is_the_exhaustive_minimum(name):
    """A unit long enough for the search to take its runs from the prefix sums (and, for
    its long runs, the weaker two-value bound): 40,000 real activations, still the
    exhaustive minimum."""
    from quantscope.core.stats import format_mse

    x = np.ascontiguousarray(_sample("layer0_ffn_gelu_activations").ravel()[:40_000])
    assert x.size >= format_mse.SEARCH_ROWS
    found = format_mse_search(prepare(x).layout(None, None), name)
    assert found.proven.all()
    _check(x, name, float(found.scale[0]), "40,000 activations")


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_a_long_rows_wide_sweeps_find_what_narrow_boxes_find(name, monkeypatch):
    """A row searched on its prefix sums sweeps boxes of up to ``LONG_SWEEP_CELLS``
    breakpoints whole: in fewer boxes, the least error that boxes halved down to
    ``SWEEP_CELLS`` find, both proven."""
    from quantscope.core.stats import format_mse

    x = np.ascontiguousarray(_sample("layer0_ffn_gelu_activations").ravel()[:40_000])
    rows = prepare(x).layout(None, None)
    wide = format_mse_search(rows, name)
    monkeypatch.setattr(format_mse, "LONG_SWEEP_CELLS", format_mse.SWEEP_CELLS)
    narrow = format_mse_search(rows, name)
    assert wide.proven.all() and narrow.proven.all()
    assert wide.boxes[0] < narrow.boxes[0]
    assert wide.error[0] <= narrow.error[0] * (1 + 1e-7)
    assert narrow.error[0] <= wide.error[0] * (1 + 1e-7)


@pytest.mark.parametrize("name", FORMATS)
def test_scales_below_min_max_are_searched_where_subnormals_differ(name):
    """The scales below the min/max scale are searched only where the octave above it does
    not bound them; the bound allows for the subnormals, which are where the error at ``s``
    and at ``2s`` differ. Tensors with many elements in the subnormal range (a cluster near
    zero, at the scale of the smallest normal value) and clusters of outliers that make
    clipping pay: the result is the exhaustive minimum, wherever it lies."""
    et = element_of(name)
    for seed in range(3):
        x = outlier_clusters(100 + seed)
        s0 = float(np.abs(x).max()) / et.max_finite
        rng = np.random.default_rng(seed)
        tiny = rng.uniform(-2.0, 2.0, 400) * s0 * 2.0 ** et.emin
        x = np.concatenate([x, tiny.astype(np.float32)])
        found = format_mse_search(prepare(x).layout(None, None), name)
        assert found.proven.all()
        _check(x, name, float(found.scale[0]), f"draw {seed}")


#: MiniLM query rows where, in FP8 per channel, the scale the search rated best (by the
#: unrounded reconstruction) was not the one the report rates best: 6.2e-7 (row 103) and
#: 1.8e-8 (row 148, across a breakpoint) above a float32 scale a few ulps away.
ROUNDING_ROWS = (103, 148, 378, 156, 45)


def test_the_pick_is_the_reports_least_error_among_the_float32_scales_beside_it():
    """The report rounds every reconstruction to float32, which moves the error by parts in
    10^7 from one float32 scale to the next: the pick is rated by that arithmetic. No float32
    scale within 300 ulps of it has a lower error by ml_dtypes' casts, not even by a part in
    10^12."""
    w = _sample("layer0_query_weight")[list(ROUNDING_ROWS)]
    p = choose_qparams(w, format="fp8_e4m3", method="mse", granularity="channel", axis=0)
    for i, r in enumerate(ROUNDING_ROWS):
        s = np.float32(p.scale[i])
        bits = s.view(np.int32) + np.arange(-300, 301, dtype=np.int32)
        errs = true_errors(w[i], bits.view(np.float32), "fp8_e4m3")
        assert errs.min() >= errs[300] * (1 - 1e-12), (r, errs[300] / errs.min() - 1)


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp4_e2m1"])
def test_the_scales_the_scan_covers_are_no_better_than_its_pick(name):
    """Around a scale, the scan of its piece rates float32 scales by the report's arithmetic
    and stops where the rest of the piece cannot be better: what it covers so (which spares
    the pick the engine's report of the search's neighbours there) holds, by ml_dtypes'
    casts, nothing better than the scan's own pick, beyond the rounding of the sums; and it
    covers both neighbours of most rows' scale."""
    from quantscope.core.stats import format_mse

    w = _sample("layer0_query_weight")[:24]
    rows = prepare(w).layout(0, None)
    s = format_mse_search(rows, name).scale
    best, cover, _ = format_mse._float32_best(rows, name, s, np.full(s.size, 1e-30))
    both = 0
    for r in range(s.size):
        lo, hi = np.float32(cover[r, 0]), np.float32(cover[r, 1])
        assert lo <= hi, r
        # its ends and the 301 scales around the row's scale
        near = s[r].view(np.int32) + np.arange(-150, 151, dtype=np.int32)
        bits = np.concatenate([[lo.view(np.int32), hi.view(np.int32)],
                               near[(near >= lo.view(np.int32)) & (near <= hi.view(np.int32))]])
        errs = true_errors(w[r], bits.view(np.float32), name)
        own = true_errors(w[r], best[r:r + 1], name)[0]
        room = format_mse.FLOOR * float(np.sum(w[r].astype(np.float64) ** 2))
        assert errs.min() >= own - room, (r, own - errs.min())
        both += bool(lo < s[r] < hi)
    assert both >= s.size // 2


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp6_e3m2", "fp4_e2m1"])
def test_the_pick_is_the_least_of_all_five_candidates_by_the_report(name):
    """The pick evaluates by the engine's report only the candidates that can still win (a
    neighbour the scan covered, one equal to a candidate before it, not): on real and
    outlier-heavy rows it picks what evaluating all five would -- the same scale and
    error."""
    from quantscope.core.stats import format_mse

    w = np.concatenate([_sample("layer0_query_weight")[:48],
                        np.stack([np.resize(outlier_clusters(d), 384) for d in range(8)])])
    rows = prepare(np.ascontiguousarray(w)).layout(0, None)
    found = format_mse_search(rows, name)
    s, s_mm = found.scale, (np.abs(w).max(axis=1) / element_of(name).max_finite).astype(
        np.float32)
    floor = np.full(s.size, float(np.finfo(np.float32).tiny))
    scale, error = format_mse._engine_pick(rows, name, True, s, s_mm, floor)
    cands = np.stack([s, format_mse._float32_best(rows, name, s, floor)[0], s_mm,
                      np.nextafter(s, np.float32(0)), np.nextafter(s, np.float32(np.inf))])
    errs = np.stack([format_mse.exact_errors(rows, name, True, c) for c in cands])
    pick = np.argmin(errs, axis=0)
    idx = np.arange(s.size)
    pick = np.where(errs[pick, idx] < errs[0], pick, 0)
    assert np.array_equal(scale, cands[pick, idx]) and np.array_equal(error, errs[pick, idx])
