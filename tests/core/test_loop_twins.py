"""The NumPy twins of the prepared reports' compiled loops give the same numbers, bit for bit."""

import dataclasses

import numpy as np
import pytest

from quantscope.core import choose_qparams, params_from_range
from quantscope.core.kernels import block_sums, compiled, sorted_kernel
from quantscope.core.kernels.read_only import read_only
from quantscope.core.kernels.unit_columns import unit_columns
from quantscope.core.stats import loop_twins
from quantscope.core.stats.prepared import prepare
from quantscope.core.stats.sorted_stats import SortedRows
from quantscope.io.samples import sample_path


@pytest.fixture
def twins():
    """The twins behind ``compiled`` for the test's body, the compiled loops again after it."""
    loop_twins.install()
    try:
        yield
    finally:
        loop_twins.remove()


def test_constants_are_the_compiled_loops_own():
    assert loop_twins.BLOCK == block_sums.BLOCK
    assert loop_twins.WALK_CHUNK == sorted_kernel.WALK_CHUNK
    assert loop_twins.ARITHMETIC_CODES == sorted_kernel.ARITHMETIC_CODES
    assert loop_twins.LINE_ARITHMETIC == sorted_kernel.LINE_ARITHMETIC
    assert set(loop_twins.TWINS) <= set(compiled.HOMES)


def _tensors():
    rng = np.random.default_rng(5)
    demo = np.load(sample_path("gelu_activations"))
    heavy = rng.standard_t(2, (96, 2500)).astype(np.float32)  # walked rows of 3 chunks
    heavy[3, 7] = np.nan
    heavy[50, :] = 0.0
    heavy[60, ::3] = np.inf
    ties = (rng.integers(-300, 300, (12, 26000)) * 0.25).astype(np.float32)  # searched rows
    return {"demo": demo, "heavy": heavy, "ties": ties}


def _cases(x):
    yield choose_qparams(x, symmetric=True)
    yield choose_qparams(x, symmetric=False, granularity="channel", axis=0)
    yield choose_qparams(x, symmetric=True, granularity="channel", axis=1, bits=4)
    yield choose_qparams(x, symmetric=False, granularity="channel", axis=1)
    # a window that clips on both sides, per tensor and per channel
    lo, hi = np.nanpercentile(np.where(np.isfinite(x), x, np.nan), [2, 97])
    yield params_from_range(lo, hi, symmetric=False, rounding="half_away")
    shape = (x.shape[1],)
    yield params_from_range(np.full(shape, lo), np.full(shape, hi), symmetric=False, axis=1)
    for runtime in ("pytorch", "tflite", "onnxruntime"):
        yield choose_qparams(x, runtime=runtime, symmetric=False, granularity="channel", axis=0)
        yield choose_qparams(x, runtime=runtime, symmetric=True)


@pytest.mark.parametrize("name", ["demo", "heavy", "ties"])
def test_prepared_reports_are_the_compiled_ones(name):
    x = _tensors()[name]
    params = list(_cases(x))
    compiled_reports = [prepare(x).analyze(p) for p in params]
    prepared_numbers = prepare(x)
    loop_twins.install()
    try:
        twin_prep = prepare(x)
        twin_reports = [twin_prep.analyze(p) for p in params]
        for axis in (0, 1):
            twin_rows = twin_prep.layout(axis, None)
            rows = prepared_numbers.layout(axis, None)
            assert np.array_equal(twin_rows.records, rows.records)
            assert np.array_equal(twin_rows.bound1, rows.bound1)
            assert np.array_equal(twin_rows.bound2, rows.bound2)
            assert np.array_equal(twin_rows.sumsq, rows.sumsq)
    finally:
        loop_twins.remove()
    for p, a, b in zip(params, twin_reports, compiled_reports, strict=True):
        assert a.summary() == b.summary(), (p.granularity, p.symmetric, p.rounding)
        assert np.array_equal(a.code_histogram, b.code_histogram)
        assert a.signal_power == b.signal_power
        if b.per_channel is not None:
            for f in dataclasses.fields(b.per_channel):
                assert np.array_equal(getattr(a.per_channel, f.name),
                                      getattr(b.per_channel, f.name), equal_nan=True), f.name


def test_raw_outputs_and_bounds_are_the_compiled_ones():
    """Every column of the evaluation, the error bounds included (they decide the redo)."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((7, 40000)).astype(np.float32)
    rows = SortedRows.from_rows([(np.arange(7), x)], 7)
    row = np.array([0, 3, 6, 6])
    scale = np.array([0.02, 0.01, 0.03, 0.005], np.float32)
    zp = np.array([0, 3, -5, 0], np.int32)
    for walk in (1 << 30, 10):  # every row walked, then every row searched
        outs = []
        for use_twins in (False, True):
            if use_twins:
                loop_twins.install()
            try:
                fresh = SortedRows(rows.values, rows.starts, rows.n_nonfinite)
                outs.append(_evaluate_raw(fresh, row, scale, zp, walk))
            finally:
                if use_twins:
                    loop_twins.remove()
        for a, b in zip(*outs, strict=True):
            assert np.array_equal(a, b)


def _evaluate_raw(rows, row, scale, zp, walk_below):
    hist = np.zeros(256, np.int64)
    # the layout evaluate hands the loop: no other signature is compiled for this test
    out_f = unit_columns(row.size, 8, np.float64, zeros=False)
    out_i = unit_columns(row.size, 5, np.int64, zeros=False)
    rec, rec_starts, b1, b2 = rows._sums
    # and its read-only scales and zero points (the parameters the report holds)
    s, z = read_only(scale), read_only(zp)
    compiled.evaluate_rows(rows.values, rows.starts, rows.sumsq, rec, rec_starts, b1, b2, row,
                           s, s, z, -128, 127, 0, False, False, walk_below, True, hist, out_f,
                           out_i)
    return hist, out_f, out_i


def test_histogram_counts_are_the_compiled_ones(twins):
    rng = np.random.default_rng(3)
    values = np.sort(rng.standard_normal(5000).astype(np.float32))
    # float32 edges, as the histogram hands them (the loop compiled ahead for them)
    for edges in (np.linspace(-2, 2, 33, dtype=np.float32),
                  np.linspace(-10, 10, 2049, dtype=np.float32),
                  np.array([values[10], values[10], values[4000]], np.float32)):
        a = np.zeros(edges.size - 1, np.int64)
        b = np.zeros(edges.size - 1, np.int64)
        loop_twins.bin_counts(values, 3, 4990, edges, a)
        block_sums.bin_counts(values, 3, 4990, edges, b)
        assert np.array_equal(a, b)


def _direct_cases(x):
    """Per-tensor parameters of every arithmetic the one-pass loop knows, both roundings, a
    window that clips on both sides, and a runtime's own multiplier."""
    lo, hi = np.nanpercentile(np.where(np.isfinite(x), x, np.nan), [3, 96])
    for arithmetic in loop_twins.LINE_ARITHMETIC:
        for rounding in ("half_even", "half_away"):
            yield params_from_range(lo, hi, symmetric=False, rounding=rounding,
                                    arithmetic=arithmetic)
    yield choose_qparams(x, symmetric=True, bits=4)
    for runtime in ("pytorch", "tflite", "tensorrt"):
        yield choose_qparams(x, runtime=runtime, symmetric=runtime == "tensorrt")


def test_direct_reports_are_the_compiled_ones():
    """``analyze`` of a tensor large enough for the one compiled pass: the twin's shares,
    blocks (a last short one) and sums give every number and count of the compiled pass."""
    from quantscope.core import analyze
    from quantscope.core.schemes.quantize import COMPILED_MIN

    rng = np.random.default_rng(11)
    x = rng.standard_t(3, COMPILED_MIN + 3 * 1024 + 517).astype(np.float32)
    x[[5, 200_001, -3]] = [np.nan, np.inf, -np.inf]
    x[1000:1400] = 0.0
    params = list(_direct_cases(x))
    compiled_reports = [analyze(x, p) for p in params]
    loop_twins.install()
    try:
        assert compiled.analyze_flat is loop_twins.analyze_flat
        twin_reports = [analyze(x, p) for p in params]
    finally:
        loop_twins.remove()
    for p, a, b in zip(params, twin_reports, compiled_reports, strict=True):
        assert a.summary() == b.summary(), (p.arithmetic, p.rounding)
        assert np.array_equal(a.code_histogram, b.code_histogram)
        assert (a.signal_power, a.n_nonfinite) == (b.signal_power, b.n_nonfinite)


def test_a_row_whose_bits_changed_gets_its_own_prefix_sums():
    """The twins keep the last searched row's prefix sums for the next report of the same
    row: a row changed in place (its array, its bounds the same), or its sign of zero
    flipped, is summed anew, and each report is the compiled loops' one."""
    rng = np.random.default_rng(4)
    x = np.sort(rng.standard_normal(3 * loop_twins.BLOCK * 40).astype(np.float32))
    x[np.searchsorted(x, 0.0)] = 0.0
    rows = SortedRows.from_rows([(np.arange(1), x[None, :])], 1)
    row, zp = np.array([0]), np.array([0], np.int32)
    scale = np.array([np.abs(x).max() / 127], np.float32)

    def evaluate() -> tuple:
        return _evaluate_raw(SortedRows(rows.values, rows.starts, rows.n_nonfinite), row,
                             scale, zp, 10)  # every row searched

    loop_twins.install()
    try:
        first = evaluate()
        values = rows.values
        values[5] = np.nextafter(values[5], np.float32(0))  # still sorted, other bits
        zero = int(np.flatnonzero(values == 0)[0])
        values[zero] = -0.0
        changed = evaluate()
    finally:
        loop_twins.remove()
    for a, b in zip(changed, evaluate(), strict=True):
        assert np.array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(first, changed, strict=True))


def test_absolute_percentiles_are_the_compiled_ones():
    """A symmetric percentile's order statistics of ``|x|`` (rows of several lengths, ±0,
    all-negative and empty rows; the first, last and in-between ranks)."""
    rng = np.random.default_rng(12)
    x = rng.standard_t(3, (40, 999)).astype(np.float32)
    x[3] = -np.abs(x[3])  # every value negative
    x[4, ::2] = -0.0
    x[5, :] = np.nan  # no finite value: an empty row
    x[6, :500] = np.inf
    qs = (0.0, 37.5, 99.9, 100.0)
    ref = [prepare(x).percentile(q, axis=axis, group_size=None, absolute=True)
           for q in qs for axis in (None, 0, 1)]
    loop_twins.install()
    try:
        twin = [prepare(x).percentile(q, axis=axis, group_size=None, absolute=True)
                for q in qs for axis in (None, 0, 1)]
    finally:
        loop_twins.remove()
    for a, b in zip(twin, ref, strict=True):
        assert np.array_equal(np.atleast_1d(a).view(np.uint8), np.atleast_1d(b).view(np.uint8))
