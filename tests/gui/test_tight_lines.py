"""A tightened label is no taller than its letters need, whatever line height its font
declares, and its letters are whole; a font with ordinary lines is laid out as before."""

from __future__ import annotations

import math

import pytest
from font_sets import TALL_LINE_EM, tall_family
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QFontInfo,
    QFontMetrics,
    QFontMetricsF,
    QPalette,
)
from PySide6.QtWidgets import QLabel

from quantscope.gui.style import reserve_lines
from quantscope.gui.tight_lines import INK_PROBE, LINE_EM, tighten, trimmed

TEXT = "Ag|(0.15) jpq 53 of 255 …"


def _label(font: QFont, qtbot, tight: bool = True, sheet: str = "") -> QLabel:
    label = QLabel(TEXT)
    label.setFont(font)
    label.setStyleSheet(sheet)
    pal = label.palette()  # black on white: ink is any dark pixel
    pal.setColor(QPalette.ColorRole.Window, QColor("white"))
    pal.setColor(QPalette.ColorRole.WindowText, QColor("black"))
    label.setPalette(pal)
    label.setAutoFillBackground(True)
    if tight:
        tighten(label)
    qtbot.addWidget(label)
    label.resize(label.sizeHint())
    label.show()
    return label


def _ink(label: QLabel) -> list[tuple[int, ...]]:
    """The label's drawn rows from its first row of ink to its last (lightness per pixel)."""
    image = label.grab().toImage()
    rows = [tuple(image.pixelColor(x, y).lightness() for x in range(image.width()))
            for y in range(image.height())]
    inked = [y for y, row in enumerate(rows) if min(row) < 160]
    return rows[inked[0]:inked[-1] + 1] if inked else []


def _faces():
    tall = QFont(tall_family())
    fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    return {"tall lines": tall, "fixed": fixed, "default": QFont()}


@pytest.mark.parametrize("face", ["tall lines", "fixed", "default"])
@pytest.mark.parametrize("points", [11, 15, 28])
def test_a_tightened_line_holds_its_letters_and_no_more(face, points, qtbot):
    font = QFont(_faces()[face])
    font.setPointSize(points)
    label = _label(font, qtbot)
    metrics = QFontMetricsF(font)
    ink = metrics.tightBoundingRect(INK_PROBE)
    room = max(LINE_EM * QFontInfo(font).pixelSize(), ink.height() + 2)
    plain = _label(font, qtbot, tight=False)
    # no taller than the letters need, and never taller than without (an ordinary face)
    assert label.height() <= plain.height()
    if metrics.height() > room + 1:
        assert label.height() <= math.ceil(room) + 1
    # the letters whole: the same pixels as the label drawn at its font's full line height
    assert _ink(label) == _ink(plain) != []


def test_the_tall_face_is_tall_and_is_made_ordinary():
    font = QFont(tall_family())
    font.setPointSize(11)
    px = QFontInfo(font).pixelSize()
    assert QFontMetricsF(font).height() == pytest.approx(TALL_LINE_EM * px, abs=1.5)
    plain = QLabel(TEXT)
    plain.setFont(font)
    tight = tighten(QLabel(TEXT))
    tight.setFont(font)
    saved = plain.sizeHint().height() - tight.sizeHint().height()
    assert saved >= (TALL_LINE_EM - LINE_EM) * px - 1


def test_a_font_with_ordinary_lines_is_laid_out_as_before(qtbot):
    for points in (11, 15, 28):
        font = QFont("DejaVu Sans")  # lines of 1.16 em (the tall face is made from it)
        font.setPointSize(points)
        assert QFontInfo(font).family() == "DejaVu Sans"
        assert QFontMetricsF(font).height() <= LINE_EM * QFontInfo(font).pixelSize()
        plain, tight = _label(font, qtbot, tight=False), _label(font, qtbot)
        assert tight.contentsMargins() == plain.contentsMargins()
        assert tight.sizeHint() == plain.sizeHint()


def test_padding_and_font_changes_keep_the_trim_right(qtbot):
    """A style sheet's padding stays the label's own (the trim comes on top of it), and a new
    font or sheet trims again for the new line."""
    font = QFont(tall_family())
    font.setPointSize(11)
    plain = _label(font, qtbot, tight=False, sheet="QLabel { padding: 3px 2px; }")
    label = _label(font, qtbot, sheet="QLabel { padding: 3px 2px; }")
    trim_11 = plain.contentsMargins().top() - label.contentsMargins().top() + \
        plain.contentsMargins().bottom() - label.contentsMargins().bottom()
    assert trim_11 > 0
    assert label.contentsMargins().left() == plain.contentsMargins().left() == 2
    font.setPointSize(22)
    label.setFont(font)
    plain.setFont(font)
    trim_22 = plain.contentsMargins().top() - label.contentsMargins().top() + \
        plain.contentsMargins().bottom() - label.contentsMargins().bottom()
    assert trim_22 > trim_11  # the bigger letters' line has more room to leave out
    label.setStyleSheet("QLabel { padding: 6px 2px; }")
    plain.setStyleSheet("QLabel { padding: 6px 2px; }")
    again = plain.contentsMargins().top() - label.contentsMargins().top() + \
        plain.contentsMargins().bottom() - label.contentsMargins().bottom()
    assert again == trim_22
    label.resize(label.sizeHint())
    plain.resize(plain.sizeHint())
    assert _ink(label) == _ink(plain) != []


def test_a_reservation_made_again_holds_after_a_font_change(qtbot):
    """The latest reservation holds: the one it replaced once went on filtering the label's
    events until deleted, and a font change in the same turn (a talk's theme) applied the old
    count after the new one (a talk's headline kept the room of two lines)."""
    label = QLabel("Ag")
    label.setWordWrap(True)
    qtbot.addWidget(label)
    reserve_lines(label, 2, slack=0)
    reserve_lines(label, 1, slack=0)
    font = QFont(label.font())
    font.setPointSize(20)
    label.setFont(font)  # before the replaced reservation's deletion is processed
    assert label.minimumHeight() == QFontMetrics(font).lineSpacing()


@pytest.mark.parametrize("face", ["tall lines", "default"])
def test_a_tightened_reservation_keeps_its_lines_less_the_trim(face, qtbot):
    """Lines reserved for a tightened label are its lines less what the trim leaves out above
    the first and below the last: two lines of the tall face take what two lines of letters
    need and their spacing, and the text drawn in that room is whole."""
    font = QFont(_faces()[face])
    font.setPointSize(15)
    label = _label(font, qtbot)
    label.setWordWrap(True)
    label.setText(f"{TEXT}\n{TEXT}")
    plain = _label(font, qtbot, tight=False)
    plain.setWordWrap(True)
    plain.setText(label.text())
    reserve_lines(label, 2, slack=0)
    reserve_lines(plain, 2, slack=0)
    top, bottom = trimmed(label)
    spacing = QFontMetrics(font).lineSpacing()
    assert label.minimumHeight() == 2 * spacing - top - bottom
    assert plain.minimumHeight() == 2 * spacing
    assert (top + bottom > 0) == (face == "tall lines")
    label.resize(label.width(), label.minimumHeight())
    plain.resize(plain.width(), plain.minimumHeight())
    assert _ink(label) == _ink(plain) != []
