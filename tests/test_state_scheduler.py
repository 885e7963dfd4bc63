"""The one scheduler (Qt-free): latest request wins per key, tickets stamp every request, one
way to cancel, panes before views, debounced requests, helpers for a job's parts, and no thread
left after shutdown."""

from __future__ import annotations

import threading
import time

import pytest

from quantscope.errors import Cancelled, QuantscopeError
from quantscope.state.scheduler import (
    COMPUTE,
    LOAD,
    PREPARE,
    THREAD_NAME,
    VIEW,
    Scheduler,
    plain_message,
)

TIMEOUT = 5.0


class Heard:
    """The scheduler's listener: every event, from whichever thread."""

    def __init__(self) -> None:
        self.events = []
        self.lock = threading.Lock()

    def __call__(self, event) -> None:
        with self.lock:
            self.events.append(event)

    def of(self, what: str, key: str | None = None) -> list:
        with self.lock:
            return [e for e in self.events if e.what == what and key in (None, e.key)]

    def until(self, predicate, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out; heard {self.events}"
            time.sleep(0.002)


@pytest.fixture
def heard():
    return Heard()


@pytest.fixture
def sched(heard):
    s = Scheduler(heard)
    yield s
    assert s.shutdown(TIMEOUT)
    assert not s.is_running()
    assert not [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


def test_queued_requests_are_replaced_and_only_the_latest_arrives(sched, heard):
    gate, started = threading.Event(), threading.Event()
    ran, saw_stale = [], []

    def blocker(ctx):
        started.set()
        gate.wait(TIMEOUT)
        saw_stale.append(ctx.stale())
        return "first"

    first = sched.submit("compute", blocker, priority=COMPUTE)
    assert started.wait(TIMEOUT)  # occupies the pane work
    tickets = [sched.submit("compute", lambda ctx, i=i: ran.append(i) or i, priority=COMPUTE)
               for i in range(5)]
    assert tickets == sorted(tickets) and first < tickets[0]  # generation stamps
    gate.set()
    assert sched.wait(timeout=TIMEOUT)
    assert ran == [4]  # the replaced ones never ran
    assert saw_stale == [True]  # the running one knew it was superseded
    done = heard.of("done")
    assert [e.value for e in done] == [4] and done[0].ticket == sched.latest("compute")


def test_pane_work_runs_one_request_at_a_time_most_urgent_first(sched, heard):
    gate = threading.Event()
    order = []
    started = threading.Event()
    sched.submit("compute", lambda ctx: started.set() or gate.wait(TIMEOUT), priority=COMPUTE)
    assert started.wait(TIMEOUT)
    sched.submit("compute", lambda ctx: order.append("compute") or "c", priority=COMPUTE)
    sched.submit("prepare", lambda ctx: order.append("prepare") or "p", priority=PREPARE)
    sched.submit("load", lambda ctx: order.append("load") or "l", priority=LOAD)
    time.sleep(0.05)
    assert order == []  # a pane request waits while another pane request runs
    gate.set()
    heard.until(lambda: len(heard.of("done")) == 3)  # the first compute was superseded
    assert order == ["load", "prepare", "compute"]
    assert [e.value for e in heard.of("done")] == ["l", "p", "c"]


def test_views_never_take_the_last_thread(sched, heard):
    gate = threading.Event()
    started = []
    for name in ("a", "b", "c"):  # three views for two view threads
        sched.submit(f"view:{name}", lambda ctx, n=name: started.append(n) or gate.wait(TIMEOUT),
                     priority=VIEW)
    heard.until(lambda: len(started) == 2)
    sched.submit("compute", lambda ctx: "panes", priority=COMPUTE)
    heard.until(lambda: bool(heard.of("done", "compute")))  # at once, beside both views
    assert len(started) == 2  # the third view still waits
    gate.set()
    heard.until(lambda: len(heard.of("done")) == 4)
    assert sorted(started) == ["a", "b", "c"]


def test_cancel_stops_the_running_request_at_its_next_check(sched, heard):
    started, stopped = threading.Event(), threading.Event()

    def slow(ctx):
        started.set()
        try:
            while True:
                ctx.check()
                time.sleep(0.002)
        finally:
            stopped.set()

    sched.submit("load", slow, priority=LOAD)
    assert started.wait(TIMEOUT)
    assert sched.busy("load")
    sched.cancel("load")
    assert stopped.wait(TIMEOUT)
    assert sched.wait("load", TIMEOUT) and not sched.busy("load")
    assert heard.events == []  # no result, no message


def test_a_result_that_finishes_after_cancel_is_dropped(sched, heard):
    gate = threading.Event()
    ticket = sched.submit("view:x", lambda ctx: gate.wait(TIMEOUT) and "late")
    sched.cancel("view:x")
    assert not sched.is_current("view:x", ticket)
    gate.set()
    assert sched.wait(timeout=TIMEOUT)
    assert heard.events == []


def test_failures_are_messages_and_the_threads_survive(sched, heard):
    def bad(ctx):
        raise QuantscopeError("file.npy: is truncated")

    sched.submit("load", bad, priority=LOAD)
    heard.until(lambda: bool(heard.of("failed")))
    assert heard.of("failed")[0].value == "file.npy: is truncated"
    sched.submit("compute", lambda ctx: 1 / 0, priority=COMPUTE)  # a bug: reported
    heard.until(lambda: len(heard.of("failed")) == 2)
    assert "internal error (ZeroDivisionError" in heard.of("failed")[1].value
    sched.submit("view:v", lambda ctx: int("x"), describe=plain_message)  # a view's wording
    heard.until(lambda: len(heard.of("failed")) == 3)
    assert heard.of("failed")[2].value.startswith("invalid literal for int()")
    sched.submit("compute", lambda ctx: "still alive", priority=COMPUTE)
    heard.until(lambda: bool(heard.of("done")))
    assert heard.of("done")[-1].value == "still alive"


def test_cancelled_raised_by_the_work_is_silent(sched, heard):
    def gives_up(ctx):
        raise Cancelled

    sched.submit("view:v", gives_up)
    assert sched.wait(timeout=TIMEOUT)
    assert heard.events == []


def test_progress_and_partial_results_carry_the_ticket(sched, heard):
    def work(ctx):
        ctx.progress(0.5, "half")
        ctx.partial("early")
        return "all"

    ticket = sched.submit("compute", work, priority=COMPUTE)
    heard.until(lambda: bool(heard.of("done")))
    assert [(e.what, e.ticket, e.value) for e in heard.events] == [
        ("progress", ticket, (0.5, "half")), ("partial", ticket, "early"),
        ("done", ticket, "all")]


def test_a_deferred_request_waits_for_the_hand_to_rest(sched, heard):
    ran = []
    gate, started = threading.Event(), threading.Event()
    running = sched.submit("view:v", lambda ctx: started.set() or (gate.wait(TIMEOUT)
                                                                   and not ctx.stale()))
    assert started.wait(TIMEOUT)
    assert sched.submit("view:v", lambda ctx: ran.append("a"), delay_s=0.15) is None
    assert sched.submit("view:v", lambda ctx: ran.append("b") or "b", delay_s=0.15) is None
    assert sched.is_current("view:v", running)  # deferred: not the latest yet
    gate.set()
    heard.until(lambda: bool(heard.of("done")))
    assert heard.of("done")[0].value is True  # the running one finished as the latest
    heard.until(lambda: len(heard.of("done")) == 2)
    assert ran == ["b"] and heard.of("done")[1].value == "b"
    assert sched.latest("view:v") > running
    # a request without delay drops a deferred one
    sched.submit("view:v", lambda ctx: ran.append("dropped"), delay_s=0.1)
    sched.submit("view:v", lambda ctx: ran.append("now"))
    time.sleep(0.25)
    assert sched.wait(timeout=TIMEOUT) and ran == ["b", "now"]


def test_a_job_runs_parts_beside_itself_on_the_helpers(sched, heard):
    both = threading.Barrier(3, timeout=TIMEOUT)  # the two parts and the job itself
    names = []

    def part(i):
        def fn():
            names.append(threading.current_thread().name)
            both.wait()
            return i * 10
        return fn

    def work(ctx):
        wait = ctx.beside([part(1), part(2)])
        both.wait()  # only passes if the parts run at the same time as the job
        return wait()

    sched.submit("compute", work, priority=COMPUTE)
    heard.until(lambda: bool(heard.of("done")))
    assert heard.of("done")[0].value == [10, 20]
    assert all(n.startswith(f"{THREAD_NAME}-helper") for n in names)

    def failing(ctx):
        return ctx.beside([lambda: 1, lambda: 1 / 0])()

    sched.submit("compute", failing, priority=COMPUTE)
    heard.until(lambda: bool(heard.of("failed")))
    assert "ZeroDivisionError" in heard.of("failed")[0].value


def test_shutdown_joins_every_thread_and_a_new_request_starts_afresh(heard):
    s = Scheduler(heard)
    s.submit("compute", lambda ctx: ctx.beside([lambda: 1])(), priority=COMPUTE)
    assert s.wait(timeout=TIMEOUT) and s.is_running()
    assert s.shutdown(TIMEOUT) and not s.is_running()
    assert not [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]
    assert not s.is_current("compute", s.latest("compute"))  # shut down: nothing is current
    s.submit("compute", lambda ctx: "again", priority=COMPUTE)
    heard.until(lambda: len(heard.of("done")) == 2)
    assert s.shutdown(TIMEOUT) and not s.is_running()


def test_a_tensors_memos_have_one_owner_that_evicts_under_its_lock():
    """The state's ReportCache owns the memos its requests carry; its memo keeps the newest
    entries and stays whole when threads insert and evict at once."""
    import numpy as np

    from quantscope.state import ExplorerState
    from quantscope.state.compute import REPORT_CACHE_SIZE, Memo

    state = ExplorerState()
    state.set_tensor(np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8))
    first, second = state.request(), state.request()
    assert first.reports is second.reports and first.ranges is second.ranges
    assert isinstance(first.reports, Memo) and first.reports.size == REPORT_CACHE_SIZE
    state.set_tensor(np.ones((4, 4), np.float32))
    assert state.request().reports is not first.reports  # a new tensor, a new owner

    memo = Memo(size=8)
    for i in range(20):
        assert memo.setdefault(i, str(i)) == str(i)
    assert len(memo) == 8 and memo.get(11) is None and memo.get(12) == "12"
    assert memo.setdefault(19, "other") == "19"  # the stored value stays

    errors = []

    def insert(base):
        try:
            for i in range(5000):
                memo.setdefault((base, i), i)
        except Exception as exc:  # any race shows up here
            errors.append(exc)

    import sys

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between any two steps: a plain dict's
    try:  # pop(next(iter(d))) eviction then raises KeyError or RuntimeError here
        threads = [threading.Thread(target=insert, args=(b,)) for b in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == [] and len(memo) == 8


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"),
                    reason="per-thread nice values are Linux's")
def test_job_threads_are_niced_once_and_pane_work_shares_at_the_owners_priority(sched, heard):
    """Every job thread (and its parts) runs niced once, never twice; the engine's shares of
    pane work run at the priority of the thread that submitted it, views' shares niced."""
    from quantscope.core.kernels.parallel import parallel, process_niceness, thread_niceness
    from quantscope.state.compute import BACKGROUND_NICENESS

    def niceness(ctx):
        parts = ctx.beside([thread_niceness, thread_niceness])()
        shares = parallel(lambda _: thread_niceness(), [(0,), (1,)])
        parts_shares = ctx.beside([lambda: parallel(lambda _: thread_niceness(), [(0,), (1,)])])()
        return thread_niceness(), parts, shares, parts_shares[0]

    owner = thread_niceness()
    niced = min(process_niceness() + BACKGROUND_NICENESS, 19)
    sched.submit("view:v", niceness, priority=VIEW)  # the view first: it makes its helpers
    heard.until(lambda: bool(heard.of("done", "view:v")))
    sched.submit("compute", niceness, priority=COMPUTE)
    heard.until(lambda: bool(heard.of("done", "compute")))
    sched.submit("load", niceness, priority=LOAD)
    heard.until(lambda: bool(heard.of("done", "load")))
    assert heard.of("done", "view:v")[0].value == (niced, [niced] * 2, [niced] * 2, [niced] * 2)
    for key in ("compute", "load"):
        assert heard.of("done", key)[0].value == (niced, [niced] * 2, [owner] * 2, [owner] * 2)
