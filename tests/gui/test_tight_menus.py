"""Menu bar items and menu rows are no taller than their letters need, whatever line height
their font declares: only rows of empty line are left out, the letters drawn where they were;
a font with ordinary lines is laid out as before."""

from __future__ import annotations

import pytest
from font_sets import tall_family
from PySide6.QtCore import QRect
from PySide6.QtGui import QFont, QImage
from PySide6.QtWidgets import QMainWindow, QMenu, QMenuBar

from quantscope.gui.tight_lines import font_line_room
from quantscope.gui.tight_menus import tighten_menus

#: The window's menu rules, as its theme writes them (a style sheet draws selected rows).
SHEET = ("QMenuBar, QMenu { background: #ffffff; color: #1a1a1a; } "
         "QMenu::item:selected { background: #0b5cad; color: #ffffff; }")
ITEMS = ("&Open…", "Presentation mode (jpq|)", "Dark theme")


_windows: list[QMainWindow] = []  # kept while the test runs (qtbot closes them)


def _window(font: QFont, qtbot, tight: bool) -> tuple[QMenuBar, QMenu]:
    win = QMainWindow()
    _windows.append(win)
    qtbot.addWidget(win)
    win.setFont(font)
    win.setStyleSheet(SHEET)
    bar = win.menuBar()
    if tight:
        tighten_menus(bar)  # before the menus: those added later get the style too
    menu = bar.addMenu("&View")
    bar.addMenu("&Help").addAction("About (jpq)")
    for text in ITEMS:
        menu.addAction(text)
    menu.insertSeparator(menu.actions()[1])
    for widget in (bar, menu):
        widget.setFont(font)
    win.show()
    qtbot.waitExposed(win)
    return bar, menu


def _rows(image: QImage, rect: QRect) -> list[tuple[int, ...]]:
    return [tuple(image.pixel(x, y) for x in range(rect.left(), rect.right() + 1))
            for y in range(rect.top(), rect.bottom() + 1)]


def _item_images(widget, actions) -> list[list[tuple[int, ...]]]:
    image = widget.grab().toImage()
    return [_rows(image, widget.actionGeometry(a)) for a in actions if not a.isSeparator()]


def _faces() -> dict[str, QFont]:
    return {"tall lines": QFont(tall_family()), "default": QFont()}


@pytest.mark.parametrize("face", ["tall lines", "default"])
@pytest.mark.parametrize("points", [11, 15, 28])
def test_menu_items_leave_out_only_empty_line(face, points, qtbot):
    """Each menu bar item and menu row (a selected one included) is the style's item less
    its font's empty room above and below the letters, and shows exactly the rows of the
    full item between them: the rows left out hold no letters."""
    font = QFont(_faces()[face])
    font.setPointSize(points)
    top, bottom = font_line_room(font)
    assert (top + bottom > 0) == (face == "tall lines")
    for container in ("bar", "menu"):
        shown = {}
        for tight in (True, False):
            bar, menu = _window(font, qtbot, tight)
            widget = bar if container == "bar" else menu
            if container == "bar":
                bar.setActiveAction(bar.actions()[0])  # a highlighted item
            else:
                menu.popup(bar.mapToGlobal(bar.rect().bottomLeft()))
                qtbot.waitExposed(menu)
                menu.setActiveAction(menu.actions()[2])
            actions = [a for a in widget.actions() if not a.isSeparator()]
            shown[tight] = ([widget.actionGeometry(a).height() for a in actions],
                            _item_images(widget, actions))
            menu.hide()
        (tight_heights, tight_rows), (plain_heights, plain_rows) = shown[True], shown[False]
        assert tight_heights == [h - top - bottom for h in plain_heights], container
        above = (top + bottom) // 2  # half the rows left out above the letters, half below
        for tight_item, plain_item in zip(tight_rows, plain_rows, strict=True):
            kept = plain_item[above:above + len(tight_item)]
            assert tight_item == kept, container  # the same pixels: the letters whole
            # left out: rows without letters, one colour between the item's sides (the
            # frame of an open menu's item in the bar is drawn at them)
            for row in plain_item[:above] + plain_item[above + len(tight_item):]:
                assert len(set(row[1:-1])) == 1, container


def test_menus_added_later_and_submenus_are_tightened_too(qtbot):
    font = QFont(tall_family())
    font.setPointSize(11)
    top, bottom = font_line_room(font)
    heights = {}
    for tight in (True, False):
        bar, menu = _window(font, qtbot, tight)
        sub = menu.addMenu("Recent")  # added after the bar was tightened
        sub.addAction("one.npy")
        later = bar.addMenu("&Later")
        later.addAction("Jump")
        for m in (sub, later):
            m.setFont(font)
            m.ensurePolished()
        heights[tight] = [m.actionGeometry(m.actions()[0]).height() for m in (sub, later)]
    assert top + bottom > 0
    assert heights[True] == [h - top - bottom for h in heights[False]]
