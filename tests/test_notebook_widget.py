"""``quantscope.widget``: live panes in a notebook, driven headless through its controls' traits.

Every change of a control must redraw the images and give the numbers of the engine and of
``quantscope report --json`` for the same settings, without Qt.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import quantscope as qs
from quantscope.cli import main
from quantscope.errors import UserError
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
    w = qs.widget(str(path))
    yield x, path, w
    w.close()
    assert not w.live.scheduler.is_running()  # its threads are joined
    with pytest.raises(UserError, match="closed"):
        w.set(bits=4)
    assert not w.live.scheduler.is_running()


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
    w.set(bits=8, method="minmax", clip=None).wait()
    before = dict(w.pngs)
    w.controls["bits"].value = 4
    w.wait()
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
    w.set(bits=8, clip=None).wait()
    w.controls["method"].value = "percentile"
    w.wait()
    assert not w.controls["percentile"].disabled
    w.controls["percentile"].value = 99.5
    w.wait()
    assert w.state.settings.percentile == 99.5
    doc = _report_json(path, "--method", "percentile", "--percentile", "99.5")
    assert w.numbers()["schemes"] == doc["schemes"]
    w.controls["preset"].value = "onnxruntime"
    w.wait()
    doc = _report_json(path, "--method", "percentile", "--percentile", "99.5",
                       "--runtime", "onnxruntime")
    assert w.numbers()["schemes"] == doc["schemes"]
    _assert_engine_numbers(w, x)
    w.controls["preset"].value = None
    w.wait()


def test_clip_window_control_shows_clipped_values(weight_widget):
    x, path, w = weight_widget
    w.set(bits=8, method="minmax", clip=None).wait()
    lo, hi = float(x.min()), float(x.max())
    img = decode_png(w.pngs["asymmetric/tensor"])
    assert not (img == CLIPPED).any()  # min/max: nothing is clipped
    window = (lo / 4, hi / 4)
    w.controls["clip"].value = window
    w.wait()
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
    w.wait()
    shown = [p for p in PANES if w._boxes[p].layout.display != "none"]
    assert shown == ["asymmetric/channel"]
    w.controls["scheme"].value = "all four"
    w.wait()
    assert all(w._boxes[p].layout.display != "none" for p in PANES)


def test_format_controls(weight_widget):
    x, _, w = weight_widget
    w.set(bits=8, method="minmax", clip=None).wait()
    w.controls["layout"].value = "number formats"
    w.wait()
    assert w.state.settings.formats is not None
    w.controls["format1"].value = "nvfp4"
    w.wait()
    assert w.state.settings.formats[1] == "nvfp4"
    assert "NVFP4" in w.titles["symmetric/channel"].value
    got = w.state.results["symmetric/channel"]
    want = analyze_with(x, w.state.prepared, w.state.params_for("symmetric/channel"))
    assert got.sqnr_db == want.sqnr_db
    w.controls["layout"].value = "int schemes"
    w.wait()
    assert w.state.settings.formats is None
    assert all(w.controls[f"format{i}"].disabled for i in range(4))


def test_set_follows_to_controls_and_refuses_bad_values(weight_widget):
    _, _, w = weight_widget
    w.set(bits=6).wait()
    assert w.controls["bits"].value == 6
    with pytest.raises(SettingsError):
        w.set(bits=9).wait()
    with pytest.raises(SettingsError):
        w.set(colour="red").wait()
    assert w.state.settings.bits == 6
    w.set(bits=8).wait()


def test_multi_tensor_file_without_tensor_fails_at_once(tmp_path):
    """The live state lists the file's tensors and the error names them, in the Python
    keyword a notebook user types (the command line's ``--tensor`` is for the shell)."""
    import time

    path = tmp_path / "two.npz"
    np.savez(path, a=np.ones((4, 4), np.float32), b=np.zeros((4, 4), np.float32))
    start = time.monotonic()
    with pytest.raises(UserError, match=r"two\.npz holds 2 tensors; choose one with "
                                        r"tensor=NAME: a, b"):
        qs.widget(str(path))
    assert time.monotonic() - start < 30
    w = qs.widget(str(path), tensor="b")
    assert w.state.tensor.shape == (4, 4)
    assert all(t.name.startswith("quantscope-widget") for t in w.live.scheduler._threads)
    w.close()


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


def test_a_change_returns_before_the_redraw_and_the_latest_wins(weight_widget):
    """With the scheduler's pane thread held busy, control changes return at once and queue;
    once it is free only the last change is drawn, and it equals a redraw made directly."""
    import threading

    from quantscope.notebook.widget import _render, _Snapshot
    from quantscope.state.compute import compute_reports
    from quantscope.state.scheduler import COMPUTE

    x, _, w = weight_widget
    w.set(bits=8, method="minmax", clip=None).wait()
    release = threading.Event()
    w.live.scheduler.submit("test-hold", lambda ctx: release.wait(30), priority=COMPUTE)
    before = w.redraws
    try:
        for bits in (2, 3, 4, 5, 6, 7, 3):
            w.controls["bits"].value = bits
        assert w.state.settings.bits == 3  # the setting is taken at once...
        assert w.redraws == before and not w._idle.is_set()  # ...the redraw is not done
        with pytest.raises(TimeoutError):
            w.wait(timeout=0.05)
    finally:
        release.set()
    w.wait()
    assert w.redraws == before + 1  # six changes superseded, never drawn
    snap = _Snapshot.of(w.state, w._data_range())
    direct = _render(snap, compute_reports(snap.request))  # reports computed afresh here
    assert direct is not None and all(w.pngs[p] == direct.panes[p][1] for p in PANES)
    _assert_engine_numbers(w, x)
    assert w.numbers()["settings"]["bits"] == 3
    w.set(bits=8).wait()


def test_the_widget_computes_on_the_live_state(weight_widget):
    """The widget owns no scheduler of its own: a change goes through the live state the
    window and ``qs.figure`` use (state -> scheduler -> engine -> inbox -> state), and the
    images follow its results."""
    from quantscope.state.live import LiveExplorer

    x, _, w = weight_widget
    assert isinstance(w.live, LiveExplorer) and w.state is w.live.state
    w.set(bits=8, method="minmax", clip=None).wait()
    steps: list[str] = []
    w.live.trace_to(steps.append)
    try:
        before = w.redraws
        w.set(bits=5).wait()
    finally:
        w.live.trace_to(None)
    assert steps[:2] == ["state.update_settings", "state.settings_changed → live"]
    assert "live → scheduler.submit(compute)" in steps
    assert "scheduler → engine: compute_reports" in steps
    assert steps[-1] == "live → state.accept"
    assert w.redraws == before + 1 and w.live.has_results()
    _assert_engine_numbers(w, x)
    assert w.numbers()["settings"]["bits"] == 5
    w.set(bits=8).wait()


def test_panes_have_axes_and_a_title(weight_widget):
    """Tick marks and labels on both axes, and the title's text, are drawn into the PNG."""
    from quantscope.notebook.font import draw_text
    from quantscope.notebook.raster import (
        AXIS,
        MARGINS,
        TEXT,
        TEXT_SIZE,
        count_ticks,
        value_ticks,
    )
    from quantscope.notebook.widget import DRAWN, PANE_SIZE, image_title

    x, _, w = weight_widget
    w.set(bits=8, method="minmax", clip=None).wait()
    img = decode_png(w.pngs["symmetric/tensor"])
    assert img.shape == (PANE_SIZE[1], PANE_SIZE[0])
    left, top, right, bottom = MARGINS
    base = PANE_SIZE[1] - bottom
    assert (img[base, left:PANE_SIZE[0] - right] == AXIS).all()  # the value axis
    assert (img[top:base, left - 1] == AXIS).all()  # the count axis
    assert (img[base + 8:, :] == TEXT).any() and (img[top:base, :left - 6] == TEXT).any()
    # the title: exactly the pixels of the pane's title text
    title = f"{w.titles['symmetric/tensor'].value[3:-4]}: {DRAWN}".replace("&#x27;", "'")
    assert image_title(w.titles["symmetric/tensor"].value[3:-4]) == title  # it fits
    long = "Symmetric · per-channel · axis 0 · 1,024 channels"  # too long with DRAWN
    assert image_title(long) == long
    want = np.zeros((8 * TEXT_SIZE + 4, PANE_SIZE[0]), np.uint8)
    draw_text(want, 4, 4, title, TEXT, TEXT_SIZE)
    assert np.array_equal(img[:want.shape[0]] == TEXT, want == TEXT)
    view = (float(x.min()), float(x.max()))
    ticks = value_ticks(view, 500)
    assert len(ticks) >= 4 and all(a < b for (a, _), (b, _) in itertools.pairwise(ticks))
    # heights are log10(count + 1) scaled to the plot: count 1 sits at log10(2) of a decade
    assert count_ticks(2.0, 200) == [(0, 0), (1, 29), (10, 101), (100, 194)]
    ys = [y for _, y in count_ticks(5.0, 200)]  # too close to 0, the tick of 1 is left out
    assert ys[1] == 40 and min(b - a for a, b in itertools.pairwise(ys)) >= 8 * TEXT_SIZE + 2


def test_tick_labels():
    from quantscope.notebook.raster import count_label, nice_step, tick_label

    assert [nice_step(1.0, n) for n in (1, 4, 5, 10)] == [1.0, 0.5, 0.2, 0.1]
    assert tick_label(-0.15000000000000002, 0.05) == "-0.15"
    assert tick_label(1e-17, 0.1) == "0.0"
    assert tick_label(0.0004, 0.0002) == "4e-4"
    assert tick_label(3e6, 1e6) == "3e6"
    assert [count_label(10 ** k) for k in (0, 2, 3, 5, 6, 9)] == ["1", "100", "1k", "100k",
                                                                  "1M", "1G"]


def test_the_browser_echo_of_the_clip_window_is_not_a_change(weight_widget):
    """A browser's range slider snaps the window the kernel shows to its step and sends it
    back: that echo keeps the method; a real move (more than a step) makes it manual."""
    _, _, w = weight_widget
    w.set(bits=8, method="percentile", clip=None).wait()
    c = w.controls["clip"]
    snapped = tuple(c.min + round((v - c.min) / c.step) * c.step for v in c.value)
    assert snapped != tuple(c.value)  # the echo differs from what the kernel set...
    c.value = snapped
    w.wait()
    assert w.state.settings.method == "percentile"  # ...and changes nothing
    # an echo of that window arriving after the next change, before its redraw
    import threading

    from quantscope.state.scheduler import COMPUTE

    release = threading.Event()
    w.live.scheduler.submit("test-hold", lambda ctx: release.wait(30), priority=COMPUTE)
    try:
        w.controls["bits"].value = 4
        c.value = snapped
    finally:
        release.set()
    w.wait()
    assert w.state.settings.method == "percentile" and w.state.settings.bits == 4
    lo, hi = c.value
    c.value = (lo + 10 * c.step, hi)
    w.wait()
    assert w.state.settings.method == "manual"
    assert w.state.settings.manual_clip == pytest.approx((lo + 10 * c.step, hi))
    w.set(method="minmax", clip=None).wait()
