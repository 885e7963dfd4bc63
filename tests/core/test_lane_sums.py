"""The compiled sums add in one fixed order that NumPy repeats bit for bit, on any machine."""

import numba
import numpy as np
import pytest

from quantscope.core.kernels.lane_order import LANES, combine_lanes, lane_sum
from quantscope.core.kernels.lane_sums import sum_ends_in_lanes, sum_in_lanes
from quantscope.io.samples import sample_path


@numba.njit(cache=False)
def _compiled(values):
    return sum_in_lanes(values)


@numba.njit(cache=False)
def _compiled_slices(values, lo, hi):
    out = np.empty(lo.size)
    for k in range(lo.size):
        out[k] = sum_in_lanes(values[lo[k]:hi[k]])
    return out


@numba.njit(cache=False)
def _ends(values, a, b):
    return sum_ends_in_lanes(values, a, b, np.full(LANES, np.nan))


def _by_hand(terms: np.ndarray) -> float:
    """The order written out with Python floats: lane ``i % LANES``, then halves."""
    acc = [0.0] * LANES
    for i, t in enumerate(terms.tolist()):
        acc[i % LANES] += t
    while len(acc) > 1:
        h = len(acc) // 2
        acc = [acc[j] + acc[j + h] for j in range(h)]
    return acc[0]


@pytest.mark.parametrize("n", [0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 65, 100, 1023, 1024, 1025])
def test_compiled_numpy_and_by_hand_agree_on_every_length(n):
    rng = np.random.default_rng(n)
    terms = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)) ** 2
    expected = _by_hand(terms)
    assert _compiled(terms) == expected
    assert lane_sum(terms) == expected


def test_agree_on_real_squares_sliced_at_every_offset():
    x = np.load(sample_path("gelu_activations")).astype(np.float64).ravel()
    sq = np.square(x - np.float64(np.float32(0.01)) * np.round(x / 0.01))
    rng = np.random.default_rng(1)
    lo = rng.integers(0, sq.size - 2000, 500)
    hi = lo + rng.integers(0, 2000, 500)
    compiled = _compiled_slices(sq, lo, hi)
    numpy_ = np.array([lane_sum(sq[a:b]) for a, b in zip(lo, hi, strict=True)])
    assert np.array_equal(compiled, numpy_)
    assert _compiled(sq) == lane_sum(sq)
    # the order matters: on these terms a plain running sum differs in the last bits
    plain = [float(np.cumsum(sq[a:b])[-1]) if b > a else 0.0 for a, b in zip(lo, hi,
                                                                           strict=True)]
    assert not np.array_equal(numpy_, plain)


def test_rows_at_once_equal_each_row_alone():
    rng = np.random.default_rng(2)
    terms = rng.standard_normal((37, 203)) ** 2
    assert np.array_equal(lane_sum(terms), [_compiled(np.ascontiguousarray(r)) for r in terms])


def test_signed_zeros_and_nonfinite_terms_follow_the_same_lanes():
    terms = np.array([-0.0] * 5 + [np.inf, 1.0, -np.inf] + [2.0] * 20 + [np.nan])
    for n in range(terms.size + 1):
        with np.errstate(invalid="ignore"):  # inf - inf: NaN on both sides
            a, b = _compiled(terms[:n].copy()), lane_sum(terms[:n])
        assert np.array_equal(a, b, equal_nan=True) and np.signbit(a) == np.signbit(b)


def test_lanes_combine_by_halves():
    acc = 2.0 ** np.arange(LANES) + 0.1
    assert combine_lanes(acc) == _by_hand(acc)


@pytest.mark.parametrize("n", [0, 1, 5, 31, 32, 33, 100, 1023, 1024])
def test_the_ends_alone_sum_as_the_whole_with_the_middle_zeroed(n):
    """The terms outside ``[a, b)`` summed alone equal the whole sum with ``values[a:b]`` set
    to +0.0, to the bit: terms of both signs over 16 decades, -0.0, infinities and NaN, every
    split of short rows and 200 of long ones (``a`` up to ``n``, ``b`` from ``a``)."""
    rng = np.random.default_rng(n + 7)
    terms = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    if n > 40:
        terms[[3, 9, 17, 20]] = [-0.0, np.inf, -0.0, 0.0]
        terms[-2] = -0.0
    splits = ([(a, b) for a in range(n + 1) for b in range(a, n + 1)] if n <= 33 else
              [tuple(sorted(rng.integers(0, n + 1, 2))) for _ in range(200)] + [(n, n), (0, n)])
    for values in (terms, np.abs(terms), np.where(np.arange(n) == n // 2, np.nan, terms)):
        for a, b in splits:
            middle = values.copy()
            middle[a:b] = 0.0
            with np.errstate(invalid="ignore"):
                whole, ends = _compiled(middle), _ends(values, a, b)
            assert np.array_equal(whole, ends, equal_nan=True), (a, b)
            assert np.signbit(whole) == np.signbit(ends)
