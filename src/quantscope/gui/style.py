"""The window's base look (a white palette, an 11 pt font) and the helpers that keep labels'
room steady as fonts change; the style sheet itself is the theme's
(:func:`quantscope.gui.theme.stylesheet`).
"""

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QBoxLayout, QLabel, QSizePolicy

from quantscope.gui.descendants import descendants
from quantscope.gui.tight_lines import line_pitch, trimmed


def light_palette(base: QPalette) -> QPalette:
    """White windows and bases, near-black text: the projector-friendly default."""
    pal = QPalette(base)
    for role, color in ((QPalette.ColorRole.Window, "#ffffff"),
                        (QPalette.ColorRole.Base, "#ffffff"),
                        (QPalette.ColorRole.AlternateBase, "#f4f6f9"),
                        (QPalette.ColorRole.WindowText, "#1a1a1a"),
                        (QPalette.ColorRole.Text, "#1a1a1a"),
                        (QPalette.ColorRole.Button, "#f4f6f9"),
                        (QPalette.ColorRole.ButtonText, "#1a1a1a")):
        pal.setColor(role, QColor(color))
    return pal


def base_font(base: QFont) -> QFont:
    """The window's font at 11 pt (readable from the back of a room)."""
    font = QFont(base)
    font.setPointSize(11)
    return font


class _Reserved(QObject):
    """Keeps a label's minimum height at ``lines`` lines, or its minimum width at the width of
    ``template``, in its own font (see :func:`reserve_lines`, :func:`reserve_width`), again
    whenever a style sheet or theme changes that font."""

    def __init__(self, label: QLabel, lines: float | None = None,
                 template: str | None = None, slack: float = 0.5) -> None:
        super().__init__(label)
        self.lines, self.template, self.slack = lines, template, slack
        for child in descendants(label, _Reserved):  # one reservation of each kind
            if child is not self and (child.lines is None) == (lines is None):
                # it filters the label's events until deleted: the old reservation would be
                # applied after the new one on the next font change (a talk's one-line
                # headline kept the room of two)
                label.removeEventFilter(child)
                child.setParent(None)
                child.deleteLater()
        label.installEventFilter(self)
        self.apply(label)

    def apply(self, label: QLabel) -> None:
        metrics = label.fontMetrics()
        if self.lines is not None:
            spacing = metrics.lineSpacing()
            pitch = line_pitch(label)  # the spacing, less the room of a tightened line
            top, bottom = trimmed(label)  # a tightened label's first and last lines
            label.setMinimumHeight(int((self.lines - 1 + self.slack) * pitch) + spacing
                                   - top - bottom)
        else:
            label.setMinimumWidth(metrics.horizontalAdvance(self.template))

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange,
                            QEvent.Type.Polish):
            self.apply(obj)
        return False


def reserve_lines(label: QLabel, lines: float, *, slack: float = 0.5) -> None:
    """Give a word-wrapped ``label`` room for ``lines`` lines whatever it says.

    A label whose text wraps to a different number of lines resizes the plots beside it, and
    a pyqtgraph resize regenerates every axis and repaints the plot: 100-200 ms of GUI thread
    for a caption that went from one line to two. The reservation follows the label's own
    font, which its style sheet may set after construction, plus ``slack`` lines for the
    margins (0 where every pixel of height counts). Set ``lines`` again by calling this
    again."""
    _Reserved(label, lines=lines, slack=slack)


def reserve_width(label: QLabel, template: str) -> None:
    """Give ``label`` the width of ``template`` and make its text irrelevant to the layout.

    A label sized by its text moves its grid's columns whenever a number gets a digit longer
    or shorter, and a pane whose minimum width passes its width resizes the four plots: two
    full window repaints, ~90 ms each at 16M, on a manual-clip step. Called with the widest
    text so far, a column widens at most a few times a session and never shrinks back."""
    policy = label.sizePolicy()
    policy.setHorizontalPolicy(QSizePolicy.Policy.Ignored)
    label.setSizePolicy(policy)
    _Reserved(label, template=template)


class _SelectableOnHover(QObject):
    """See :func:`selectable_on_hover`."""

    def __init__(self, label: QLabel) -> None:
        super().__init__(label)
        label.installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == QEvent.Type.Enter:
            obj.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        elif ((kind == QEvent.Type.Leave and not obj.hasSelectedText())
              or (kind == QEvent.Type.FocusOut and not obj.underMouse())):
            obj.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
        return False


def selectable_on_hover(label: QLabel) -> None:
    """Let the mouse select and copy ``label``'s text, but only while it is over the label (or
    a selection is kept). A selectable label lays out and paints its text through a text
    document: for the panes' 44 numbers that was ~11 ms of GUI thread per settings change,
    a quarter of all the window's work for it."""
    label.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
    _SelectableOnHover(label)


def summary_label(layout: QBoxLayout, lines: float) -> QLabel:
    """A view's one-paragraph summary above its plot: word-wrapped, styled as a caption, with
    room for ``lines`` lines (:func:`reserve_lines`), so "computing…" and back never resize
    the plot below it."""
    label = QLabel("")
    label.setObjectName("viewCaption")
    label.setWordWrap(True)
    layout.addWidget(label)
    reserve_lines(label, lines)
    return label
