"""Lines of text no taller than their letters need, whatever the font says a line is.

A font sets how tall its lines are (ascent plus descent), and faces differ: DejaVu Sans and
Liberation Sans give a line 1.15-1.16 em, Noto Sans Mono 1.36 em, Noto Sans CJK 1.45 em, the
extra being empty room above the capitals. Qt sizes a label by that line, so a pane's title,
key and six rows of numbers grew by 3-4 px each with such a face: 50 px of a 720-row window
that its four histograms needed (with Noto Sans Mono as the fixed-width face they were 76 px
tall, below the 80 a histogram needs to be read).

:func:`tighten` keeps a one-line label's line at most :data:`LINE_EM` of its font's size, or
the height of its letters with a pixel of air above and below where they are taller, with
the letters centred in that room: the label's contents extend beyond it by the font's empty
room (negative contents margins), so the text is drawn where it would be, only the unused
part of its line is left out. A font whose lines are no taller than :data:`LINE_EM` (most
faces, the default ones included) is laid out exactly as before.

A label of several lines (a pane's caption, a talk's scene line) loses that room between its
lines too when it draws them with :func:`draw_lines` and is tightened with ``every_line``:
each line is then :func:`line_pitch` rows below the one before, the line's letters where
they would be in a line of the font's full height.
"""

from __future__ import annotations

import math
from typing import TypeVar

from PySide6.QtCore import QEvent, QMargins, QObject, QPointF, QRect, QSize, Qt
from PySide6.QtGui import (
    QFont,
    QFontInfo,
    QFontMetrics,
    QFontMetricsF,
    QPainter,
    QPalette,
    QTextLayout,
    QTextOption,
)
from PySide6.QtWidgets import QLabel, QPushButton, QWidget

from quantscope.gui.descendants import descendants

Label = TypeVar("Label", bound=QLabel)

#: The tallest line a label keeps, in ems of its font (common sans faces' lines are 1.15-1.17
#: em: they are untouched).
LINE_EM = 1.2
#: Letters whose extent a line must hold: capitals, digits, descenders, brackets, bars and
#: the signs the panes' numbers use (not accented capitals: the labels this is for have none).
INK_PROBE = "0123456789AMQbdfghjklpqy|()[]%…−+/"


def line_room(widget: QWidget) -> tuple[int, int]:
    """(top, bottom): pixels of ``widget``'s font's line left out above and below its letters
    (0, 0 where the line is no taller than :data:`LINE_EM` em)."""
    return font_line_room(widget.font())


#: :func:`font_line_room` by font: a theme change sends each tightened label its font and
#: style changes and a polish, each asking again for the same few fonts' room (measuring the
#: letters' ink was ~10 % of a presentation toggle's CPU).
_ROOM: dict[tuple[str, str], tuple[int, int]] = {}


def font_line_room(font: QFont) -> tuple[int, int]:
    """(top, bottom): pixels of a line of ``font`` left out above and below its letters (see
    :func:`line_room`)."""
    # the family the font resolves to is part of the key: a face added to the application
    # later (a test's tall font) changes what a request for its name gets
    key = (font.key(), QFontInfo(font).family())
    room = _ROOM.get(key)
    if room is None:
        room = _ROOM[key] = _measure_line_room(font)
    return room


def _measure_line_room(font: QFont) -> tuple[int, int]:
    metrics = QFontMetricsF(font)
    ascent, descent = metrics.ascent(), metrics.descent()
    ink = metrics.tightBoundingRect(INK_PROBE)
    ink_top, ink_bottom = -ink.top(), ink.bottom()  # above and below the baseline
    room = max(LINE_EM * QFontInfo(font).pixelSize(), ink_top + ink_bottom + 2)
    if ascent + descent <= room:
        return 0, 0
    room = math.ceil(room)
    # the line's top sits this far above the label's, the letters centred in its room
    above = ascent - ink_top - (room - ink_top - ink_bottom) / 2
    top = max(0, math.floor(above))
    bottom = max(0, math.floor(ascent + descent - room - top))
    return top, bottom


class _Tight(QObject):
    """Keeps a label's (or bar's) contents margins beyond its own (frame, style sheet padding)
    at :func:`line_room`, at most ``most`` pixels above and below, again whenever its font
    changes (see :func:`tighten`, :func:`tighten_bar`); ``every_line``: the label draws each
    of its lines that much shorter (:func:`draw_lines`)."""

    def __init__(self, label: QWidget, most: tuple[int, int] | None = None,
                 every_line: bool = False) -> None:
        super().__init__(label)
        self.most = most
        self.every_line = every_line
        for child in descendants(label, _Tight):  # one per widget
            if child is not self:
                label.removeEventFilter(child)  # until deleted it would still trim
                child.setParent(None)
                child.deleteLater()
        self.trim = (0, 0)
        label.installEventFilter(self)
        self.apply(label)

    def room(self, label: QWidget) -> tuple[int, int]:
        """What to leave out for ``label``'s font now."""
        top, bottom = line_room(label)
        if self.most is not None:
            top, bottom = min(top, self.most[0]), min(bottom, self.most[1])
        return top, bottom

    def apply(self, label: QWidget) -> None:
        trim = self.room(label)
        if trim == self.trim:
            return
        # what the frame and style set stays: only this object's own share is replaced
        margins = label.contentsMargins()
        old_top, old_bottom = self.trim
        label.setContentsMargins(QMargins(margins.left(), margins.top() + old_top - trim[0],
                                          margins.right(),
                                          margins.bottom() + old_bottom - trim[1]))
        self.trim = trim

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange,
                            QEvent.Type.Polish):
            self.apply(obj)
        return False


def tighten(label: Label, *, every_line: bool = False) -> Label:
    """Keep one-line ``label`` no taller than its letters need (see the module docstring);
    returns it. ``every_line``: each of its lines, for a label that draws them with
    :func:`draw_lines`."""
    _Tight(label, every_line=every_line)
    return label


def line_pitch(label: QWidget) -> int:
    """Rows from the top of one of ``label``'s lines to the top of the next as it draws them:
    its font's line spacing, less the room :func:`tighten` leaves out of a line where it was
    asked to tighten every line (rounded up: a line keeps its letters' whole room). ``n``
    such lines take ``n - 1`` pitches and a line spacing, less the first line's room above
    and the last's below (the label's contents margins)."""
    spacing = QFontMetrics(label.font()).lineSpacing()
    tight = descendants(label, _Tight)
    if not tight or not tight[0].every_line:
        return spacing
    top, bottom = tight[0].room(label)
    if top + bottom == 0:
        return spacing
    return min(spacing, math.ceil(QFontMetricsF(label.font()).lineSpacing() - top - bottom))


def draw_lines(painter: QPainter, label: QLabel, rect: QRect, flags: int, text: str) -> None:
    """Draw ``text`` in ``rect`` (``label``'s contents) as ``label``'s style draws an item's
    text with ``flags`` (alignment, word wrap), each line :func:`line_pitch` below the one
    before: where that is the font's line spacing, exactly as the style draws it; else with
    the same lines, each line's letters drawn whole where a line of the font's full height
    puts them, only the empty room between the lines left out."""
    pitch = line_pitch(label)
    if pitch >= QFontMetrics(label.font()).lineSpacing():
        label.style().drawItemText(painter, rect, flags, label.palette(), label.isEnabled(),
                                   text, label.foregroundRole())
        return
    option = QTextOption(Qt.AlignmentFlag(flags & int(Qt.AlignmentFlag.AlignHorizontal_Mask)))
    option.setWrapMode(QTextOption.WrapMode.WordWrap if flags & int(Qt.TextFlag.TextWordWrap)
                       else QTextOption.WrapMode.ManualWrap)
    # a label's "\n" ends a line (QLabel makes it a line separator too)
    layout = QTextLayout(text.replace("\n", "\u2028"), label.font(), label)
    layout.setTextOption(option)
    layout.beginLayout()
    count = 0
    while (line := layout.createLine()).isValid():
        line.setLineWidth(rect.width())
        line.setPosition(QPointF(0, count * pitch))
        count += 1
    layout.endLayout()
    # the lines' extent: the last one's full line below the others' pitches
    height = (count - 1) * pitch + QFontMetrics(label.font()).lineSpacing() if count else 0
    if flags & int(Qt.AlignmentFlag.AlignTop):
        top = rect.top()
    elif flags & int(Qt.AlignmentFlag.AlignBottom):
        top = rect.bottom() + 1 - height
    else:
        top = rect.top() + (rect.height() - height) // 2
    group = QPalette.ColorGroup.Active if label.isEnabled() else QPalette.ColorGroup.Disabled
    painter.save()
    painter.setPen(label.palette().color(group, label.foregroundRole()))
    layout.draw(painter, QPointF(rect.left(), top))
    painter.restore()


def trimmed(label: QLabel) -> tuple[int, int]:
    """(top, bottom): what :func:`tighten` leaves out of ``label``'s height for its font now
    ((0, 0) for a label it was not given), read from the font, so that a reservation of
    height made in the same font change agrees with it whichever sees the change first."""
    tight = descendants(label, _Tight)
    return tight[0].room(label) if tight else (0, 0)


def tighten_bar(bar: QWidget, spacing: tuple[int, int]) -> QWidget:
    """Leave out of ``bar``, whose layout holds one row of widgets between ``spacing`` pixels
    above and below (the status bar's 3 and 2), the room its font's line has beyond
    :data:`LINE_EM`, at most that spacing; returns it.

    The row is as tall as the bar's line or its tallest widget (a button: the line and the
    button's frame), so the letters of its labels sit that much lower than an ordinary
    font's would: the bar begins that much higher, out of sight, and they are where they
    would be. No more than the spacing: a taller widget of the row would lose its edge."""
    _Tight(bar, spacing)
    return bar


class TightButton(QPushButton):
    """A push button no taller than its letters need: the room its font's line has beyond
    :data:`LINE_EM` (:func:`line_room`) is left out of its size hints. The text is drawn
    centred as before, so its letters keep the room the button's frame leaves around them
    (a menu bar is as tall as the button in its corner)."""

    def sizeHint(self) -> QSize:
        return self._less_room(super().sizeHint())

    def minimumSizeHint(self) -> QSize:
        return self._less_room(super().minimumSizeHint())

    def _less_room(self, size: QSize) -> QSize:
        top, bottom = line_room(self)
        return QSize(size.width(), size.height() - top - bottom)
