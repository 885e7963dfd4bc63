"""The branch and bound's pieces: the galloping walk finds the same runs as a walk over every
element, a box's bound never exceeds the error at any scale of the box, for any zero point
(what makes dropping a box safe), and a box's sweep is the least error of every float32 scale
in it (what makes settling a box by its sweep exact)."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.kernels import mse_bound as mb
from quantscope.core.kernels import mse_sweep as ms

# the search's inner loops, each called here on its own (the app runs them inside rows_optimum,
# compiled with it): versions of their own, compiled once per cache
pytestmark = pytest.mark.compiles("the search's inner loops on their own")

QMIN, QMAX = -128, 127
K = QMAX - QMIN + 1


def _scratch():
    cap = 4 * K + 8
    return (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty((cap, 4)),
            np.empty((cap + 1, 7)), np.empty(K), np.empty(K))


def _prefix_and_codes(x: np.ndarray):
    """The values' prefix sums, and room for the codes that change at two scales."""
    pre = np.empty((x.size + 1, 4))
    mb.unit_prefix(x, 0, x.size, pre)
    pos = np.empty(4 * (2 * K + 1), np.int64)
    return pre, pos, np.empty_like(pos), mb.code_scratch(x.size)


def _values(seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.standard_normal(1500) * 0.05, [0.9, -0.6, 0.0, 0.0]])
    return np.sort(x.astype(np.float32))


def _errors(xd: np.ndarray, s: float, zs: np.ndarray) -> np.ndarray:
    """The exact error of the values ``xd`` (float64) at scale ``s`` for each zero point of
    ``zs``: codes ``clip(rint(x / s) + z)``, squared differences ``(x - s · (code - z))²``
    summed along the values. Each quotient is rounded once for all the zero points, and the
    steps run in place (the same operations on the same numbers, in a fraction of the
    time)."""
    d = np.rint(xd / s)[:, None] + zs
    np.clip(d, QMIN, QMAX, out=d)
    d -= zs
    d *= s
    np.subtract(xd[:, None], d, out=d)
    d *= d
    return d.sum(axis=0)


def test_galloping_walk_finds_the_runs_of_the_element_walk():
    x = _values()
    rng = np.random.default_rng(0)
    for _ in range(40):
        s1 = float(np.exp(rng.uniform(np.log(1e-4), np.log(0.02))))
        s2 = s1 * (1 + float(np.exp(rng.uniform(np.log(1e-4), np.log(1.0)))))
        a_lo, a_hi, a_f, *_ = _scratch()
        b_lo, b_hi, b_f, *_ = _scratch()
        n = mb.runs_walk(x, 0, x.size, s1, s2, K, a_lo, a_hi, a_f)
        m = mb._runs_element_by_element(x, 0, x.size, s1, s2, K, b_lo, b_hi, b_f)
        assert n == m
        np.testing.assert_array_equal(a_lo[:n], b_lo[:n])
        np.testing.assert_array_equal(a_hi[:n], b_hi[:n])
        np.testing.assert_allclose(a_f[:n], b_f[:n], rtol=1e-12, atol=1e-15)


def test_a_box_merged_from_its_ends_runs_has_the_gallops_runs_bit_for_bit():
    x = _values()
    pre, pos, code, lanes = _prefix_and_codes(x)
    rng = np.random.default_rng(1)
    for trial in range(60):
        s1 = float(np.float32(np.exp(rng.uniform(np.log(1e-4), np.log(0.02)))))
        s2 = s1 if trial % 5 == 0 else float(np.float32(
            s1 * (1 + float(np.exp(rng.uniform(np.log(1e-6), np.log(1.0)))))))
        e1 = mb.codes_at(x, 0, x.size, s1, K, pos, code, 0, *lanes)
        e2 = mb.codes_at(x, 0, x.size, s2, K, pos, code, e1, *lanes)
        assert np.all(np.diff(pos[:e1]) > 0) and np.all(np.diff(code[:e1]) != 0)
        a_lo, a_hi, a_f, *_ = _scratch()
        b_lo, b_hi, b_f, *_ = _scratch()
        n = mb.runs_prefix(x, 0, x.size, pre, s1, s2, K, a_lo, a_hi, a_f)
        m = mb.runs_between(x, 0, x.size, pre, s1, s2, pos, code, 0, e1, e1, e2, b_lo, b_hi,
                            b_f)
        assert n == m
        np.testing.assert_array_equal(a_lo[:n], b_lo[:n])
        np.testing.assert_array_equal(a_hi[:n], b_hi[:n])
        np.testing.assert_array_equal(a_f[:n], b_f[:n])  # same sums and bounds, bit for bit


def test_a_box_to_be_swept_takes_its_runs_sums_without_the_two_code_bounds():
    """The runs of a box the search sweeps (``bounds=False``): the same runs and sums as with
    the two-code bounds, those bounds 0, and the zero points' bounds from them still below
    the error at every scale of the box -- only weaker (the search then sweeps the zero
    points the exact bounds would have kept, and perhaps a few more)."""
    x = _values(3)
    xd = x.astype(np.float64)
    zs = np.arange(QMIN, QMAX + 1)
    pre, pos, code, lanes = _prefix_and_codes(x)
    rng = np.random.default_rng(4)
    for _ in range(20):
        s1 = float(np.float32(np.exp(rng.uniform(np.log(2e-4), np.log(0.01)))))
        s2 = float(np.float32(s1 * (1 + float(np.exp(rng.uniform(np.log(1e-3),
                                                                  np.log(0.3)))))))
        e1 = mb.codes_at(x, 0, x.size, s1, K, pos, code, 0, *lanes)
        e2 = mb.codes_at(x, 0, x.size, s2, K, pos, code, e1, *lanes)
        a_lo, a_hi, a_f, cum, lb, arg = _scratch()
        b_lo, b_hi, b_f, *_ = _scratch()
        n = mb.runs_between(x, 0, x.size, pre, s1, s2, pos, code, 0, e1, e1, e2, a_lo, a_hi,
                            a_f)
        m = mb.runs_between(x, 0, x.size, pre, s1, s2, pos, code, 0, e1, e1, e2, b_lo, b_hi,
                            b_f, False)
        assert n == m
        np.testing.assert_array_equal(a_lo[:n], b_lo[:n])
        np.testing.assert_array_equal(a_hi[:n], b_hi[:n])
        np.testing.assert_array_equal(a_f[:n, :3], b_f[:n, :3])
        assert (b_f[:n, 3] == 0.0).all()
        two = a_hi[:n] == a_lo[:n] + 1
        assert (a_f[:n, 3][two] > 0.0).any()  # the exact bounds had something to give up
        mb.z_bounds(b_lo, b_hi, b_f, n, s1, s2, QMIN, QMAX, QMIN, QMAX, cum, lb, arg)
        weak = lb.copy()
        mb.z_bounds(a_lo, a_hi, a_f, n, s1, s2, QMIN, QMAX, QMIN, QMAX, cum, lb, arg)
        assert (weak <= lb).all()
        for s in np.linspace(s1, s2, 25):
            assert (weak <= _errors(xd, s, zs) * (1 + 1e-9) + 1e-15).all()


def test_a_box_bound_is_below_the_error_at_every_scale_of_the_box():
    x = _values(5)
    xd = x.astype(np.float64)
    zs = np.arange(QMIN, QMAX + 1)
    rlo, rhi, rf, cum, lb, arg = _scratch()
    rng = np.random.default_rng(1)
    for _ in range(25):
        s1 = float(np.exp(rng.uniform(np.log(2e-4), np.log(0.01))))
        s2 = s1 * (1 + float(np.exp(rng.uniform(np.log(1e-3), np.log(0.5)))))
        n = mb.runs_walk(x, 0, x.size, s1, s2, K, rlo, rhi, rf)
        mb.z_bounds(rlo, rhi, rf, n, s1, s2, QMIN, QMAX, QMIN, QMAX, cum, lb, arg)
        for s in np.linspace(s1, s2, 40):
            err = _errors(xd, s, zs)
            assert (lb <= err * (1 + 1e-9) + 1e-15).all()
        # and at one scale the bound is the error itself
        n = mb.runs_walk(x, 0, x.size, s1, s1, K, rlo, rhi, rf)
        mb.z_bounds(rlo, rhi, rf, n, s1, s1, QMIN, QMAX, QMIN, QMAX, cum, lb, arg)
        np.testing.assert_allclose(lb, _errors(xd, s1, zs), rtol=1e-9, atol=1e-14)


def _every_float32(s1: float, s2: float) -> np.ndarray:
    """Every float32 scale in ``[s1, s2]`` (both float32)."""
    a, b = np.float32(s1), np.float32(s2)
    n = int(b.view(np.int32)) - int(a.view(np.int32)) + 1
    return (np.arange(n, dtype=np.int32) + a.view(np.int32)).view(np.float32).astype(np.float64)


@pytest.mark.parametrize(("z_lo", "z_hi", "seed"), [(0, 0, 3), (-128, 127, 4), (-20, -5, 6)])
def test_a_box_sweep_is_the_least_error_of_every_float32_scale_in_it(z_lo, z_hi, seed):
    """A narrow box holds a few thousand float32 scales: each evaluated exactly for every
    zero point by NumPy, and the least of them is the sweep's."""
    x = _values(seed)
    xd = x.astype(np.float64)
    zs = np.arange(z_lo, z_hi + 1)
    rlo, rhi, rf, *_ = _scratch()
    rng = np.random.default_rng(seed)
    for _ in range(4):
        s1 = float(np.float32(np.exp(rng.uniform(np.log(3e-4), np.log(4e-3)))))
        s2 = float(np.float32(s1 * (1 + 10 ** rng.uniform(-4.5, -3.5))))
        n = mb.runs_walk(x, 0, x.size, s1, s2, K, rlo, rhi, rf)
        crossings = ms.box_crossings(rlo, rhi, rf, n)
        ev = (np.empty(crossings), np.empty(crossings), np.empty(crossings, np.int64))
        out = np.empty(3)
        assert ms.box_sweep(x, 0, rlo, rhi, rf, n, s1, s2, QMIN, QMAX, z_lo, z_hi, np.inf,
                            *ev, np.empty(zs.size), np.empty(zs.size), out)
        scales = _every_float32(s1, s2)
        best = np.inf
        for s in scales:
            best = min(best, float(_errors(xd, s, zs).min()))
        assert out[0] == pytest.approx(best, rel=1e-11)
        assert s1 <= out[1] <= s2 and out[1] == float(np.float32(out[1]))
        assert z_lo <= out[2] <= z_hi
        # and nothing is reported when the best found already beats the box
        assert not ms.box_sweep(x, 0, rlo, rhi, rf, n, s1, s2, QMIN, QMAX, z_lo, z_hi,
                                best * (1 - 1e-9), *ev, np.empty(zs.size), np.empty(zs.size),
                                out)


def test_a_two_code_run_minimum_is_the_least_error_of_the_run_over_the_box():
    """One run whose codes are m and m + 1 on the box: its exact least error over a dense
    scan of the box's scales (the sum of each element's own least error is far below it)."""
    rng = np.random.default_rng(9)
    for m in (3, -4, 0, -1):
        s1, s2 = 0.01, 0.0104
        centre = (m + 0.5) * 0.0102
        x = np.sort(centre + rng.uniform(-1, 1, 200).astype(np.float32) * 0.0015)
        x = x.astype(np.float32)
        xd = x.astype(np.float64)
        got = mb.two_code_run_minimum(x, 0, x.size, s1, s2, m, float(xd.sum()),
                                      float((xd * xd).sum()))
        scan = np.linspace(s1, s2, 20001)
        codes = np.clip(np.rint(xd[:, None] / scan), m, m + 1)
        errs = ((xd[:, None] - scan * codes) ** 2).sum(axis=0)
        assert got <= errs.min() * (1 + 1e-9)
        assert got >= errs.min() * (1 - 1e-4)


@pytest.mark.parametrize(("lo_frac", "hi_frac"), [(0.93, 0.97), (0.97, 1.0), (0.985, 0.99)])
@pytest.mark.parametrize(("z_lo", "z_hi"), [(QMIN, QMAX), (-40, 12)])
def test_a_wide_box_sweep_with_outliers_at_the_range_ends_is_the_exhaustive_minimum(
        lo_frac, hi_frac, z_lo, z_hi):
    """Boxes a few percent wide just below the min/max scale, every zero point: the outliers'
    codes lie beyond some zero points' ranges and inside others', and cross several
    breakpoints in the box, so the zero points' own parts change inside it (the sweep's edge
    events) while the bulk's crossings are shared. Against the exhaustive sweep of every real
    scale of the box (a float32 scale can only do as well or a rounding worse)."""
    from mse_exhaustive import _sweep

    rng = np.random.default_rng(11)
    x = np.concatenate([rng.standard_normal(300) * 0.05, [0.93, 0.95, -0.61, -0.6, 0.4]])
    x = np.sort(x.astype(np.float32))
    s0 = (float(x[-1]) - float(x[0])) / (QMAX - QMIN)
    s1, s2 = float(np.float32(lo_frac * s0)), float(np.float32(hi_frac * s0))
    rlo, rhi, rf, *_ = _scratch()
    n = mb.runs_walk(x, 0, x.size, s1, s2, K, rlo, rhi, rf)
    crossings = ms.box_crossings(rlo, rhi, rf, n)
    ev = (np.empty(crossings), np.empty(crossings), np.empty(crossings, np.int64))
    out = np.empty(3)
    assert ms.box_sweep(x, 0, rlo, rhi, rf, n, s1, s2, QMIN, QMAX, z_lo, z_hi, np.inf, *ev,
                        np.empty(K), np.empty(K), out)
    want, _, _ = _sweep(x.astype(np.float64), s1, s2, QMIN, QMAX, np.arange(z_lo, z_hi + 1))
    assert z_lo <= out[2] <= z_hi
    assert want * (1 - 1e-12) <= out[0] <= want * (1 + 1e-9)
    xd = x.astype(np.float64)  # and it is the error of the scale and zero point it names
    codes = np.clip(np.rint(xd / out[1]) + out[2], QMIN, QMAX)
    assert ((xd - out[1] * (codes - out[2])) ** 2).sum() == pytest.approx(out[0], rel=1e-9)


def test_the_incumbents_bring_the_least_error_of_their_scales_equal_errors_to_the_least():
    # an LLM weight's channel: normal values and four ten times larger (its optimum lies a
    # little below the min/max scale)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(2048) * 0.02
    x[:4] *= 10
    x = np.sort(x.astype(np.float32))
    xd = x.astype(np.float64)
    zs = np.arange(QMIN, QMAX + 1)
    pre, *_ = _prefix_and_codes(x)
    rlo, rhi, rf, cum, lb, arg = _scratch()
    s_mm = float(np.float32((xd[-1] - xd[0]) / (QMAX - QMIN)))
    scales = [float(np.float32(s_mm * f)) for f in mb.INCUMBENTS]
    least = [float(_errors(xd, s, zs).min()) for s in scales]
    i = int(np.argmin(least))
    args = (K, QMIN, QMAX, QMIN, QMAX, 0.0, rlo, rhi, rf, cum, lb, arg)
    start = float(_errors(xd, s_mm, zs).min())
    assert least[i] < start  # the values' optimum lies near 0.98 of the min/max scale
    e, s, z = mb._incumbents(x, 0, x.size, pre, s_mm, 1e-4 * s_mm, 2 * s_mm, start, s_mm, 0,
                             *args)
    assert s == scales[i]
    np.testing.assert_allclose([e, _errors(xd, s, np.array([z]))[0]], least[i], rtol=1e-9)
    # the same error at a larger scale gives way to the incumbent's, not at a smaller one
    assert mb._incumbents(x, 0, x.size, pre, s_mm, 1e-4 * s_mm, 2 * s_mm, e, 2 * s_mm, 5,
                          *args) == (e, s, z)
    assert mb._incumbents(x, 0, x.size, pre, s_mm, 1e-4 * s_mm, 2 * s_mm, e, s / 2, 5,
                          *args) == (e, s / 2, 5)
    # a better start, a start without error and scales beyond the range leave it as it was
    assert mb._incumbents(x, 0, x.size, pre, s_mm, 1e-4 * s_mm, 2 * s_mm, e / 2, s_mm, 3,
                          *args) == (e / 2, s_mm, 3)
    assert mb._incumbents(x, 0, x.size, pre, s_mm, 1e-4 * s_mm, 2 * s_mm, 0.0, s_mm, 3,
                          *args) == (0.0, s_mm, 3)
    top = float(np.float32(s_mm * mb.INCUMBENTS.min()))
    e_low, s_low, _ = mb._incumbents(x, 0, x.size, pre, s_mm, 1e-4 * s_mm, top, np.inf, s_mm,
                                     0, *args)
    assert s_low == top
    np.testing.assert_allclose(e_low, _errors(xd, top, zs).min(), rtol=1e-9)
