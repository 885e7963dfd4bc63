"""The engine's pool threads never run the cyclic garbage collector: in a process with Qt, a
collection there finalises PySide6 wrappers off the GUI thread, and shiboken's deferred deletion
of them later crashed the main thread (inside ``runDeletionInMainThread``, in this pool's wait)."""

import gc
import itertools
import threading
import time

import pytest

from quantscope.core.kernels import parallel as P


@pytest.fixture
def collections():
    """The names of the threads each automatic or explicit collection started on."""
    seen: list[str] = []

    def record(phase, info):
        if phase == "start":
            seen.append(threading.current_thread().name)

    gc.callbacks.append(record)
    yield seen
    gc.callbacks.remove(record)


def _allocate(n: int) -> int:
    """Python work on a pool thread: ``n`` new containers, hundreds of times the collector's
    first threshold (a collection is due many times over unless it is paused)."""
    return len([[i] for i in range(n)])


@pytest.fixture(autouse=True)
def _collector_on():
    """These tests start from the collector's default (on); a window another test in this
    process left open pauses it (quantscope.gui.collector), which is not what is tested here."""
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_pool_threads_never_start_a_collection(collections):
    assert gc.isenabled()
    n = 200 * gc.get_threshold()[0]
    assert P.parallel(_allocate, [(n,), (n,)]) == [n, n]
    assert not [t for t in collections if t.startswith(P.THREAD_NAME)], collections
    assert gc.isenabled()  # restored


def test_pauses_are_counted_and_restore_what_was_there():
    assert gc.isenabled()
    with P.collector_paused():
        P.pause_collector()
        assert P.parallel(_allocate, [(10,), (10,)]) == [10, 10]
        assert not gc.isenabled()
        P.resume_collector()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    try:
        with P.collector_paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


def _nice(_: int = 0) -> int:
    return P.thread_niceness()


@pytest.mark.skipif(not P.PER_THREAD_NICE, reason="per-thread nice values are Linux's")
def test_shares_run_at_the_callers_share_priority():
    """A niced caller's shares run niced unless it keeps them at its former priority, and a
    caller at the window's priority is never served by threads a niced caller made (a lowered
    thread cannot come back unprivileged)."""
    own = P.thread_niceness()
    P.start_pool()
    seen = {}

    def niced(keep: bool):
        if keep:
            P.shares_at(P.thread_niceness())
        P.set_thread_niceness(P.process_niceness() + 5)
        seen[keep] = (P.thread_niceness(), P.parallel(_nice, [(0,), (1,)]))

    for keep in (False, True):
        t = threading.Thread(target=niced, args=(keep,))
        t.start()
        t.join()
    caller, shares = seen[False]
    assert caller == min(P.process_niceness() + 5, 19) and shares == [caller, caller]
    caller, shares = seen[True]
    assert caller == min(P.process_niceness() + 5, 19) and shares == [own, own]
    assert P.parallel(_nice, [(0,), (1,)]) == [own, own]


def test_parallel_behind_leads_each_share_and_waits_for_all_of_them():
    """Each share is submitted after its lead ran on the calling thread; the results come in
    order; an error in a lead is raised only once the shares submitted before it are done
    (they may still be writing into the caller's arrays)."""
    events: list[tuple[str, int]] = []
    lock = threading.Lock()
    caller = threading.get_ident()

    def lead(k: int) -> None:
        assert threading.get_ident() == caller
        with lock:
            events.append(("lead", k))

    def share(k: int) -> int:
        with lock:
            assert ("lead", k) in events
        return k * k

    assert P.parallel_behind(share, [(k,) for k in range(6)], lead) == [0, 1, 4, 9, 16, 25]
    assert [k for what, k in events if what == "lead"] == list(range(6))

    failed, finished = threading.Event(), threading.Event()

    def slow(k: int) -> None:
        failed.wait(5)
        time.sleep(0.05)  # still at work well after the lead has raised
        finished.set()

    def failing(k: int) -> None:
        if k == 1:
            failed.set()
            raise RuntimeError("lead failed")

    with pytest.raises(RuntimeError, match="lead failed"):
        P.parallel_behind(slow, [(0,), (1,)], failing)
    assert finished.is_set()


@pytest.mark.parametrize("n_items,n_elements", [(0, 0), (1, 1 << 20), (3, 1 << 20), (5, 100),
                                                (1000, 1 << 17), (229_376, 58_720_256)])
def test_pieces_cover_the_items_once_in_order(n_items, n_elements):
    got = P.pieces(n_items, n_elements)
    assert got[0][0] == 0 and got[-1][1] == n_items
    assert all(a[1] == b[0] for a, b in itertools.pairwise(got))
    assert all(hi > lo for lo, hi in got) or got == [(0, 0)]
    want = (1 if n_elements < P.PARALLEL_MIN else
            min(P.THREADS * P.PIECES_PER_THREAD, max(n_items, 1)))
    assert len(got) == want
