"""``quantscope report``: the four schemes, equal to the engine's numbers, as a table and JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from quantscope import analyze, choose_qparams, prepare
from quantscope.cli import main


def test_report_json_equals_engine(tmp_path, capsys, query_weight):
    path = tmp_path / "w.npy"
    np.save(path, query_weight)
    assert main(["report", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["schemes"]) == {"symmetric/tensor", "symmetric/channel",
                                   "asymmetric/tensor", "asymmetric/channel"}
    # the direct pass to 1e-9; the prepared path (the window's) to the last bit
    prepared = prepare(query_weight)
    r = analyze(query_weight, choose_qparams(query_weight, symmetric=False))
    s = doc["schemes"]["asymmetric/tensor"]
    assert s["sqnr_db"] == pytest.approx(r.sqnr_db, rel=1e-9)
    assert s["sqnr_db"] == prepared.analyze(r.params).sqnr_db
    assert s["codes_used"] == r.codes_used and s["zero_point"] == int(r.params.zero_point)
    rc = analyze(query_weight, choose_qparams(query_weight, granularity="channel", axis=0))
    got = doc["schemes"]["symmetric/channel"]["rounding_mse"]
    assert got == pytest.approx(rc.rounding_mse, rel=1e-9)
    assert got == prepared.analyze(rc.params).rounding_mse


def test_report_demo_table(capsys, gelu_activations):
    assert main(["report"]) == 0
    out = capsys.readouterr().out
    assert "gelu_activations" in out and "(197, 1536)" in out
    r = analyze(gelu_activations, choose_qparams(gelu_activations))
    assert f"{r.sqnr_db:.2f}" in out and f"{r.codes_used}/255" in out


def test_exact_quantization_gives_strict_json(tmp_path, capsys):
    path = tmp_path / "exact.npy"
    np.save(path, np.array([[-1.0, 0.0, 1.0]], np.float32))
    assert main(["report", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # strict: no bare Infinity
    assert doc["schemes"]["symmetric/tensor"]["sqnr_db"] == "inf"


@pytest.mark.parametrize("content, message", [
    (np.zeros((0, 3), np.float32), "empty"),
    (np.float32(1.0), "0-d"),  # refused as the window refuses it
])
def test_report_edge_tensors(tmp_path, capsys, content, message):
    path = tmp_path / "t.npy"
    np.save(path, content)
    rc = main(["report", str(path)])
    if message:
        assert rc == 2 and message in capsys.readouterr().err
    else:
        assert rc == 0


def test_bad_axis_is_one_line_error(tmp_path, capsys, query_weight):
    path = tmp_path / "w.npy"
    np.save(path, query_weight)
    assert main(["report", str(path), "--axis", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("quantscope: error:") and "axis" in err and "Traceback" not in err


def test_python_dash_m_runs_the_same_entry_point():
    out = subprocess.run([sys.executable, "-m", "quantscope", "report", "--json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["shape"] == [197, 1536]
