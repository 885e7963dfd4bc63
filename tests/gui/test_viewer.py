"""``quantscope.view`` / ``Viewer`` / ``figure`` from Python: the handle drives the same state
as the controls, its numbers are the engine's, figures render with no display, and an
IPython-style Qt loop keeps ``view`` non-blocking."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import quantscope as qs
from oracles import need
from quantscope.core import prepare
from quantscope.errors import QuantscopeError
from quantscope.state import PANES, SettingsError, pane_params
from quantscope.state.compute import analyze_with
from quantscope.viewer import Viewer, ViewerClosedError

INTEGER_KEYS = ("n", "n_nonfinite", "clipped_below", "clipped_above", "codes_used", "qmin",
                "qmax", "levels", "zero_point", "zero_point_min", "zero_point_max")


def close_to(shown: dict, summary: dict, where: str) -> None:
    """Counts, codes, scales and labels equal; error sums within 1e-9 relative (what the fast
    exact path promises against the direct pass)."""
    assert set(shown) == set(summary), where
    for key, value in summary.items():
        if key in INTEGER_KEYS or not isinstance(value, float) or key.startswith("scale"):
            assert shown[key] == value, (where, key)
        else:
            assert shown[key] == pytest.approx(value, rel=1e-9, abs=1e-30), (where, key)


def engine_agrees(numbers: dict, x: np.ndarray, settings) -> None:
    """Every pane's numbers equal the engine's for ``settings``: the path the window takes
    (``analyze_with``: the fast exact one, or the direct pass on a tiny tensor) bit for bit,
    the direct pass as :func:`close_to` says."""
    fast = prepare(x)
    for pane in PANES:
        shown = numbers["schemes"][pane]
        params = pane_params(x, pane, settings)
        assert shown == analyze_with(x, fast, params).summary(), pane
        close_to(shown, qs.analyze(x, params).summary(), pane)


def run_python(code: str, env_drop=(), **env) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON document last."""
    full = {k: v for k, v in os.environ.items() if k not in env_drop}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=full, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


#: A script driving ``view`` until the user closes its window; ``script`` is its document.
VIEW_SCRIPT = """
    import json, numpy as np, quantscope as qs
    x = np.random.default_rng(3).standard_normal((192, 256)).astype(np.float32)
    x[5, 9] = 30.0
    v = qs.view(name="first")
    v.wait()
    demo = v.numbers()
    v.load(x, name="mine").set(bits=5, method="percentile", percentile=99.9, axis=1)
    x[:] = 0  # the viewer took a snapshot: the caller may reuse its array at once
    v.wait()
    numbers = v.numbers()
    v.set(clip=(-2.0, 3.5), code_range="full").wait()
    clipped = v.numbers()
    from PySide6.QtCore import QTimer
    QTimer.singleShot(50, v.window.close)  # the user closes the window
    qs.run()  # blocks until then
    script = {"demo": demo, "numbers": numbers, "clipped": clipped,
              "closed_after_run": v.closed}
"""

#: Then torch tensors, in the same interpreter; ``tensors`` is its document.
TORCH_SCRIPT = """
    import torch
    g = torch.Generator().manual_seed(0)
    w = torch.nn.Parameter(torch.randn(128, 96, generator=g))
    v = qs.view(w, bits=6).wait()
    f32 = v.numbers()
    b = (torch.randn(64, 200, generator=g) * 2).to(torch.bfloat16).requires_grad_(True)
    v.load(b, name="bf16 activations").set(axis=-1).wait()
    bf = v.numbers()
    v.close()
    tensors = {"f32": f32, "bf": bf, "grad": b.requires_grad}
"""


@pytest.fixture(scope="module")
def scripts() -> dict:
    """The two scripts' documents, ``{"script": ..., "tensors": ...}``, from one fresh
    interpreter (each start costs seconds of imports): the first ends as a user's script
    does, in ``qs.run()`` until its window is closed; torch tensors follow where torch is
    installed (without it, its test asks for torch as it did alone)."""
    import importlib.util

    torch = importlib.util.find_spec("torch") is not None
    code = textwrap.dedent(VIEW_SCRIPT) + (textwrap.dedent(TORCH_SCRIPT) if torch else
                                           "tensors = None\n")
    return run_python(code + 'print(json.dumps({"script": script, "tensors": tensors}))\n',
                      QT_QPA_PLATFORM="offscreen")


def test_a_script_drives_view_load_set_wait_numbers_against_the_engine(scripts,
                                                                       engine_reports):
    doc = scripts["script"]
    from quantscope.io.samples import sample_path
    from quantscope.state import Settings
    from quantscope.state.source import DEMO_AXIS, DEMO_SAMPLE

    demo_x, demo_axis = np.load(sample_path(DEMO_SAMPLE)), DEMO_AXIS
    demo_reports = engine_reports(demo_x, demo_axis)
    assert doc["demo"]["current"] and doc["demo"]["axis"] == demo_axis
    for pane, report in demo_reports.items():  # the first numbers are `quantscope report`'s
        close_to(doc["demo"]["schemes"][pane], report.summary(), pane)
    x = np.random.default_rng(3).standard_normal((192, 256)).astype(np.float32)
    x[5, 9] = 30.0
    n = doc["numbers"]
    assert n["current"] and n["source"] == "mine" and n["shape"] == [192, 256]
    settings = Settings(method="percentile", percentile=99.9, bits=5, axis=1)
    assert n["settings"] == settings.to_dict()
    engine_agrees(n, x, settings)
    assert doc["closed_after_run"]
    c = doc["clipped"]
    settings = Settings(method="manual", manual_clip=(-2.0, 3.5), percentile=99.9, bits=5,
                        axis=1, narrow_range=False)
    assert c["settings"] == settings.to_dict()
    engine_agrees(c, x, settings)


def test_torch_tensors_in_a_script_cpu_float32_and_bf16_with_grad(scripts):
    torch = need("torch")
    doc = scripts["tensors"]
    from quantscope.state import Settings

    g = torch.Generator().manual_seed(0)
    w = torch.randn(128, 96, generator=g)
    b = (torch.randn(64, 200, generator=g) * 2).to(torch.bfloat16)
    assert doc["f32"]["source"] == "torch float32 tensor"
    engine_agrees(doc["f32"], w.numpy(), Settings(bits=6))
    assert doc["bf"]["source"] == "bf16 activations" and doc["grad"] is True
    engine_agrees(doc["bf"], b.float().numpy(), Settings(bits=6, axis=-1))


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_figure_renders_a_png_of_the_size_asked_with_no_display(tmp_path):
    doc = run_python(f"""
        import json, os, numpy as np, quantscope as qs
        x = np.random.default_rng(4).standard_normal((128, 256)).astype(np.float32)
        fig = qs.figure(x, bits=4, size=(1000, 640))
        open({str(tmp_path / 'four.png')!r}, 'wb').write(fig._repr_png_())
        two = qs.figure(x, panes=["symmetric/tensor", "asymmetric/tensor"], size=(1000, 420))
        two.save({str(tmp_path / 'two.png')!r})
        view = qs.figure(x, panes="trade-off", size=(700, 450), svg=True)
        view.save({str(tmp_path / 'view.svg')!r})
        bundle, meta = fig._repr_mimebundle_()
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            qs.view(x).close()  # the process is offscreen now: a window, and a warning
        warned = [str(w.message) for w in caught]
        print(json.dumps({{"platform": os.environ.get("QT_QPA_PLATFORM"), "meta": meta,
                          "warned": warned,
                          "sqnr": fig.numbers["schemes"]["symmetric/tensor"]["sqnr_db"]}}))
        """, env_drop=("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"))
    from PySide6.QtGui import QImage

    assert doc["platform"] == "offscreen"  # chosen by quantscope itself
    assert doc["meta"] == {"image/png": {"width": 1000, "height": 640}}
    assert any("no display" in w for w in doc["warned"])
    x = np.random.default_rng(4).standard_normal((128, 256)).astype(np.float32)
    expect = qs.analyze(x, qs.choose_qparams(x, bits=4)).sqnr_db
    assert doc["sqnr"] == pytest.approx(expect, rel=1e-12)
    for name, size in (("four.png", (2000, 1280)), ("two.png", (2000, 840))):
        data = (tmp_path / name).read_bytes()
        assert png_size(data) == size
        image = QImage.fromData(data)
        assert (image.width(), image.height()) == size
        # not blank: the histograms' blue, text's near-black and the background all appear
        colors = {image.pixel(i, j) for i in range(0, size[0], 7) for j in range(0, size[1], 7)}
        assert len(colors) > 50
    svg = (tmp_path / "view.svg").read_text()
    assert 'width="700"' in svg and 'height="450"' in svg


def test_an_ipython_style_qt_loop_keeps_view_non_blocking():
    doc = run_python("""
        import json, sys, time, types, numpy as np
        from PySide6.QtWidgets import QApplication

        app = QApplication([])
        calls = []

        class Shell:  # what IPython's %gui qt leaves behind: an input hook, not app.exec()
            active_eventloop = None
            def enable_gui(self, gui):
                calls.append(gui)
                self.active_eventloop = gui

        shell = Shell()
        sys.modules["IPython"] = types.SimpleNamespace(get_ipython=lambda: shell)
        import quantscope as qs

        x = np.random.default_rng(5).standard_normal((256, 512)).astype(np.float32)
        t0 = time.perf_counter()
        v = qs.view(x)
        returned = time.perf_counter() - t0
        ticks_before = v.is_current()
        qs.run()  # with the loop integrated this returns at once
        after_run = time.perf_counter() - t0
        # the prompt waits for input: the input hook turns Qt's loop meanwhile
        deadline = time.monotonic() + 120
        ticks = 0
        while not v.is_current() and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.005)
            ticks += 1
        v.set(bits=3)  # typed at the next prompt: returns at once as well
        set_current = v.is_current()
        while not v.is_current() and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.005)
        print(json.dumps({"calls": calls, "visible": v.window.isVisible(),
                          "current_at_return": ticks_before, "after_run": after_run,
                          "returned": returned, "ticks": ticks, "set_current": set_current,
                          "bits": v.numbers()["schemes"]["symmetric/tensor"]["levels"],
                          "current": v.is_current()}))
        v.close()
        """, QT_QPA_PLATFORM="offscreen")
    assert doc["calls"] == ["qt"]  # view switched IPython's Qt integration on, like napari
    assert doc["visible"] and not doc["current_at_return"]  # returned before any result
    assert doc["ticks"] > 0 and doc["current"]  # the input hook's turns computed them
    assert not doc["set_current"] and doc["bits"] == 7  # 3 bits, narrow symmetric: 7 codes


# -- in-process: the handle and the controls are one thing -----------------------------------
@pytest.fixture
def viewer(qtbot):
    made: list[Viewer] = []

    def make(*args, **kwargs) -> Viewer:
        v = Viewer(*args, **kwargs)
        qtbot.addWidget(v.window)
        made.append(v)
        return v

    yield make
    for v in made:
        v.close()


def test_controls_and_handle_change_the_same_settings(viewer):
    x = np.random.default_rng(6).standard_normal((64, 128)).astype(np.float32)
    v = viewer(x, bits=6).wait()
    controls = v.window.controls
    assert controls.bits_label.value() == 6
    controls.bits_label.setValue(4)  # by hand
    assert v.settings.bits == 4
    engine_agrees(v.wait().numbers(), x, v.settings)
    v.set(rounding="half_away", group_size=32)  # by the handle: the controls follow
    assert controls.rounding.currentData() == "half_away" and controls.group.value() == 32
    engine_agrees(v.wait().numbers(), x, v.settings)


def test_refusals_raise_and_keep_what_the_window_shows(viewer, tmp_path):
    x = np.random.default_rng(7).standard_normal((32, 64)).astype(np.float32)
    v = viewer(x).wait()
    before = v.numbers()
    with pytest.raises(SettingsError, match="bits"):
        v.set(bits=12)
    with pytest.raises(SettingsError, match="unknown setting 'bitz'"):
        v.set(bitz=4)
    with pytest.raises(SettingsError, match="out of range"):
        v.set(axis=5)
    with pytest.raises(qs.EngineTypeError, match="complex"):
        v.load(np.ones((4, 4), np.complex64))
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not a tensor")
    with pytest.raises(QuantscopeError, match=r"bad\.npy"):
        v.load(bad).wait()
    assert v.numbers() == before
    v.close()
    with pytest.raises(ViewerClosedError):
        v.set(bits=4)


def test_the_handle_loads_through_the_state_not_the_window(viewer, tmp_path, monkeypatch):
    """``view`` on a file of several tensors asks the live state, as ``figure`` does: with
    ``tensor=`` the tensor named is shown (its numbers the engine's), without it the model
    view lists them all, and neither the window's loader nor its picker is ever called."""
    from quantscope.gui.loading import Loading

    def refuse(*args, **kwargs):
        raise AssertionError("the handle loaded through the window")

    for name in ("load", "load_from", "_show_picker"):
        monkeypatch.setattr(Loading, name, refuse)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    path = tmp_path / "two.npz"
    np.savez(path, a=a, b=b)
    v = viewer(path, tensor="b", show=False).wait()
    assert v.state.tensor.shape == (8, 8) and v.window.picker is None
    engine_agrees(v.numbers(), b, v.settings)
    v.load(path, tensor="a").wait()
    assert v.state.tensor.shape == (16, 32)
    engine_agrees(v.numbers(), a, v.settings)
    opened: list[str] = []
    monkeypatch.setattr(type(v.window), "open_model", lambda self, p: opened.append(str(p)))
    v.load(path)  # several tensors, none named: the model view, once, no picker
    v._run_until(lambda: v._load_done, 60)
    assert opened == [str(path)] and v.window.picker is None
    assert v.state.tensor.shape == (16, 32)  # the tensor shown stays


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
def test_a_quantized_torch_tensor_is_shown_under_its_own_scale_and_zero_point(viewer):
    torch = need("torch")
    x = torch.randn(4096, generator=torch.Generator().manual_seed(8)) * 0.7
    q = torch.quantize_per_tensor(x, 0.0123, -5, torch.qint8)
    v = viewer(q).wait()
    shown = v.numbers()["schemes"]["asymmetric/tensor"]
    assert shown["scale"] == float(np.float32(0.0123)) and shown["zero_point"] == -5
    assert shown["mse"] == 0.0 and shown["sqnr_db"] == float("inf")  # its own grid: exact
    assert "scale 0.0123, zero point -5" in v.numbers()["source"]


def test_a_result_queued_before_shutdown_does_not_restart_the_worker(make_window):
    """Closing right as a load lands (a script's ``view(x).close()``) left its result queued:
    installing it asked the stopped worker for reports, which restarted its thread, and Qt
    aborted the process at exit ('QThread: Destroyed while thread is still running')."""
    import threading

    from PySide6.QtWidgets import QApplication

    from quantscope.state import Source

    w = make_window()
    arrived = threading.Event()
    wake = w.live.wake  # called on the job's thread once the outcome waits in the inbox

    def heard() -> None:
        wake()
        if any(e.key == "load" and e.what == "done" for e in list(w.live._inbox)):
            arrived.set()

    w.live.wake = heard
    w.load(Source.generator("normal", (64, 64), 0))
    assert arrived.wait(60)  # the result waits in the GUI thread's queue, not delivered yet
    w.shutdown()
    QApplication.processEvents()
    assert w.state.tensor is None and not w.jobs.is_running()
