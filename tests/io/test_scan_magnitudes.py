"""A scan row's max |x| and outlier channels from the channels' minima and maxima equal those of
the tensor's magnitudes, finite values only (quantscope.state.model_scan.magnitudes)."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.state.model_scan import magnitudes


def _by_magnitudes(x: np.ndarray, axis: int | None, threshold: float):
    finite_abs = np.abs(np.where(np.isfinite(x), x, 0.0))
    if axis is None:
        return float(finite_abs.max(initial=0.0)), None, None
    big = np.moveaxis(finite_abs >= np.float32(threshold), axis, 0)
    return (float(finite_abs.max(initial=0.0)),
            int(big.reshape(big.shape[0], -1).any(axis=1).sum()), big.shape[0])


def _cases():
    rng = np.random.default_rng(8)
    g = (rng.standard_normal((40, 24)) * 3).astype(np.float32)
    nan = g.copy()
    nan[2, 3], nan[5, 0] = np.nan, np.inf  # set aside: the finite values only
    neg = -np.abs(g)
    neg[0, 0] = -7.5  # a channel reaching the threshold by its minimum only
    zeros = np.full((6, 8), -0.0, np.float32)
    at = np.zeros((4, 5), np.float32)
    at[1, 2] = 6.0  # exactly the threshold
    cube = (rng.standard_normal((3, 5, 7)) * 4).astype(np.float32)
    return {"gaussian": g, "nonfinite": nan, "negative": neg, "minus_zeros": zeros,
            "at_threshold": at, "cube": cube, "all_nan": np.full((3, 3), np.nan, np.float32)}


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_magnitudes_equal_the_finite_magnitudes_figures(name):
    x = CASES[name]
    for axis in (None, *range(-x.ndim, x.ndim)):
        got = magnitudes(x, axis, 6.0)
        want = _by_magnitudes(x, axis, 6.0)
        assert got == want, (axis, got, want)
        assert str(got[0]) == str(want[0])  # 0.0, never -0.0
    assert magnitudes(CASES["negative"], 0, 6.0)[1] >= 1
