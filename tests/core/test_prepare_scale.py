"""Preparing large tensors: the parallel sort equals np.sort, the block prefix sums are bit for
bit a full table's, a preparation reports progress and can be cancelled, and it keeps little."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantscope.core import analyze, choose_qparams
from quantscope.core.kernels import parallel, radix_sort
from quantscope.core.kernels.block_sums import BLOCK
from quantscope.core.stats import sorted_stats
from quantscope.core.stats.prepared import prepare, working_copy
from quantscope.core.stats.sorted_stats import SortedRows


def _finite_sorted(x: np.ndarray) -> np.ndarray:
    s = np.sort(x.reshape(-1))
    return s[np.isfinite(s)]


SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-38,
                    -3.4e38, 3.4e38, 1.0, -1.0], np.float32)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3000), st.integers(0, 2**32 - 1), st.sampled_from([1, 2, 3]))
def test_sort_finite_equals_numpy(n, seed, threads):
    rng = np.random.default_rng(seed)
    x = (rng.standard_t(2, n) * rng.choice([1e-30, 1.0, 1e30])).astype(np.float32)
    if n:
        x[rng.integers(0, n, min(n, 20))] = rng.choice(SPECIAL, min(n, 20))
    old = parallel.THREADS
    parallel.THREADS = threads
    try:
        values, bad = radix_sort.sort_finite(x)
    finally:
        parallel.THREADS = old
    want = _finite_sorted(x)
    assert bad == n - want.size
    np.testing.assert_array_equal(values, want)
    # -0.0 and +0.0 compare equal; the sort puts every -0.0 first
    assert (np.diff(np.signbit(values[values == 0]).astype(int)) <= 0).all()


def test_sort_finite_on_one_bucket_and_on_nothing_finite():
    for x in (np.full(100_000, 1.5, np.float32), np.full(1000, np.nan, np.float32),
              np.zeros(0, np.float32), np.linspace(1, 1.2, 300_000, dtype=np.float32)[::-1]):
        values, bad = radix_sort.sort_finite(x)
        np.testing.assert_array_equal(values, _finite_sorted(x))
        assert bad == x.size - values.size


def _full_table(v: np.ndarray) -> np.ndarray:
    """The double-double prefix sums of every position, the straightforward way."""
    out = np.zeros((v.size + 1, 4))
    h1 = l1 = h2 = l2 = 0.0
    for i, x in enumerate(v.astype(np.float64).tolist()):
        for k, val in ((0, x), (2, x * x)):
            hi, lo = (h1, l1) if k == 0 else (h2, l2)
            cur = hi + val
            bv = cur - hi
            err = (hi - (cur - bv)) + (val - bv)
            hi, lo = cur, lo + err
            if k == 0:
                h1, l1 = hi, lo
            else:
                h2, l2 = hi, lo
        out[i + 1] = (h1, l1, h2, l2)
    return out


@pytest.mark.compiles("SortedRows.sums reads the prefix sums back for tests; the app never does")
@pytest.mark.parametrize("lengths", [[0], [1], [BLOCK - 1, BLOCK, BLOCK + 1], [3 * BLOCK + 5],
                                     [7, 0, 2 * BLOCK]])
def test_block_prefix_sums_are_the_full_tables_bit_for_bit(lengths):
    rng = np.random.default_rng(len(lengths))
    rows = [np.sort(rng.standard_t(2, n).astype(np.float32) * np.float32(3.7)) for n in lengths]
    values = np.concatenate(rows) if rows else np.zeros(0, np.float32)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.intp)
    layout = SortedRows(values, starts, 0).build_sums()
    for r, v in enumerate(rows):
        table = _full_table(v)
        a = starts[r]
        pos = np.arange(v.size + 1)
        s1, s2 = layout.sums(np.full(pos.size, a), a + pos, np.full(pos.size, r))
        np.testing.assert_array_equal(s1, table[pos, 0] + table[pos, 1])
        np.testing.assert_array_equal(s2, table[pos, 2] + table[pos, 3])
        u = np.finfo(np.float64).eps / 2
        assert layout.bound1[r] == u * np.abs(table[:, 1]).max()
        assert layout.bound2[r] == u * np.abs(table[:, 3]).max()


def test_a_prefix_carried_from_an_earlier_one_is_the_full_table_bit_for_bit():
    """``prefix_from`` (a threshold's sums carried on from the previous threshold's) gives,
    for every pair of positions, the full running sum: in or across blocks, from the row's
    start, at block starts and at the row's end."""
    from quantscope.core.kernels.block_sums import prefix_at, prefix_from

    rng = np.random.default_rng(11)
    v = np.sort(rng.standard_t(2, 3 * BLOCK + 17).astype(np.float32) * np.float32(3.7))
    values = np.concatenate([np.zeros(5, np.float32), v])  # the row starts at 5
    layout = SortedRows(values, np.array([0, 5, values.size], np.intp), 0).build_sums()
    rec, k0 = layout.records, int(layout.rec_starts[1])
    table = _full_table(v)
    pos = np.unique(np.concatenate([np.arange(0, v.size + 1, 7), [0, 1, BLOCK - 1, BLOCK,
                                    BLOCK + 1, 2 * BLOCK, v.size - 1, v.size]]))
    for p0 in pos:
        g = prefix_at(values, 5, 5 + p0, rec, k0)
        for p in pos[pos >= p0]:
            assert prefix_from(values, 5, 5 + p0, g, 5 + p, rec, k0) == tuple(table[p]), (p0, p)


@pytest.mark.parametrize("gran", ["tensor", "channel"])
def test_reports_through_the_parallel_sort_equal_the_direct_pass(gran, monkeypatch):
    monkeypatch.setattr(sorted_stats, "RADIX_ROWS", 0)
    monkeypatch.setattr(sorted_stats, "WALK_PER_LEVEL", 0)
    rng = np.random.default_rng(5)
    x = rng.standard_t(3, (16, 5000)).astype(np.float32)
    x[3, 7], x[9, 1], x[0, 0] = np.nan, np.inf, -np.inf
    for symmetric in (True, False):
        p = choose_qparams(np.nan_to_num(x, posinf=0, neginf=0), symmetric=symmetric,
                           granularity=gran, axis=0)
        p = p.with_(scale=p.scale * np.float32(0.6))
        with np.errstate(all="ignore"):
            direct = analyze(x, p)
        fast = prepare(x).analyze(p)
        np.testing.assert_array_equal(fast.code_histogram, direct.code_histogram)
        assert (fast.clipped_below, fast.clipped_above, fast.max_abs_error, fast.n_nonfinite) \
            == (direct.clipped_below, direct.clipped_above, direct.max_abs_error,
                direct.n_nonfinite)
        np.testing.assert_allclose(fast.mse, direct.mse, rtol=1e-9, atol=0)


def test_progress_rises_to_one_and_raising_cancels(monkeypatch):
    monkeypatch.setattr(sorted_stats, "RADIX_ROWS", 0)
    x = np.random.default_rng(0).standard_normal(300_000).astype(ml_dtypes.bfloat16)
    monkeypatch.setattr("quantscope.core.stats.prepared.CONVERT_BLOCK", 50_000)
    seen = []
    prep = prepare(x, progress=lambda f, stage: seen.append((f, stage)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and 0.0 <= fractions[0]
    assert {"converting to float32", "sorting", "prefix sums"} <= {s for _, s in seen}
    np.testing.assert_array_equal(prep.x, x.astype(np.float32))

    class Stop(Exception):
        pass

    def stop_at_half(f, stage):
        if f > 0.5:
            raise Stop

    with pytest.raises(Stop):
        prepare(x, progress=stop_at_half)


def test_a_float32_tensor_is_kept_not_copied_and_the_rest_is_small(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32))
    mapped = np.load(path, mmap_mode="r")
    prep = prepare(mapped)
    assert np.shares_memory(prep.x, mapped)
    assert prep.nbytes <= 4.3 * mapped.size + 1024  # sorted values and a record per block
    assert working_copy(mapped) is not None and np.shares_memory(working_copy(mapped), mapped)
    half = np.arange(10, dtype=np.float16)
    assert working_copy(half).dtype == np.float32
