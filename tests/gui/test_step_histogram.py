"""The histogram's outline is bounded exactly as Qt bounds a path item with its pen (a stroke
of the whole path), without the stroke: same rectangle for every pen the themes use, after
every new path and every new pen."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import QGraphicsPathItem

from quantscope.gui.step_histogram import StepHistogram


@pytest.mark.parametrize("width", [0.0, 1.0, 1.5, 2.25, 3.0])
def test_the_outline_is_bounded_as_qt_bounds_its_stroke(qapp, width):
    rng = np.random.default_rng(7)
    hist = StepHistogram(pg.mkPen("b", width=1.0), QBrush())
    hist.setPen(pg.mkPen("#1f4e9c", width=width))  # a theme's pen, after the first
    qt = QGraphicsPathItem()  # Qt's own bounds: a stroke of the path with the pen
    qt.setPen(hist.outline.pen())
    for bins in (1, 7, 2048):
        edges = np.sort(rng.uniform(-30.0, 40.0, bins + 1))
        heights = rng.uniform(0.0, 5e4, bins) * (rng.random(bins) > 0.3)
        hist.setData(edges, heights)
        qt.setPath(hist.outline.path())
        assert hist.outline.boundingRect() == qt.boundingRect()
    hist.setData(np.zeros(0), np.zeros(0))
    qt.setPath(hist.outline.path())
    assert hist.outline.boundingRect() == qt.boundingRect()
    hist.setPen(pg.mkPen(None))  # no pen: the path's own bounds
    qt.setPen(hist.outline.pen())
    assert hist.outline.boundingRect() == qt.boundingRect()
