"""A Hugging Face folder opens from Python as from the command line: ``qs.view`` and
``qs.figure`` on a folder (or its index) and a tensor name show ``report``'s numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

import quantscope as qs
from oracles import need
from quantscope.cli import main
from quantscope.errors import QuantscopeError
from quantscope.viewer import Viewer

QUERY = "encoder.layer.0.attention.self.query.weight"


def _report(capsys, source) -> dict:
    assert main(["report", str(source), "--tensor", QUERY, "--bits", "4", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_view_and_figure_open_a_folder_with_reports_numbers(hf_folder, qtbot, capsys):
    root, _ = hf_folder
    expected = _report(capsys, root)["schemes"]
    v = Viewer(root / "model.safetensors.index.json", tensor=QUERY, bits=4, show=False)
    qtbot.addWidget(v.window)
    try:
        numbers = v.wait().numbers()
    finally:
        v.close()
    assert numbers["schemes"] == expected
    fig = qs.figure(root, tensor=QUERY, bits=4, size=(1000, 640))
    assert fig.numbers["schemes"] == expected
    with pytest.raises(QuantscopeError, match="has no tensor named 'nope'"):
        qs.figure(root, tensor="nope")


def test_window_opens_a_pytorch_checkpoint_and_an_onnx_model(make_window, qtbot, wait_results,
                                                            tmp_path):
    """A file of several tensors opens the model view; a row opens the tensor in the panes
    with the values ``qs.load`` reads."""
    torch = need("torch")
    onnx = need("onnx")
    from onnx import helper, numpy_helper

    g = torch.Generator().manual_seed(1)
    sd = {"fc.weight": torch.randn(48, 32, generator=g).to(torch.bfloat16),
          "fc.bias": torch.randn(48, generator=g)}
    pt = tmp_path / "model.pt"
    torch.save(sd, pt)
    w = np.random.default_rng(2).standard_normal((40, 24)).astype(np.float32)
    graph = helper.make_graph([], "g", [], [], initializer=[
        numpy_helper.from_array(w, "proj.weight"), numpy_helper.from_array(w[0], "proj.bias")])
    model = tmp_path / "model.onnx"
    onnx.save_model(helper.make_model(graph), str(model))
    win = make_window()  # the second model replaces the first (its chart legend redrawn)
    for path, names in ((pt, ["fc.weight", "fc.bias"]), (model, ["proj.weight", "proj.bias"])):
        win.open_path(path)
        qtbot.waitUntil(win.model_active, timeout=30_000)
        qtbot.waitUntil(win.model_view.is_complete, timeout=60_000)
        assert [r.name for r in win.model_view.rows] == names
        win.model_view.table.clicked.emit(win.model_view.model.index(
            [win.model_view.model.row_at(i).name for i in range(2)].index(names[0]), 0))
        qtbot.waitUntil(lambda n=names[0]: win.state.source is not None
                        and win.state.source.tensor == n, timeout=30_000)
        wait_results(win)
        np.testing.assert_array_equal(win.state.tensor, qs.load(path, names[0]))
