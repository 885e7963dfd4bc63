"""A first run paints the panes with NumPy twins while another process compiles the loops:
the numbers are the compiled ones, a loop without a twin waits for that process, and the
compiled loops take over when it ends."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import types

import pytest

from quantscope.core.kernels import compiled
from quantscope.core.stats import loop_twins
from quantscope.state import compile_ahead, warm_up
from quantscope.state.explorer import ExplorerState
from quantscope.state.source import (
    DEMO_AXIS,
    DEMO_SAMPLE,
    Source,
    load_source,
    overview,
    prepare_tensor,
)


def _demo_numbers() -> dict:
    """``describe()`` of the demo tensor's window state, loaded as the window loads it."""
    src = Source("sample", DEMO_SAMPLE, axis=DEMO_AXIS)
    x, dtype = load_source(src)
    state = ExplorerState(cache_reports=False)
    prepared = prepare_tensor(x, state.settings, DEMO_AXIS)
    state.set_tensor(x, src, prepared=prepared, overview=overview(x, dtype, prepared),
                     checked=True)
    for changes in ({}, {"bits": 4}, {"method": "manual", "manual_clip": (-0.1, 0.4)},
                    {"method": "minmax", "runtime": "tflite"}):
        state.update_settings(**changes)
        state.compute()
        yield state.describe(), state.overview.hist_counts.tolist()


def test_the_twins_paint_the_compiled_numbers():
    compiled_numbers = list(_demo_numbers())
    loop_twins.install()
    try:
        twin_numbers = list(_demo_numbers())
    finally:
        loop_twins.remove()
    assert twin_numbers == compiled_numbers  # every pane's numbers, as `report --json` keys


def test_a_loop_without_a_twin_waits_for_the_compiling_process(monkeypatch):
    monkeypatch.delattr(compiled, "group_rows", raising=False)  # not looked up yet
    waited = []
    loop_twins.install(until=lambda: waited.append(True))
    try:
        assert compiled.evaluate_rows is loop_twins.evaluate_rows and not waited
        assert compiled.group_rows is not None and waited == [True]
    finally:
        loop_twins.remove()
    assert not compiled.standing_in()
    assert compiled.evaluate_rows is not loop_twins.evaluate_rows


class _Ahead:
    """A compile-ahead process that says the panes' loops are written, then ends."""

    def __init__(self):
        self.stdout = io.StringIO(compile_ahead.PANES_WRITTEN + "\n")

    def wait(self, timeout=None):
        return 0


def test_the_compiled_loops_take_over_when_the_process_ends(monkeypatch):
    started = []
    monkeypatch.setattr(compile_ahead.subprocess, "Popen",
                        lambda args, **kw: started.append((args, kw)) or _Ahead())
    monkeypatch.setattr(compile_ahead, "_started", None)
    monkeypatch.setattr(warm_up, "_warmed", False)
    monkeypatch.setattr(compile_ahead, "compiled_ready", threading.Event())
    try:
        assert compile_ahead.start_with_stand_ins()
        (args, kw), = started
        assert args[1:] == ["-m", "quantscope.state.compile_ahead", "--panes"]
        assert kw["stdout"] == subprocess.PIPE and kw["start_new_session"]
        assert warm_up._warmed  # the window's own warm-up is skipped: the twins serve
        assert compile_ahead.compiled_ready.wait(60)
        for t in threading.enumerate():
            if t.name == "quantscope-take-compiled":
                t.join(60)
        assert not compiled.standing_in()
        assert not compile_ahead.start_with_stand_ins()  # once per process
    finally:
        loop_twins.remove()


@pytest.mark.parametrize("failure", [OSError])
def test_a_process_that_cannot_start_leaves_the_compiled_loops(monkeypatch, failure):
    def refuse(*a, **kw):
        raise failure("no")

    monkeypatch.setattr(compile_ahead.subprocess, "Popen", refuse)
    monkeypatch.setattr(compile_ahead, "_started", None)
    monkeypatch.setattr(warm_up, "_warmed", False)
    assert not compile_ahead.start_with_stand_ins()
    assert not compiled.standing_in() and not warm_up._warmed


class _Held:
    """A compile-ahead process that says the panes' loops are written only when told to."""

    def __init__(self):
        read, self._write = os.pipe()
        self.stdout = os.fdopen(read, "r")
        self.said = False

    def say_written(self) -> None:
        if not self.said:
            self.said = True
            os.write(self._write, (compile_ahead.PANES_WRITTEN + "\n").encode())
            os.close(self._write)  # and ends

    def wait(self, timeout=None):
        return 0


@pytest.fixture
def cold_start(monkeypatch):
    """A compile-ahead process (held: see :class:`_Held`) that starts when asked, the twins
    and the warm-up as a new process has them; the test makes the cache cold."""
    started: list = []
    held = _Held()
    monkeypatch.setattr(compile_ahead.subprocess, "Popen",
                        lambda args, **kw: started.append((args, kw)) or held)
    monkeypatch.setattr(compile_ahead, "_started", None)
    monkeypatch.setattr(warm_up, "_warmed", False)
    monkeypatch.setattr(compile_ahead, "compiled_ready", threading.Event())
    try:
        yield held, started
    finally:
        held.say_written()
        for t in threading.enumerate():
            if t.name == "quantscope-take-compiled":
                t.join(60)
        loop_twins.remove()
        held.stdout.close()


def _live_numbers(**settings) -> dict:
    from quantscope.inputs import live_state
    from quantscope.viewer import state_numbers

    live = live_state("gelu_activations", settings=settings, threads_name="first-paint")
    try:
        return state_numbers(live.state)
    finally:
        live.shutdown()


def test_a_notebook_figure_on_a_cold_cache_is_computed_by_the_twins(cold_start, monkeypatch):
    """``qs.figure`` / ``qs.widget``'s live state on a first run: the twins compute the panes
    at once (no compile in the kernel) with the compiled loops' numbers, while the
    compile-ahead process runs; at its word the compiled loops serve again."""
    held, started = cold_start
    compiled_numbers = _live_numbers(bits=4)  # the suite's warm cache: nothing started
    assert not started and not compiled.standing_in()
    monkeypatch.setattr(compile_ahead, "panes_cached", lambda: False)
    twin_numbers = _live_numbers(bits=4)
    assert compiled.standing_in() and compiled.evaluate_rows is loop_twins.evaluate_rows
    (args, kw), = started
    assert args[1:] == ["-m", "quantscope.state.compile_ahead", "--panes"]
    assert kw["stdout"] == subprocess.PIPE  # its word is read here
    assert twin_numbers == compiled_numbers
    held.say_written()
    assert compile_ahead.compiled_ready.wait(60)
    assert not compiled.standing_in()


def test_a_command_on_a_cold_cache_reports_by_the_twins(cold_start, monkeypatch, capsys):
    """``quantscope report`` on a first run: the twins serve its reports (the same JSON as the
    compiled loops'), and the compile-ahead process it starts is nobody's to wait for."""
    from quantscope.cli import main

    _, started = cold_start
    assert main(["report", "--json", "--bits", "6"]) == 0 and not started
    compiled_json = capsys.readouterr().out
    monkeypatch.setattr(compile_ahead, "panes_cached", lambda: False)
    assert main(["report", "--json", "--bits", "6"]) == 0
    assert compiled.standing_in() and compiled._until is None  # a loop without one compiles
    (args, kw), = started
    assert args[1:] == ["-m", "quantscope.state.compile_ahead", "--panes"]
    assert kw["stdout"] == subprocess.DEVNULL and kw["start_new_session"]
    assert capsys.readouterr().out == compiled_json


def test_a_wait_for_the_other_process_is_said_with_its_progress(monkeypatch, capsys):
    monkeypatch.setattr(compile_ahead, "compiled_ready", threading.Event())
    monkeypatch.setattr(compile_ahead, "WAIT_PROGRESS_S", 0.05)
    assert not compile_ahead.wait_for_compiled(timeout=0.12)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("quantscope: waiting for the engine's loops, compiled in "
                               "another process")
    assert lines[1:] and all(ln.startswith("quantscope: still waiting for the compiled "
                                           "loops, ") for ln in lines[1:])
    compile_ahead.compiled_ready.set()
    assert compile_ahead.wait_for_compiled(timeout=0.12)
    assert capsys.readouterr().err == ""  # no wait, no word


def test_in_a_notebook_kernel_the_engine_announces_its_compiles(monkeypatch):
    """``qs.analyze`` called alone in a Jupyter kernel on a first run compiles its loop:
    the notice is registered at the loop's first look-up there (and not in a script)."""
    from quantscope.core.kernels import compile_notice

    calls = []
    monkeypatch.setattr(compile_notice, "announce_compiles", lambda: calls.append(1))
    monkeypatch.setattr(compiled, "_first_loop", None)  # the suite's loops stay compiled
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.delattr(compiled, "analyze_flat", raising=False)  # not looked up yet
    assert compiled.analyze_flat is not None and calls == []
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.delattr(compiled, "analyze_flat")
    assert compiled.analyze_flat is not None and calls == [1]


#: Run in a fresh interpreter on an empty Numba cache, as a Jupyter kernel's first cell:
#: ``qs.analyze`` of the demo tensor, with every compile Numba starts counted.
_FIRST_ANALYZE = r"""
import json, os, sys, types
sys.modules["ipykernel"] = types.ModuleType("ipykernel")  # a Jupyter kernel, as seen from here
from numba.core import event

compiles = []


class Count(event.Listener):
    def on_start(self, ev):
        compiles.append(1)

    def on_end(self, ev):
        pass


event.register("numba:compile", Count())
import numpy as np
import quantscope as qs
from quantscope.io.samples import sample_path

x = np.load(sample_path("gelu_activations"))
report = qs.analyze(x, qs.choose_qparams(x, bits=int(sys.argv[1])))
from quantscope.core.kernels import compiled
from quantscope.state import compile_ahead

seen = {"numbers": NUMBERS(report), "compiles": len(compiles), "twins": compiled.standing_in(),
        "waits": compiled.waits_for_another_process()}
ahead = compile_ahead._started
if ahead is not None:  # its compiles are not this test's (at its end the twins step aside)
    ahead.kill()
    ahead.wait()
print(json.dumps({**seen, "ahead": ahead is not None}), flush=True)
os._exit(0)  # the thread that would take the compiled loops at the killed process's word
"""


def _report_numbers(report) -> list:
    """Every number of a per-tensor report, floats as their exact hex."""
    p = report.params
    exact = [float(v).hex() for v in (report.mse, report.rounding_mse, report.clipping_mse,
                                      report.sqnr_db, report.max_abs_error,
                                      report.signal_power, p.scale)]
    return [*exact, int(p.zero_point), report.n, report.n_nonfinite, report.clipped_below,
            report.clipped_above, report.codes_used, report.code_histogram.tolist()]


def test_analyze_as_a_kernels_first_call_on_a_cold_cache_is_computed_by_the_twins(tmp_path):
    """``qs.analyze`` first in a fresh Jupyter kernel, on an empty Numba cache: the twins
    compute it at once (not one compile in the kernel), to the bit what the compiled loops
    give, while a compile-ahead process is started; a loop without a twin would compile
    there and then, not wait for that process."""
    import inspect

    import numpy as np

    import quantscope as qs
    from quantscope.io.samples import sample_path

    bits = 6
    x = np.load(sample_path("gelu_activations"))
    compiled_numbers = _report_numbers(qs.analyze(x, qs.choose_qparams(x, bits=bits)))
    code = _FIRST_ANALYZE.replace("NUMBERS", "_report_numbers").replace(
        "import json, os, sys, types", "import json, os, sys, types\n"
        + inspect.getsource(_report_numbers))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code, str(bits)], capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["compiles"] == 0 and seen["twins"] and seen["ahead"] and not seen["waits"]
    assert seen["numbers"] == json.loads(json.dumps(compiled_numbers))


def test_the_first_loop_hook_runs_once_and_only_at_a_prompt(monkeypatch):
    """A script's or a test's look-ups never call it (they keep the compiled loops); in a
    kernel the first look-up does, once, and serves what the hook stood in."""
    calls = []
    monkeypatch.setattr(compiled, "_first_loop", None)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.delattr(sys, "ps1", raising=False)
    compiled.on_first_loop(lambda: calls.append(1))
    monkeypatch.delattr(compiled, "analyze_flat", raising=False)  # not looked up yet
    assert compiled.analyze_flat is not loop_twins.analyze_flat and calls == []
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.delattr(compiled, "analyze_flat")
    compiled.on_first_loop(lambda: calls.append(1) or loop_twins.install())
    try:
        assert compiled.analyze_flat is loop_twins.analyze_flat and calls == [1]
    finally:
        loop_twins.remove()
    assert compiled.analyze_flat is not loop_twins.analyze_flat
    assert calls == [1] and compiled._first_loop is None  # once


#: The compile-ahead process with its steps replaced: the panes' step waits until the test
#: has closed the pipe its word goes to, the rest's step leaves a file behind.
_AHEAD_ORPHANED = r"""
import sys
from quantscope.state import compile_ahead

compile_ahead.compile_panes = lambda: sys.stdin.read()
compile_ahead.compile_rest = lambda: open(sys.argv[1], "w").write("rest")
compile_ahead.os.nice = lambda n: 0
sys.argv[1:] = [sys.argv[1], "--panes"]
compile_ahead.main()
"""


def test_the_compile_ahead_goes_on_when_its_starter_has_ended(tmp_path):
    """A notebook's kernel shut down (or a window closed) before the panes' loops were in:
    the process that compiles them still compiles the rest for the next run, silently."""
    done = tmp_path / "rest"
    proc = subprocess.Popen([sys.executable, "-c", _AHEAD_ORPHANED, str(done)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # its starter is gone: nobody reads its word
    proc.stdin.close()  # the panes' step ends now
    err = proc.stderr.read().decode()
    assert proc.wait(120) == 0 and err == ""
    assert done.read_text() == "rest"


#: ``quantscope report --json --format ...`` in a fresh interpreter on an empty Numba cache:
#: its output, then the compiles it made (the compile-ahead process it starts is stopped).
_FRESH_FORMATS = r"""
import json, os, signal, sys
from numba.core import event

compiles = []


class Count(event.Listener):
    def on_start(self, ev):
        compiles.append(str(ev.data.get("dispatcher")))

    def on_end(self, ev):
        pass


event.register("numba:compile", Count())
from quantscope.cli import main

code = main(sys.argv[1:])
from quantscope.state import compile_ahead

ahead = compile_ahead._started
if ahead is not None:
    os.killpg(ahead.pid, signal.SIGKILL)
print(json.dumps({"code": code, "compiles": compiles}), flush=True)
os._exit(0)
"""


def test_a_first_gguf_q8_0_and_torchao_report_compiles_nothing(tmp_path, capsys):
    """``report --format gguf_q8_0 --format torchao_int4_g128`` on a first run: the twins
    give the compiled loops' JSON, and not one loop is compiled in the process."""
    from quantscope.cli import main

    command = ["report", "--sample", "query_weight", "--json", "--format", "gguf_q8_0",
               "--format", "torchao_int4_g128"]
    assert main(command) == 0
    want = capsys.readouterr().out
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _FRESH_FORMATS, *command], capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    *report, last = out.stdout.splitlines()
    assert json.loads(last) == {"code": 0, "compiles": []}
    assert "\n".join(report) == want.rstrip("\n")
