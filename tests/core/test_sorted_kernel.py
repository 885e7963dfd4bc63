"""The compiled kernel must apply the direct pass's rule bit for bit, and choose its per-row
strategy without changing a single number."""

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantscope.core import analyze, choose_qparams
from quantscope.core.kernels.sorted_kernel import (
    ARITHMETIC_CODES,
    CHANGE_STEP,
    PACK_LANES,
    _changes_in,
    code_of,
)
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.schemes.quantize import quantize_codes_float
from quantscope.core.stats import sorted_stats
from quantscope.core.stats.prepared import prepare


@numba.njit(cache=False)
def _codes_by_kernel(x, s, inv, z, arithmetic, half_away):
    out = np.empty(x.size, np.float32)
    for i in range(x.size):
        out[i] = code_of(x[i], s, inv, z, arithmetic, half_away)
    return out


def _both(x, s, z, arithmetic, rounding, inv=None):
    x = np.ascontiguousarray(x, np.float32)
    s32 = np.float32(s)
    inv32 = np.float32(1.0) / s32 if inv is None else np.float32(inv)
    kernel = _codes_by_kernel(x, s32, inv32, np.int32(z), ARITHMETIC_CODES[arithmetic],
                              rounding == "half_away")
    with np.errstate(all="ignore"):
        direct = quantize_codes_float(x, s32, np.int32(z), -128, 127, rounding, arithmetic,
                                      inv_scale=None if inv is None else inv32)
    return kernel, direct


@pytest.mark.parametrize("arithmetic", sorted(ARITHMETIC_CODES))
@pytest.mark.parametrize("rounding", ["half_even", "half_away"])
def test_code_of_equals_the_direct_rule_on_ties_and_random_bits(arithmetic, rounding):
    rng = np.random.default_rng(1)
    for s in (np.float32(0.1), np.float32(3.0e-3), np.float32(7.0), np.float32(1e-30)):
        k = np.arange(-300, 300, dtype=np.float64)
        ties = np.float32((k + 0.5) * np.float64(s))  # on the boundary, as near as float32 gets
        near = np.concatenate([ties, np.nextafter(ties, np.float32(np.inf)),
                               np.nextafter(ties, np.float32(-np.inf))])
        bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
        random = bits.view(np.float32)
        random = random[np.isfinite(random)]
        for z in (0, -37, 128):
            kernel, direct = _both(np.concatenate([near, random]), s, z, arithmetic, rounding)
            np.testing.assert_array_equal(kernel, direct)


@settings(max_examples=300, deadline=None)
@given(x=st.floats(width=32, allow_nan=False, allow_infinity=False),
       s=st.floats(min_value=2.0**-126, max_value=2.0**100, width=32),
       z=st.integers(-255, 255), arithmetic=st.sampled_from(sorted(ARITHMETIC_CODES)),
       rounding=st.sampled_from(["half_even", "half_away"]), ulps=st.integers(-2, 2))
def test_code_of_equals_the_direct_rule(x, s, z, arithmetic, rounding, ulps):
    inv = None
    if arithmetic != "divide" and ulps:  # a runtime's own multiplier, a few ulps off 1 / s
        inv = np.float32(1.0) / np.float32(s)
        for _ in range(abs(ulps)):
            inv = np.nextafter(inv, np.float32(np.inf if ulps > 0 else 0.0))
    kernel, direct = _both(np.array([x]), s, z, arithmetic, rounding, inv)
    np.testing.assert_array_equal(kernel, direct)


def test_rows_of_both_kinds_in_one_report():
    """Per channel, rows with many NaNs are short (walked) and the others long (split by
    search) in the same call: the report must equal the direct pass's."""
    rng = np.random.default_rng(3)
    levels = 256
    walk_below = sorted_stats.WALK_PER_LEVEL * (levels + 1)
    x = rng.standard_normal((4, walk_below + 100)).astype(np.float32)
    x[1, 50:] = np.nan
    x[3, walk_below // 2:] = np.nan
    x[2, :5] = [40.0, -40.0, np.inf, 0.0, 0.0]
    lengths = np.isfinite(x).sum(axis=1)
    assert (lengths < walk_below).any() and (lengths >= walk_below).any()
    prep = prepare(x)
    for symmetric in (True, False):
        p = choose_qparams(x, symmetric=symmetric, granularity="channel", axis=0,
                           method="percentile", percentile=99.0)
        direct, fast = analyze(x, p), prep.analyze(p)
        np.testing.assert_array_equal(fast.code_histogram, direct.code_histogram)
        np.testing.assert_array_equal(fast.per_channel.codes_used, direct.per_channel.codes_used)
        np.testing.assert_array_equal(fast.per_channel.clipped_above,
                                      direct.per_channel.clipped_above)
        np.testing.assert_array_equal(fast.per_channel.max_abs_error,
                                      direct.per_channel.max_abs_error)
        np.testing.assert_allclose(fast.per_channel.mse, direct.per_channel.mse, rtol=1e-9)


@pytest.mark.parametrize("magnitude", [1e-44, 1e-40, 1e-20, 1.0, 1e20, 3e38])
def test_walked_rows_agree_at_the_ends_of_float32(magnitude, monkeypatch):
    """A walked row's max |error| is the square root of its largest squared error: exact from
    errors of a few 2^-149 (subnormal values and scales) up to ones near float32's largest,
    with clipping at both ends."""
    monkeypatch.setattr(sorted_stats, "WALK_PER_LEVEL", 1 << 40)
    rng = np.random.default_rng(7)
    x = (rng.uniform(-1.0, 1.0, (3, 500)) * magnitude).astype(np.float32)
    amax = np.abs(x).max(axis=1)
    prep = prepare(x)
    for qmin, qmax, zp in ((-1, 1, 0), (0, 3, 1), (-7, 7, 0), (-127, 127, 0), (0, 255, 0)):
        scale = np.maximum(amax * np.float32(1.2 / (qmax - qmin)), np.float32(1e-45))
        p = QuantParams(scale.astype(np.float32), np.full(3, zp, np.int32), qmin, qmax, axis=0)
        with np.errstate(all="ignore"):
            direct = analyze(x, p)
        fast = prep.analyze(p)
        np.testing.assert_array_equal(fast.code_histogram, direct.code_histogram)
        for name in ("max_abs_error", "codes_used", "clipped_below", "clipped_above"):
            np.testing.assert_array_equal(getattr(fast.per_channel, name),
                                          getattr(direct.per_channel, name), err_msg=name)


@pytest.mark.parametrize("arithmetic", sorted(ARITHMETIC_CODES))
@pytest.mark.parametrize("rounding", ["half_even", "half_away"])
def test_walked_rows_count_codes_across_64_element_words(arithmetic, rounding, monkeypatch):
    """A walked row finds its code changes 64 elements at a time: rows ending just before, on
    and after a word's end, runs of one code longer than a word, and clipping at both ends
    must give the direct pass's counts."""
    monkeypatch.setattr(sorted_stats, "WALK_PER_LEVEL", 1 << 40)
    rng = np.random.default_rng(11)
    lengths = [1, 2, 63, 64, 65, 66, 127, 128, 129, 130, 191, 640, 641, 1000]
    x = np.full((len(lengths), 1000), np.nan, np.float32)
    for i, n in enumerate(lengths):
        x[i, :n] = rng.standard_normal(n) * 3.0
    x[-1] = np.repeat(rng.standard_normal(10), 100) * 3.0  # runs of 100 equal values
    x[-2, :300] = np.float32(0.25)
    prep = prepare(x)
    for qmin, qmax, zp, scale in ((-128, 127, 0, 0.02), (-8, 7, 2, 0.1), (0, 3, 1, 1.0)):
        p = QuantParams(np.full(len(lengths), scale, np.float32), np.full(len(lengths), zp,
                        np.int32), qmin, qmax, axis=0, rounding=rounding, arithmetic=arithmetic)
        direct, fast = analyze(x, p), prep.analyze(p)
        np.testing.assert_array_equal(fast.code_histogram, direct.code_histogram)
        for name in ("codes_used", "clipped_below", "clipped_above", "max_abs_error"):
            np.testing.assert_array_equal(getattr(fast.per_channel, name),
                                          getattr(direct.per_channel, name), err_msg=name)
        np.testing.assert_allclose(fast.per_channel.mse, direct.per_channel.mse, rtol=1e-9)


@numba.njit(cache=False)
def _changes_by_kernel(codes, n):
    """The walk's listing of the positions ``k`` in ``[1, n)`` where the code changes."""
    pos = np.empty(n + CHANGE_STEP, np.int32)
    return pos[:_changes_in(codes, 1, n, pos)]


@pytest.mark.parametrize("shift", range(PACK_LANES + 1))
def test_the_change_list_finds_every_pattern_of_eight_codes(shift):
    """Every one of the 256 patterns of changes among eight neighbouring codes, at every
    position in a pack of eight (``shift``), in both packs of a step of 16, and in a last
    partial step, gives exactly the positions NumPy finds; equal infinities, 0.0 beside -0.0
    and NaN compare as ``!=`` does."""
    steps = [int(m >> t & 1) for m in range(256) for t in range(PACK_LANES)]
    codes = np.concatenate([np.zeros(1 + shift), np.cumsum(steps)]).astype(np.float32)
    codes[100:104] = np.inf
    codes[200:202] = [0.0, -0.0]
    codes[300:302] = np.nan
    for n in (codes.size, codes.size - 5, 17, 16, 9, 2, 1):
        padded = np.concatenate([codes[:n], np.full(64, -1.0, np.float32)])
        expected = np.flatnonzero(codes[1:n] != codes[:n - 1]) + 1
        np.testing.assert_array_equal(_changes_by_kernel(padded, n), expected)


def test_walked_rows_on_the_grid_count_every_code_change(monkeypatch):
    """Walked rows whose values sit on the grid and change code at random places (a change
    at about every second element, every pattern of eight, runs that skip codes) and rows of
    1 to 40 elements: the code counts and codes used equal the direct pass's."""
    monkeypatch.setattr(sorted_stats, "WALK_PER_LEVEL", 1 << 40)
    rng = np.random.default_rng(5)
    steps = rng.integers(0, 3, (6, 3000)) * (rng.random((6, 3000)) < 0.5)
    x = np.full((46, 3000), np.nan, np.float32)
    x[:6] = ((np.cumsum(steps, axis=1) - 1500) * 0.05).astype(np.float32)
    for n in range(1, 41):
        x[5 + n, :n] = rng.integers(-20, 20, n) * np.float32(0.05)
    prep = prepare(x)
    for qmin, qmax, zp in ((-128, 127, 0), (-127, 127, 3), (0, 255, 128)):
        p = QuantParams(np.full(46, 0.05, np.float32), np.full(46, zp, np.int32), qmin, qmax,
                        axis=0)
        direct, fast = analyze(x, p), prep.analyze(p)
        np.testing.assert_array_equal(fast.code_histogram, direct.code_histogram)
        np.testing.assert_array_equal(fast.per_channel.codes_used,
                                      direct.per_channel.codes_used)
