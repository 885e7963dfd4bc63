"""One clip sweep: the library's ``clip_sweep`` and the Trade-off tab's curve are the same
thresholds, the same windows and the same numbers."""

from __future__ import annotations

import numpy as np
import pytest

import quantscope as qs
from quantscope.core import analyze, params_from_range
from quantscope.core.stats.sweep import ClipSweep, clip_sweep_curve, window_for_threshold
from quantscope.core.tensors.validate import EngineValueError

FIELDS = ("thresholds", "lower", "upper", "scale", "zero_point", "rounding_mse",
          "clipping_mse", "mse", "sqnr_db", "clipped_fraction")


def _skewed(n: int = 30_000) -> np.ndarray:
    """GELU-like: a short negative side (down to -0.17) and a long positive one."""
    rng = np.random.default_rng(7)
    x = np.maximum(rng.standard_normal(n), -0.17).astype(np.float32) * 3
    x[11] = 24.8
    return x


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("bits", [8, 4])
def test_library_sweep_is_the_trade_off_tabs_sweep(symmetric, bits):
    """Batched over the sorted rows (library) or one report per point (the tab, through the
    panes' own ``analyze``): identical arrays, bit for bit. 64 points: ``k/64 · max|x|`` and
    ``max|x| · k/64`` are the same float, so the two grids coincide."""
    x = _skewed()
    prep = qs.prepare(x)
    lo, hi = (float(v) for v in prep.min_max())
    lib = qs.clip_sweep(prep, symmetric=symmetric, points=64, bits=bits)
    tab = clip_sweep_curve(prep.analyze, x_min=lo, x_max=hi, symmetric=symmetric, points=64,
                           refine=0, bits=bits)
    assert type(lib) is type(tab) is ClipSweep
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(lib, name), getattr(tab, name), err_msg=name)
    assert lib.best == tab.best and lib.best_threshold == tab.best_threshold
    assert prep.clip_sweep(symmetric=symmetric, points=64, bits=bits).to_dict() == lib.to_dict()


def test_symmetric_library_results_are_the_old_windows():
    """The symmetric sweep's parameters are exactly those of the old windows
    ``[-f·max|x|, f·max|x|]`` at the same fractions (its numbers are unchanged)."""
    x = _skewed()
    sw = qs.clip_sweep(x, symmetric=True, points=25)
    amax = float(np.abs(x).max())
    f = np.arange(1, 26) / 25
    old = params_from_range(-f * amax, f * amax, symmetric=True)
    np.testing.assert_array_equal(sw.scale, old.scale)
    np.testing.assert_array_equal(sw.zero_point, old.zero_point)
    np.testing.assert_allclose(sw.fraction, f, rtol=1e-15, atol=0)  # t / max|x|, derived


def test_asymmetric_thresholds_clip_only_beyond_t():
    """What changed for ``clip_sweep(symmetric=False)``: a threshold clips ``|x| > t`` and keeps
    the short side's real minimum (the old window ``[f·lo, f·hi]`` cut into it as well)."""
    x = _skewed()
    lo, hi = float(x.min()), float(x.max())
    sw = qs.clip_sweep(x, symmetric=False, points=20)
    k = 4  # t = 5 · 24.8 / 20 = 6.2, far beyond the short side's 0.51
    t = float(sw.thresholds[k])
    assert (sw.lower[k], sw.upper[k]) == window_for_threshold(t, lo, hi) == (lo, t)
    new = analyze(x, params_from_range(sw.lower[k], sw.upper[k], symmetric=False))
    assert new.clipped_below == 0 and new.clipped_above > 0
    assert new.mse == pytest.approx(sw.mse[k], rel=1e-9)
    f = sw.fraction[k]
    old = analyze(x, params_from_range(f * lo, f * hi, symmetric=False))
    assert old.clipped_below > 0.05 * x.size  # the short side cut: a fifth of the values


def test_bad_thresholds_are_refused():
    x = _skewed(1000)
    lo, hi = float(x.min()), float(x.max())
    prep = qs.prepare(x)
    rows = prep.layout(None, None)
    for bad in ([], [np.nan], [-1.0], [hi * 2]):
        with pytest.raises(EngineValueError):
            clip_sweep_curve(rows=rows, x_min=lo, x_max=hi, symmetric=True, thresholds=bad,
                             refine=0)
    with pytest.raises(EngineValueError):  # neither way to evaluate, or both
        clip_sweep_curve(x_min=lo, x_max=hi, symmetric=True)
    with pytest.raises(EngineValueError):
        clip_sweep_curve(prep.analyze, rows=rows, x_min=lo, x_max=hi, symmetric=True)


@pytest.mark.parametrize("symmetric", [True, False])
def test_the_best_marker_stays_on_the_data_when_the_optimum_reaches_past_it(
        gelu_activations, symmetric):
    """The affine MSE optimum of GELU activations puts its lower end below the data's
    minimum (-0.17): the marker is where the window stops keeping data -- its upper end, or
    max|x| -- never beyond the curve's last threshold; the same rule places a symmetric
    optimum."""
    x = gelu_activations
    prep = qs.prepare(x)
    lo, hi = (float(v) for v in prep.min_max())
    p = qs.choose_qparams(x, symmetric=symmetric, method="mse", prepared=prep)
    sweep = clip_sweep_curve(prep.analyze, x_min=lo, x_max=hi, symmetric=symmetric,
                             points=32, refine=0, optimum=p)
    s, z = float(p.scale), int(p.zero_point)
    lower = -s * 127 if symmetric else s * (p.qmin - z)
    upper = s * 127 if symmetric else s * (p.qmax - z)
    if not symmetric:
        assert lower < lo  # the case itself: the window reaches past the minimum
    assert 0 < sweep.best_threshold <= sweep.thresholds[-1] == max(-lo, hi)
    assert sweep.best_threshold == max(min(-lower, -lo), min(upper, hi))
    # the marker's window clips what the optimum clips: nothing below, the same above
    w_lo, w_hi = sweep.best_window
    assert (x < w_lo).sum() == (x < lower).sum() and (x > w_hi).sum() == (x > upper).sum()


@pytest.mark.parametrize("symmetric", [True, False])
def test_the_best_marker_of_a_grid_wider_than_the_data_is_max_abs(symmetric):
    """Values on a grid of step 0.1 from -10 to 10 (15 affine): the optimum is that step,
    coarser than the min/max scale, so its window (±12.7, or 25.5 wide) reaches past the data
    on both sides; "best" then clips nothing and sits at max|x|, the curve's last point (it
    was drawn at 12.7, beyond the curve)."""
    top = 100 if symmetric else 150
    x = (np.arange(-100, top + 1) * np.float32(0.1)).astype(np.float32)
    prep = qs.prepare(x)
    lo, hi = (float(v) for v in prep.min_max())
    p = qs.choose_qparams(x, symmetric=symmetric, method="mse", prepared=prep)
    assert float(p.scale) == pytest.approx(0.1, rel=1e-6)
    sweep = clip_sweep_curve(prep.analyze, x_min=lo, x_max=hi, symmetric=symmetric,
                             points=32, refine=0, optimum=p)
    assert sweep.best_threshold == sweep.thresholds[-1] == max(-lo, hi)
    assert sweep.best_mse < 1e-12
