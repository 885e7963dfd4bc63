"""The integer MSE search's wholesale cuts (:mod:`quantscope.core.kernels.scale_cuts`): each
bound stays below the exact error at every scale and zero point it claims to cover (what makes
dropping those scales safe), is close enough to rule out the scales the search no longer
opens boxes for, and the cuts leave every error above the bar they were placed at."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.kernels import mse_bound
from quantscope.core.kernels import scale_cuts as sc

# the search's cuts, each called here on its own (the app runs them inside rows_optimum,
# compiled with it): versions of their own, compiled once per cache
pytestmark = pytest.mark.compiles("the search's cuts on their own")

QMIN, QMAX = -128, 127


def _error(x: np.ndarray, s: float, z: int) -> float:
    """The exact error at scale ``s`` and zero point ``z`` (float64 division, half to even)."""
    q = np.clip(np.rint(x.astype(np.float64) / s) + z, QMIN, QMAX)
    return float(np.sum((x.astype(np.float64) - s * (q - z)) ** 2))


def _pre(x: np.ndarray) -> np.ndarray:
    """The unit's prefix sums, as the search builds them before its cuts."""
    pre = np.empty((x.size + 1, 4))
    mse_bound.unit_prefix(x, 0, x.size, pre)
    return pre


def _unclamped(x: np.ndarray, s: float) -> float:
    v = x.astype(np.float64)
    return float(np.sum((v - s * np.rint(v / s)) ** 2))


def _units() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    w = rng.standard_normal(4096) * 0.02
    w[rng.choice(4096, 4, replace=False)] *= 10  # the bench's outlier columns
    clustered = np.repeat(rng.standard_normal(40), 25) + rng.standard_normal(1000) * 1e-4
    return [np.sort(u.astype(np.float32)) for u in (
        w, rng.standard_normal(700), rng.uniform(0.5, 3.0, 300), clustered,
        rng.standard_exponential(500) * -1.0, np.array([0.0, 0.0, 1.0, 1.0, 2.0]))]


@pytest.mark.parametrize("unit", range(6))
def test_the_spread_bound_is_below_the_error_at_every_larger_scale_and_zero_point(unit):
    x = _units()[unit]
    rng = np.random.default_rng(unit)
    span = float(x[-1] - min(x[0], 0.0)) or 1.0
    for _ in range(30):
        s1 = span / 255 * float(np.exp(rng.uniform(np.log(0.05), np.log(3.0))))
        bound = sc.spread_bound(x, 0, x.size, s1, _pre(x), 0)
        assert bound >= 0.0
        for s in s1 * np.concatenate([[1.0], np.exp(rng.uniform(0, np.log(8.0), 12))]):
            s = float(np.float32(s))
            if s < s1:
                continue
            assert bound <= _unclamped(x, s) * (1 + 1e-12) + 1e-300
            for z in (QMIN, -40, 0, 77, QMAX):
                assert bound <= _error(x, s, z) * (1 + 1e-12) + 1e-300


def test_the_spread_bound_of_a_unit_inside_a_longer_array_reads_its_own_prefix_sums():
    # a group of a row (or a core of a unit) starts past the prefix sums' first position
    x = _units()[0]
    pad = np.concatenate([np.full(37, -9.0, np.float32), x, np.full(5, 9.0, np.float32)])
    pre = np.empty((x.size + 1, 4))
    mse_bound.unit_prefix(pad, 37, 37 + x.size, pre)
    s1 = float(np.float32((x[-1] - x[0]) / 255))
    whole = sc.spread_bound(x, 0, x.size, s1, _pre(x), 0)
    assert whole > 0.0
    assert sc.spread_bound(pad, 37, 37 + x.size, s1, pre, 37) == whole
    assert sc.spread_bound(pad, 137, 37 + x.size, s1, pre, 37) == sc.spread_bound(
        x, 100, x.size, s1, _pre(x), 0)


def test_the_spread_bound_holds_most_of_a_dense_units_error():
    # why it cuts: on a dense unit it stays near the error itself (a bound of 0 would pass
    # the test above and cut nothing)
    x = _units()[0]
    s0 = float(x[-1] - x[0]) / 255
    for f in (0.9, 1.0, 1.2, 1.6):
        bound = sc.spread_bound(x, 0, x.size, f * s0, _pre(x), 0)
        assert bound >= 0.75 * _unclamped(x, f * s0)


@pytest.mark.parametrize("unit", range(6))
def test_the_window_clip_bound_is_below_every_windows_clipping_and_passes_a_bar_below_it(unit):
    x = _units()[unit].astype(np.float64)
    span = float(x[-1] - x[0]) or 1.0
    for width in span * np.array([0.2, 0.6, 0.9, 0.99, 1.5]):
        l_min, l_max = -width, 0.0
        ls = np.linspace(l_min, l_max, 4001)
        clip = np.array([np.sum(np.maximum(at - x, 0) ** 2
                                + np.maximum(x - at - width, 0) ** 2) for at in ls])
        least = clip.min()
        for bar in (0.5 * least, least * (1 - 1e-3), least * (1 + 1e-3)):
            bound = sc.window_clip(x.astype(np.float32), 0, x.size, width, l_min, l_max, bar)
            assert bound <= least * (1 + 1e-12) + 1e-300
            # it exceeds a bar just below the least clipping (a bar it could not pass is
            # reported as not passed)
            assert (bound > bar) == (bar < least)


@pytest.mark.parametrize("unit", range(6))
def test_the_window_clip_bound_holds_when_the_windows_allowed_lie_beside_the_data(unit):
    """Window positions ``[l_min, l_max]`` anywhere, not only around the data: all left of it,
    all right of it, wider than it, around it. The least clipping is then at an end of the
    positions allowed or inside them, and the bound starts its search between the data's ends
    clamped into them: it must still be below the least clipping of every position allowed,
    and pass a bar just below that least."""
    x = _units()[unit].astype(np.float64)
    span = float(x[-1] - x[0]) or 1.0
    rng = np.random.default_rng(10 + unit)
    for _ in range(12):
        width = span * float(rng.choice([0.3, 0.8, 1.2]))
        a, b = np.sort(x[0] + span * rng.uniform(-2.0, 1.5, 2))
        ls = np.linspace(a, b, 2001)
        clip = np.array([np.sum(np.maximum(at - x, 0) ** 2
                                + np.maximum(x - at - width, 0) ** 2) for at in ls])
        least = clip.min()
        for bar in (least * (1 - 1e-3), least * (1 + 1e-3)):
            bound = sc.window_clip(x.astype(np.float32), 0, x.size, width, a, b, bar)
            assert bound <= least * (1 + 1e-12) + 1e-300
            assert (bound > bar) == (bar < least)


@pytest.mark.parametrize("unit", range(6))
def test_every_scale_beyond_the_cuts_has_an_error_above_the_bar(unit):
    x = _units()[unit]
    s_mm = float(np.float32((max(x[-1], 0.0) - min(x[0], 0.0)) / (QMAX - QMIN)))
    best = min(_error(x, s_mm, z) for z in range(QMIN, QMAX + 1))
    if best == 0.0:
        pytest.skip("a unit on the grid: the search keeps its whole grid")  # never for most
    lo = sc.clip_cut(x, 0, x.size, s_mm, 1e-4 * s_mm, QMIN - QMAX, 0, QMAX - QMIN, best)
    hi = sc.spread_cut(x, 0, x.size, s_mm, 2.0 * s_mm, best, _pre(x), 0)
    assert 1e-4 * s_mm <= lo < s_mm < hi <= 2.0 * s_mm
    assert lo == np.float32(lo) and hi == np.float32(hi)
    rng = np.random.default_rng(unit)
    below = [lo, float(np.nextafter(np.float32(lo), np.float32(0))),
             *(lo * np.exp(rng.uniform(np.log(0.3), 0, 6)))]
    above = [hi, float(np.nextafter(np.float32(hi), np.float32(np.inf))),
             *(hi * np.exp(rng.uniform(0, np.log(1.8), 6)))]
    for s in below if lo > 1e-4 * s_mm else []:
        assert min(_error(x, float(np.float32(s)), z) for z in range(QMIN, QMAX + 1)) > best
    for s in above if hi < 2.0 * s_mm else []:
        assert min(_error(x, float(np.float32(s)), z) for z in range(QMIN, QMAX + 1)) > best


def test_the_bench_units_are_cut_close_to_the_min_max_scale():
    # what the cuts are for: on a channel with outliers both land within 15% of the min/max
    # scale, leaving the search two short boxes instead of the range 1e-4 .. 2 times it
    x = _units()[0]
    s_mm = float(np.float32((x[-1] - x[0]) / (QMAX - QMIN)))
    best = min(_error(x, s, z) for s in s_mm * np.linspace(0.95, 1.02, 15)
               for z in range(QMIN, QMAX + 1))
    lo = sc.clip_cut(x, 0, x.size, s_mm, 1e-4 * s_mm, QMIN - QMAX, 0, QMAX - QMIN, best)
    hi = sc.spread_cut(x, 0, x.size, s_mm, 2.0 * s_mm, best, _pre(x), 0)
    assert 0.85 * s_mm < lo and hi < 1.15 * s_mm


@pytest.mark.parametrize("unit", range(6))
@pytest.mark.parametrize("symmetric", [False, True])
def test_every_scale_below_the_clip_and_spread_cut_has_an_error_above_the_bar(unit, symmetric):
    x = _units()[unit]
    if symmetric:  # zero point 0: the windows are [QMIN + 1, QMAX] · s
        zs, span, a_lo, a_hi = [0], QMAX - QMIN - 1, QMIN + 1, QMIN + 1
        s_mm = float(np.float32(max(-float(x[0]), float(x[-1])) / QMAX))
    else:
        zs, span, a_lo, a_hi = range(QMIN, QMAX + 1), QMAX - QMIN, QMIN - QMAX, 0
        s_mm = float(np.float32((max(x[-1], 0.0) - min(x[0], 0.0)) / (QMAX - QMIN)))
    best = min(_error(x, s_mm, z) for z in zs)
    if best == 0.0:
        pytest.skip("a unit on the grid: the search keeps its whole grid")  # never for most
    lo = sc.clip_cut(x, 0, x.size, s_mm, 1e-4 * s_mm, a_lo, a_hi, span, best)
    cut, whole = sc.clip_spread_cut(x, 0, x.size, lo, s_mm, a_lo, a_hi, span, best, _pre(x),
                                    0)
    assert lo <= cut < s_mm and cut == np.float32(cut)
    rng = np.random.default_rng(unit)
    between = [cut, float(np.nextafter(np.float32(cut), np.float32(0))),
               *(lo + (cut - lo) * rng.uniform(0, 1, 8))]
    for s in between if cut > lo else []:
        assert min(_error(x, float(np.float32(s)), z) for z in zs) > best
    # the unit's spread bound it hands on holds from its lowest scale up; the upper cut aimed
    # from it leaves every error above the bar too
    if cut > lo:
        for s in lo * np.exp(rng.uniform(0, np.log(3.0), 6)):
            assert whole <= min(_error(x, float(np.float32(s)), z) for z in zs) * (1 + 1e-12)
    hi = sc.spread_cut(x, 0, x.size, s_mm, 2.0 * s_mm, best, _pre(x), 0, lo, whole)
    assert s_mm <= hi <= 2.0 * s_mm and hi == np.float32(hi)
    for s in [hi, *(hi * np.exp(rng.uniform(0, np.log(1.8), 6)))] if hi < 2.0 * s_mm else []:
        assert min(_error(x, float(np.float32(s)), z) for z in zs) > best


@pytest.mark.parametrize("symmetric", [False, True])
def test_the_clip_and_spread_cut_reaches_past_the_clip_cut_on_a_bench_unit(symmetric):
    # what it is for: on a channel with outliers the clipping alone leaves the scales from
    # 0.85-0.9 of the min/max scale to be swept, though the optimum lies above 0.95 of it
    x = _units()[0]
    if symmetric:
        zs, span, a_lo, a_hi = [0], QMAX - QMIN - 1, QMIN + 1, QMIN + 1
        s_mm = float(np.float32(max(-float(x[0]), float(x[-1])) / QMAX))
    else:
        zs, span, a_lo, a_hi = range(QMIN, QMAX + 1), QMAX - QMIN, QMIN - QMAX, 0
        s_mm = float(np.float32((x[-1] - x[0]) / (QMAX - QMIN)))
    best = min(_error(x, s_mm, z) for z in zs)
    lo = sc.clip_cut(x, 0, x.size, s_mm, 1e-4 * s_mm, a_lo, a_hi, span, best)
    cut, _ = sc.clip_spread_cut(x, 0, x.size, lo, s_mm, a_lo, a_hi, span, best, _pre(x), 0)
    assert cut > lo + 0.02 * s_mm


def test_a_groups_terms_are_the_one_pass_sums_whatever_its_length():
    # the two half chains (front sums forward, back sums backward) against the running sums
    # of one pass in Python, for every length from 2 on, odd and even, dense and gappy groups
    rng = np.random.default_rng(3)
    checked = 0
    for n in [*range(2, 40), 127, 128, 129, 500, 1001]:
        for kind in ("dense", "gappy", "equal"):
            if kind == "dense":
                g = np.sort(rng.uniform(0.1, 0.1 + 5e-3, n))
            elif kind == "gappy":
                g = np.sort(np.concatenate([rng.uniform(0, 1e-3, n // 2),
                                            rng.uniform(4e-3, 5e-3, n - n // 2)]))
            else:
                g = np.full(n, 0.25)
            x = np.concatenate([[-9.0], g, [9.0]]).astype(np.float32)
            xd = x[1:-1].astype(np.float64)
            mean = float(xd.mean())
            c = 6e-3 / n
            dev = np.cumsum(xd - mean)[:-1]  # D_1 .. D_{n-1}
            t = np.arange(1, n)
            low = min(0.0, float((c * t * (n - t) + 2.0 * dev).min()))
            ss = float(((xd - mean) ** 2).sum())
            got_ss, got_low = sc._group_terms(x, 1, n, mean, c)
            scale = c * n * n + float(np.abs(xd - mean).sum())
            assert got_ss == pytest.approx(ss, rel=1e-12, abs=1e-30), (n, kind)
            assert abs(got_low - low) <= 1e-12 * scale, (n, kind)
            checked += 1
    assert checked == 3 * 43
