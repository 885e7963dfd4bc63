"""A first load in a fresh process loads no compiled loop: the engine's loops were loaded before
the window showed (``quantscope.state.warm_up.warm_up_engine``). Loading one from Numba's cache
holds the GIL inside LLVM for 10-300 ms; in the worker during a load it stalled the window."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # fresh interpreters: the last tier (tests/conftest.py)

#: Run in a fresh interpreter (this test process has long loaded every loop): counts the
#: dispatches that found no loaded loop for their argument types -- a load from Numba's cache
#: or a compile -- during the window's construction and during a first load.
SCRIPT = r"""
import json, os
os.environ["QT_QPA_PLATFORM"] = "offscreen"
from numba.core import dispatcher

counts = {"phase": "start"}
original = dispatcher.Dispatcher._compile_for_args

def counted(self, *args, **kws):
    counts[counts["phase"]] = counts.get(counts["phase"], 0) + 1
    return original(self, *args, **kws)

dispatcher.Dispatcher._compile_for_args = counted
from PySide6.QtWidgets import QApplication
app = QApplication([])
from quantscope.gui import create_window
from quantscope.state import ExplorerState, Source

counts["phase"] = "window"
window = create_window(ExplorerState(cache_reports=False), install_views=False)
window.resize(1600, 1000)
window.show()
app.processEvents()
counts["phase"] = "load"
window.load(Source.generator("outliers", (1024, 1024), 0, count=16, magnitude=25.0))
import time
deadline = time.monotonic() + 120
while not window.all_shown() and time.monotonic() < deadline:
    app.processEvents()
    time.sleep(0.002)
counts["shown"] = window.all_shown()
for changes in ({"method": "percentile", "percentile": 99.9}, {"bits": 6},
                {"method": "manual", "manual_clip": (-3.0, 3.0)}):
    window.state.update_settings(**changes)
    deadline = time.monotonic() + 60
    app.processEvents()
    while not window.all_shown() and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.002)
counts["changed"] = window.all_shown()
window.shutdown()
print("COUNTS", json.dumps(counts))
"""


def test_a_first_load_loads_no_compiled_loop():
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTS "))
    counts = json.loads(line.removeprefix("COUNTS "))
    assert counts["shown"] and counts["changed"]
    assert counts.get("load", 0) == 0, counts
    assert counts.get("window", 0) > 0  # the counting sees the loops the warm-up loads
