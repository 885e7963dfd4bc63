"""A Hugging Face folder opens from Python as from the command line: ``qs.view`` and
``qs.figure`` on a folder (or its index) and a tensor name show ``report``'s numbers."""

from __future__ import annotations

import json

import pytest

import quantscope as qs
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
