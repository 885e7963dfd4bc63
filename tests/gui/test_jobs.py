"""The one Qt adapter of the live state: outcomes of the job threads reach the GUI thread
(and only the live state's current ones), a view's lane hears its key's, the state is told
through a weak reference, and the threads stop on shutdown."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from quantscope.gui.jobs import Jobs, Lane
from quantscope.state.live import LiveExplorer


@pytest.fixture
def jobs(qtbot):
    w = Jobs()
    yield w
    assert w.shutdown()
    assert not w.is_running()


def test_outcomes_are_delivered_on_the_gui_thread(jobs, qtbot):
    """The job runs on a scheduler thread; the state installs its result and emits its
    events on the thread that owns it."""
    live = jobs.live
    threads: dict[str, int] = {}
    live.results_ready.connect(lambda: threads.setdefault("results", threading.get_ident()))
    jobs_thread: list[int] = []
    real = live.scheduler.submit

    def spy(key, fn, **kw):
        def wrapped(ctx):
            jobs_thread.append(threading.get_ident())
            return fn(ctx)
        return real(key, wrapped, **kw)

    live.scheduler.submit = spy
    live.set_tensor(np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64))
    qtbot.waitUntil(lambda: "results" in threads, timeout=60_000)
    assert threads["results"] == threading.get_ident()
    assert jobs_thread and threading.get_ident() not in jobs_thread
    # the panes' results can arrive while other work set off by the tensor is still queued
    # (its overview, its preparation): the state goes idle after them, on this thread
    qtbot.waitUntil(live.idle, timeout=60_000)
    assert live.has_results()


def test_a_lane_hears_only_its_keys_newest_outcome(jobs, qtbot):
    lane = Lane("view:test", jobs)
    other = Lane("view:other", jobs)
    got, others = [], []
    lane.finished.connect(got.append)
    other.finished.connect(others.append)
    gate, started = threading.Event(), threading.Event()
    lane.submit(lambda ctx: started.set() or (gate.wait(5) and "old"))
    assert started.wait(5)
    lane.submit(lambda ctx: "new")  # the running one is stale now: its result is dropped
    gate.set()
    qtbot.waitUntil(lambda: bool(got), timeout=5000)
    assert lane.wait(5)
    qtbot.wait(50)
    assert got == ["new"] and others == []


def test_unknown_kind_is_refused(jobs):
    with pytest.raises(ValueError, match="kind"):
        jobs.submit("render", lambda ctx: None)
    with pytest.raises(ValueError, match="own kind"):
        jobs.live.submit("compute", lambda ctx: None)


def test_the_state_holds_its_adapter_weakly(qtbot):
    """No reference cycle through a Qt wrapper: the adapter goes with its last reference,
    not at some later cyclic collection on whichever thread trips it."""
    import gc
    import weakref

    live = LiveExplorer()
    jobs = Jobs(live)
    live.submit("view:x", lambda ctx: "done")
    assert jobs.scheduler.wait(timeout=5)
    ref = weakref.ref(jobs)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del jobs
        assert ref() is None
        live.wake()  # a job ending after the adapter went tells nobody, and does not raise
    finally:
        if enabled:
            gc.enable()
        assert live.shutdown()
