"""On a first run the loops beyond the warm-up's are compiled ahead, in a process of their own:
afterwards the window's warm-up, its formats, the formats view, a checkpoint scan and the
engine API find every loop they call ready, none compiles."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quantscope.state import compile_ahead, compile_steps
from quantscope.state.choices import FormatChoice

pytestmark = pytest.mark.slow  # fresh interpreters: the last tier (tests/conftest.py)

#: After the warm-up and the compile-ahead module's ``main``, what the window, the formats
#: view, the scan and the engine API run. Every compiled loop a call reaches is added to its
#: dispatcher by ``add_overload``, whether Numba compiles it or loads it from the cache: one
#: added after the compile-ahead is a loop :func:`compile_ahead.compile_rest` does not warm,
#: which a first run would compile inside the window.
_USE_THEM = """
import os
import runpy
import sys

import numpy as np
from numba.core import dispatcher

from quantscope.core import analyze, choose_qparams, dequantize, quantize
from quantscope.core.kernels import compiled
from quantscope.core.stats.fused import figures_of
from quantscope.core.stats.prepared import prepare
from quantscope.io.dtypes import dtype_from_name
from quantscope.state.compute import compute_reports
from quantscope.state.explorer import ExplorerState
from quantscope.state.formats import best_formats, format_points
from quantscope.state.source import Source, load_source, overview, prepare_tensor, working_tensor
from quantscope.state.warm_up import warm_up_engine

warm_up_engine()
print("warm-up reaches evaluate_rows:", bool(compiled.evaluate_rows.signatures))
# what a first window starts, `python -m quantscope.state.compile_ahead --panes` (the panes'
# loops first, said on stdout, then the rest), here in this process and at its priority (the
# module lowers its own to the least)
os.nice = lambda increment: 0
sys.argv = ["compile_ahead", "--panes"]
runpy.run_module("quantscope.state.compile_ahead", run_name="__main__")
added = []
add_overload = dispatcher._DispatcherBase.add_overload

def record(self, cres):
    added.append(self.py_func.__qualname__ + str(cres.signature))
    add_overload(self, cres)

dispatcher._DispatcherBase.add_overload = record

def window(x, src, dtype):
    state = ExplorerState(cache_reports=False)
    prepared = prepare_tensor(x, state.settings, None)
    state.set_tensor(x, src, prepared=prepared, overview=overview(x, dtype, prepared),
                     checked=True)
    for formats in (("int8/channel", "fp8_e4m3/tensor", "mxfp4", "int4_g128"),
                    ("nvfp4", "fp8_e5m2/channel", "mxfp8", "nf4")):
        state.update_settings(formats=formats)
        compute_reports(state.request())
    # each block's stored scale of least error (the MSE method on MX and NVFP4 panes)
    state.update_settings(formats=("mxfp4", "nvfp4", "nvfp4_modelopt", "nf4"),
                          method="mse")
    compute_reports(state.request())
    state.update_settings(method="minmax")
    return state, prepared

src = Source.generator("laplace", (700, 600), 3)
x, dtype = load_source(src)
x = working_tensor(x)
state, prepared = window(x, src, dtype)  # above the direct passes' bound: prepared
small = np.random.default_rng(1).standard_normal((384, 384)).astype(np.float32)
small.flags.writeable = False  # a file the window opened: read-only, on the direct passes
window(small, Source.generator("normal", (384, 384), 1), np.dtype(np.float32))
format_points(x, prepared, state.settings)
best_formats(x, state.settings)  # a large tensor's formats screened (scan --formats)
choose_qparams(x, symmetric=False, method="mse", prepared=prepared)
choose_qparams(x[:8], symmetric=True, method="mse", granularity="channel", axis=0)
choose_qparams(x, format="fp8_e4m3", method="mse", prepared=prepared)  # a format pane's MSE
choose_qparams(small, format="fp6_e2m3", method="mse", granularity="channel", axis=0,
               saturate=False)
p = choose_qparams(x, symmetric=False)
analyze(x, p)
dequantize(quantize(x, p.scale, p.zero_point), p.scale, p.zero_point)
figures_of(x[:50].astype(dtype_from_name("bfloat16")), 0)
print("added after the compile-ahead:", sorted(set(added)))
"""

_WARM_UP_COLD = ("from quantscope.state import compile_ahead as c, warm_up as s\n"
                 "print('cached:', c.panes_cached())\n"
                 "s.warm_up_engine()\nprint('cold:', c.cache_was_cold(), c.panes_cached())")


def _seed_without_the_panes_loop(cache: Path) -> int:
    """Copy this process's compiled loops (the warm-up's, from the suite's cache) into
    ``cache`` as a ``NUMBA_CACHE_DIR`` of their own, all but the panes' main loop
    (``evaluate_rows``, the loop :func:`compile_ahead.cache_was_cold` and
    :func:`compile_ahead.panes_cached` ask about): a warm-up there then compiles that one loop
    and loads the others, as it would compile them all on an empty cache (20-30 s of CPU).
    How many files were copied."""
    from numba.core.caching import UserProvidedCacheLocator
    from numba.core.registry import CPUDispatcher

    from quantscope.core.kernels import sorted_kernel
    from quantscope.state.warm_up import warm_up_engine

    warm_up_engine()  # every module of the warm-up's loops imported
    skip = f"sorted_kernel.{sorted_kernel.evaluate_rows.__name__}-"
    folders = {}
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("quantscope."):
            continue
        for obj in list(vars(module).values()):
            path = getattr(getattr(obj, "_cache", None), "_cache_path", None)
            if isinstance(obj, CPUDispatcher) and path is not None:
                source = obj.py_func.__code__.co_filename
                folders[path] = UserProvidedCacheLocator.get_suitable_cache_subpath(source)
    copied = 0
    for path, sub in folders.items():
        names = [n for n in (os.listdir(path) if os.path.isdir(path) else ())
                 if n.endswith((".nbi", ".nbc")) and not n.startswith(skip)]
        for name in names:
            (cache / sub).mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.join(path, name), cache / sub / name)
            copied += 1
    return copied


def _python(code: list[str], cache=None) -> list[str]:
    env = dict(os.environ)
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    out = subprocess.run([sys.executable, *code], env=env, check=True, capture_output=True,
                         text=True, timeout=600)
    return out.stdout.splitlines()


def test_after_the_compile_ahead_the_window_formats_scans_and_api_compile_nothing():
    """Run on the suite's own cache (tests/conftest.py fills it with the same two calls before
    the tests): the question is which loops ``compile_rest`` leaves out, and a loop it leaves
    out shows as an overload added after it, compiled or loaded alike. The module is run as
    the launcher runs it, ``python -m quantscope.state.compile_ahead``."""
    assert _python(["-c", _USE_THEM]) == ["warm-up reaches evaluate_rows: True", "panes",
                                          "added after the compile-ahead: []"]


def test_the_warm_up_knows_a_cold_cache_from_a_warm_one(tmp_path):
    """On a cache of its own that lacks the panes' main loop the warm-up compiles it and
    :func:`cache_was_cold` says so (the launcher then starts the compile-ahead process); the
    next start loads, and does not."""
    assert _seed_without_the_panes_loop(tmp_path) > 0
    assert _python(["-c", _WARM_UP_COLD], tmp_path) == ["cached: False", "cold: True True"]
    assert _python(["-c", _WARM_UP_COLD], tmp_path) == ["cached: True", "cold: False True"]


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


def test_the_groups_hold_every_step_once_in_its_order():
    """Processes that share the steps claim them a group at a time: every step of
    ``all_steps`` is in one group, each group keeps the steps' order (a loop's writable steps
    before its read-only ones, which load what those wrote) and has its place in
    ``GROUP_ORDER``, the costliest first."""
    names = [name for name, _ in compile_steps.all_steps()]
    groups = compile_steps.step_groups()
    grouped = [name for _, steps in groups for name, _ in steps]
    assert sorted(grouped) == sorted(names) and len(set(names)) == len(names)
    assert [g for g, _ in groups] == [g for g in compile_steps.GROUP_ORDER
                                     if g in dict(groups)]
    assert len(groups) == len(compile_steps.GROUP_ORDER)
    for _, steps in groups:
        at = [names.index(name) for name, _ in steps]
        assert at == sorted(at)
    assert dict(groups)["panes"][:2] == compile_steps.all_steps()[:2]  # the warm-up's first


@pytest.mark.parametrize(("spec", "path", "group"), [
    ("gguf_q8_0", "prepared", "gguf"), ("gguf_q4_k", "read-only", "gguf"),
    ("gguf_q2_k", "direct", "gguf"), ("int8/channel", "prepared", "panes"),
    ("fp8_e4m3/tensor", "prepared", "panes"), ("fp8_e4m3/tensor", "direct", "direct rows"),
    ("fp4_e2m1/channel", "read-only", "direct rows"), ("mxfp8_e4m3", "prepared", "direct rows"),
    ("mxint8", "direct", "direct rows"), ("nf4", "prepared", "direct rows"),
    ("mxfp4", "prepared", "float blocks"), ("nvfp4_modelopt", "read-only", "float blocks"),
    ("mxfp6_e3m2", "direct", "float blocks"), ("int4_g32", "direct", "int direct"),
    ("torchao_int4_g32", "prepared", "torchao")])
def test_a_format_step_goes_with_the_loop_that_measures_it(spec, path, group):
    assert compile_steps.format_group(FormatChoice(spec), path) == group


def test_compile_all_runs_whole_groups_that_it_claims(monkeypatch):
    """A group is claimed by its name, once, and run whole by the process that claims it; a
    group another process claimed is skipped whole."""
    ran, asked = [], []
    groups = [("big", [("a", lambda: ran.append("a")), ("b", lambda: ran.append("b"))]),
              ("taken", [("c", lambda: ran.append("c"))]),
              ("small", [("d", lambda: ran.append("d"))])]
    monkeypatch.setattr(compile_ahead, "step_groups", lambda: groups)
    compile_ahead.compile_all(lambda name: asked.append(name) or name != "taken")
    assert (asked, ran) == (["big", "taken", "small"], ["a", "b", "d"])


def test_a_claim_is_taken_once_between_processes(tmp_path):
    first, second = compile_ahead.claim_in(tmp_path), compile_ahead.claim_in(tmp_path)
    assert [first("gguf"), second("gguf"), second("int8/tensor prepared"),
            first("int8/tensor prepared")] == [True, False, True, False]
    assert sorted(os.listdir(tmp_path)) == ["gguf", "int8-tensor prepared"]
