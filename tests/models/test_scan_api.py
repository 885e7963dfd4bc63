"""``quantscope.scan`` on what a Python user holds: a path, a state dict, an nn.Module."""

from __future__ import annotations

import json

import numpy as np
import pytest

import quantscope as qs
from oracles import need
from quantscope.cli import main
from quantscope.errors import UserError
from tiny_models import tiny_lm

torch = need("torch")
safetensors_torch = need("safetensors.torch")


def _cli_json(path, capsys, *args) -> dict:
    assert main(["scan", str(path), "--json", "--no-progress", *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_module_json_equals_cli_on_the_saved_tensors(tmp_path, capsys, dtype):
    model = tiny_lm(torch, dtype=dtype)
    path = tmp_path / "tiny.safetensors"
    safetensors_torch.save_file(model.state_dict(), str(path))
    cli = _cli_json(path, capsys)
    for obj in (model, model.state_dict()):
        doc = json.loads(qs.scan(obj).to_json())
        assert doc.pop("source") in ("TinyLM", "state dict")
        cli.pop("source", None)
        assert doc == cli
    assert len(cli["tensors"]) == len(model.state_dict())
    on_path = json.loads(qs.scan(path).to_json())
    assert on_path.pop("source") == str(path)
    assert on_path == cli


def test_scan_settings_match_cli_options(tmp_path, capsys):
    model = tiny_lm(torch)
    path = tmp_path / "tiny.safetensors"
    safetensors_torch.save_file(model.state_dict(), str(path))
    cli = _cli_json(path, capsys, "--method", "mse", "--bits", "6", "--sort", "gap", "--top", "5")
    doc = json.loads(qs.scan(model, method="mse", bits=6).to_json(sort="gap", top=5))
    doc.pop("source"), cli.pop("source")
    assert doc == cli and len(doc["tensors"]) == 5


def test_rows_hold_the_parameters_figures_without_copies():
    model = tiny_lm(torch)
    table = qs.scan(model)
    sd = model.state_dict()
    assert [r.name for r in table] == list(sd)
    w = sd["layers.1.up_proj.weight"]
    row = table["layers.1.up_proj.weight"]
    assert row.info.shape == tuple(w.shape) and row.params == w.numel()
    assert row.figures.max_abs == pytest.approx(float(w.abs().max()), rel=0, abs=0)
    # the engine's own report of the same tensor, per tensor
    ref = qs.analyze(w.numpy(), qs.choose_qparams(w.numpy()))
    assert row.figures.per_tensor_db == pytest.approx(ref.sqnr_db, rel=1e-9)
    assert np.shares_memory(table.read(row), w.numpy())  # read again, not copied


def test_table_views(capsys):
    pd = pytest.importorskip("pandas")
    table = qs.scan(tiny_lm(torch))
    frame = table.to_pandas()
    assert isinstance(frame, pd.DataFrame) and len(frame) == len(table.rows)
    html = table._repr_html_()
    assert html.count("<tr>") == 1 + len(table.analysed) and "lm_head.weight" in html


def test_not_a_model_is_refused():
    with pytest.raises(UserError, match="state dict"):
        qs.scan(42)
    with pytest.raises(UserError, match="unknown setting"):
        qs.scan({"w": np.ones((2, 2), np.float32)}, bogus=1)


def test_formats_json_equals_cli_scan_formats(tmp_path, capsys):
    model = tiny_lm(torch, width=32)
    path = tmp_path / "tiny.safetensors"
    safetensors_torch.save_file(model.state_dict(), str(path))
    cli = _cli_json(path, capsys, "--formats")
    doc = json.loads(qs.scan(model, formats=True).to_json())
    doc.pop("source"), cli.pop("source")
    assert doc == cli
    best = {t["name"]: t for t in doc["tensors"]}["layers.1.up_proj.weight"]
    assert best["best_8bit"]["format"] and best["best_4bit"]["bits_per_element"] >= 4
