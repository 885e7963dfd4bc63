"""The axes of a pane: pictures kept per range (a settings change moves an axis between a
few ranges), the histogram's count axis, whose width the occupancy strip's count axis copies
so that the two plot areas span the same screen columns, and building an axis's picture
outside a paint.
"""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QFontMetricsF, QPainter, QPicture

#: Pictures an axis keeps (the code ranges of the bit widths and code ranges a talk steps
#: through).
KEPT_PICTURES = 8


class RangeAxis(pg.AxisItem):
    """An axis that keeps the pictures of the ranges it showed, while nothing else about it
    changes.

    A new range throws the axis's picture away, and regenerating it (ticks, their text, the
    text's size) took ~1.5 ms per axis: each occupancy strip's code axis on every change of
    bit width or code range, back and forth between the same few ranges. pyqtgraph drops the
    picture (``picture = None``) for everything that changes it -- pens, fonts, style, size,
    label, tick spacing -- and only :meth:`setRange` is a change of range alone; any other
    drop forgets every kept picture (a re-sizing for the tick text only if the size changes:
    pyqtgraph re-sizes on every regeneration). A picture is kept with its range, the axis's
    rectangle, the linked view's rectangle (the grid lines' length), its scale and SI prefix,
    and is used again only where all of them are equal.
    """

    _picture: QPicture | None = None
    _kept: dict | None = None
    _keep = False

    @property
    def picture(self) -> QPicture | None:
        """The axis's picture; one kept for the current range when there is none."""
        if self._picture is None and self._kept:
            self._picture = self._kept.get(self._key())
        return self._picture

    @picture.setter
    def picture(self, picture: QPicture | None) -> None:
        if picture is None:
            if not self._keep:
                self._kept = None
        else:
            kept = self._kept if self._kept is not None else {}
            if len(kept) >= KEPT_PICTURES:
                kept.pop(next(iter(kept)))
            kept[self._key()] = picture
            self._kept = kept
        self._picture = picture

    def setRange(self, mn: float, mx: float) -> None:
        """pyqtgraph's ``setRange``, keeping the pictures of other ranges."""
        self._keep = True
        try:
            super().setRange(mn, mx)
        finally:
            self._keep = False

    def _updateWidth(self) -> None:
        self._resize(super()._updateWidth)

    def _updateHeight(self) -> None:
        self._resize(super()._updateHeight)

    def _resize(self, update: Callable[[], None]) -> None:
        """Run pyqtgraph's re-sizing; the kept pictures go only when the size changes."""
        before = (self.minimumSize(), self.maximumSize())
        keep, self._keep = self._keep, True
        try:
            update()
        finally:
            self._keep = keep
        if not keep and (self.minimumSize(), self.maximumSize()) != before:
            self._kept = None

    def _key(self) -> tuple:
        view = self.linkedView()
        shown = (self.mapRectFromItem(view, view.boundingRect()).getRect()
                 if view is not None else None)
        return (tuple(self.range), self.boundingRect().getRect(), shown, self.scale,
                self.autoSIPrefixScale)


#: The count axis keeps room for tick labels this wide (``log₁₀(1+n)`` ticks such as "2.5"
#: and linear counts such as "800" under their SI prefix fit).
COUNT_TICKS = "0.00"


class CountAxis(RangeAxis):
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

    def boundingRect(self) -> QRectF:
        """pyqtgraph's rectangle, reaching a tick label's height below the axis.

        With its grid on, the axis's rectangle is its own and the plot's, nothing beyond;
        pyqtgraph draws only the tick labels inside it, and the label of the count's base
        (0, on the plot's bottom edge) is centred on that edge: half of it lay outside, so
        the axis never showed its "0". Below the axis is the empty corner beside the value
        axis, where the label has room."""
        rect = super().boundingRect()
        if self.style["showValues"]:
            font = self.style["tickFont"] or self.font()
            rect.setBottom(rect.bottom() + QFontMetricsF(font).height())
        return rect

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
