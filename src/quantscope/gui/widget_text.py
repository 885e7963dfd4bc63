"""Text sizes and the stage's few size rules, given widget by widget instead of by the window's
style sheet.

The window's style sheet once carried every text size (``QWidget { font-size: ... }`` and a size
per object name), so presentation mode changed the sheet, and Qt re-polishes every widget
under a window whose sheet changes, equal rules or not: ~700 widgets, the largest share of a
presentation toggle's CPU time. Here a widget whose size changes gets a font of its own, and
only it is re-laid out. Under a style sheet Qt passes neither a parent's font to its children
nor the application's to a widget already polished, so every widget gets its size here (one
pass over the window, most of them already at the size); a widget made later starts from the
application's font, which the theme keeps at the window's text size.

The sheet keeps what does not change with the text size (colours, weights, borders) and the
desk's sizes of the slider handles and the tabs' padding; when presenting, sliders and tab
bars get the stage's sizes in a sheet of their own, a few small re-polishes.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QEvent
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QSlider, QTabBar, QWidget

#: Dynamic property of a widget: the sheet of its own that :func:`set_stage_sheets` gave it.
_STAGE_SHEET = "_quantscope_stage_sheet"


def set_text_sizes(widgets: Iterable[QWidget], default_pt: int, by_name: dict[str, int]) -> None:
    """Give each widget its text size: ``by_name[its object name]``, else ``default_pt``
    points; its family, weight and style stay (a fixed-width number keeps its face).
    ``widgets`` in :func:`~quantscope.gui.descendants.descendants`' order (each before its
    children)."""
    changed = []
    for w in widgets:
        pt = by_name.get(w.objectName(), default_pt)
        font = w.font()
        if font.pointSize() != pt:
            font = QFont(font)
            font.setPointSize(pt)
            w.setFont(font)
            changed.append(w)
    # Qt forgets some sizes it measured in a font only on a new style, not on a new font: a
    # combo box's minimum size (the controls' rows kept the stage's height after a talk), a
    # table header's row height, an empty label's size hint. Children first, every font set:
    # a status bar measures its height from its children's then.
    for w in reversed(changed):
        QApplication.sendEvent(w, QEvent(QEvent.Type.StyleChange))


def set_stage_sheets(widgets: Iterable[QWidget], sheets: dict[type, str]) -> None:
    """Give each slider and tab bar among ``widgets`` the sheet of its kind in ``sheets``
    (empty: none of its own, the window's rules alone). A sheet the widget was given by other
    code than this stays."""
    for w in widgets:
        kind = QSlider if isinstance(w, QSlider) else QTabBar if isinstance(w, QTabBar) else None
        if kind is None:
            continue
        sheet = sheets.get(kind, "")
        own = w.styleSheet()
        if own == sheet or (own and own != w.property(_STAGE_SHEET)):
            continue
        w.setStyleSheet(sheet)
        w.setProperty(_STAGE_SHEET, sheet)
