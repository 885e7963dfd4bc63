"""``quantscope [FILE] --screenshot OUT.png --metrics OUT.json``: renders offscreen once every
pane has results, writes exactly the numbers the panes display, exits 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QImage

from quantscope.cli import main
from quantscope.core import analyze
from quantscope.core.tensors.generators import generate
from quantscope.gui.numbers import display_values
from quantscope.io.samples import sample_path
from quantscope.jsonable import to_jsonable
from quantscope.state import PANES, Settings, pane_params
from quantscope.state.source import DEMO_AXIS

SRC = Path(__file__).resolve().parents[2] / "src"


def test_screenshot_and_metrics_of_the_demo_in_a_fresh_process(tmp_path, engine_reports):
    png, js = tmp_path / "demo.png", tmp_path / "demo.json"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen",
           "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "quantscope", "--screenshot", str(png),
                           "--metrics", str(js)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr  # includes a clean interpreter exit
    image = QImage(str(png))
    k = image.width() // 1600  # the export renders at 2x pixel density for slides
    assert k in (1, 2) and (image.width(), image.height()) == (1600 * k, 1000 * k)
    doc = json.loads(js.read_text())
    x = np.load(sample_path("gelu_activations"))
    ref = engine_reports(x, DEMO_AXIS)
    assert set(doc["panes"]) == set(PANES)
    for pane in PANES:
        assert doc["panes"][pane]["displayed"] == display_values(ref[pane])
        # the numbers behind the strings: the fast exact path, within 1e-9 of the direct pass
        want = to_jsonable(ref[pane].summary())
        got = doc["panes"][pane]["values"]
        assert got.keys() == want.keys()
        for key, value in want.items():
            assert got[key] == (pytest.approx(value, rel=1e-9)
                                if isinstance(value, float) else value), key
    assert doc["panes"]["symmetric/tensor"]["title"] == "Symmetric · per-tensor"
    assert doc["panes"]["symmetric/channel"]["title"] == (
        "Symmetric · per-channel · axis -1 · 1,536 channels")
    assert doc["settings"] == Settings(axis=DEMO_AXIS).to_dict()
    assert doc["applied"]["axis_rule"] == 'name "gelu_activations" says activation'
    # the keys of `quantscope report --json`, with the numbers the panes display
    assert set(doc["schemes"]) == set(PANES) and doc["errors"] == {}
    for pane in PANES:
        assert doc["schemes"][pane] == doc["panes"][pane]["values"]


@pytest.mark.parametrize("generator", ["weights", "relu"])
def test_generator_metrics_match_the_engine(qapp, tmp_path, generator):
    js = tmp_path / "m.json"
    assert main(["--generator", generator, "--shape", "64x128", "--seed", "3", "--bits", "6",
                 "--metrics", str(js)]) == 0
    doc = json.loads(js.read_text())
    x = generate(generator, (64, 128), seed=3)
    s = Settings(bits=6)
    for pane in PANES:
        want = display_values(analyze(x, pane_params(x, pane, s)))
        assert doc["panes"][pane]["displayed"] == want
    assert doc["source_spec"]["kind"] == "generator" and doc["source_spec"]["seed"] == 3


def test_file_with_a_named_tensor(qapp, tmp_path):
    path = tmp_path / "two.npz"
    a = generate("laplace", (40, 50), seed=1)
    np.savez(path, a=a, b=generate("normal", (5,), seed=2))
    js = tmp_path / "m.json"
    assert main([str(path), "--tensor", "a", "--axis", "1", "--metrics", str(js)]) == 0
    doc = json.loads(js.read_text())
    s = Settings(axis=1)
    assert doc["panes"]["symmetric/channel"]["displayed"] == display_values(
        analyze(a, pane_params(a, "symmetric/channel", s)))


def test_unreadable_file_exits_2_with_the_message(qapp, tmp_path, capsys):
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not a tensor at all")
    assert main([str(bad), "--screenshot", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "bad.npy" in err and "not a NumPy .npy file" in err
    assert not (tmp_path / "x.png").exists()


def test_conflicting_sources_are_refused(qapp, capsys):
    assert main(["--sample", "query_weight", "--generator", "normal", "--metrics", "x.json"]) == 2
    assert "only one of" in capsys.readouterr().err


def test_no_display_is_a_clear_error_not_a_qt_abort(monkeypatch, capsys):
    from quantscope.cli import main

    for var in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "no display" in err and "--screenshot" in err
