"""A view's lane of the scheduler: the newest request wins, stale work can stop early, results
and progress arrive on the GUI thread, and no thread outlives shutdown."""

from __future__ import annotations

import threading

from quantscope.gui.jobs import Lane
from quantscope.state.scheduler import THREAD_NAME


def test_only_the_newest_result_is_delivered(qtbot):
    job = Lane("test")
    release, started = threading.Event(), threading.Event()
    saw_stale: list[bool] = []
    got: list[object] = []
    job.finished.connect(got.append)

    def slow(ctx):
        started.set()
        release.wait(5)
        saw_stale.append(ctx.stale())
        return "old"

    job.submit(slow)
    assert started.wait(5)
    job.submit(lambda ctx: "middle")  # replaced by the next one before it ever runs
    job.submit(lambda ctx: "new")
    release.set()
    qtbot.waitUntil(lambda: got == ["new"], timeout=5000)
    assert saw_stale == [True]  # the running request knew it had been superseded
    qtbot.wait(20)
    assert got == ["new"]
    job.shutdown()
    assert not job.busy


def test_results_arrive_on_the_gui_thread_with_progress(qtbot):
    job = Lane("test")
    threads: list[threading.Thread] = []
    progress: list[float] = []
    job.progress.connect(lambda f: (progress.append(f), threads.append(threading.current_thread())))

    def work(ctx):
        ctx.progress(0.5)
        return 42

    with qtbot.waitSignal(job.finished, timeout=5000) as blocker:
        job.submit(work)
    assert blocker.args == [42]
    assert progress == [0.5] and threads == [threading.main_thread()]
    job.shutdown()


def test_failures_are_messages(qtbot):
    job = Lane("test")

    def boom(ctx):
        raise ValueError("bad window")

    with qtbot.waitSignal(job.failed, timeout=5000) as blocker:
        job.submit(boom)
    assert blocker.args == ["bad window"]
    job.shutdown()
    assert not any(t.name.startswith(THREAD_NAME) for t in threading.enumerate())
