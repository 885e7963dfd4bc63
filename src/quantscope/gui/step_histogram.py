"""A histogram of filled steps drawn by Qt alone.

A pyqtgraph curve in step mode runs Python on every data change (``updateData``) and on every
paint (its fill is rebuilt segment by segment): about 2 ms of a pane's 11 ms update and repaint,
four panes per settings change. Two plain path items -- the filled steps and their outline --
draw the same picture with no Python call while painting.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsPathItem


class _Outline(QGraphicsPathItem):
    """A path item bounded by its path widened by half its pen, as a stroke of these steps
    is (square corners and ends): Qt bounds a path item with a pen by stroking the whole path
    with it, on every new path -- about 1 ms for 2,000 bins' steps, a pane's outline per
    settings change -- where the steps' own bounds give the same rectangle at once."""

    def __init__(self, parent: QGraphicsPathItem) -> None:
        super().__init__(parent)
        self._bounds = QRectF()

    def setPath(self, path: QPainterPath) -> None:
        self.prepareGeometryChange()
        super().setPath(path)
        self._bound()

    def setPen(self, pen: QPen) -> None:
        self.prepareGeometryChange()
        super().setPen(pen)
        self._bound()

    def _bound(self) -> None:
        pen = self.pen()
        half = 0.0 if pen.style() == Qt.PenStyle.NoPen else pen.widthF() / 2
        path = self.path()
        rect = path.controlPointRect()  # an empty path's stroke is empty: no widening
        self._bounds = rect.adjusted(-half, -half, half, half) if half and not path.isEmpty() \
            else rect

    def boundingRect(self) -> QRectF:
        return QRectF(self._bounds)


class StepHistogram(QGraphicsPathItem):
    """Bars of ``yData[i]`` over ``xData[i]..xData[i + 1]`` from the axis up: this item is the
    fill, its child :attr:`outline` the steps' line.

    Attributes
    ----------
    xData, yData : numpy.ndarray
        The bin edges and the heights last set (as a step-mode ``PlotDataItem`` keeps them).
    opts : dict
        ``"pen"`` and ``"brush"`` last set.
    """

    def __init__(self, pen: QPen, brush: QBrush) -> None:
        super().__init__()
        super().setPen(QPen(Qt.PenStyle.NoPen))
        self.outline = _Outline(self)
        self.outline.setBrush(QBrush(Qt.BrushStyle.NoBrush))
        self.xData = np.zeros(0)
        self.yData = np.zeros(0)
        self.opts: dict = {}
        self.setPen(pen)
        self.setBrush(brush)

    def setPen(self, pen: QPen) -> None:
        """The outline's pen."""
        self.opts["pen"] = pen
        self.outline.setPen(pen)

    def setBrush(self, brush: QBrush) -> None:
        """The fill's brush."""
        self.opts["brush"] = brush
        super().setBrush(brush)

    def setData(self, edges, heights) -> None:
        """Bars of ``heights`` between consecutive ``edges`` (one more edge than heights)."""
        self.xData = np.asarray(edges, np.float64)
        self.yData = np.asarray(heights, np.float64)
        if self.yData.size == 0:
            self.setPath(QPainterPath())
            self.outline.setPath(QPainterPath())
            return
        path = pg.arrayToQPath(np.repeat(self.xData, 2),  # up from the axis, along, down
                               np.concatenate([[0.0], np.repeat(self.yData, 2), [0.0]]))
        self.setPath(path)
        self.outline.setPath(path)
