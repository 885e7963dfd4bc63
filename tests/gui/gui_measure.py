"""Measurements of what the window puts on screen, for the layout and F11 tests: the pixel
size of every visible text (widgets and the text items of every plot), whether a label shows
all of its text, and a snapshot of the window's look to compare before and after."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QFontInfo, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QGraphicsTextItem,
    QGraphicsView,
    QLabel,
    QLineEdit,
    QMenu,
    QTabBar,
    QWidget,
)

TEXT_WIDGETS = (QLabel, QAbstractButton, QTabBar, QComboBox, QAbstractSpinBox, QLineEdit)


def _dpi() -> float:
    return QGuiApplication.primaryScreen().logicalDotsPerInch()


def font_px(font) -> float:
    """Pixel size a font is drawn at (point sizes converted at the screen's dpi)."""
    if font.pixelSize() > 0:
        return float(font.pixelSize())
    return float(QFontInfo(font).pixelSize())


def shown(widget: QWidget, root: QWidget) -> bool:
    """Visible on screen inside ``root`` (every ancestor shown, a non-empty size)."""
    return widget.isVisibleTo(root) and widget.isVisible() and widget.width() > 0 \
        and widget.height() > 0


def widget_texts(root: QWidget) -> list[tuple[str, float]]:
    """(description, pixel size) of every visible widget that shows text."""
    out = []
    for w in root.findChildren(QWidget):
        if not isinstance(w, TEXT_WIDGETS) or not shown(w, root):
            continue
        text = w.text() if hasattr(w, "text") and callable(w.text) else ""
        if isinstance(w, QLabel) and not text.strip():
            continue
        out.append((f"{type(w).__name__} {w.objectName()!r} {text[:40]!r}", font_px(w.font())))
    return out


def _document_px(item: QGraphicsTextItem) -> float:
    """Smallest font in a text item's document (HTML may size each run in pt or px)."""
    doc = item.document()
    sizes = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if frag.isValid() and frag.text().strip():
                f = frag.charFormat().font()
                if f.pixelSize() > 0:
                    sizes.append(float(f.pixelSize()))
                elif f.pointSizeF() > 0:
                    sizes.append(f.pointSizeF() * _dpi() / 72.0)
                else:
                    sizes.append(font_px(item.font()))
            it += 1
        block = block.next()
    return min(sizes) if sizes else float("inf")


def scene_texts(root: QWidget) -> list[tuple[str, float]]:
    """(description, pixel size) of every visible text in every visible plot under ``root``:
    text items (titles, axis labels, line labels) and the axes' tick labels."""
    out = []
    for view in root.findChildren(QGraphicsView):
        if not shown(view, root) or view.scene() is None:
            continue
        for item in view.scene().items():
            if not item.isVisible():
                continue
            if isinstance(item, QGraphicsTextItem) and item.toPlainText().strip():
                out.append((f"text {item.toPlainText()[:30]!r}", _document_px(item)))
            elif isinstance(item, pg.AxisItem) and item.style.get("showValues", True):
                font = item.style.get("tickFont")
                out.append((f"ticks of {item.orientation} axis",
                            font_px(font) if font is not None else 0.0))
    return out


def cut_labels(root: QWidget) -> list[str]:
    """Visible labels that cannot show all their text in the room they have."""
    bad = []
    for w in root.findChildren(QLabel):
        if not shown(w, root) or not w.text().strip():
            continue
        needs = getattr(w, "shown_width", None)  # a label of two lengths (KeyLabel)
        if needs is not None:
            if needs() > w.contentsRect().width() + 1:
                bad.append(f"{w.objectName()!r} {w.text()[:40]!r}: needs {needs()} px, has "
                           f"{w.contentsRect().width()}")
        elif w.wordWrap():
            if w.heightForWidth(w.width()) > w.height() + 1:
                bad.append(f"{w.objectName()!r} {w.text()[:40]!r}: needs "
                           f"{w.heightForWidth(w.width())} px of height, has {w.height()}")
        elif w.sizeHint().width() > w.width() + 1 and w.sizePolicy().horizontalPolicy() \
                != w.sizePolicy().Policy.Ignored:
            bad.append(f"{w.objectName()!r} {w.text()[:40]!r}: needs {w.sizeHint().width()} "
                       f"px, has {w.width()}")
        elif w.fontMetrics().horizontalAdvance(w.text()) > w.contentsRect().width() + 1 \
                and not w.textFormat() == w.textFormat().RichText and "<" not in w.text():
            bad.append(f"{w.objectName()!r} {w.text()[:40]!r}: text wider than the label")
    return bad


def axis_labels_cut(root: QWidget) -> list[str]:
    """Axis labels longer than the side of the plot they label (a rotated y label taller
    than its view box is cut: "log₁₀(1")."""
    bad = []
    for view in root.findChildren(QGraphicsView):
        if not shown(view, root) or view.scene() is None:
            continue
        for item in view.scene().items():
            if isinstance(item, pg.AxisItem) and item.isVisible() and item.label.isVisible():
                label = item.label.boundingRect()
                length = label.width()  # along the axis, rotated or not
                side = item.height() if item.orientation in ("left", "right") else item.width()
                if length > side + 1:
                    bad.append(f"{item.orientation} axis label {item.labelText!r}: "
                               f"{length:.0f} px on a {side:.0f} px axis")
    return bad


def _path(widget: QWidget, root: QWidget) -> str:
    """A widget's place in the tree (class, name and rank among same-class siblings per
    level): stable while widgets elsewhere are created."""
    parts = []
    w = widget
    while w is not None and w is not root:
        parent = w.parentWidget()
        same = [c for c in parent.children() if type(c) is type(w)
                and c.objectName() == w.objectName()] if parent else [w]
        parts.append(f"{type(w).__name__}:{w.objectName()}#{same.index(w)}")
        w = parent
    return "/".join(reversed(parts))


def settle(win, qtbot) -> None:
    """Paint twice: pyqtgraph sizes its axes from the text it measured while painting, and
    the plots take their final height only then (as on screen after the first frame)."""
    for _ in range(2):
        win.grab()
        qtbot.wait(10)


def look(window: QWidget) -> dict:
    """Everything F11 may change, per widget: style sheet, font, visibility, enabled state and
    the colours its palette gives its text -- plus the window's own sheet and layout sizes."""
    from PySide6.QtGui import QPalette

    out = {"window sheet": window.styleSheet(),
           "app font": font_px(QGuiApplication.font()),
           "size": (window.width(), window.height())}
    # popups (menus, combo lists) are windows of their own, made when first opened; the
    # dock's own title buttons are never shown
    widgets = [w for w in window.findChildren(QWidget) if QWidget.window(w) is window
               and not isinstance(w, QMenu) and not w.objectName().startswith("qt_dockwidget_")]
    for w in widgets:
        group = QPalette.ColorGroup.Disabled if not w.isEnabled() else QPalette.ColorGroup.Active
        out[_path(w, window)] = (
            w.styleSheet(), font_px(w.font()), w.font().bold(), w.isHidden(), w.isEnabled(),
            w.palette().color(group, QPalette.ColorRole.WindowText).name(),
            w.palette().color(group, QPalette.ColorRole.Text).name())
    splitter = getattr(window, "splitter", None)
    if splitter is not None:
        out["splitter hidden"] = [splitter.widget(i).isHidden() for i in range(splitter.count())]
    views = getattr(window, "views", None)
    if views is not None:
        out["current view"] = views.currentIndex()
    return out


def build_every_tab(window: QWidget) -> None:
    """Bring every view tab forward once, then the one shown back: a tab is built when first
    shown, and a :func:`look` taken before a talk must hold the tabs the talk will show."""
    views = window.views
    shown = views.currentIndex()
    for i in range(views.count()):
        views.setCurrentIndex(i)
    views.setCurrentIndex(shown)


def look_changes(before: dict, after: dict) -> dict:
    """``{key: (before, after)}`` for what differs between two :func:`look` snapshots."""
    return {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys()
            if before.get(k) != after.get(k)}


def rich_text_lines(label: QLabel) -> list[str]:
    """The lines a rich-text label lays its text out in, at its present width (line
    separators and no-break spaces read as plain text)."""
    from PySide6.QtGui import QTextDocument

    doc = QTextDocument()
    doc.setDefaultFont(label.font())
    doc.setDocumentMargin(0)
    doc.setHtml(label.text())
    doc.setTextWidth(label.contentsRect().width())
    doc.documentLayout().documentSize()  # lays the blocks out
    lines = []
    block = doc.begin()
    while block.isValid():
        layout = block.layout()
        for i in range(layout.lineCount()):
            line = layout.lineAt(i)
            lines.append(block.text()[line.textStart():line.textStart() + line.textLength()])
        block = block.next()
    return [line.replace("\u2028", "").replace("\u00a0", " ").strip() for line in lines]


def cut_combo_texts(boxes) -> list[tuple[str, int]]:
    """(text, field width) of each combo box whose current text is wider than its field."""
    from PySide6.QtWidgets import QStyle, QStyleOptionComboBox

    cut = []
    for box in boxes:
        option = QStyleOptionComboBox()
        option.initFrom(box)
        option.currentText = box.currentText()
        field = box.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                           QStyle.SubControl.SC_ComboBoxEditField, box)
        if box.fontMetrics().horizontalAdvance(box.currentText()) > field.width():
            cut.append((box.currentText(), field.width()))
    return cut


def project(win, qtbot, load=None) -> None:
    """Put ``win`` in presentation mode at 1280x720, as a speaker projects it (loading
    ``load`` there, if given), and wait until the resize and every pane's numbers are in."""
    win.presentation_action.setChecked(True)
    win.resize(1280, 720)
    if load is not None:
        win.load(load, pick=False)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == (1280, 720), timeout=5000)
    qtbot.waitUntil(win.all_shown, timeout=30_000)
    qtbot.wait(100)
