"""A first run paints the panes with NumPy twins while another process compiles the loops:
the numbers are the compiled ones, a loop without a twin waits for that process, and the
compiled loops take over when it ends."""

from __future__ import annotations

import io
import subprocess
import threading

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
    monkeypatch.delattr(compiled, "abs_order_stats", raising=False)  # not looked up yet
    waited = []
    loop_twins.install(until=lambda: waited.append(True))
    try:
        assert compiled.evaluate_rows is loop_twins.evaluate_rows and not waited
        assert compiled.abs_order_stats is not None and waited == [True]
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
