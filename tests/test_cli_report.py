"""``quantscope report``: the four schemes, equal to the engine's numbers, as a table and JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from quantscope import analyze, choose_qparams, prepare
from quantscope.cli import main
from quantscope.jsonable import dumps
from quantscope.state.compute import analyze_with


def test_report_json_equals_engine(tmp_path, capsys, query_weight):
    path = tmp_path / "w.npy"
    np.save(path, query_weight)
    assert main(["report", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["schemes"]) == {"symmetric/tensor", "symmetric/channel",
                                   "asymmetric/tensor", "asymmetric/channel"}
    # the window's path (analyze_with) to the last bit, the other path to 1e-9
    prepared = prepare(query_weight)
    r = analyze(query_weight, choose_qparams(query_weight, symmetric=False))
    s = doc["schemes"]["asymmetric/tensor"]
    assert s["sqnr_db"] == analyze_with(query_weight, prepared, r.params).sqnr_db
    assert s["sqnr_db"] == pytest.approx(prepared.analyze(r.params).sqnr_db, rel=1e-9)
    assert s["sqnr_db"] == pytest.approx(r.sqnr_db, rel=1e-9)
    assert s["codes_used"] == r.codes_used and s["zero_point"] == int(r.params.zero_point)
    rc = analyze(query_weight, choose_qparams(query_weight, granularity="channel", axis=0))
    got = doc["schemes"]["symmetric/channel"]["rounding_mse"]
    assert got == analyze_with(query_weight, prepared, rc.params).rounding_mse
    assert got == pytest.approx(prepared.analyze(rc.params).rounding_mse, rel=1e-9)
    assert got == pytest.approx(rc.rounding_mse, rel=1e-9)

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
    assert doc["schema"] == "quantscope.report/1"
    exact = doc["schemes"]["symmetric/tensor"]
    assert exact["sqnr_db"] is None and exact["nonfinite"] == {"sqnr_db": "inf"}
    assert isinstance(exact["mse"], float) and exact["mse"] == 0.0


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


@pytest.mark.parametrize("options", [
    [],
    ["--bits", "6", "--method", "percentile", "--percentile", "99.9"],
    ["--method", "mse", "--bits", "4", "--axis", "1"],
    ["--clip", "-0.2", "0.3", "--rounding", "half_away", "--group-size", "64"],
    ["--runtime", "tflite", "--method", "entropy", "--code-range", "full"],
])
def test_report_json_is_the_windows_path_bit_for_bit(tmp_path, capsys, query_weight, options):
    """What the window's loader and compute job run, without Qt (read, float32, prepare with
    the settings, install, compute the request), gives the report's numbers with ``==``."""
    import argparse

    from quantscope.state import ExplorerState, Source, compute_reports, load_source
    from quantscope.state.axes import choose_axis
    from quantscope.state.options import (
        add_settings_arguments,
        add_source_arguments,
        settings_from_args,
    )
    from quantscope.state.source import prepare_tensor, working_tensor

    x = query_weight.copy()
    x[3, 5], x[7, 11] = np.nan, np.inf  # left out of every statistic, on both paths alike
    path = tmp_path / "layer0_query_weight.npy"
    np.save(path, x)
    assert main(["report", str(path), *options, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)

    parser = argparse.ArgumentParser()
    add_source_arguments(parser)
    add_settings_arguments(parser)
    args = parser.parse_args([str(path), *options])  # the options as the window reads them
    source = Source("file", str(path), axis=args.axis)
    settings = settings_from_args(args)
    data, _ = load_source(source)
    data = working_tensor(data)
    prepared = prepare_tensor(data, settings, choose_axis(data.shape, source).axis)
    state = ExplorerState()
    assert state.set_tensor(data, source, prepared=prepared, checked=True, settings=settings)
    assert state.accept(compute_reports(state.request()))
    want = json.loads(dumps(state.describe()))
    assert doc["schemes"] == want["schemes"] and doc["errors"] == want["errors"]
    assert doc["applied"] == want["applied"]
