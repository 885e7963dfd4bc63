"""The model view with a reference: a quantized checkpoint (int4 compressed-tensors, made
from the bundled bf16 MiniLM layer by the real package) compared with its original in the
window, its rows the comparison's numbers; a row opens its tensor with the stored scheme's
format in the first pane and the best alternatives in the others; a stored weight opens
decoded from the model view's own table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oracles import need
from quantscope.gui.stored_view import common_prefix, row_cells
from quantscope.io.stored import open_stored
from quantscope.state.stored_compare import compare
from stored_builders import compress_checkpoint

ORIGINAL = (Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources"
            / "samples" / "layer0_bf16.safetensors")
QUERY = "encoder.layer.0.attention.self.query.weight"


@pytest.fixture(scope="module")
def quantized(tmp_path_factory) -> Path:
    need("compressed_tensors")
    return compress_checkpoint(ORIGINAL, tmp_path_factory.mktemp("gui") / "minilm-w4a16")


def _compared(win, qtbot, quantized):
    win.open_path(str(quantized))
    qtbot.waitUntil(win.model_active, timeout=30_000)
    qtbot.waitUntil(win.model_view.is_complete, timeout=60_000)
    win.compare_with_original(str(ORIGINAL))
    view = win.model_view.compare_view
    qtbot.waitUntil(win.model_view.is_complete, timeout=120_000)
    return view


@pytest.fixture(scope="module")
def compared_once(shared_window, quantized, request):
    """One window with the checkpoint compared with its original, for the tests that read
    the comparison or open one of its rows (the comparison decodes every weight twice)."""
    from pytestqt.qtbot import QtBot

    win = shared_window()
    return win, _compared(win, QtBot(request), quantized)


@pytest.fixture
def compared(compared_once, qtbot):
    """The compared window, back on the comparison after each test."""
    win, view = compared_once
    yield win, view
    win.show_model_view()
    qtbot.waitUntil(lambda: view.isVisible() and win.model_active(), timeout=30_000)


def test_compare_with_original_shows_what_each_weight_lost(compared, quantized):
    win, view = compared
    assert view.isVisible() and "File" in [a.text().replace("&", "")
                                           for a in win.menuBar().actions()]
    assert win.compare_action.text().replace("&", "") == "Compare with original…"
    expected = compare(quantized, ORIGINAL).ranked()
    assert [r.name for r in view.rows] == [r.name for r in expected]
    prefix = common_prefix([r.name for r in expected])
    assert prefix == "encoder.layer.0."
    for i, row in enumerate(expected):
        cells = row_cells(row, prefix, "compressed-tensors")
        assert [view.table.item(i, j).text() for j in range(len(cells))] == list(cells)
        assert cells[1] == "int4 g128 asym" and float(cells[3]) == pytest.approx(
            row.stored.sqnr_db, abs=0.005)
    assert "against the original" in win.headline.text()


def test_a_compared_row_opens_with_the_stored_scheme_first(compared, qtbot, wait_results):
    win, view = compared
    i = next(k for k, r in enumerate(view.rows) if r.name == QUERY)
    view.table.cellClicked.emit(i, 0)
    qtbot.waitUntil(lambda: getattr(win.state.source, "tensor", None) == QUERY,
                    timeout=60_000)
    wait_results(win, timeout=180_000)  # the FP4 and INT4 group panes' loops may compile
    formats = win.state.settings.formats
    # the stored compressed-tensors int4 g128 asym scheme is AutoAWQ's rule in the engine
    assert formats[0] == "awq_int4_g128"
    others = [a.spec for a in view.rows[i].alternatives if a.spec != "awq_int4_g128"]
    assert len(others) >= 3 and formats[1:] == tuple(others[:3])  # then the best at its bits
    from quantscope.io import load_for_analysis

    original, _ = load_for_analysis(ORIGINAL, QUERY)
    np.testing.assert_array_equal(win.state.tensor, original)
    assert "awq_int4_g128" in win.model_back_label.text()


def test_a_stored_weight_opens_decoded_from_the_model_table(make_window, qtbot, wait_results,
                                                           quantized):
    win = make_window()
    win.open_path(str(quantized))
    qtbot.waitUntil(win.model_active, timeout=30_000)
    qtbot.waitUntil(win.model_view.is_complete, timeout=60_000)
    row = next(r for r in win.model_view.rows if r.name == QUERY)
    assert row.info.format == "stored" and row.status == "ok"
    win.model_view.tensor_chosen.emit(row)
    qtbot.waitUntil(lambda: getattr(win.state.source, "tensor", None) == QUERY,
                    timeout=60_000)
    wait_results(win, timeout=120_000)
    np.testing.assert_array_equal(win.state.tensor, open_stored(quantized).decode(QUERY).values)
