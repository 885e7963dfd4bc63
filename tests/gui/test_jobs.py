"""The window's jobs (the scheduler's Qt adapter): queued requests are replaced, not stacked;
superseded and cancelled results never arrive; failures arrive as messages; the threads stop on
shutdown."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QObject, Slot

from quantscope.errors import QuantscopeError
from quantscope.gui.jobs import Jobs


class Sink(QObject):
    """Receives the jobs' signals in the GUI thread (a QObject, so Qt queues the calls)."""

    def __init__(self) -> None:
        super().__init__()
        self.done: list[tuple[str, int, object]] = []
        self.failed: list[tuple[str, int, str]] = []

    @Slot(str, int, object)
    def on_done(self, kind, ticket, result) -> None:
        self.done.append((kind, ticket, result))

    @Slot(str, int, str)
    def on_failed(self, kind, ticket, message) -> None:
        self.failed.append((kind, ticket, message))


@pytest.fixture
def jobs(qtbot):
    w = Jobs()
    sink = Sink()
    w.done.connect(sink.on_done)
    w.failed.connect(sink.on_failed)
    w.sink = sink
    yield w
    assert w.shutdown()
    assert not w.is_running()


def test_queued_requests_are_replaced_and_only_the_latest_arrives(jobs, qtbot):
    gate, started = threading.Event(), threading.Event()
    ran: list[int] = []

    def blocker(ctx):
        started.set()
        gate.wait(5)
        return "first"

    jobs.submit("compute", blocker)  # occupies the thread
    assert started.wait(5)
    for i in range(5):  # queued behind it: each replaces the previous
        jobs.submit("compute", lambda ctx, i=i: ran.append(i) or i)
    gate.set()
    qtbot.waitUntil(jobs.is_idle, timeout=5000)
    qtbot.waitUntil(lambda: bool(jobs.sink.done), timeout=5000)
    assert ran == [4]  # the superseded ones never ran
    # "first" finished after being superseded: dropped on arrival
    assert [r for _, _, r in jobs.sink.done] == [4]
    assert jobs.sink.done[0][1] == jobs.latest("compute")


def test_kinds_do_not_replace_each_other_and_loads_go_first(jobs, qtbot):
    gate, started = threading.Event(), threading.Event()
    order: list[str] = []
    jobs.submit("compute", lambda ctx: started.set() or gate.wait(5))  # occupies the thread
    assert started.wait(5)
    jobs.submit("compute", lambda ctx: order.append("compute") or "c")
    jobs.submit("load", lambda ctx: order.append("load") or "l")
    gate.set()
    qtbot.waitUntil(lambda: len(jobs.sink.done) == 2, timeout=5000)
    assert order == ["load", "compute"]


def test_cancel_drops_the_running_job_cooperatively(jobs, qtbot):
    started, stopped = threading.Event(), threading.Event()

    def slow(ctx):
        started.set()
        try:
            while True:
                ctx.check()
                threading.Event().wait(0.002)
        finally:
            stopped.set()

    jobs.submit("load", slow)
    qtbot.waitUntil(started.is_set, timeout=5000)
    jobs.cancel("load")
    qtbot.waitUntil(stopped.is_set, timeout=5000)
    qtbot.waitUntil(jobs.is_idle, timeout=5000)
    assert jobs.sink.done == [] and jobs.sink.failed == []


def test_failures_arrive_as_messages_and_the_thread_survives(jobs, qtbot):
    def bad(ctx):
        raise QuantscopeError("file.npy: is truncated")

    jobs.submit("load", bad)
    qtbot.waitUntil(lambda: bool(jobs.sink.failed), timeout=5000)
    assert jobs.sink.failed[0][0] == "load" and "truncated" in jobs.sink.failed[0][2]
    jobs.submit("compute", lambda ctx: 1 / 0)  # a bug: reported, not fatal
    qtbot.waitUntil(lambda: len(jobs.sink.failed) == 2, timeout=5000)
    assert "internal error (ZeroDivisionError" in jobs.sink.failed[1][2]
    jobs.submit("compute", lambda ctx: "still alive")
    qtbot.waitUntil(lambda: bool(jobs.sink.done), timeout=5000)
    assert jobs.sink.done[-1][2] == "still alive"


def test_unknown_kind_is_refused(jobs):
    with pytest.raises(ValueError, match="kind"):
        jobs.submit("render", lambda ctx: None)


def test_the_scheduler_holds_its_adapter_weakly(qtbot):
    """No reference cycle through a Qt wrapper: the adapter goes with its last reference,
    not at some later cyclic collection on whichever thread trips it."""
    import gc
    import weakref

    jobs = Jobs()
    jobs.submit("compute", lambda ctx: "done")
    assert jobs.scheduler.wait(timeout=5)
    assert jobs.shutdown()
    ref = weakref.ref(jobs)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del jobs
        assert ref() is None
    finally:
        if enabled:
            gc.enable()
