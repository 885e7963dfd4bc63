"""The worker thread: queued requests are replaced, not stacked; superseded and cancelled
results never arrive; failures arrive as messages; the thread stops on shutdown."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QObject, Slot

from quantscope.errors import QuantscopeError
from quantscope.gui.worker import Worker


class Sink(QObject):
    """Receives the worker's signals in the GUI thread (a QObject, so Qt queues the calls)."""

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
def worker(qtbot):
    w = Worker()
    sink = Sink()
    w.done.connect(sink.on_done)
    w.failed.connect(sink.on_failed)
    w.sink = sink
    yield w
    assert w.shutdown()
    assert not w.isRunning()


def test_queued_requests_are_replaced_and_only_the_latest_arrives(worker, qtbot):
    gate = threading.Event()
    ran: list[int] = []

    def blocker(ctx):
        gate.wait(5)
        return "first"

    worker.submit("compute", blocker)  # occupies the thread
    for i in range(5):  # queued behind it: each replaces the previous
        worker.submit("compute", lambda ctx, i=i: ran.append(i) or i)
    gate.set()
    qtbot.waitUntil(worker.is_idle, timeout=5000)
    qtbot.waitUntil(lambda: bool(worker.sink.done), timeout=5000)
    assert ran == [4]  # the superseded ones never ran
    # "first" finished after being superseded: dropped on arrival
    assert [r for _, _, r in worker.sink.done] == [4]
    assert worker.sink.done[0][1] == worker.latest("compute")


def test_kinds_do_not_replace_each_other_and_loads_go_first(worker, qtbot):
    gate = threading.Event()
    order: list[str] = []
    worker.submit("compute", lambda ctx: gate.wait(5))
    worker.submit("compute", lambda ctx: order.append("compute") or "c")
    worker.submit("load", lambda ctx: order.append("load") or "l")
    gate.set()
    qtbot.waitUntil(lambda: len(worker.sink.done) == 2, timeout=5000)
    assert order == ["load", "compute"]


def test_cancel_drops_the_running_job_cooperatively(worker, qtbot):
    started, stopped = threading.Event(), threading.Event()

    def slow(ctx):
        started.set()
        try:
            while True:
                ctx.check()
                threading.Event().wait(0.002)
        finally:
            stopped.set()

    worker.submit("load", slow)
    qtbot.waitUntil(started.is_set, timeout=5000)
    worker.cancel("load")
    qtbot.waitUntil(stopped.is_set, timeout=5000)
    qtbot.waitUntil(worker.is_idle, timeout=5000)
    assert worker.sink.done == [] and worker.sink.failed == []


def test_failures_arrive_as_messages_and_the_thread_survives(worker, qtbot):
    def bad(ctx):
        raise QuantscopeError("file.npy: is truncated")

    worker.submit("load", bad)
    qtbot.waitUntil(lambda: bool(worker.sink.failed), timeout=5000)
    assert worker.sink.failed[0][0] == "load" and "truncated" in worker.sink.failed[0][2]
    worker.submit("compute", lambda ctx: 1 / 0)  # a bug: reported, not fatal
    qtbot.waitUntil(lambda: len(worker.sink.failed) == 2, timeout=5000)
    assert "internal error (ZeroDivisionError" in worker.sink.failed[1][2]
    worker.submit("compute", lambda ctx: "still alive")
    qtbot.waitUntil(lambda: bool(worker.sink.done), timeout=5000)
    assert worker.sink.done[-1][2] == "still alive"


def test_unknown_kind_is_refused(worker):
    with pytest.raises(ValueError, match="kind"):
        worker.submit("render", lambda ctx: None)
