"""Names beside scatter points: every name placed once, inside the plot, no two blocks
overlapping, however crowded the points."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, QRectF, QSizeF

from quantscope.gui.views._point_labels import COLUMN_SEP, place_labels

LINE_PX, CHAR_PX = 16.0, 7.0


def measure(lines: list[str]) -> QSizeF:
    return QSizeF(max(len(line) for line in lines) * CHAR_PX + 8, len(lines) * LINE_PX + 8)


@pytest.mark.parametrize("size", [(300, 120), (700, 200), (1400, 500)])
@pytest.mark.parametrize("seed", [0, 1])
def test_blocks_hold_every_name_inside_the_box_without_overlap(size, seed):
    rng = np.random.default_rng(seed)
    box = QRectF(40, 10, *size)
    # a crowd at one spot (the 8-bit formats) and points scattered elsewhere
    xy = np.concatenate([rng.normal([box.right() - 60, box.top() + 40], 6, (12, 2)),
                         rng.uniform([box.left(), box.top()], [box.right(), box.bottom()],
                                     (18, 2))])
    points = [(QPointF(float(x), float(y)), f"name{k}") for k, (x, y) in enumerate(xy)]
    blocks = place_labels(points, measure, box)
    names = [name for b in blocks for line in b.lines for name in line.split(COLUMN_SEP)]
    assert sorted(names) == sorted(name for _, name in points)
    for i, a in enumerate(blocks):
        if a.rect.height() <= box.height() and a.rect.width() <= box.width():
            assert box.contains(a.rect), (a.rect, box)
        for b in blocks[i + 1:]:
            assert not a.rect.intersects(b.rect), (a.lines, b.lines)


def test_a_lone_point_is_named_level_with_it_on_its_right():
    box = QRectF(0, 0, 400, 200)
    (block,) = place_labels([(QPointF(100, 100), "int8")], measure, box)
    assert block.lines == ["int8"]
    assert block.rect.left() > 100 and block.rect.center().y() == pytest.approx(100)


@pytest.mark.parametrize("height", [0.5, 5.0, 30.0])
def test_a_plot_shorter_than_a_line_still_gets_every_name(height):
    """However short the plot, the names end up in one block, in columns, and placing them
    ends (a plot a few pixels tall while its window is laid out)."""
    box = QRectF(0, 0, 300, height)
    points = [(QPointF(10.0 * k, height / 2), f"n{k}") for k in range(5)]
    blocks = place_labels(points, measure, box)
    names = [name for b in blocks for line in b.lines for name in line.split(COLUMN_SEP)]
    assert sorted(names) == sorted(name for _, name in points)
