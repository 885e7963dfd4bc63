"""Accessible names and descriptions for every control of a window.

A screen reader announces a control by its accessible name, and Qt leaves that empty for a
spin box, a combo box or a slider: a person who does not see the form hears "spin box, 8"
instead of "Bit width, 8". The controls' text already says what each is -- a button's own
text, the label of its form row, the label just before it in a row, its tool tip -- so
:func:`label_controls` gives each control without a name the first of these, and a
description from its tool tip (or, without one, where it sits: tab and group), leaving every
name or description a widget set itself alone. It is run whenever the window shows and when
views are added, so controls built later are covered too; :func:`unlabelled` lists what is
still missing (a test walks the whole window with it).

What counts as a control: a widget a person operates (buttons, boxes, sliders, text fields,
tables and lists, tab bars, plots that take the mouse), not the parts of one (a spin box's
line edit, a combo box's pop-up list, a scroll area's bars, a table's headers).
"""

from __future__ import annotations

import re

import shiboken6
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QFormLayout,
    QGraphicsView,
    QGroupBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QScrollBar,
    QTabBar,
    QTabWidget,
    QTextEdit,
    QWidget,
)

from quantscope.gui.descendants import descendants, form_rows, laid_out, layouts

CONTROL_TYPES = (QAbstractButton, QComboBox, QAbstractSpinBox, QAbstractSlider, QLineEdit,
                 QTabBar, QAbstractItemView, QGraphicsView, QTextEdit)
#: Parts of controls and scroll areas, never announced on their own.
PART_TYPES = (QScrollBar, QHeaderView)

_TAGS = re.compile(r"<[^>]+>")


def plain(text: str) -> str:
    """``text`` without markup, mnemonics (``&``), ellipses and surrounding blanks, on one
    line; empty when no letter or digit is left (a dash placeholder names nothing)."""
    text = _TAGS.sub(" ", text or "").replace("&&", "\0").replace("&", "").replace("\0", "&")
    text = text.replace("&nbsp;", " ").replace("…", "").replace("...", "")
    text = " ".join(text.split()).strip(" :")
    return text if any(c.isalnum() for c in text) else ""


def first_sentence(text: str) -> str:
    """The first sentence of plain ``text`` (a tool tip's opening says what the control is)."""
    text = plain(text)
    m = re.match(r"(.+?[.;:!?])(\s|$)", text)
    return (m.group(1) if m else text).rstrip(".;:")


def is_control(widget: QWidget) -> bool:
    """Whether ``widget`` is a control a person operates, not a part of one."""
    if not isinstance(widget, CONTROL_TYPES) or isinstance(widget, PART_TYPES):
        return False
    parent = widget.parentWidget()
    while parent is not None:  # inside another control: a part of it
        if isinstance(parent, CONTROL_TYPES) and not isinstance(parent, QGraphicsView):
            return False
        parent = parent.parentWidget()
    return True


def controls(root: QWidget) -> list[QWidget]:
    """Every control under ``root`` (hidden ones too: they show on another tab or mode)."""
    return [w for w in descendants(root, QWidget) if is_control(w)]


def address(widget: QWidget) -> int:
    """``widget``'s C++ address: a wrapper of one of Qt's own widgets is made afresh on each
    walk (see :mod:`quantscope.gui.descendants`), so its Python ``id`` is no key."""
    return shiboken6.getCppPointer(widget)[0]


def _row_labels(root: QWidget) -> dict[int, str]:
    """Controls named by their layout, by :func:`address`: a form row's label, a label's buddy,
    the label just before the control in a row or column, else the last label before it in
    its layout."""
    found: dict[int, str] = {}
    after: dict[int, str] = {}  # the weakest: a label a few controls back
    for label in descendants(root, QLabel):
        buddy = label.buddy()
        if buddy is not None and plain(label.text()):
            found.setdefault(address(buddy), plain(label.text()))
    for owner in [root, *descendants(root, QWidget)]:
        for layout in layouts(owner):
            if isinstance(layout, QFormLayout):
                for lw, fw in form_rows(layout, owner):
                    if isinstance(lw, QLabel) and fw is not None and plain(lw.text()):
                        for w in [fw, *descendants(fw, QWidget)]:
                            found.setdefault(address(w), plain(lw.text()))
            last: str | None = None  # a row's label names what follows it, to the next label
            just = False
            for w in laid_out(layout, owner):
                if isinstance(w, QLabel):
                    last = plain(w.text()) or None
                    just = True
                elif last is not None:
                    if just:
                        found.setdefault(address(w), last)
                    for part in [w, *descendants(w, QWidget)]:
                        after.setdefault(address(part), last)
                    just = False
    return {**after, **found}


def _context(widget: QWidget) -> str:
    """Where ``widget`` sits: the titles of its tab and group boxes, outermost first."""
    parts: list[str] = []
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QGroupBox) and plain(parent.title()):
            parts.append(plain(parent.title()))
        if isinstance(parent, QTabWidget):
            for index in range(parent.count()):
                page = parent.widget(index)
                if (page is widget or page.isAncestorOf(widget)) and plain(
                        parent.tabText(index)):
                    parts.append(f"{plain(parent.tabText(index))} tab")
        parent = parent.parentWidget()
    win = widget.window()
    if not parts and win is not None and plain(win.windowTitle()):
        parts.append(plain(win.windowTitle()).split(" — ")[0])
    return ", ".join(reversed(parts))


#: Qt's own unnamed controls, by object name.
QT_PARTS = {"qt_menubar_ext_button": "More menus"}


def _plot_title(view: QGraphicsView) -> str:
    """A plot's title, else what its axes show ("SQNR against clip threshold")."""
    items = view.scene().items() if view.scene() is not None else []
    for item in reversed(items):  # scene order: the first plots drawn first
        title = getattr(getattr(item, "titleLabel", None), "text", "")
        if plain(title):
            return plain(title)
    for item in reversed(items):
        get_axis = getattr(item, "getAxis", None)
        if callable(get_axis):
            left = plain(getattr(get_axis("left"), "labelText", "") or "")
            bottom = plain(getattr(get_axis("bottom"), "labelText", "") or "")
            if left and bottom:
                return f"plot of {left} against {bottom}"
            if left or bottom:
                return f"plot of {left or bottom}"
    return ""


def _name_of(widget: QWidget, rows: dict[int, str]) -> str:
    if widget.objectName() in QT_PARTS:
        return QT_PARTS[widget.objectName()]
    if isinstance(widget, QAbstractButton) and plain(widget.text()):
        return plain(widget.text())
    if isinstance(widget, QGroupBox) and plain(widget.title()):
        return plain(widget.title())
    if isinstance(widget, QGraphicsView):  # before its row: a label above a plot may be live
        title = _plot_title(widget)
        if title:
            where = _context(widget)
            return f"{title}, {where}" if where and where not in title else title
    if address(widget) in rows:
        return first_sentence(rows[address(widget)])
    if plain(widget.toolTip()):
        return first_sentence(widget.toolTip())
    if isinstance(widget, QLineEdit) and plain(widget.placeholderText()):
        return plain(widget.placeholderText())
    if isinstance(widget, QTabBar):
        tabs = [plain(widget.tabText(i)) for i in range(widget.count())]
        return "Tabs: " + ", ".join(t for t in tabs if t) if any(tabs) else "Tabs"
    return _context(widget).split(", ")[-1]  # the innermost group or tab it fills


def _description_of(widget: QWidget, name: str) -> str:
    tip = plain(widget.toolTip())
    if tip and tip != name:
        return tip
    if plain(widget.whatsThis()):
        return plain(widget.whatsThis())
    where = _context(widget)
    text = f"{name}, in {where}" if where and where not in name else name
    if isinstance(widget, QComboBox) and widget.count():
        shown = [plain(widget.itemText(i)) for i in range(min(widget.count(), 6))]
        more = ", …" if widget.count() > 6 else ""
        text += f"; choices: {', '.join(shown)}{more}"
    return text


def label_controls(root: QWidget) -> int:
    """Give every control under ``root`` without an accessible name or description one (see
    the module docstring); return how many widgets were changed."""
    rows = _row_labels(root)
    changed = 0
    for w in controls(root):
        name = w.accessibleName()
        if not name:
            name = _name_of(w, rows)
            if name:
                w.setAccessibleName(name)
                changed += 1
        if name and not w.accessibleDescription():
            w.setAccessibleDescription(_description_of(w, name))
            changed += 1
    return changed


def unlabelled(root: QWidget) -> list[QWidget]:
    """The controls under ``root`` still lacking a name or a description."""
    return [w for w in controls(root)
            if not w.accessibleName() or not w.accessibleDescription()]


def describe(widget: QWidget) -> str:
    """A control as a test failure names it: its class, object name and nearest text."""
    return (f"{type(widget).__name__}(objectName={widget.objectName()!r}, "
            f"in {_context(widget)!r})")
