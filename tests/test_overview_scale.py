"""A large tensor is checked, summarised and installed without full-size temporaries: the
summary from the preparation equals NumPy's, and the GUI thread's install is O(1)."""

import numpy as np
import pytest

from quantscope.core.stats.prepared import prepare
from quantscope.core.stats.sorted_stats import SortedRows
from quantscope.state import ExplorerState, Source, source


@pytest.mark.parametrize("seed", [0, 1])
def test_sorted_histogram_is_numpys(seed):
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_t(2, 20_000) * 8).astype(np.float32) / np.float32(8)  # ties
    for bins, span in ((7, (float(x.min()), float(x.max()))), (2048, (-3.0, 3.0)),
                       (5, (0.0, 0.0 + 1e-3))):
        edges = np.histogram_bin_edges(np.zeros(0, np.float32), bins=bins, range=span)
        v = np.sort(x)
        rows = SortedRows(v, np.array([0, v.size]), 0)
        np.testing.assert_array_equal(rows.histogram(edges), np.histogram(x, bins=edges)[0])


def test_summary_from_the_preparation_equals_numpys(monkeypatch):
    monkeypatch.setattr(source, "SUMMARY_BLOCK", 1000)
    rng = np.random.default_rng(2)
    x = (rng.standard_t(3, (60, 500)) * 0.1 + 5).astype(np.float32)
    x[3, 4], x[7, 7], x[9, 9], x[0, 1] = np.nan, np.inf, -np.inf, np.nan
    want = source._overview_numpy(x, "float32")
    got = source.overview(x, "float32", prepare(x))
    for name in ("shape", "n", "n_nan", "n_posinf", "n_neginf", "min", "max", "percentiles",
                 "dtype"):
        assert getattr(got, name) == getattr(want, name), name
    np.testing.assert_array_equal(got.hist_edges, want.hist_edges)
    np.testing.assert_array_equal(got.hist_counts, want.hist_counts)
    assert got.mean == pytest.approx(want.mean, rel=1e-12)
    assert got.std == pytest.approx(want.std, rel=1e-9)
    assert source.tensor_problem(np.full((3, 5000), np.nan, np.float32)) is not None
    assert source.tensor_problem(x) is None


def test_a_checked_tensor_is_installed_without_a_pass_over_it(monkeypatch):
    x = np.zeros((4, 8), np.float32)
    state = ExplorerState()

    def no_pass(_):
        raise AssertionError("set_tensor(checked=True) must not look at every element")

    monkeypatch.setattr("quantscope.state.explorer.tensor_problem", no_pass)
    assert state.set_tensor(x, Source("array", "x"), checked=True)
    assert np.shares_memory(state.tensor, x)
