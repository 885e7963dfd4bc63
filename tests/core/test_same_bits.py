"""The kept reports' comparison of parameter arrays: equal exactly when every bit is."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.stats import kept
from quantscope.core.stats.kept import same_bits


@pytest.mark.parametrize("size", [0, 1, 7, 8, 13, 3 * 1024 + 5])
def test_one_flipped_bit_anywhere_is_seen(size, monkeypatch):
    monkeypatch.setattr(kept, "SAME_PIECE", 1024)  # several pieces and a tail of odd bytes
    a = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    assert same_bits(a, a.copy())
    for at in {0, size // 2, size - 1} if size else set():
        for bit in (0, 7):
            b = a.copy()
            b[at] ^= np.uint8(1 << bit)
            assert not same_bits(a, b), (at, bit)


def test_bits_not_values_and_dtype_and_shape_count():
    z = np.zeros(5, np.float32)
    nz = z.copy()
    nz[3] = -0.0
    assert not same_bits(z, nz)  # equal values, other bits
    nan = np.full(3, np.nan)
    assert same_bits(nan, nan.copy())  # same bits, though NaN != NaN
    assert not same_bits(z, z.view(np.int32))
    assert not same_bits(z, z.reshape(5, 1))
    grid = np.arange(24, dtype=np.float64).reshape(4, 6)
    assert same_bits(grid[:, ::2], np.ascontiguousarray(grid[:, ::2]))
