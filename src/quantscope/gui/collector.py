"""While a window lives, the cyclic garbage collector runs on the GUI thread only.

Automatic collection runs on whichever thread's allocation trips it: the worker thread, a view's
job thread, the engine's pool. A PySide6 wrapper finalised there is not deleted there: shiboken
queues the C++ deletion for the main thread, which runs the queue as a pending call at some later
GIL hand-off -- by then Qt may have deleted the object itself, and the queued destructor jumps
through freed memory (a segmentation fault inside
``Shiboken::BindingManager::runDeletionInMainThread``). So while a window exists, automatic
collection is paused (:func:`quantscope.core.kernels.parallel.pause_collector`, counted with the
engine's
own pauses) and a GUI-thread timer collects by the collector's own thresholds, as pyqtgraph's
``GarbageCollector`` does. The last window out restores the collector and collects once, on the
next turn of the event loop.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QCoreApplication, QTimer

from quantscope.core.kernels.parallel import pause_collector, resume_collector

#: How often the GUI thread looks whether a collection is due.
INTERVAL_MS = 250

_holders = 0
_timer: QTimer | None = None


def hold() -> None:
    """A window was made (GUI thread): collections happen on this thread until :func:`release`."""
    global _holders, _timer
    _holders += 1
    if _holders > 1:
        return
    pause_collector()
    if _timer is None:
        _timer = QTimer(QCoreApplication.instance())
        _timer.setInterval(INTERVAL_MS)
        _timer.timeout.connect(collect_due)
    _timer.start()


def release() -> None:
    """A window is gone (GUI thread); the last one collects its garbage here, then lets the
    collector run on its own again."""
    global _holders
    if _holders == 0:
        return
    _holders -= 1
    if _holders:
        return
    if _timer is not None:
        _timer.stop()
    resume_collector()
    # Collected once control is back in the event loop, never here: this runs inside the last
    # window's closeEvent, and a collection that finalises that window's own wrapper (nothing
    # else may hold it any more) deletes the C++ window under its running event handler.
    QTimer.singleShot(0, gc.collect)


def collect_due() -> None:
    """The collections the automatic collector would have made by now, youngest first."""
    thresholds = gc.get_threshold()
    if thresholds[0] == 0:  # collection switched off by the program
        return
    counts = gc.get_count()
    due = -1
    for generation in range(3):
        if counts[generation] <= thresholds[generation]:
            break
        due = generation
    if due >= 0:
        gc.collect(due)  # this generation and the younger ones
