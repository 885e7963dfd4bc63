"""The axes of a pane: the histogram's count axis, whose width the occupancy strip's count
axis copies so that the two plot areas span the same screen columns, and building an axis's
picture outside a paint.
"""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtGui import QFontMetricsF, QPainter, QPicture

#: The count axis keeps room for tick labels this wide (``log₁₀(1+n)`` ticks such as "2.5"
#: and linear counts such as "800" under their SI prefix fit).
COUNT_TICKS = "0.00"


class CountAxis(pg.AxisItem):
    """A left axis that reports each new width it takes (:attr:`on_width`).

    pyqtgraph sizes an axis in ``_updateWidth`` -- on a new tick font, tick offset or label,
    and when its tick text grows -- by setting the layout item's minimum and maximum width;
    ``width()`` follows only at the layout's next pass. A strip that copied ``width()``
    therefore got the width before the change (at a theme switch: the other theme's), and
    one that copied it once never followed a later change.

    Attributes
    ----------
    on_width : callable or None
        Called with the width just reserved (the axis label included).
    """

    on_width: Callable[[float], None] | None = None

    def _updateWidth(self) -> None:
        super()._updateWidth()
        if self.on_width is not None:
            self.on_width(self.maximumWidth())


def follow_width(axis: pg.AxisItem, width: float) -> None:
    """Give ``axis`` exactly ``width`` (its own label and ticks not counted); a no-op when it
    has it already, since every new width throws away the axis's cached picture."""
    if axis.fixedWidth != width or axis.maximumWidth() != (width if axis.isVisible() else 0):
        axis.setWidth(width)


def reserve_tick_text(axis: pg.AxisItem) -> None:
    """Keep the count axis as wide as :data:`COUNT_TICKS` in its tick font (wider only for
    wider labels, never narrower): an axis that resized to its labels moved its view box,
    and panes whose views are linked line up on screen, so one pane's new tick labels
    changed every pane's range and repainted all four."""
    font = axis.style["tickFont"] or axis.font()
    axis.setStyle(autoReduceTextSpace=False)
    axis.textWidth = QFontMetricsF(font).horizontalAdvance(COUNT_TICKS)
    axis._updateWidth()


def draw_axis(axis: pg.AxisItem) -> None:
    """Build the axis's picture as its ``paint`` would (``AxisItem.paint``), outside a paint:
    building it sizes the axis for its tick text, which mid-paint re-lays out the plot."""
    if axis.picture is not None or not axis.isVisible():
        return
    picture = QPicture()
    painter = QPainter(picture)
    try:
        if axis.style["tickFont"]:
            painter.setFont(axis.style["tickFont"])
        specs = axis.generateDrawSpecs(painter)
        if specs is not None:
            axis.drawPicture(painter, *specs)
    finally:
        painter.end()
    axis.picture = picture
