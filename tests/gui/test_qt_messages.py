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


def test_default_figure_is_small_at_the_same_pixels(monkeypatch):
    """A palette PNG: the default four-pane figure under 150 KB, at the same 2x pixels as the
    full-colour rendering, and its pixels within a few levels of it."""
    import numpy as np
    from PySide6.QtGui import QImage

    import quantscope as qs
    from quantscope import figures

    fig = qs.figure(bits=4)
    assert len(fig.png) <= 150_000, len(fig.png)
    image = QImage.fromData(fig.png)
    assert image.format() == QImage.Format.Format_Indexed8
    monkeypatch.setattr(figures, "palette_png", lambda png: png)
    full = qs.figure(bits=4)
    assert len(full.png) > 2 * len(fig.png)
    reference = QImage.fromData(full.png)
    assert image.size() == reference.size()
    assert (image.width(), image.height()) == (2 * fig.size[0], 2 * fig.size[1])

    def pixels(img: QImage) -> np.ndarray:
        img = img.convertToFormat(QImage.Format.Format_RGB32)
        return np.frombuffer(img.constBits(), np.uint8).reshape(
            img.height(), img.width(), 4)[..., :3].astype(int)

    diff = np.abs(pixels(image) - pixels(reference))
    assert diff.mean() < 1.0 and np.quantile(diff.max(axis=-1), 0.999) <= 24, (
        diff.mean(), diff.max())


def test_one_pane_figure_title_says_what_is_drawn(monkeypatch):
    import quantscope as qs
    import quantscope.figures as figures

    seen: list[str] = []
    render = figures._render

    def spy(target, *args):
        seen.append(target.headline.text())  # the headline as rendered
        return render(target, *args)

    monkeypatch.setattr(figures, "_render", spy)
    qs.figure(panes="asymmetric/channel", bits=4, size=(640, 480))
    assert "four ways" not in seen[0]
    assert seen[0].endswith("quantized to int4: Asymmetric · per-channel · axis -1 · "
                            "1,536 channels"), seen[0]
