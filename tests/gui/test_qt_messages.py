"""A figure drawn offscreen leaves no "propagateSizeHints" lines on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import numpy as np, quantscope as qs
x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
fig = qs.figure(x, size=(640, 480))
print(len(fig.png) > 1000)
"""


def test_offscreen_figure_has_no_qt_noise():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
    assert "propagateSizeHints" not in out.stderr, out.stderr
