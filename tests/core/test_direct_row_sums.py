"""The direct pass's sums do not depend on what else is analysed with a tensor: a tensor alone
and the same tensor as rows of a stacked array (how ``scan --formats`` and the plain scan
evaluate many small tensors at once, :mod:`quantscope.state.format_batch`) give the same
signal, rounding and clipping sums to the bit, clipped or not, whatever its place and the
number of rows beside it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantscope import QuantParams, analyze

f32 = np.float32


def _totals(x: np.ndarray, p: QuantParams) -> tuple[np.ndarray, ...]:
    tot = analyze(x, p).unit_totals
    assert tot is not None
    return tot.sig, tot.round_err, tot.clip_err, tot.n, tot.below + tot.above


@st.composite
def _stacks(draw):
    """A tensor, its place among ``k`` tensors of its shape, and a scale that may clip."""
    rows = draw(st.integers(1, 40))
    cols = draw(st.sampled_from([1, 3, 64, 300, 1000, 5000]))
    k = draw(st.integers(2, 6))
    at = draw(st.integers(0, k - 1))
    seed = draw(st.integers(0, 2**32 - 1))
    shrink = draw(st.sampled_from([1.0, 0.9, 0.5]))  # below 1: the loudest values clip
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_t(4, size=(rows, cols)) * rng.lognormal(0, 1)).astype(f32)
          for _ in range(k)]
    return xs, at, shrink


def _scale(x: np.ndarray, shrink: float, axis: int | None) -> np.ndarray:
    amax = np.abs(x).max(axis=None if axis is None else 1 - axis)
    return np.maximum(amax * f32(shrink) / f32(127), f32(1e-30)).astype(f32)


@settings(max_examples=60, deadline=None)
@given(_stacks())
def test_a_tensor_alone_sums_as_its_row_of_a_stack(case):
    xs, at, shrink = case
    x = xs[at]
    alone = _totals(x, QuantParams(_scale(x, shrink, None), 0, qmin=-127, qmax=127))
    stacked = np.stack([y.reshape(-1) for y in xs])
    scales = np.array([_scale(y, shrink, None) for y in xs], f32)
    together = _totals(stacked, QuantParams(scales, np.zeros(len(xs), np.int32), qmin=-127,
                                            qmax=127, axis=0))
    for a, b in zip(alone, together, strict=True):
        assert a[0] == b[at], (a[0], b[at])


@settings(max_examples=60, deadline=None)
@given(_stacks())
def test_a_tensors_channels_sum_as_among_other_tensors_channels(case):
    xs, at, shrink = case
    x = xs[at]
    rows = x.shape[0]
    alone = _totals(x, QuantParams(_scale(x, shrink, 0), np.zeros(rows, np.int32), qmin=-127,
                                   qmax=127, axis=0))
    stacked = np.concatenate(xs)
    scales = np.concatenate([_scale(y, shrink, 0) for y in xs])
    together = _totals(stacked, QuantParams(scales, np.zeros(stacked.shape[0], np.int32),
                                            qmin=-127, qmax=127, axis=0))
    mine = slice(at * rows, (at + 1) * rows)
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_array_equal(a, b[mine])


def test_a_lone_long_row_sums_as_among_others():
    """The case that differed before: a 10,112-element row alone and as one of two."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(10112) * 0.02).astype(f32)
    y = x[::-1] * f32(0.5)
    s = _scale(x, 1.0, None)
    alone = _totals(x, QuantParams(s, 0, qmin=-127, qmax=127))
    both = _totals(np.stack([x, y]), QuantParams(np.array([s, _scale(y, 1.0, None)], f32),
                                                 np.zeros(2, np.int32), qmin=-127, qmax=127,
                                                 axis=0))
    assert alone[0][0] == both[0][0] and alone[1][0] == both[1][0]


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_the_sums_do_not_depend_on_the_threads(monkeypatch, threads):
    """Rows shared between 1 to 8 threads (blocks of rows, a last short one) give the sums of
    one thread, clipped rows included."""
    from quantscope.core.stats import analyze as direct

    rng = np.random.default_rng(3)
    x = (rng.standard_t(4, size=(301, 1000)) * 0.05).astype(f32)
    p = QuantParams(_scale(x, 0.7, 0), np.zeros(301, np.int32), qmin=-127, qmax=127, axis=0)
    one = _totals(x, p)
    monkeypatch.setattr(direct, "shares", lambda n: [(0, 0)] * threads)
    many = _totals(x, p)
    assert one[4].sum() > 0  # some rows clipped
    for a, b in zip(one, many, strict=True):
        np.testing.assert_array_equal(a, b)
