"""``qs.figure`` and ``qs.view`` say when a compile makes the person wait, as the command line
does: in a notebook the first figure of a fresh install compiles the panes' loops for a
minute, and a cell with no word for that long looks hung. The notice goes to stderr, which a
Jupyter kernel shows under the cell."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = r"""
import numpy as np, quantscope as qs
qs.figure(np.linspace(-1, 1, 64 * 32, dtype=np.float32).reshape(64, 32))
import numba
numba.njit(lambda v: v + 1)(1)   # a compile after the figure: the first of this process
"""


def test_a_compile_after_a_figure_is_announced_on_stderr():
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("quantscope: compiling")]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert "for this machine" in lines[0] or "in memory" in lines[0]
