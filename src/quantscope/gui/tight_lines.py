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
"""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QMargins, QObject
from PySide6.QtGui import QFontInfo, QFontMetricsF
from PySide6.QtWidgets import QLabel

from quantscope.gui.descendants import descendants

#: The tallest line a label keeps, in ems of its font (common sans faces' lines are 1.15-1.17
#: em: they are untouched).
LINE_EM = 1.2
#: Letters whose extent a line must hold: capitals, digits, descenders, brackets, bars and
#: the signs the panes' numbers use (not accented capitals: the labels this is for have none).
INK_PROBE = "0123456789AMQbdfghjklpqy|()[]%…−+/"


def line_room(label: QLabel) -> tuple[int, int]:
    """(top, bottom): pixels of ``label``'s font's line left out above and below its letters
    (0, 0 where the line is no taller than :data:`LINE_EM` em)."""
    font = label.font()
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
    """Keeps a label's contents margins beyond its own (frame, style sheet padding) at
    :func:`line_room`, again whenever its font changes (see :func:`tighten`)."""

    def __init__(self, label: QLabel) -> None:
        super().__init__(label)
        for child in descendants(label, _Tight):  # one per label
            if child is not self:
                child.setParent(None)
                child.deleteLater()
        self.trim = (0, 0)
        label.installEventFilter(self)
        self.apply(label)

    def apply(self, label: QLabel) -> None:
        trim = line_room(label)
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


def tighten(label: QLabel) -> QLabel:
    """Keep one-line ``label`` no taller than its letters need (see the module docstring);
    returns it."""
    _Tight(label)
    return label
