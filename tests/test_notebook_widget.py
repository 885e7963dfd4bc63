"""``quantscope.widget``: live panes in a notebook, driven headless through its controls' traits.

Every change of a control must redraw the images and give the numbers of the engine and of
``quantscope report --json`` for the same settings, without Qt.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import quantscope as qs
from quantscope.cli import main
from quantscope.errors import QuantscopeError, UserError
from quantscope.notebook.raster import (
    BAR,
    CLIPPED,
    PALETTE,
    decode_png,
    encode_png,
)
from quantscope.state import PANES, SettingsError
from quantscope.state.compute import analyze_with
from quantscope.state.display import display_values

SAMPLES = Path(__file__).resolve().parents[1] / "src" / "quantscope" / "resources" / "samples"


@pytest.fixture(scope="module")
def weight_widget(tmp_path_factory):
    x = np.load(SAMPLES / "layer0_query_weight.npy", allow_pickle=False)
    path = tmp_path_factory.mktemp("w") / "w.npy"
    np.save(path, x)
    return x, path, qs.widget(str(path))


def _report_json(path, *options) -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", str(path), "--json", *options]) == 0
    return json.loads(out.getvalue())


def _assert_engine_numbers(w, x):
    """Each pane's report equals the engine's for the pane's own parameters (the prepared
    path the window and report use, to the bit)."""
    prepared = w.state.prepared
    for pane in PANES:
        got = w.state.results[pane]
        want = analyze_with(x, prepared, w.state.params_for(pane))
        assert got.sqnr_db == want.sqnr_db and got.codes_used == want.codes_used
        assert got.rounding_mse == want.rounding_mse and got.clipping_mse == want.clipping_mse


def test_png_round_trip():
    img = np.arange(8 * 5, dtype=np.uint8).reshape(5, 8) % len(PALETTE)
    assert np.array_equal(decode_png(encode_png(img)), img)


def test_no_qt_is_loaded(weight_widget):
    assert "PySide6.QtWidgets" not in sys.modules or "pytestqt" in sys.modules


def test_bits_control_redraws_and_equals_report(weight_widget):
    x, path, w = weight_widget
    w.set(bits=8, method="minmax", clip=None)
    before = dict(w.pngs)
    w.controls["bits"].value = 4
    assert w.state.settings.bits == 4
    assert all(w.pngs[p] != before[p] for p in PANES)  # every pane was redrawn differently
    assert all(w.images[p].value == w.pngs[p] for p in PANES)
    _assert_engine_numbers(w, x)
    doc = _report_json(path, "--bits", "4")
    assert w.numbers()["schemes"] == doc["schemes"]
    shown = display_values(w.state.results["symmetric/tensor"])  # the window's strings
    assert shown["codes_used"].endswith(" of 15")  # narrow range at 4 bits
    assert all(shown[k] in w.tables["symmetric/tensor"].value for k in ("scale", "sqnr_db"))


def test_percentile_and_preset_controls(weight_widget):
    x, path, w = weight_widget
    w.set(bits=8, clip=None)
    w.controls["method"].value = "percentile"
    assert not w.controls["percentile"].disabled
    w.controls["percentile"].value = 99.5
    assert w.state.settings.percentile == 99.5
    doc = _report_json(path, "--method", "percentile", "--percentile", "99.5")
    assert w.numbers()["schemes"] == doc["schemes"]
    w.controls["preset"].value = "onnxruntime"
    doc = _report_json(path, "--method", "percentile", "--percentile", "99.5",
                       "--runtime", "onnxruntime")
    assert w.numbers()["schemes"] == doc["schemes"]
    _assert_engine_numbers(w, x)
    w.controls["preset"].value = None


def test_clip_window_control_shows_clipped_values(weight_widget):
    x, path, w = weight_widget
    w.set(bits=8, method="minmax", clip=None)
    lo, hi = float(x.min()), float(x.max())
    img = decode_png(w.pngs["asymmetric/tensor"])
    assert not (img == CLIPPED).any()  # min/max: nothing is clipped
    window = (lo / 4, hi / 4)
    w.controls["clip"].value = window
    s = w.state.settings
    assert s.method == "manual" and s.manual_clip == pytest.approx(window)
    img = decode_png(w.pngs["asymmetric/tensor"])
    assert (img == CLIPPED).any() and (img == BAR).any()
    summary = w.numbers()["schemes"]["asymmetric/tensor"]
    assert summary["clipped_below"] + summary["clipped_above"] > 0
    assert summary["clipping_mse"] > 0
    doc = _report_json(path, "--clip", repr(s.manual_clip[0]), repr(s.manual_clip[1]))
    assert w.numbers()["schemes"] == doc["schemes"]
    _assert_engine_numbers(w, x)


def test_scheme_control_shows_one_pane(weight_widget):
    _, _, w = weight_widget
    w.controls["scheme"].value = "asymmetric/channel"
    shown = [p for p in PANES if w._boxes[p].layout.display != "none"]
    assert shown == ["asymmetric/channel"]
    w.controls["scheme"].value = "all four"
    assert all(w._boxes[p].layout.display != "none" for p in PANES)


def test_format_controls(weight_widget):
    x, _, w = weight_widget
    w.set(bits=8, method="minmax", clip=None)
    w.controls["layout"].value = "number formats"
    assert w.state.settings.formats is not None
    w.controls["format1"].value = "nvfp4"
    assert w.state.settings.formats[1] == "nvfp4"
    assert "NVFP4" in w.titles["symmetric/channel"].value
    got = w.state.results["symmetric/channel"]
    want = analyze_with(x, w.state.prepared, w.state.params_for("symmetric/channel"))
    assert got.sqnr_db == want.sqnr_db
    w.controls["layout"].value = "int schemes"
    assert w.state.settings.formats is None
    assert all(w.controls[f"format{i}"].disabled for i in range(4))


def test_set_follows_to_controls_and_refuses_bad_values(weight_widget):
    _, _, w = weight_widget
    w.set(bits=6)
    assert w.controls["bits"].value == 6
    with pytest.raises(SettingsError):
        w.set(bits=9)
    with pytest.raises(SettingsError):
        w.set(colour="red")
    assert w.state.settings.bits == 6
    w.set(bits=8)


def test_multi_tensor_file_without_tensor_fails_at_once(tmp_path):
    path = tmp_path / "two.npz"
    np.savez(path, a=np.ones((4, 4), np.float32), b=np.zeros((4, 4), np.float32))
    with pytest.raises(QuantscopeError, match="choose one with --tensor NAME: a, b"):
        qs.widget(str(path))


def test_missing_ipywidgets_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(UserError, match=r"quantscope\[notebook\]"):
        qs.widget(np.ones((4, 4), np.float32))


def test_figure_of_a_multi_tensor_file_without_tensor_fails_at_once(tmp_path):
    import time

    path = tmp_path / "two.npz"
    np.savez(path, a=np.ones((4, 4), np.float32), b=np.zeros((4, 4), np.float32))
    start = time.monotonic()
    with pytest.raises(UserError, match=r"holds 2 tensors; choose one with tensor=NAME: a, b"):
        qs.figure(str(path))
    assert time.monotonic() - start < 5  # no window, no wait for numbers that never come
