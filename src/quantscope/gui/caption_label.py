"""A pane's caption: one sentence, broken where its phrases end, in a fixed number of lines.

A caption says what dominates a pane's error ("12 values up to 24.8 stretch the window: 99% of
values share 9 of 255 codes"), and is read from the back of a room in two seconds. Left to
Qt's word wrap, it broke wherever the line ran out: "…share 9 / of 255 codes", "…half a /
step (0.003)". :func:`fit_caption` breaks it between its clauses when each fits on a line;
otherwise the numbers stay with the words around them, and a caption that would still need
more lines than the pane keeps room for ends in "…" (the whole sentence is the tooltip): a
caption one line taller than its room resized the pane's plots, and with them all four panes.
"""

from __future__ import annotations

import re
from itertools import pairwise

from PySide6.QtCore import QPoint, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QFontMetrics, QFontMetricsF, QPainter, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QLabel,
    QSizePolicy,
    QStyle,
    QStyleOptionComboBox,
    QStylePainter,
)

from quantscope.gui.tight_lines import draw_lines, line_pitch

#: Where a caption may break, best kind first: after a clause's colon or semicolon, then
#: after a comma (the engine's captions put their clauses between these).
CAPTION_BREAKS = ((": ", "; "), (", ",))
#: A space that keeps its two words on one line.
NBSP = "\u00a0"
#: Words a line never ends on: each belongs with the word after it ("of 255", "half a step").
_LEADING_WORDS = frozenset({"a", "an", "the", "of", "to", "at", "up", "vs", "and", "by",
                            "half", "each", "its", "one", "only", "≤", "≥", "≈", "<", ">",
                            "/"})
#: A number as captions write it: "9", "-0.003", "1,973", "0.7%", "24.8".
_NUMBER = re.compile(r"^[-+−]?\(?\d[\d.,eE+−-]*%?\)?$")
#: Punctuation that ends a clause: a line may end after it.
_CLAUSE_END = (":", ";", ",")
#: Signs that join the words either side of them ("K ≤ 105,026", "|A| ≥ 6").
_COMPARISONS = frozenset({"≤", "≥", "≈", "<", ">", "="})


def _fits_line(metrics: QFontMetricsF, text: str, width: float) -> bool:
    return metrics.horizontalAdvance(text) <= width


def line_count(metrics: QFontMetricsF, text: str, width: float) -> int:
    """Lines ``text`` takes wrapped at ``width``, as a word-wrapped label draws it."""
    rect = metrics.boundingRect(QRectF(0, 0, width, 1e6), int(Qt.TextFlag.TextWordWrap), text)
    return max(1, round(rect.height() / metrics.lineSpacing()))


def keep_phrases(text: str, *, numbers: bool = True, parenthesis: bool = True) -> str:
    """``text`` with a non-breaking space wherever a line break would split a phrase: on
    either side of a number ("share 9 of 255 codes" stays whole) unless a clause ends there,
    after a word that leads into the next ("of", "half a"), before a parenthesis or a
    comparison ("K ≤ 105,026"), and inside brackets and parentheses ("[197, 1536]").
    ``parenthesis=False`` lets a line end before a parenthesis, and ``numbers=False`` leaves
    out the first rule, for lines too narrow for a whole phrase ("589,824 offline" / "(W
    column sums)", "0 of 302,592" / "outputs")."""
    words = text.split(" ")
    out = [words[0]]
    depth = _bracket_depth(0, words[0])
    for prev, word in pairwise(words):
        bare = word.rstrip(":;,")
        glue = depth > 0 or word in _COMPARISONS or (not prev.endswith(_CLAUSE_END) and (
            prev.lower() in _LEADING_WORDS or (parenthesis and word.startswith("("))
            or (numbers and (_NUMBER.match(prev) is not None
                            or _NUMBER.match(bare) is not None))))
        out.append((NBSP if glue else " ") + word)
        depth = _bracket_depth(depth, word)
    return "".join(out)


def _bracket_depth(depth: int, word: str) -> int:
    """How many brackets and parentheses are open after ``word``, ``depth`` being open
    before it."""
    return max(0, depth + word.count("[") + word.count("(") - word.count("]")
               - word.count(")"))


def fit_caption(text: str, metrics: QFontMetricsF, width: float, lines: int = 2, *,
                broken: bool = False) -> str:
    """``text`` as it is drawn in ``lines`` lines ``width`` wide (see the module docstring):
    whole when it fits on one line; else broken after the clause whose two halves each fit a
    line (the more even split of the best kind of break); else wrapped between phrases; and
    if that needs more than ``lines`` lines, its last words make way for "…".

    ``broken``: broken after its clause even where it fits on one line (as the caption beside
    it is), if it has such a clause; else whole."""
    if width <= 0:
        return text
    if _fits_line(metrics, text, width):
        if broken and lines >= 2:
            split = _clause_split(text, metrics, width)
            return split if split is not None else text
        return text
    if lines >= 2:
        split = _clause_split(text, metrics, width)
        if split is not None:
            return split
    kept = keep_phrases(text)
    if line_count(metrics, kept, width) <= lines:
        return kept
    words = text.split(" ")
    for n in range(len(words) - 1, 0, -1):
        short = keep_phrases(" ".join(words[:n]).rstrip(":;,")) + " …"
        if line_count(metrics, short, width) <= lines:
            return short
    return metrics.elidedText(text, Qt.TextElideMode.ElideRight, width)


def _clause_split(text: str, metrics: QFontMetricsF, width: float) -> str | None:
    """``text`` broken in two lines after a clause, both halves fitting ``width``: the most
    even split of the best kind of break (:data:`CAPTION_BREAKS`); None when there is none."""
    for kind in CAPTION_BREAKS:
        best: tuple[float, str] | None = None
        for sep in kind:
            start = text.find(sep)
            while start >= 0:
                head, tail = text[:start + len(sep)].rstrip(), text[start + len(sep):]
                if _fits_line(metrics, head, width) and _fits_line(metrics, tail, width):
                    longer = max(metrics.horizontalAdvance(head),
                                 metrics.horizontalAdvance(tail))
                    if best is None or longer < best[0]:
                        best = (longer, f"{head}\n{tail}")
                start = text.find(sep, start + 1)
        if best is not None:
            return best[1]
    return None


class CaptionLabel(QLabel):
    """A label that shows its sentence as :func:`fit_caption` lays it out.

    ``text()`` stays the sentence (what tests, exports and screen readers get); only the
    painting breaks it. The label's height is what it reserves for ``lines`` lines
    (:func:`quantscope.gui.style.reserve_lines`) whatever it says, and its width is the
    pane's: a new caption never moves the plots above it. Its lines are drawn with
    :func:`quantscope.gui.tight_lines.draw_lines`: tightened with ``every_line``, a font's
    tall lines take only the room their letters need.
    """

    def __init__(self, lines: int = 2, parent=None) -> None:
        super().__init__("", parent)
        self.lines = lines
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(True)  # its height follows its width (heightForWidth)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._fitted: tuple[tuple, str] = ((), "")
        #: Captions that may stand beside this one (see :func:`pair_captions`).
        self.partners: list[CaptionLabel] = []

    def fit(self, metrics: QFontMetricsF, width: float) -> str:
        """The text as drawn ``width`` wide: the caption as :func:`fit_caption` breaks it."""
        return fit_caption(self.text(), metrics, width, self.lines)

    def setText(self, text: str) -> None:
        """Set the sentence; the captions beside it repaint too (their lines follow it)."""
        if text == self.text():
            return
        super().setText(text)
        for partner in self.partners:
            partner.update()

    def _alone_lines(self) -> int:
        """Lines the caption takes at its present width, ignoring the captions beside it."""
        metrics = QFontMetricsF(self.font())
        width = float(self.contentsRect().width())
        return line_count(metrics, self.fit(metrics, width), width)

    def _beside(self) -> list[CaptionLabel]:
        """The partners shown on the same row as this caption (their tops level with it)."""
        if not self.isVisible():
            return []
        top = self.mapToGlobal(QPoint(0, 0)).y()
        return [p for p in self.partners if p.isVisible() and p.text()
                and p.mapToGlobal(QPoint(0, 0)).y() == top]

    def heightForWidth(self, width: int) -> int:
        """The height of the text as drawn ``width`` wide (at most ``lines`` lines): QLabel's
        own is that of the sentence wrapped anywhere, a line more than is drawn."""
        margins = self.contentsMargins()
        room = width - margins.left() - margins.right()
        metrics = QFontMetricsF(self.font())
        text = self.fit(metrics, room)
        pitch = line_pitch(self)
        if pitch < metrics.lineSpacing():  # its lines tightened (draw_lines)
            lines = line_count(metrics, text, max(room, 1))
            drawn = (lines - 1) * pitch + QFontMetrics(self.font()).lineSpacing()
            return drawn + margins.top() + margins.bottom()
        rect = metrics.boundingRect(QRectF(0, 0, max(room, 1), 1e6),
                                    int(Qt.TextFlag.TextWordWrap), text)
        return int(rect.height() + 0.999) + margins.top() + margins.bottom()

    def shown_text(self) -> str:
        """The text as drawn at the label's present width and font: in as many lines as the
        captions beside it take, where its clauses allow (a pair of captions whose lengths
        differ by a character read alike, not one on a line and its twin on two)."""
        width = float(self.contentsRect().width())
        beside = self._beside()
        broken = self.lines >= 2 and any(p._alone_lines() >= 2 for p in beside)
        key = (self.text(), width, self.font().key(), self.lines, broken)
        if self._fitted[0] != key:
            metrics = QFontMetricsF(self.font())
            text = (fit_caption(self.text(), metrics, width, self.lines, broken=True)
                    if broken and type(self).fit is CaptionLabel.fit
                    else self.fit(metrics, width))
            self._fitted = (key, text)
        return self._fitted[1]

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        try:
            self.drawFrame(painter)  # the style sheet's background, as QLabel paints it
            flags = int(self.alignment()) | int(Qt.TextFlag.TextWordWrap)
            draw_lines(painter, self, self.contentsRect(), flags, self.shown_text())
        finally:
            painter.end()


def pair_captions(labels: list[CaptionLabel]) -> None:
    """Make ``labels`` partners: those shown on one row take equal lines where their clauses
    allow (:meth:`CaptionLabel.shown_text`)."""
    for label in labels:
        label.partners = [other for other in labels if other is not label]


class PhraseLabel(CaptionLabel):
    """A label for text whose lines the engine broke ("used [-82,178, 92,707]\nof
    ±2,147,483,647"): each line shown whole where it fits, else broken between its phrases
    (:func:`keep_phrases`) into as many lines as it takes. Its height is that of the text as
    drawn, so a column of these lays out as it reads."""

    def __init__(self, parent=None) -> None:
        super().__init__(lines=1, parent=parent)

    def fit(self, metrics: QFontMetricsF, width: float) -> str:
        if width <= 0:
            return self.text()
        return "\n".join(_phrased(line, metrics, width) for line in self.text().split("\n"))


def _phrased(line: str, metrics: QFontMetricsF, width: float) -> str:
    """``line`` whole when it fits ``width``; else with its phrases kept together, or, where
    a number's phrase alone is wider than that, only its brackets and comparisons; else as
    it is (wrapped between any words)."""
    if _fits_line(metrics, line, width):
        return line
    for numbers, parenthesis in ((True, True), (True, False), (False, False)):
        kept = keep_phrases(line, numbers=numbers, parenthesis=parenthesis)
        if all(_fits_line(metrics, chunk, width) for chunk in kept.split(" ")):
            return kept
    return line


class CaptionCombo(QComboBox):
    """A combo box that shows its current choice in up to ``lines`` lines, broken as
    :func:`fit_caption` breaks a caption.

    The channel axis's rule is a sentence the engine writes ('name "gelu_activations" says
    activation', "2-D: taken as a weight [out, in]"): on one line in a side panel it read
    'name "gelu_activat'. ``currentText()`` stays the sentence; the box is as tall as
    ``lines`` lines of it, whatever it says, so a new tensor never moves the rows below.
    """

    def __init__(self, lines: int = 2, parent=None) -> None:
        super().__init__(parent)
        self.lines = lines

    def _field(self) -> tuple[QStyleOptionComboBox, QRect]:
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        field = self.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                            QStyle.SubControl.SC_ComboBoxEditField, self)
        return option, field

    def shown_text(self) -> str:
        """The current choice as drawn at the box's present width and font."""
        _, field = self._field()
        return fit_caption(self.currentText(), QFontMetricsF(self.font()), field.width(),
                           self.lines)

    def _extra_height(self) -> int:
        return round(QFontMetricsF(self.font()).lineSpacing() * (self.lines - 1))

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(hint.width(), hint.height() + self._extra_height())

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(hint.width(), hint.height() + self._extra_height())

    def paintEvent(self, event) -> None:
        painter = QStylePainter(self)
        option, field = self._field()
        option.currentText = ""  # the frame and arrow as Qt draws them; the text below
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, option)
        flags = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter) \
            | int(Qt.TextFlag.TextWordWrap)
        painter.drawItemText(field, flags, self.palette(), self.isEnabled(), self.shown_text(),
                             QPalette.ColorRole.ButtonText)
