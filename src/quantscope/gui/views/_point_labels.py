"""Names beside a scatter plot's points, placed in screen pixels so that no two cover each other.

Points a fraction of a bit and a dB apart (the FP8 and MX variants at 8 bits, the 4-bit
formats) are a few pixels apart on a short plot: grouping them by distance in data units
left labels a line apart on a tall plot and piled on each other on a 200-pixel one. Here
each name goes beside its point, right or left of it and shifted up or down as far as
:data:`SHIFTS` allows, where it covers no name placed before it (and, where it can, no
point); a name with no such spot
joins the block of the name placed nearest its point, and the blocks are placed again, until
every block has a spot. Nothing here reads the data: it places boxes around pixel positions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSizeF

#: Pixels between a point and its name.
GAP_PX = 6.0
#: Half the side of the square around a point that a name avoids covering (its marker).
MARKER_PX = 5.0
#: Shifts of a name's spot from level with its point, in half its height, nearest first.
SHIFTS = (0, -1, 1, -2, 2, -3, 3, -4, 4, -6, 6, -8, 8)

#: Separator between the columns of a block taller than the plot.
COLUMN_SEP = "   "

Point = tuple[QPointF, str]


@dataclass
class LabelBlock:
    """One block of names: its lines of text and where it goes (scene pixels)."""

    lines: list[str]
    rect: QRectF


def _columns(names: list[str], measure: Callable[[list[str]], QSizeF],
             box: QRectF) -> tuple[list[str], QSizeF]:
    """``names`` one a line, or read down as many columns as keep them within ``box``'s
    height, and the size they take."""
    columns, lines = 1, names
    size = measure(lines)
    while columns < len(names) and size.height() > box.height():
        columns += 1
        rows = math.ceil(len(names) / columns)
        cols = [names[c * rows:(c + 1) * rows] for c in range(math.ceil(len(names) / rows))]
        lines = [COLUMN_SEP.join(col[r] for col in cols if r < len(col)) for r in range(rows)]
        size = measure(lines)
    return lines, size


def _spots(group: list[Point], size: QSizeF, box: QRectF):
    """Where ``group``'s block may go, nearest its points first: level with them right, then
    left, then shifted up or down a little more each time."""
    xs = [p.x() for p, _ in group]
    y = sum(p.y() for p, _ in group) / len(group) - size.height() / 2
    for shift in SHIFTS:
        for left in (max(xs) + GAP_PX, min(xs) - GAP_PX - size.width()):
            rect = QRectF(QPointF(left, y + shift * size.height() / 2), size)
            if box.contains(rect):
                yield rect


def _free_spot(group: list[Point], size: QSizeF, box: QRectF, taken: list[QRectF],
               markers: list[QRectF]) -> QRectF | None:
    """The nearest spot that covers no placed name and no point's marker, else the nearest
    that covers no placed name (a marker under a name beats a name far from its point)."""
    for avoid in (taken + markers, taken):
        rect = next((r for r in _spots(group, size, box)
                     if not any(r.intersects(t) for t in avoid)), None)
        if rect is not None:
            return rect
    return None


def place_labels(points: Sequence[Point], measure: Callable[[list[str]], QSizeF],
                 box: QRectF, unnamed: Sequence[QPointF] = (),
                 marker_px: float = MARKER_PX) -> list[LabelBlock]:
    """Blocks of names for ``points`` (scene position, name) inside ``box`` (as far as a
    block fits in it), no two overlapping; ``measure`` gives the size of a block's lines as
    drawn. Where they can, the blocks leave uncovered the square of ``marker_px`` (half its
    side) around every point, the ``unnamed`` ones' too: a name over a point hides a format.
    Blocks are placed top to bottom; a merge places again only the blocks from the one that
    grew (those before it keep their spots)."""
    groups = [[point] for point in sorted(points, key=lambda m: m[0].y())]
    markers = [QRectF(p.x() - marker_px, p.y() - marker_px, 2 * marker_px, 2 * marker_px)
               for p in [*(p for p, _ in points), *unnamed]]
    placed: list[LabelBlock] = []  # placed[i] is the block of groups[i]
    while len(placed) < len(groups):
        group = groups[len(placed)]
        lines, size = _columns([name for _, name in sorted(group, key=lambda m: m[0].y())],
                               measure, box)
        rect = _free_spot(group, size, box, [b.rect for b in placed], markers)
        if rect is None and not placed:  # taller or wider than the plot: its top-left
            rect = QRectF(box.topLeft(), size)
        if rect is not None:
            placed.append(LabelBlock(lines, rect))
            continue
        # no spot: the names join the block placed nearest their points
        here = QPointF(sum(p.x() for p, _ in group) / len(group),
                       sum(p.y() for p, _ in group) / len(group))
        nearest = min(range(len(placed)), key=lambda i: _distance(placed[i].rect, here))
        groups[nearest] = groups[nearest] + groups.pop(len(placed))
        del placed[nearest:]
    return placed


def _distance(rect: QRectF, point: QPointF) -> float:
    """Pixels from ``point`` to the nearest point of ``rect``."""
    dx = max(rect.left() - point.x(), 0.0, point.x() - rect.right())
    dy = max(rect.top() - point.y(), 0.0, point.y() - rect.bottom())
    return (dx * dx + dy * dy) ** 0.5
