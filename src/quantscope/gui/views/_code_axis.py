"""The Mapping view's axis of codes: every end of the code range labelled.

The ends (-128 and 127 for int8, 0 and 255 for uint8, -8 and 7 at four bits) are what a
learner looks for on this axis, and they sit where pyqtgraph drops a label: its rule hides
any tick label that reaches past the axis's ends, and the end codes are a few codes from
them, so "-128" and "127" lost half their width to the rule and vanished. The real axis
above the codes (:class:`ApartAxis`) labels the values shown, which may be a few pixels apart:
there a label that would touch its neighbour is left out.
"""

from __future__ import annotations

from collections.abc import Collection

import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QFontMetricsF, QPainter

#: Room (px) kept between two tick labels of the axis.
LABEL_GAP = 6


def code_ticks(first: int, last: int) -> list[int]:
    """The codes the axis labels: ``first``, ``last``, and between them the multiples of a
    quarter of the range (a power of two: 64 at 8 bits, 4 at 4 bits) at least half of that
    from either end, so that no round code crowds an end's label."""
    bits = max(1, (last - first).bit_length())
    step = 1 << max(0, bits - 2)
    inner = [c for c in range(first - first % step + step, last, step)
             if c - first >= step / 2 and last - c >= step / 2]
    return [first, *inner, last] if last > first else [first]


class CodeRangeAxis(pg.AxisItem):
    """A horizontal axis labelled at :func:`code_ticks` of a code range (:meth:`set_codes`).

    pyqtgraph keeps a tick label only where it lies inside the axis's rectangle: the rectangle
    here reaches an end label's width past either end, so pyqtgraph keeps the end labels;
    :meth:`generateDrawSpecs` then moves each label that reaches past an end back inside (as
    little as it can: a label that fits stays centred on its tick), and leaves out a label
    between them that would touch one, so the ends are always read.
    """

    #: The first and last code of the range the axis labels (None: pyqtgraph's ticks).
    codes: tuple[int, int] | None = None

    def set_codes(self, first: int, last: int) -> None:
        """Label the range ``first`` to ``last`` (its ends and round codes between)."""
        if self.codes != (first, last):
            self.codes = (first, last)
            self.setTicks([[(c, str(c)) for c in code_ticks(first, last)]])

    def _reach(self) -> float:
        """How far (px) an end label may reach past the axis before it is moved back."""
        if self.codes is None:
            return 0.0
        metrics = QFontMetricsF(self.style["tickFont"] or self.font())
        return max(metrics.horizontalAdvance(str(c)) for c in self.codes)

    def boundingRect(self) -> QRectF:
        """pyqtgraph's rectangle, an end label's width wider at either end."""
        reach = self._reach()
        return super().boundingRect().adjusted(-reach, 0, reach, 0)

    def generateDrawSpecs(self, p: QPainter):
        """pyqtgraph's ticks and labels, each label inside the axis, the ends' first."""
        specs = super().generateDrawSpecs(p)
        if specs is None or self.codes is None:
            return specs
        axis, ticks, texts = specs
        inner = self.mapRectFromParent(self.geometry())
        moved = []
        for rect, flags, text in texts:
            rect = QRectF(rect)
            if rect.left() < inner.left():
                rect.moveLeft(inner.left())
            if rect.right() > inner.right():
                rect.moveRight(inner.right())
            moved.append((rect, flags, text))
        # the ends claim their room first; a label between them gives way
        return axis, ticks, apart(moved, first={str(c) for c in self.codes})


def apart(texts: list, first: Collection[str] = ()) -> list:
    """The tick labels ``(rect, flags, text)`` of ``texts`` that keep :data:`LABEL_GAP` px
    from each other, left to right: those whose text is in ``first`` always, then each other
    label in its turn where it touches none kept before it."""
    kept: list = []
    for rect, flags, text in sorted(texts, key=lambda t: (t[2] not in first, t[0].left())):
        room = rect.adjusted(-LABEL_GAP, 0, LABEL_GAP, 0)
        if text in first or not any(room.intersects(r) for r, _, _ in kept):
            kept.append((rect, flags, text))
    kept.sort(key=lambda t: t[0].left())
    return kept


class ApartAxis(pg.AxisItem):
    """A horizontal axis whose tick labels never touch: pyqtgraph draws the labels of ticks
    it is given however close they are, and two values a few pixels apart ("0" and "0.5")
    read as one number ("00.5"); a label that would touch one to its left is left out
    (its tick stays)."""

    def generateDrawSpecs(self, p: QPainter):
        specs = super().generateDrawSpecs(p)
        if specs is None:
            return specs
        axis, ticks, texts = specs
        return axis, ticks, apart(texts)
