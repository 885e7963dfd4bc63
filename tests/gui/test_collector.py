"""While a window lives, garbage is collected on the GUI thread only (a PySide6 wrapper
finalised on another thread has its C++ deletion queued for the main thread, which crashed
inside ``Shiboken::BindingManager::runDeletionInMainThread`` when the queue ran). Run in a
child process, so that a segmentation fault is a failed test and not a dead test run."""

import json
import subprocess
import sys
import textwrap

CHILD = """
    import gc, json, threading
    import numpy as np
    from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget
    import quantscope.core.schemes.quantize as Q
    from quantscope.core import analyze, choose_qparams
    from quantscope.gui.window import MainWindow

    app = QApplication([])
    threads = []
    gc.callbacks.append(lambda phase, info: phase == "start"
                        and threads.append(threading.current_thread().name))

    class Cycle:  # only the collector can free what it holds
        pass

    def qt_garbage():
        for _ in range(30):
            w = QWidget()
            QVBoxLayout(w).addWidget(QLabel("x", w))
            c = Cycle(); c.w = w; c.me = c

    def allocate():  # a job's Python work: the collector's threshold many times over
        junk = [[i] for i in range(200 * gc.get_threshold()[0])]

    win = MainWindow(install_views=False)
    win.show()
    qt_garbage()
    job = threading.Thread(target=allocate, name="job")  # like the worker's and views' threads
    job.start(); job.join()
    Q.COMPILED_MIN = 0  # the compiled analysis on the engine's pool, as in the crash
    x = np.random.default_rng(0).standard_normal(1 << 19).astype(np.float32)
    for _ in range(5):
        analyze(x, choose_qparams(x))
        app.processEvents()
    while_open = sorted(set(threads))
    win.close()
    qt_garbage()
    for _ in range(20):  # GIL hand-offs: the main thread runs any queued deletion here
        analyze(x, choose_qparams(x))
    print(json.dumps({"while_open": while_open, "enabled_after": gc.isenabled()}))
"""


def test_while_a_window_lives_only_the_gui_thread_collects():
    out = subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(CHILD)],
                         capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(doc["while_open"]) <= {"MainThread"}, doc
    assert doc["enabled_after"]  # the last window out gave the collector back
