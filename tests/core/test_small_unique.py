"""The compiled loops' ``np.unique`` of a few candidate scales, bit for bit."""

import numpy as np
import pytest

from quantscope.core.kernels.small_unique import small_unique


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(a, np.float64).view(np.uint64)


@pytest.mark.parametrize("size", [0, 1, 2, 8, 15])
def test_the_distinct_values_are_numpys_in_its_order(size):
    """Repeats, NaN, ±inf and subnormals, in random orders: NumPy's values in NumPy's order
    (NaN last, each one kept as in Numba's unique: NaN equals nothing)."""
    rng = np.random.default_rng(size)
    pool = np.array([1.5, 1.5, 0.25, np.nan, np.inf, -np.inf, 0.0, 5e-324, 3.0,
                     np.float64(np.float32(0.1)), 0.25, 7.0, -2.0, np.nan])
    for _ in range(200):
        a = rng.choice(pool, size) if size else np.empty(0)
        assert np.array_equal(_bits(small_unique(a)), _bits(np.unique(a, equal_nan=False)))


def test_of_equal_values_the_first_is_kept_as_numbas_insertion_sort_keeps_it():
    assert _bits(small_unique(np.array([0.0, 2.0, -0.0]))).tolist() == _bits([0.0, 2.0]).tolist()
    assert _bits(small_unique(np.array([-0.0, 2.0, 0.0]))).tolist() == _bits([-0.0, 2.0]).tolist()
