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
    QTextLayout,
)
from PySide6.QtWidgets import QLabel

from quantscope.gui.caption_label import CaptionLabel
from quantscope.gui.style import reserve_lines
from quantscope.gui.tight_lines import INK_PROBE, LINE_EM, line_pitch, tighten, trimmed

TEXT = "Ag|(0.15) jpq 53 of 255 …"


def _label(font: QFont, qtbot, tight: bool = True, sheet: str = "",
           label: QLabel | None = None) -> QLabel:
    label = label if label is not None else QLabel(TEXT)
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


#: A caption of two clauses: broken after the colon at the test's width.
CAPTION = "12 values up to 24.8 stretch the window (jpq|): 99% of values share 9 of 255 codes"


def _ink_bands(label: QLabel) -> list[tuple[int, list[tuple[int, ...]]]]:
    """(first row, rows) of each run of inked rows of the drawn label: its lines' letters."""
    image = label.grab().toImage()
    rows = [tuple(image.pixelColor(x, y).lightness() for x in range(image.width()))
            for y in range(image.height())]
    bands: list[tuple[int, list[tuple[int, ...]]]] = []
    for y, row in enumerate(rows):
        if min(row) < 250:
            if bands and bands[-1][0] + len(bands[-1][1]) == y:
                bands[-1][1].append(row)
            else:
                bands.append((y, [row]))
    return bands


def _caption(font: QFont, qtbot, tight: bool) -> CaptionLabel:
    label = _label(font, qtbot, tight=False, label=CaptionLabel(2))
    if tight:
        tighten(label, every_line=True)
    label.setText(CAPTION)
    width = round(QFontMetricsF(font).horizontalAdvance(CAPTION) * 0.6)
    label.resize(width, label.heightForWidth(width))
    return label


@pytest.mark.parametrize("face", ["tall lines", "fixed", "default"])
@pytest.mark.parametrize("points", [11, 15, 28])
def test_every_line_of_a_tightened_caption_keeps_its_letters(face, points, qtbot):
    """A caption whose every line is tightened draws the same two lines as one drawn at its
    font's full line spacing, pixel for pixel, each line only the room its font's line has
    beyond its letters closer to the one above: the tall face's lines a pitch of their
    letters' room apart, the ordinary faces exactly as before."""
    font = QFont(_faces()[face])
    font.setPointSize(points)
    tight, plain = _caption(font, qtbot, True), _caption(font, qtbot, False)
    assert tight.shown_text() == plain.shown_text() and tight.shown_text().count("\n") == 1
    spacing = QFontMetrics(font).lineSpacing()
    top, bottom = trimmed(tight)
    pitch = line_pitch(tight)
    assert tight.height() == pitch + spacing - top - bottom
    assert plain.height() == 2 * spacing
    metrics = QFontMetricsF(font)
    room = max(LINE_EM * QFontInfo(font).pixelSize(),
               metrics.tightBoundingRect(INK_PROBE).height() + 2)
    tight_bands, plain_bands = _ink_bands(tight), _ink_bands(plain)
    assert len(tight_bands) == len(plain_bands) == 2  # two lines, apart
    for (_, a), (_, b) in zip(tight_bands, plain_bands, strict=True):
        assert a == b  # each line's letters whole, the same size
    (first, _), (second, rows) = tight_bands
    assert first > 0 and second + len(rows) < tight.height()  # inside the label, not cut
    if metrics.height() > room + 1:  # a tall face: each line in its letters' room
        ink = metrics.tightBoundingRect(INK_PROBE).height()
        assert ink + 2 <= pitch <= math.ceil(room) + 1  # a row of air above and below
        assert tight.height() <= plain.height() - (spacing - pitch) - top - bottom
        # the second line a pitch below the first, where Qt puts it a line's height below
        layout = QTextLayout(CAPTION, font)
        layout.beginLayout()
        line = layout.createLine()
        line.setLineWidth(plain.width())
        qt_line = line.height()
        layout.endLayout()
        saved = (plain_bands[1][0] - plain_bands[0][0]) - (second - first)
        assert saved == qt_line - pitch > 0
    else:  # an ordinary face: as drawn before
        assert pitch == spacing and (top, bottom) == (0, 0)
        assert tight.grab().toImage() == plain.grab().toImage()


@pytest.mark.parametrize("face", ["tall lines", "default"])
def test_lines_reserved_for_a_tightened_caption_are_pitches(face, qtbot):
    """The room reserved for a caption's lines (and its half line of slack) counts the
    pitch its lines are drawn at; a caption that is not tightened keeps the font's spacing."""
    font = QFont(_faces()[face])
    font.setPointSize(15)
    tight, plain = _caption(font, qtbot, True), _caption(font, qtbot, False)
    reserve_lines(tight, 2)
    reserve_lines(plain, 2)
    spacing = QFontMetrics(font).lineSpacing()
    top, bottom = trimmed(tight)
    assert plain.minimumHeight() == int(2.5 * spacing)
    assert tight.minimumHeight() == int(1.5 * line_pitch(tight)) + spacing - top - bottom
    assert (tight.minimumHeight() < plain.minimumHeight()) == (face == "tall lines")
    tight.resize(tight.width(), tight.minimumHeight())
    plain.resize(plain.width(), plain.minimumHeight())
    # centred in the reservation as before, the letters whole
    assert [b for _, b in _ink_bands(tight)] == [b for _, b in _ink_bands(plain)]
