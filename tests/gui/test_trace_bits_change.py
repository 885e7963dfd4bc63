"""One change of bits through the house: state → scheduler → engine → state → views, each
hand-off once, in that order; the window never moves the computation along itself (the old
window snapshotted the state, submitted, checked tickets and installed results)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from layer_trace import LayerTrace

#: The bound on GUI-thread calls across layers (every function call, accessors included) for
#: one bits change until every pane shows it: 178 measured on this window (the one that ran
#: the computation itself: 180; bench/trace_bits_change.py prints both). Drawing dominates:
#: each pane reads its report's display values from the state.
MAX_CROSSINGS = 200


def test_one_bits_change_goes_round_the_house_once(app_window, qtbot):
    win = app_window(1000)
    live = win.live
    steps: list[tuple[str, str]] = []
    gui = threading.current_thread().name
    live.trace_to(lambda step: steps.append((threading.current_thread().name, step)))
    live.results_ready.connect(lambda: steps.append((threading.current_thread().name,
                                                     "state → views")))
    try:
        with LayerTrace() as trace:
            win.controls.bits.setValue(4)
            qtbot.waitUntil(win.all_shown, timeout=30_000)
    finally:
        live.trace_to(None)
    names = [s for _, s in steps]
    assert names == ["state.settings_changed → live", "live → scheduler.submit(compute)",
                     "scheduler → engine: compute_reports", "engine → inbox (job thread)",
                     "inbox → live.deliver (owner thread)", "live → state.accept",
                     "state → views"], names
    # the engine ran on a job thread; everything else on the GUI thread
    threads = [t for t, _ in steps]
    assert threads[2] != gui and threads[3] == threads[2]
    assert all(t == gui for i, t in enumerate(threads) if i not in (2, 3))
    # no front end computed a report or touched the scheduler's state kinds: the window and
    # the views only drew what the state said (views submit their own work through it)
    computing = ("state.compute.compute_reports", "state.live.LiveExplorer.request_compute",
                 "core.stats.analyze", "core.stats.fused", "core.calibration.")
    assert not [c for c in trace.crossings if c[0] == "gui" and c[3].startswith(computing)]
    assert trace.plumbing() == []  # the old window: request, submit, is_current, accept
    print(f"{trace.count()} crossings: {dict(trace.by_direction())}")
    assert 0 < trace.count() <= MAX_CROSSINGS, "\n".join(trace.lines())


def test_the_figure_waits_for_the_state_without_a_window(qtbot, monkeypatch):
    """``qs.figure`` builds no MainWindow: the state computes, a board of panes draws."""
    import numpy as np

    import quantscope as qs
    import quantscope.gui.window as window_module

    def no_window(*args, **kwargs):
        raise AssertionError("a figure built a MainWindow")

    monkeypatch.setattr(window_module.MainWindow, "__init__", no_window)
    x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    fig = qs.figure(x, bits=4, size=(800, 600))
    assert fig.size == (800, 600)
    assert fig.numbers["settings"]["bits"] == 4 and fig.numbers["current"]
    assert set(fig.numbers["schemes"]) == {"symmetric/tensor", "symmetric/channel",
                                           "asymmetric/tensor", "asymmetric/channel"}
    one = qs.figure(x, panes="Trade-off", size=(700, 450))
    assert one.size == (700, 450)
