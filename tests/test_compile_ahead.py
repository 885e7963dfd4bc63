"""On a first run the loops beyond the warm-up's are compiled ahead, in a process of their own:
afterwards the window's warm-up, its formats, the formats view, a checkpoint scan and the
engine API load every loop they call from the cache, none compiles."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from quantscope.state import compile_ahead

pytestmark = pytest.mark.slow  # fresh interpreters: the last tier (tests/conftest.py)

_USE_THEM = """
import numpy as np
from numba.core import event

compiled = []

class Compiles(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev):
        pass

event.register("numba:compile", Compiles())
from quantscope.core import analyze, choose_qparams, dequantize, quantize
from quantscope.core.stats.fused import figures_of
from quantscope.core.stats.prepared import prepare
from quantscope.io.dtypes import dtype_from_name
from quantscope.state.compute import compute_reports
from quantscope.state.explorer import ExplorerState
from quantscope.state.formats import format_points
from quantscope.state.source import Source, load_source, overview, prepare_tensor, working_tensor

from quantscope.state.compile_ahead import cache_was_cold
from quantscope.state.warm_up import warm_up_engine

warm_up_engine()
print("cold:", cache_was_cold())
src = Source.generator("laplace", (700, 600), 3)
state = ExplorerState(cache_reports=False)
x, dtype = load_source(src)
x = working_tensor(x)
prepared = prepare_tensor(x, state.settings, None)
state.set_tensor(x, src, prepared=prepared, overview=overview(x, dtype, prepared), checked=True)
for formats in (("int8/channel", "fp8_e4m3/tensor", "mxfp4", "int4_g128"),
                ("nvfp4", "fp8_e5m2/channel", "mxfp8", "nf4")):
    state.update_settings(formats=formats)
    compute_reports(state.request())
format_points(x, prepared, state.settings)
from quantscope.state.formats import best_formats
best_formats(x, state.settings)  # a large tensor's formats screened (scan --formats)
choose_qparams(x, symmetric=False, method="mse", prepared=prepared)
choose_qparams(x[:8], symmetric=True, method="mse", granularity="channel", axis=0)
p = choose_qparams(x, symmetric=False)
analyze(x, p)
dequantize(quantize(x, p.scale, p.zero_point), p.scale, p.zero_point)
figures_of(x[:50].astype(dtype_from_name("bfloat16")), 0)
print("compiled:", sorted(set(compiled)))
"""


def _python(code_or_module: list[str], cache) -> list[str]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, *code_or_module], env=env, check=True,
                         capture_output=True, text=True, timeout=600)
    return out.stdout.splitlines()


def test_after_the_compile_ahead_the_window_formats_scans_and_api_compile_nothing(tmp_path):
    # a cold cache of its own: the warm-up compiles, and knows it
    warm = "from quantscope.state import compile_ahead as c, warm_up as s\n" \
           "print('cached:', c.panes_cached())\n" \
           "s.warm_up_engine()\nprint('cold:', c.cache_was_cold(), c.panes_cached())"
    assert _python(["-c", warm], tmp_path) == ["cached: False", "cold: True True"]
    _python(["-m", "quantscope.state.compile_ahead"], tmp_path)
    assert _python(["-c", _USE_THEM], tmp_path) == ["cold: False", "compiled: []"]


def test_a_warm_cache_starts_nothing(monkeypatch):
    monkeypatch.setattr(compile_ahead, "cache_was_cold", lambda: False)
    monkeypatch.setattr(compile_ahead.subprocess, "Popen", lambda *a, **kw: 1 / 0)
    assert compile_ahead.start_if_cold() is None


def test_a_cold_cache_starts_it_at_the_lowest_priority(monkeypatch):
    started = []
    monkeypatch.setattr(compile_ahead, "cache_was_cold", lambda: True)
    monkeypatch.setattr(compile_ahead.subprocess, "Popen",
                        lambda args, **kw: started.append((args, kw)) or "process")
    monkeypatch.setattr(compile_ahead, "_started", None)
    assert compile_ahead.start_if_cold() == "process"
    assert compile_ahead.start_if_cold() is None  # once per process
    (args, kw), = started
    assert args[1:] == ["-m", "quantscope.state.compile_ahead"]
    assert kw["start_new_session"] and kw["stdin"] == subprocess.DEVNULL
