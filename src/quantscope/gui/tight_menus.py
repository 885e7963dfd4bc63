"""Menus whose items are no taller than their letters need, whatever the font says a line is.

The menu bar's items and a menu's rows are as tall as the style makes them around the font's
line: with a face of tall lines (Noto Sans CJK, 1.45 em) the menu bar's items were 27 rows
where the default face's are 23 (the bar, whose corner button is 26, grew with them), and
each row of a menu 29 instead of 26. :class:`TightMenuStyle` leaves out of each item the
room :func:`quantscope.gui.tight_lines.font_line_room` finds beyond its letters, as the
window's labels do, and draws the item as the style would at its full height, half the rows
left out cut away above its letters and half below (a style sheet that draws selected rows
itself centres their text so): the letters are drawn whole, only empty rows are gone. A face
whose lines are no taller than
:data:`quantscope.gui.tight_lines.LINE_EM` leaves nothing out (the default faces).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import (
    QMenu,
    QMenuBar,
    QProxyStyle,
    QStyle,
    QStyleOption,
    QStyleOptionMenuItem,
    QWidget,
)

from quantscope.gui.tight_lines import font_line_room

_SIZES = (QStyle.ContentsType.CT_MenuBarItem, QStyle.ContentsType.CT_MenuItem)
_ITEMS = (QStyle.ControlElement.CE_MenuBarItem, QStyle.ControlElement.CE_MenuItem)
#: The property that marks a menu already given the style.
_WATCHED = "tightMenus"


def _room(option: QStyleOption, widget: QWidget | None) -> tuple[int, int]:
    """(top, bottom) to leave out of the item ``option`` describes: a row of text (not a
    separator, which has no line) in its action's font (a menu bar's items are drawn in the
    bar's, which their option does not carry)."""
    if not isinstance(option, QStyleOptionMenuItem) or \
            option.menuItemType == QStyleOptionMenuItem.MenuItemType.Separator:
        return 0, 0
    bar = isinstance(widget, QMenuBar)
    return font_line_room(widget.font() if bar else option.font)


class TightMenuStyle(QProxyStyle):
    """The application's style, with menu bar items and menu rows no taller than their
    letters need (see the module docstring)."""

    def sizeFromContents(self, kind: QStyle.ContentsType, option: QStyleOption, size: QSize,
                         widget: QWidget | None = None) -> QSize:
        size = super().sizeFromContents(kind, option, size, widget)
        if kind in _SIZES:
            top, bottom = _room(option, widget)
            size = QSize(size.width(), size.height() - top - bottom)
        return size

    def drawControl(self, element: QStyle.ControlElement, option: QStyleOption,
                    painter: QPainter, widget: QWidget | None = None) -> None:
        top, bottom = _room(option, widget) if element in _ITEMS else (0, 0)
        if not top and not bottom:
            super().drawControl(element, option, painter, widget)
            return
        # the item at its full height, half of what was left out above it and half below
        # (where the style sheet, drawing a selected row itself, centres its text: a row's
        # letters do not move when it is selected), and only its own rows painted
        above = (top + bottom) // 2
        full = QStyleOptionMenuItem(option)
        full.rect = option.rect.adjusted(0, -above, 0, top + bottom - above)
        painter.save()
        painter.setClipRect(option.rect, Qt.ClipOperation.IntersectClip)
        super().drawControl(element, full, painter, widget)
        painter.restore()


class _MenuWatch(QObject):
    """Gives each menu added to a menu bar (or to one of its menus) the bar's style."""

    def __init__(self, bar: QMenuBar, style: TightMenuStyle) -> None:
        super().__init__(bar)
        self.style = style
        self.watch(bar)

    def watch(self, widget: QWidget) -> None:
        widget.setStyle(self.style)
        widget.setProperty(_WATCHED, True)
        widget.installEventFilter(self)
        for action in widget.actions():
            self._watch_menu(action.menu())

    def _watch_menu(self, menu) -> None:
        if isinstance(menu, QMenu) and not menu.property(_WATCHED):
            self.watch(menu)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ActionAdded:
            self._watch_menu(event.action().menu())
        return False


def tighten_menus(bar: QMenuBar) -> QMenuBar:
    """Give ``bar`` and its menus, those added later included, :class:`TightMenuStyle`;
    returns it."""
    style = TightMenuStyle()
    style.setParent(bar)  # a widget does not own the style it is given
    _MenuWatch(bar, style)
    return bar
