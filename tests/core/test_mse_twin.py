"""The NumPy twin of the integer MSE search (``mse_twin.rows_optimum``) gives the compiled
loop's output to the byte -- search scale, zero point, error, proof flag and boxes opened --
on the bundled real tensors and on constructed tensors with several basins, ties and runs of
equal values; work it is not written for goes to the compiled loop."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import choose_qparams
from quantscope.core.kernels import compiled
from quantscope.core.stats import loop_twins, mse_search, mse_twin
from quantscope.core.stats.prepared import prepare
from quantscope.core.stats.sorted_stats import SortedRows


def _codes(bits: int, symmetric: bool) -> tuple[int, int]:
    half = 1 << (bits - 1)
    return (-half + 1 if symmetric else -half), half - 1


def _outputs(rows: SortedRows, loop, bits: int, symmetric: bool) -> tuple[list[bytes], object]:
    """The raw ``out`` of every call ``mse_search`` makes with ``loop`` serving
    ``rows_optimum`` (in the order of the rows), and its result."""
    seen: dict[int, bytes] = {}

    def record(*args):
        loop(*args)
        for e, r in enumerate(args[5]):
            seen[int(r)] = args[-1][e].tobytes()

    qmin, qmax = _codes(bits, symmetric)
    compiled.stand_in({"rows_optimum": record})
    try:
        found = mse_search.mse_search(rows, qmin=qmin, qmax=qmax, symmetric=symmetric)
    finally:
        compiled.stand_in({})
    return [seen[r] for r in range(rows.n_rows)], found


def _the_compiled_loop(*args):
    compiled.loop("rows_optimum")(*args)


def assert_twin_is_compiled(rows: SortedRows, bits: int, symmetric: bool) -> np.ndarray:
    """The twin's and the compiled loop's outputs, byte for byte; the compiled ``out`` rows."""
    want, found = _outputs(rows, _the_compiled_loop, bits, symmetric)
    got, twin_found = _outputs(rows, mse_twin.rows_optimum, bits, symmetric)
    assert got == want
    for field in ("scale", "zero_point", "error", "proven", "boxes"):
        assert getattr(twin_found, field).tobytes() == getattr(found, field).tobytes(), field
    out = np.frombuffer(b"".join(want)).reshape(-1, mse_search.OUT_PICK + 1)
    assert np.all(out[:, 3] == 1.0)  # proven: the search settled every box
    return out


def _real() -> dict[str, np.ndarray]:
    from quantscope.io.samples import sample_path

    return {name: np.load(sample_path(name)).astype(np.float32)
            for name in ("gelu_activations", "output_activations", "query_weight", "ffn_weight")}


@pytest.mark.parametrize("bits,symmetric", [(8, True), (8, False), (4, False), (6, True)])
@pytest.mark.parametrize("name", ["gelu_activations", "output_activations", "query_weight",
                                  "ffn_weight"])
def test_real_tensors_per_tensor(name, bits, symmetric):
    x = _real()[name]
    rows = prepare(x).layout(None, None)
    assert rows.lengths[0] >= mse_search.SEARCH_ROWS  # a searched row: the twin's own work
    out = assert_twin_is_compiled(rows, bits, symmetric)
    assert out[0, 4] > 10  # boxes opened: the branch and bound ran, not the grid alone


def _basins(seed: int) -> np.ndarray:
    """A bulk and outlier clusters at several magnitudes: clipping each cluster or not makes
    a basin of the error over the scale."""
    rng = np.random.default_rng(seed)
    parts = [rng.standard_normal(50_000), 6.0 + 0.05 * rng.standard_normal(300),
             -11.0 + 0.1 * rng.standard_normal(60), 23.0 + rng.standard_normal(9)]
    return np.concatenate(parts).astype(np.float32)


def _ties() -> np.ndarray:
    """Multiples of 1/8 (rounding ties at many scales), long runs of equal values and a
    thousand exact zeros, one sign only."""
    rng = np.random.default_rng(3)
    x = np.round(np.abs(rng.standard_normal(40_000)) * 8) / 8
    return np.concatenate([x, np.zeros(1000), np.full(500, 3.125)]).astype(np.float32)


@pytest.mark.parametrize("bits,symmetric", [(8, False), (8, True), (3, False), (5, True)])
@pytest.mark.parametrize("make", [lambda: _basins(0), lambda: _basins(1), _ties,
                                  lambda: -_ties()], ids=["basins0", "basins1", "ties", "neg"])
def test_constructed_tensors(make, bits, symmetric):
    x = make()
    assert_twin_is_compiled(prepare(x).layout(None, None), bits, symmetric)


def test_rows_of_a_per_channel_search(gelu_activations):
    """Two long rows: each share of the search is one of them."""
    x = np.ascontiguousarray(gelu_activations.reshape(2, -1))
    rows = prepare(x).layout(0, None)
    assert rows.n_rows == 2
    assert_twin_is_compiled(rows, 8, False)


def test_several_rows_in_one_call_are_each_searched(gelu_activations):
    """One call with both rows gives what two calls with one row each give."""
    x = np.ascontiguousarray(gelu_activations.reshape(2, -1))
    rows = prepare(x).layout(0, None)
    one = [np.frombuffer(b).copy() for b in
           _outputs(rows, mse_twin.rows_optimum, 8, False)[0]]
    qmin, qmax = _codes(8, False)
    s0 = mse_search.minmax_scales(rows, qmin, qmax, False)
    out = mse_search.result_rows(2)
    mse_twin.rows_optimum(
        rows.values, rows.starts, rows.records, rows.rec_starts, np.ones(2, bool),
        np.arange(2), qmin, qmax, qmin - 1, np.maximum(mse_search.F_MIN * s0, mse_search._TINY32),
        mse_search.S_MAX * s0, s0.astype(np.float32).astype(np.float64), mse_search.EPS,
        mse_search.FLOOR * rows.sumsq, mse_search.GRID, mse_search.MAX_BOXES,
        mse_search.SWEEP_CROSSINGS, out)
    assert out.tobytes() == np.concatenate(one).tobytes()


def test_rows_too_long_to_keep_carry_their_sums_from_the_records(monkeypatch,
                                                                gelu_activations):
    """A row whose running sums are not kept whole: each position's sum carried on from its
    block record gives the same bytes."""
    rows = prepare(gelu_activations).layout(None, None)
    want = _outputs(rows, mse_twin.rows_optimum, 8, False)[0]
    monkeypatch.setattr(mse_twin, "KEEP_PREFIXES_MAX", 0)
    assert _outputs(rows, mse_twin.rows_optimum, 8, False)[0] == want


def test_walked_rows_go_to_the_compiled_loop(monkeypatch):
    """Short rows are walked and swept by the loop: the twin hands them over unchanged."""
    x = _basins(2)[:4000]
    rows = prepare(x).layout(None, None)
    want = _outputs(rows, _the_compiled_loop, 8, False)[0]
    asked = []
    real = compiled.loop
    monkeypatch.setattr(compiled, "loop", lambda name: asked.append(name) or real(name))
    assert _outputs(rows, mse_twin.rows_optimum, 8, False)[0] == want
    assert asked == ["rows_optimum"]


def test_the_records_are_the_twins_blocks():
    from quantscope.core.kernels import block_sums

    assert mse_twin.BLOCK == block_sums.BLOCK


def test_many_rows_in_one_call_go_to_the_compiled_loop(monkeypatch):
    asked = []
    monkeypatch.setattr(compiled, "loop", lambda name: asked.append(name) or (lambda *a: None))
    n = mse_twin.MAX_TWIN_ROWS + 1
    mse_twin.rows_optimum(None, None, None, None, np.ones(n, bool), np.arange(n), *[None] * 11,
                          None)
    assert asked == ["rows_optimum"]


def test_the_twins_serve_the_search_and_choose_the_compiled_parameters(gelu_activations):
    prepared = prepare(gelu_activations)
    want = [choose_qparams(gelu_activations, symmetric=s, method="mse", prepared=prepared)
            for s in (True, False)]
    loop_twins.install()
    try:
        assert compiled.rows_optimum is mse_twin.rows_optimum
        got = [choose_qparams(gelu_activations, symmetric=s, method="mse",
                              prepared=prepare(gelu_activations)) for s in (True, False)]
    finally:
        loop_twins.remove()
    for g, w in zip(got, want, strict=True):
        assert g.scale.tobytes() == w.scale.tobytes()
        assert g.zero_point.tobytes() == w.zero_point.tobytes()
