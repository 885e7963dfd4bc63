"""The format MSE pick leaves out of the engine's report the candidates that cannot be
strictly better than one it reports anyway: the search's scale where the scan rated it above
its own pick, the min/max scale where the search's error there proves the report's higher
(:mod:`quantscope.core.stats.pick_bounds`). Here the bounds hold against the engine's report
and ml_dtypes' casts on real, outlier-heavy, tiny (subnormal) and on-grid rows, per channel
and per tensor, and the pick is the one all five candidates give -- while most rows report
one candidate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from format_exhaustive import true_errors

from quantscope.core import prepare
from quantscope.core.formats.catalog import element_of
from quantscope.core.stats import format_mse
from quantscope.core.stats.format_mse import exact_errors, format_mse_search
from quantscope.core.stats.pick_bounds import rated_span, report_floor

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources" / "samples"
FORMATS = ("fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1")


def _rows() -> np.ndarray:
    """Rows of 384: MiniLM query weights, outlier clusters, the same far below float32's
    normal range (subnormal reconstructions), and values on an FP4 grid at one scale."""
    q = np.load(SAMPLES / "layer0_query_weight.npy").astype(np.float32)[:24, :384]
    rng = np.random.default_rng(5)
    clusters = []
    for _ in range(6):
        x = rng.standard_normal(384) * 0.02
        x[rng.choice(384, 5, replace=False)] = rng.uniform(0.2, 2.0, 5) * rng.choice([-1, 1], 5)
        clusters.append(x)
    clusters_ = np.array(clusters, np.float32)
    tiny = clusters_[:3] * np.float32(1e-36)
    on_grid = (rng.choice([-6, -3, -1.5, -0.5, 0.5, 1, 2, 4, 6], (3, 384)) * 0.01).astype(
        np.float32)
    return np.ascontiguousarray(np.concatenate([q, clusters_, tiny, on_grid]))


def _search(monkeypatch, x: np.ndarray, name: str, axis: int | None):
    """The search on ``x``, with what it handed the pick, the pick's answer and the count of
    candidates the engine reported."""
    seen: dict = {"reported": 0}
    pick, errors = format_mse._engine_pick, format_mse.exact_errors

    def spy_pick(rows, name, saturate, s, s_mm, s_floor, mm_err=None, mm_depth=None,
                 long_rows=None):
        seen.update(rows=rows, s=s.copy(), s_mm=s_mm.copy(), s_floor=np.array(s_floor),
                    mm_err=np.array(mm_err), mm_depth=np.array(mm_depth))
        seen["out"] = pick(rows, name, saturate, s, s_mm, s_floor, mm_err, mm_depth,
                           long_rows)
        return seen["out"]

    def spy_errors(rows, name, saturate, scale, which=None):
        seen["reported"] += np.asarray(scale).size
        return errors(rows, name, saturate, scale, which)

    monkeypatch.setattr(format_mse, "_engine_pick", spy_pick)
    monkeypatch.setattr(format_mse, "exact_errors", spy_errors)
    rows = prepare(x).layout(axis, None)
    found = format_mse_search(rows, name)
    monkeypatch.undo()
    return rows, found, seen


def _q_sub(name: str) -> float:
    vals = element_of(name).values
    return float(vals[vals > 0].min())


@pytest.mark.parametrize("name", FORMATS)
def test_the_min_max_floor_is_below_the_report_there(monkeypatch, name):
    """Where the search took the min/max scale, the floor it gives the report's error there
    is below the engine's report and ml_dtypes' casts -- and close enough to them (within
    1e-4) to leave the min/max scale out on most rows."""
    x = _rows()
    rows, _, seen = _search(monkeypatch, x, name, 0)
    s_mm, err, depth = seen["s_mm"], seen["mm_err"], seen["mm_depth"]
    took = np.isfinite(err)
    assert took.sum() >= 0.9 * x.shape[0]
    low = report_floor(err, depth, rows.sumsq, rows.lengths, s_mm, _q_sub(name))
    report = exact_errors(rows, name, True, s_mm)
    casts = np.array([true_errors(x[r], s_mm[r:r + 1], name)[0] for r in range(x.shape[0])])
    assert np.all(low[took] <= report[took]), np.flatnonzero(low > report)
    assert np.all(low[took] <= casts[took]), np.flatnonzero(low > casts)
    close = low >= report * (1 - 1e-4)
    assert close.sum() >= 0.8 * x.shape[0]


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp6_e3m2", "fp4_e2m1"])
def test_a_long_rows_min_max_floor_is_below_the_report_there(monkeypatch, name):
    """The same for one scale per tensor (a row on its prefix sums, the search's
    evaluation of the min/max scale)."""
    g = np.load(SAMPLES / "layer0_ffn_gelu_activations.npy").astype(np.float32)
    x = np.ascontiguousarray(g.reshape(-1)[:40_000])
    rows, _, seen = _search(monkeypatch, x, name, None)
    assert np.isfinite(seen["mm_err"]).all()
    low = report_floor(seen["mm_err"], seen["mm_depth"], rows.sumsq, rows.lengths,
                       seen["s_mm"], _q_sub(name))
    assert low[0] <= exact_errors(rows, name, True, seen["s_mm"])[0]
    assert low[0] <= true_errors(x, seen["s_mm"], name)[0]
    assert low[0] > 0.0


@pytest.mark.parametrize("name", FORMATS)
def test_the_scans_ratings_hold_the_report(name):
    """The report's error at the scan's pick and at the search's scale lies within the span
    the scan's rating gives (where it rated them: most rows)."""
    x = _rows()
    rows = prepare(x).layout(0, None)
    s = format_mse_search(rows, name).scale
    floor = np.full(s.size, float(np.finfo(np.float32).tiny))
    best, _, rated = format_mse._float32_best(rows, name, s, floor)
    runs = 2 * element_of(name).values.size + 8
    for col, at in ((0, best), (1, s)):
        ok = np.isfinite(rated[:, col])
        assert ok.sum() >= 0.8 * s.size
        lo, hi = rated_span(rated[:, col], runs, rows.sumsq, rows.lengths, at, _q_sub(name))
        report = exact_errors(rows, name, True, at)
        assert np.all((lo <= report) & (report <= hi)), np.flatnonzero(ok & (
            (lo > report) | (report > hi)))


@pytest.mark.parametrize("name", FORMATS)
def test_the_pick_is_what_all_five_candidates_give(monkeypatch, name):
    """Per channel, the scale and error the search returns are those the engine's report of
    all five candidates (the search's scale, the scan's pick, the min/max scale, the
    search's neighbours) gives, keeping the first of equal errors -- with fewer than 1.3
    candidates reported per row."""
    x = _rows()
    rows, found, seen = _search(monkeypatch, x, name, 0)
    s, s_mm, floor = seen["s"], seen["s_mm"], seen["s_floor"]
    cands = np.stack([s, format_mse._float32_best(rows, name, s, floor)[0], s_mm,
                      np.nextafter(s, np.float32(0)), np.nextafter(s, np.float32(np.inf))])
    errs = np.stack([exact_errors(rows, name, True, c) for c in cands])
    pick = np.argmin(errs, axis=0)
    idx = np.arange(s.size)
    pick = np.where(errs[pick, idx] < errs[0], pick, 0)
    assert np.array_equal(found.scale, cands[pick, idx])
    assert np.array_equal(found.error, errs[pick, idx])
    assert seen["reported"] < 1.3 * s.size
