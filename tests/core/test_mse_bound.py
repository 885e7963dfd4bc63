"""The branch and bound's pieces: the galloping walk finds the same runs as a walk over every
element, and a box's bound never exceeds the error at any scale of the box, for any zero
point (what makes dropping a box safe)."""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels import mse_bound as mb

QMIN, QMAX = -128, 127
K = QMAX - QMIN + 1


def _scratch():
    cap = 4 * K + 8
    return (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty((cap, 4)),
            np.empty((cap + 1, 7)), np.empty(K), np.empty(K))


def _values(seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.standard_normal(1500) * 0.05, [0.9, -0.6, 0.0, 0.0]])
    return np.sort(x.astype(np.float32))


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
            codes = np.clip(np.rint(xd[:, None] / s) + zs, QMIN, QMAX)
            err = ((xd[:, None] - s * (codes - zs)) ** 2).sum(axis=0)
            assert (lb <= err * (1 + 1e-9) + 1e-15).all()
        # and at one scale the bound is the error itself
        n = mb.runs_walk(x, 0, x.size, s1, s1, K, rlo, rhi, rf)
        mb.z_bounds(rlo, rhi, rf, n, s1, s1, QMIN, QMAX, QMIN, QMAX, cum, lb, arg)
        codes = np.clip(np.rint(xd[:, None] / s1) + zs, QMIN, QMAX)
        err = ((xd[:, None] - s1 * (codes - zs)) ** 2).sum(axis=0)
        np.testing.assert_allclose(lb, err, rtol=1e-9, atol=1e-14)
