"""The views' background job: the newest request wins, stale work can stop early, results and
progress arrive on the GUI thread, and no thread outlives shutdown."""

from __future__ import annotations

import threading

from quantscope.gui.views._jobs import LatestJob


def test_only_the_newest_result_is_delivered(qtbot):
    job = LatestJob()
    release = threading.Event()
    saw_stale: list[bool] = []
    got: list[object] = []
    job.finished.connect(got.append)

    def slow():
        release.wait(5)
        saw_stale.append(job.stale())
        return "old"

    job.submit(slow)
    job.submit(lambda: "middle")  # replaced by the next one before it ever runs
    job.submit(lambda: "new")
    release.set()
    qtbot.waitUntil(lambda: got == ["new"], timeout=5000)
    assert saw_stale == [True]  # the running request knew it had been superseded
    qtbot.wait(20)
    assert got == ["new"]
    job.shutdown()
    assert not job.busy


def test_results_arrive_on_the_gui_thread_with_progress(qtbot):
    job = LatestJob()
    threads: list[threading.Thread] = []
    progress: list[float] = []
    job.progress.connect(lambda f: (progress.append(f), threads.append(threading.current_thread())))

    def work():
        job.report_progress(0.5)
        return 42

    with qtbot.waitSignal(job.finished, timeout=5000) as blocker:
        job.submit(work)
    assert blocker.args == [42]
    assert progress == [0.5] and threads == [threading.main_thread()]
    job.shutdown()


def test_failures_are_messages(qtbot):
    job = LatestJob()

    def boom():
        raise ValueError("bad window")

    with qtbot.waitSignal(job.failed, timeout=5000) as blocker:
        job.submit(boom)
    assert blocker.args == ["bad window"]
    job.shutdown()
    assert not any(t.name == "quantscope-view-job" for t in threading.enumerate())
