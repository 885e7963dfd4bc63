"""Fixtures for the window tests: a window factory that, at teardown, closes every window it
made and fails on anything left behind (a running scheduler thread, an active timer, a new
Python thread); the font sets that stand for other machines' fonts."""

from __future__ import annotations

import gc
import threading

import pytest
from font_sets import FONT_SETS, font_set
from PySide6.QtGui import QFont

#: Full (oldest-generation) collections finished on the main thread so far in this process.
_main_thread_full_collections = 0


def _count_main_thread_full_collections(phase: str, info: dict) -> None:
    global _main_thread_full_collections
    if (phase == "stop" and info["generation"] == 2
            and threading.current_thread() is threading.main_thread()):
        _main_thread_full_collections += 1


gc.callbacks.append(_count_main_thread_full_collections)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    """Once a window test is torn down, its Qt objects are collected here, on the main thread:
    left to a later automatic collection, they could be finalised on the engine's pool thread
    of another test, and shiboken's deferred deletion of them then crashes the main thread.
    What is left is then frozen (out of every later collection's scan): with torch loaded by
    other tests in the same worker, a full collection of the whole heap took 0.4-0.6 s per
    test. A window's shutdown thaws it all again (``gc.unfreeze``), as it does in the app.

    The last window to close collects the whole heap itself, on the main thread, as pytest-qt
    processes events after closing it (:mod:`quantscope.gui.collector`). A second full scan
    here cost as much again (a third of ``tests/gui/test_window.py``'s CPU time went to the
    two) for the few objects the fixtures let go after it, the window object among them:
    those are frozen with the rest and collected, on the main thread, by the collection that
    follows the next window's shutdown. Here only the young generations are collected then;
    without a full collection during the tear-down, the whole heap is (cheap while frozen).
    The hook wraps every other tear-down (``tryfirst``: the outermost), pytest-qt's closing of
    the test's widgets included, so that it sees that collection and runs after the rest."""
    full_before = _main_thread_full_collections
    yield
    gc.collect(2 if _main_thread_full_collections == full_before else 1)
    gc.freeze()


def _wait_for_results(qtbot, window, timeout: int = 30_000) -> None:
    qtbot.waitUntil(window.all_shown, timeout=timeout)


@pytest.fixture(params=FONT_SETS)
def fonts(request, qapp):
    """The application's font set to each of :data:`font_sets.FONT_SETS` in turn (the test
    runs once per set), and back afterwards."""
    before = QFont(qapp.font())
    qapp.setFont(font_set(request.param, before))
    yield request.param
    qapp.setFont(before)


@pytest.fixture
def wait_results(qtbot):
    """``wait_results(window)``: block (processing events) until every pane shows results for
    the current tensor and settings."""
    return lambda window, timeout=30_000: _wait_for_results(qtbot, window, timeout)


def _new_window(state=None, install_views: bool = False):
    """A shown 1600x1000 MainWindow."""
    from quantscope.gui import configure_pyqtgraph
    from quantscope.gui.window import MainWindow
    from quantscope.state import ExplorerState

    configure_pyqtgraph()
    win = MainWindow(state or ExplorerState(), install_views=install_views)
    win.resize(1600, 1000)
    win.show()
    return win


def _running_jobs() -> set:
    """The schedulers whose threads run now."""
    import shiboken6

    from quantscope.gui.jobs import Jobs

    return {j for j in list(Jobs.instances) if shiboken6.isValid(j) and j.is_running()}


def _close_and_check(windows, threads_before: set, jobs_before: set) -> None:
    """Close ``windows``; fail on an active timer of theirs, or a scheduler thread or a
    Python thread that was not running before they were made (``jobs_before``,
    ``threads_before``: a file's shared window keeps its own until the file ends)."""
    from PySide6.QtCore import QTimer

    for win in windows:
        win.close()
        timers = [t for t in win.findChildren(QTimer) if t.isActive()]
        assert not timers, f"active timers left after close: {timers}"
    # Every window's scheduler was stopped (its threads joined) when the window closed.
    running = _running_jobs() - jobs_before
    assert not running, f"scheduler threads still running after close: {running}"
    # A _DummyThread is Python's record of a foreign thread (one of Qt's): Python never
    # removes it.
    # The engine's worker pool (quantscope.core.kernels.parallel) is made once and kept for the
    # process.
    leaked = {t for t in set(threading.enumerate()) - threads_before
              if not isinstance(t, threading._DummyThread)
              and not t.name.startswith("quantscope-engine")}
    assert not leaked, f"threads leaked: {leaked}"


@pytest.fixture
def make_window(qtbot):
    """``make_window(state=None, install_views=False)`` -> a shown 1600x1000 MainWindow."""
    threads_before, jobs_before = set(threading.enumerate()), _running_jobs()
    windows = []

    def make(state=None, install_views: bool = False):
        win = _new_window(state, install_views)
        qtbot.addWidget(win)
        windows.append(win)
        return win

    yield make
    _close_and_check(windows, threads_before, jobs_before)


@pytest.fixture(scope="module")
def shared_window(qapp):
    """``shared_window(state=None, install_views=False)`` -> a window as :func:`make_window`
    makes it, for all the tests of a file that its own fixture puts back as they found it
    (building a window costs more than most window tests); closed and checked as
    :func:`make_window`'s after the file's last test."""
    threads_before, jobs_before = set(threading.enumerate()), _running_jobs()
    windows = []

    def make(state=None, install_views: bool = False):
        win = _new_window(state, install_views)
        windows.append(win)
        return win

    yield make
    _close_and_check(windows, threads_before, jobs_before)


def _open_app_window(height: int, wait_until):
    """The window as ``quantscope`` builds it (views installed), 1600 x ``height``, showing a
    128x256 outlier tensor, once every pane shows it."""
    from quantscope.gui import create_window
    from quantscope.state import Source

    win = create_window()
    win.resize(1600, height)
    win.show()
    win.load(Source.generator("outliers", (128, 256), 1))
    wait_until(win.all_shown, timeout=30_000)
    return win


def _close_app_windows(windows, threads_before: set) -> None:
    """Close ``windows``; no thread of their schedulers (the views' jobs run there) may be
    left: none started since ``threads_before`` (a file's shared window keeps its own until
    the file ends)."""
    from quantscope.state.scheduler import THREAD_NAME

    for win in windows:
        win.close()
    left = set(threading.enumerate()) - threads_before
    assert not any(t.name.startswith(THREAD_NAME) for t in left), left


@pytest.fixture
def app_window(qtbot):
    """``app_window(height)`` -> the window as ``quantscope`` builds it (views installed),
    1600 x ``height``, showing a 128x256 outlier tensor; closed at teardown, where no thread
    of its scheduler (the views' jobs run there) may be left."""
    threads_before = set(threading.enumerate())
    windows = []

    def make(height: int):
        win = _open_app_window(height, qtbot.waitUntil)
        qtbot.addWidget(win)
        windows.append(win)
        return win

    yield make
    _close_app_windows(windows, threads_before)


class _SharedAppWindows:
    """``make(height)`` opens a window as :func:`app_window` does; ``make.close(win)`` closes
    one before the file's tests end (the others are closed then)."""

    def __init__(self, wait_until) -> None:
        self.wait_until = wait_until
        self.open: list = []

    def __call__(self, height: int):
        win = _open_app_window(height, self.wait_until)
        self.open.append(win)
        return win

    def close(self, win) -> None:
        self.open.remove(win)
        win.close()


@pytest.fixture(scope="module")
def shared_app_window(qapp, request):
    """``shared_app_window(height)`` -> one window as :func:`app_window` makes it, for all
    the tests of a file that each leave it as they found it (the file's own fixture puts back
    what its tests change): building a window costs more than most window tests. Closed after
    the file's last test (or by ``shared_app_window.close(win)``), where no thread of its
    scheduler may be left."""
    from pytestqt.qtbot import QtBot

    threads_before = set(threading.enumerate())
    windows = _SharedAppWindows(QtBot(request).waitUntil)
    yield windows
    _close_app_windows(windows.open, threads_before)


@pytest.fixture(scope="module")
def talk_window(shared_app_window, request):
    """``talk_window(1000)`` -> one window as :func:`app_window` makes it, for all the tests
    of a file that take it into a talk, full screen, the dark theme or another size: after
    each test it leaves all four, takes its size back and must look exactly as it opened
    (:func:`gui_measure.look`; leaving a talk puts back what entering it found, as
    tests/gui/test_f11.py checks), or the test errors."""
    from gui_measure import build_every_tab, look, settle
    from pytestqt.qtbot import QtBot

    qtbot = QtBot(request)
    win = shared_app_window(1000)
    build_every_tab(win)  # the tabs a talk brings up, as they are before any talk
    settle(win, qtbot)
    return win, look(win), qtbot


@pytest.fixture
def shared_talk_window(talk_window):
    """``shared_talk_window(1000)``: :func:`talk_window`'s window, put back after the test."""
    from gui_measure import look, look_changes, settle

    win, found, qtbot = talk_window
    yield lambda height: win
    if win.isFullScreen():
        win.full_screen_action.trigger()
        qtbot.waitUntil(lambda: not win.isFullScreen(), timeout=5000)
    win.presentation_action.setChecked(False)
    win.dark_action.setChecked(False)  # the theme is process-wide
    win.resize(1600, 1000)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == (1600, 1000), timeout=5000)
    settle(win, qtbot)
    # a scroll area's bars follow its contents' size, which its next layout measures anew
    changed = {k: v for k, v in look_changes(found, look(win)).items()
               if "qt_scrollarea_" not in k}
    assert not changed, f"the window did not come back as it opened: {list(changed.items())[:5]}"
