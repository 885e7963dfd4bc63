"""The window painted by the NumPy twins (a machine's first run, its loops still compiling in
another process) is the window painted by the compiled loops: the same numbers in every pane
and the same pixels."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtGui import QImage

from quantscope.cli import main
from quantscope.core.stats import loop_twins

pytestmark = pytest.mark.slow  # two whole windows rendered: the last tier (tests/conftest.py)


def _render(tmp_path, name: str) -> tuple[dict, np.ndarray]:
    metrics, shot = tmp_path / f"{name}.json", tmp_path / f"{name}.png"
    assert main(["--metrics", str(metrics), "--screenshot", str(shot)]) == 0
    image = QImage(str(shot)).convertToFormat(QImage.Format.Format_RGBA8888)
    pixels = np.frombuffer(image.constBits(), np.uint8, image.sizeInBytes()).copy()
    return json.loads(metrics.read_text()), pixels


def test_the_twins_paint_the_same_window(tmp_path):
    numbers, pixels = _render(tmp_path, "compiled")
    loop_twins.install()
    try:
        twin_numbers, twin_pixels = _render(tmp_path, "twins")
    finally:
        loop_twins.remove()
    assert twin_numbers == numbers
    assert twin_pixels.size == pixels.size and np.array_equal(twin_pixels, pixels)
