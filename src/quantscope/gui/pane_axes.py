"""The axes of a pane: pictures kept per range (a settings change moves an axis between a
few ranges), the histogram's count axis, whose width the occupancy strip's count axis copies
so that the two plot areas span the same screen columns, and building an axis's picture
outside a paint.
"""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF
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


#: How far (px) a code axis lets a tick label reach past its left end, over the empty
#: corner under the count axis: the first code of a format whose codes start at 0 sits a
#: code's width from that end, and its "0" is wider.
CODE_LABEL_REACH = 12


class CodeAxis(RangeAxis):
    """The occupancy strip's code axis: ticks at codes of the format only (not at the spare
    code shown at either end), a tick only where a label is, and the first label drawn even
    where it reaches a few pixels past the axis's left end.

    The strip is a fifth of the pane high: pyqtgraph's minor levels put a comb of unlabelled
    ticks under it (every 10 codes between labels every 50). And pyqtgraph hides a label
    that reaches past the axis's ends, so an FP8 strip (its codes start at 0, one spare code
    shown to the left) began at "50" with no "0". To the right of the strip is the pane's
    edge, where a label would be cut: there the axis keeps pyqtgraph's rule.
    """

    #: The first and last code of the format the strip shows (None: every tick).
    codes: tuple[int, int] | None = None

    def set_codes(self, first: int, last: int) -> None:
        """Ticks from now on only at codes ``first`` to ``last``."""
        if self.codes != (first, last):
            self.codes = (first, last)
            self._picture = None  # the kept pictures stay: each is kept with its codes
            self.update()

    def _key(self) -> tuple:
        return (*super()._key(), self.codes)

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:
        levels = super().tickValues(minVal, maxVal, size)
        if self.codes is None:
            return levels
        first, last = self.codes
        return [(spacing, [v for v in values if first <= v <= last])
                for spacing, values in levels]

    def boundingRect(self) -> QRectF:
        """pyqtgraph's rectangle, reaching :data:`CODE_LABEL_REACH` past the left end."""
        return super().boundingRect().adjusted(-CODE_LABEL_REACH, 0, 0, 0)

    def generateDrawSpecs(self, p: QPainter):
        """pyqtgraph's ticks and labels, less the ticks that have no label."""
        specs = super().generateDrawSpecs(p)
        if specs is None or self.grid is not False:
            return specs
        axis, ticks, texts = specs
        horizontal = self.orientation in ("top", "bottom")

        def along(point) -> float:
            return point.x() if horizontal else point.y()

        labelled = [along(rect.center()) for rect, _, _ in texts]
        ticks = [tick for tick in ticks if any(abs(along(tick[1]) - at) < 0.5 for at in labelled)]
        return axis, ticks, texts


#: The count axis keeps room for tick labels this wide (``log₁₀(1+n)`` ticks such as "2.5"
#: and linear counts such as "800" under their SI prefix fit).
COUNT_TICKS = "0.00"


#: How far (px) the count axis's rotated label starts left of the axis (pyqtgraph's own
#: "nudge" for a left axis).
LABEL_INSET = 5


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
        self.place_label()
        if self.on_width is not None:
            self.on_width(self.maximumWidth())

    def resizeEvent(self, ev=None) -> None:
        super().resizeEvent(ev)
        self.place_label()

    def place_label(self) -> None:
        """Put the rotated label :data:`LABEL_INSET` px left of the axis, centred on its
        height, for the label's text and font as they are now.

        pyqtgraph places the label only in ``resizeEvent``, from the label's size at that
        moment: a new text ("count" -> "log₁₀(1+n)" when the first numbers arrive) or a new
        font (a theme change) left it where the old one was centred, until the axis happened
        to be resized. Whether that happened depended on each pane's layout history, so the
        same label sat at different heights in neighbouring panes. Every new text and font
        reaches ``_updateWidth`` (pyqtgraph's ``setLabel``; the theme's
        :func:`reserve_tick_text`), every new size ``resizeEvent``: both place it here.
        """
        if self.label is None:  # pyqtgraph drops it when the axis is closed
            return
        at = QPointF(-LABEL_INSET,
                     round(self.size().height() / 2 + self.label.boundingRect().width() / 2))
        if self.label.pos() != at:
            self.label.setPos(at)


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
