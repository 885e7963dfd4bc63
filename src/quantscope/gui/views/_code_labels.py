"""The Mapping view's labels under the code cells ("code → value (error)"), laid out in pixels
from what their text items measure.

A row of labels is as tall as the letters' ink, not as the font's line: fonts differ in how
much room a line keeps beyond its letters (DejaVu Sans 1.16 em, Noto Sans CJK 1.45 em), and
rows a line apart took a tall-line font's three rows the room of four and set the third
against the code axis's ticks. Here the letters of each row are a gap below those of the row
above, the first row's a gap below the cells and the last row's a gap above the ticks the
code axis draws into the plot; a short plot shows as many rows as fit above its arrows' room.
Across, each label is centred on its code and moved inward only as far as keeps it whole in
the plot, and goes in the first row where it clears the labels already there by a gap.
Nothing here reads the data: it places boxes measured in pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtGui import QFontInfo, QFontMetricsF
from PySide6.QtWidgets import QGraphicsTextItem

#: Room between two rows' letters, and around the rows, as a fraction of the font's size.
GAP_EM = 0.3
#: Height (px) the figure above the labels keeps at least: the real axis, the arrows, the cells.
ARROWS_PX = 60.0
#: Most rows of labels.
MAX_ROWS = 3


@dataclass(frozen=True)
class LabelBoxes:
    """The labels' text items as measured, in pixels.

    Attributes
    ----------
    widths : list of float
        Each item's width (its text and the item's margins either side).
    ink_offset : float
        From an item's top to the top of its letters (the item's margin, and the room the
        font's line keeps above the letters).
    ink_height : float
        From the top of the tallest letters of any label to the bottom of the lowest.
    gap : float
        Room kept between rows of letters, and around the rows.
    """

    widths: list[float]
    ink_offset: float
    ink_height: float
    gap: float

    @property
    def pitch(self) -> float:
        """From one row's letters to the next's."""
        return self.ink_height + self.gap


def measure(items: Sequence[QGraphicsTextItem]) -> LabelBoxes:
    """The boxes of ``items`` (one line of text each, all in one font) as they are laid out:
    the ink is the font's tight box of each text, hung from the baseline of the item's first
    line (where the item draws it)."""
    font = items[0].font()
    metrics = QFontMetricsF(font)
    tops, bottoms, widths = [], [], []
    for item in items:
        line = item.document().firstBlock().layout().lineAt(0)
        baseline = item.document().documentMargin() + line.y() + line.ascent()
        ink = metrics.tightBoundingRect(item.toPlainText())
        tops.append(baseline + ink.top())
        bottoms.append(baseline + ink.bottom())
        widths.append(item.boundingRect().width())
    top = min(tops)
    return LabelBoxes(widths=widths, ink_offset=top, ink_height=max(bottoms) - top,
                      gap=max(2.0, GAP_EM * QFontInfo(font).pixelSize()))


def band_px(rows: int, boxes: LabelBoxes, ticks_px: float) -> float:
    """Pixels below the cells that ``rows`` rows of labels take: a gap, the rows, and a gap
    above the ``ticks_px`` the code axis's ticks reach into the plot."""
    if rows <= 0:
        return 0.0
    return boxes.gap + rows * boxes.pitch + ticks_px


def rows_that_fit(height: float, boxes: LabelBoxes, ticks_px: float) -> int:
    """How many rows (up to :data:`MAX_ROWS`) a plot ``height`` px tall has room for below
    :data:`ARROWS_PX` of figure."""
    rows = MAX_ROWS
    while rows and height - band_px(rows, boxes, ticks_px) < ARROWS_PX:
        rows -= 1
    return rows


def item_top_px(row: int, boxes: LabelBoxes) -> float:
    """Pixels from the cells' bottom down to the top of a ``row`` label's item (its letters
    sit :attr:`LabelBoxes.ink_offset` lower)."""
    return boxes.gap + row * boxes.pitch - boxes.ink_offset


def place(centres: Sequence[float], boxes: LabelBoxes, width: float,
          rows: int) -> list[tuple[int, float]]:
    """(row, left edge) in pixels for each label centred at ``centres`` (pixels across a
    plot ``width`` wide), in the first row where it clears the labels placed before it
    (nearest the left first) by a gap; row -1 where no row has room (the value then goes
    unlabelled: its arrow and code still show it)."""
    ends = [float("-inf")] * rows
    out = [(-1, 0.0)] * len(centres)
    for i in sorted(range(len(centres)), key=lambda k: centres[k]):
        w = boxes.widths[i]
        left = min(max(centres[i] - w / 2, 0.0), max(width - w, 0.0))
        for r in range(rows):
            if left >= ends[r]:
                ends[r] = left + w + boxes.gap
                out[i] = (r, left)
                break
    return out
