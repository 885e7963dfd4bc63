"""A pane's key ("[ ] window ▀ clipped ┆ zero point │ code grid") in one of two lengths.

The key in full is about 400 px at 11 pt, which with the detail beside it set each pane's
minimum width, and with two panes side by side the window's: on a machine whose fonts are a
little wider the window could no longer be made 1280 px wide. The label asks only for the
room of its short form (the same swatches, the grid's name in one word) and shows the full
form whenever the pane is wide enough for it; the tooltip always explains every mark.
"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel, QSizePolicy


class KeyLabel(QLabel):
    """A rich-text label with a full and a short text; it needs the short one's width."""

    def __init__(self) -> None:
        super().__init__("")
        self._full = self._short = ""
        self._widths = (0, 0)
        self._measured = ""  # the font (its key) the widths were measured in
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)

    def set_texts(self, full: str, short: str) -> None:
        """Both forms (HTML); the one shown follows the label's width."""
        if (full, short) == (self._full, self._short):
            return
        self._full, self._short = full, short
        self._measure()

    def _measure(self) -> None:
        self._measured = self.font().key()
        self._widths = (_html_width(self._full, self), _html_width(self._short, self))
        self.updateGeometry()
        self._choose()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if (event.type() in (event.Type.FontChange, event.Type.StyleChange) and self._full
                and self.font().key() != self._measured):
            # a theme or presentation font changes both widths; a restyle that leaves the
            # font as it was (each theme change sends a style change too) changes neither
            self._measure()

    def _choose(self) -> None:
        text = self._full if self.contentsRect().width() >= self._widths[0] else self._short
        if self.text() != text:
            self.setText(text)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._choose()

    def shown_width(self) -> int:
        """Pixels the text on show needs (the size hint is the full form's, which the label
        asks for and does not always get)."""
        return self._widths[0] if self.text() == self._full else self._widths[1]

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(self._widths[0] + self._margins(), hint.height())

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(self._widths[1] + self._margins(), hint.height())

    def _margins(self) -> int:
        m = self.contentsMargins()
        return m.left() + m.right() + 2 * self.margin()


def _html_width(html: str, label: QLabel) -> int:
    """Pixels ``html`` takes on one line in ``label``'s font (as QLabel lays it out)."""
    doc = QTextDocument()
    doc.setDocumentMargin(0)
    doc.setDefaultFont(label.font())
    doc.setHtml(html)
    return int(doc.idealWidth()) + 1
