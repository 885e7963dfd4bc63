"""The window painted by the NumPy twins (a machine's first run, its loops still compiling in
another process) is the window painted by the compiled loops: the same numbers in every pane
and the same pixels."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtGui import QImage

from quantscope.cli import main
from quantscope.core.stats import loop_twins

pytestmark = pytest.mark.slow  # two whole windows rendered: the last tier (tests/conftest.py)


def _render(tmp_path, name: str) -> tuple[dict, np.ndarray]:
    metrics, shot = tmp_path / f"{name}.json", tmp_path / f"{name}.png"
    assert main(["--metrics", str(metrics), "--screenshot", str(shot)]) == 0
    image = QImage(str(shot)).convertToFormat(QImage.Format.Format_RGBA8888)
    pixels = np.frombuffer(image.constBits(), np.uint8, image.sizeInBytes()).copy()
    return json.loads(metrics.read_text()), pixels


@pytest.fixture(scope="module")
def compiled_window(tmp_path_factory) -> tuple[dict, np.ndarray]:
    """The window the compiled loops paint (numbers and pixels), rendered once for the tests
    that hold another way of painting it to it: rendering does not change what it renders."""
    return _render(tmp_path_factory.mktemp("compiled"), "compiled")


def test_the_twins_paint_the_same_window(tmp_path, compiled_window):
    numbers, pixels = compiled_window
    loop_twins.install()
    try:
        twin_numbers, twin_pixels = _render(tmp_path, "twins")
    finally:
        loop_twins.remove()
    assert twin_numbers == numbers
    assert twin_pixels.size == pixels.size and np.array_equal(twin_pixels, pixels)


def test_a_screenshot_on_a_cold_cache_is_painted_by_the_twins(tmp_path, monkeypatch,
                                                              compiled_window):
    """``quantscope --screenshot`` on a first run: the twins paint it (the compiled loops'
    numbers) at once, and the compile-ahead process it starts outlives it for the next run;
    a loop without a twin compiles here rather than wait for that process."""
    from quantscope.core.kernels import compiled
    from quantscope.state import compile_ahead

    numbers, _ = compiled_window  # the suite's warm cache: no twins
    started: list = []
    monkeypatch.setattr(compile_ahead.subprocess, "Popen",
                        lambda args, **kw: started.append((args, kw)) or object())
    monkeypatch.setattr(compile_ahead, "_started", None)
    monkeypatch.setattr(compile_ahead, "panes_cached", lambda: False)
    try:
        twin_numbers, _ = _render(tmp_path, "cold")
        assert compiled.standing_in() and not compiled.waits_for_another_process()
    finally:
        loop_twins.remove()
    (args, kw), = started
    assert args[1:] == ["-m", "quantscope.state.compile_ahead", "--panes"]
    assert kw["start_new_session"]
    assert twin_numbers == numbers


#: A fresh interpreter on an empty Numba cache, as a first ``quantscope --screenshot`` is: the
#: compiles it makes are counted, the compile-ahead process it starts is stopped at its end.
_FRESH_SHOT = r"""
import json, os, signal, sys
from numba.core import event

compiles = []


class Count(event.Listener):
    def on_start(self, ev):
        compiles.append(getattr(ev.data.get("dispatcher"), "__qualname__", "?"))

    def on_end(self, ev):
        pass


event.register("numba:compile", Count())
from quantscope.cli import main

code = main(["--metrics", sys.argv[1], "--screenshot", sys.argv[2]])
from quantscope.state import compile_ahead

ahead = compile_ahead._started
if ahead is not None:  # its compiles are not this process's
    os.killpg(ahead.pid, signal.SIGKILL)
print(json.dumps({"code": code, "compiles": compiles, "ahead": ahead is not None}), flush=True)
os._exit(0)
"""


def test_a_first_screenshot_compiles_nothing_and_draws_the_compiled_window(tmp_path,
                                                                          compiled_window):
    """The whole window, the trade-off curve's optimum (its "best") included, from the twins:
    not one loop compiled in the process, and the compiled window's numbers and pixels."""
    import os
    import subprocess
    import sys

    numbers, pixels = compiled_window
    cache = tmp_path / "numba-cache"
    cache.mkdir()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), HOME=str(tmp_path))
    shot, metrics = tmp_path / "fresh.png", tmp_path / "fresh.json"
    out = subprocess.run([sys.executable, "-c", _FRESH_SHOT, str(metrics), str(shot)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen == {"code": 0, "compiles": [], "ahead": True}
    assert json.loads(metrics.read_text()) == numbers
    image = QImage(str(shot)).convertToFormat(QImage.Format.Format_RGBA8888)
    fresh = np.frombuffer(image.constBits(), np.uint8, image.sizeInBytes())
    assert fresh.size == pixels.size and np.array_equal(fresh, pixels)
