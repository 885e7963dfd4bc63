"""The objects under a widget, found without tying Qt's own objects to Python.

PySide's ``QObject.findChildren`` makes every object it returns a child of the caller's Python
wrapper, and ``QLayout.itemAt`` makes each layout item's wrapper a child of its layout's: the
wrappers of Qt's internal objects (a status bar's box layout and its spacers, a spin box's line
edit) then live as long as the window's. Qt deletes and rebuilds some of those on its own -- a
status bar rebuilds its layout whenever a widget is added to it -- and PySide cannot learn that a
layout item (not a QObject) is gone: when the allocator hands its address to a new object,
PySide returns the old wrapper for it. pyqtgraph, building a plot, then met a ``QWidgetItem``
among a widget's children and failed. ``QObject.children()`` returns wrappers nothing keeps, so
the walk here drops them as it goes, and layouts are read through ``indexOf`` and
``getWidgetPosition``, which take widgets and make no item wrappers.
"""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFormLayout, QLayout, QWidget

T = TypeVar("T", bound=QObject)


def descendants(root: QObject, kind: type[T], name: str | None = None) -> list[T]:
    """Every object of ``kind`` under ``root`` (not ``root`` itself), in ``findChildren``'s
    order (depth first, each object before its children), optionally only those named
    ``name``."""
    found: list[T] = []
    stack = list(reversed(root.children()))
    while stack:
        obj = stack.pop()
        if isinstance(obj, kind) and (name is None or obj.objectName() == name):
            found.append(obj)
        stack.extend(reversed(obj.children()))
    return found


def layouts(owner: QWidget) -> list[QLayout]:
    """``owner``'s layout and the layouts nested in it, outermost first."""
    top = owner.layout()
    return [] if top is None else [top, *descendants(top, QLayout)]


def laid_out(layout: QLayout, owner: QWidget) -> list[QWidget]:
    """The widgets ``layout`` places directly (not through a nested layout), in its order;
    ``owner`` is the widget the layout belongs to (all of them are its children)."""
    placed = [(layout.indexOf(w), w) for w in owner.children() if isinstance(w, QWidget)]
    return [w for index, w in sorted((p for p in placed if p[0] >= 0), key=lambda p: p[0])]


def form_rows(form: QFormLayout, owner: QWidget) -> list[tuple[QWidget | None, QWidget | None]]:
    """The (label, field) widgets of each row of ``form`` that has a widget in either place."""
    rows: dict[int, dict[QFormLayout.ItemRole, QWidget]] = {}
    for w in owner.children():
        if isinstance(w, QWidget):
            row, role = form.getWidgetPosition(w)
            if row >= 0:
                rows.setdefault(row, {})[role] = w
    return [(rows[r].get(QFormLayout.ItemRole.LabelRole),
             rows[r].get(QFormLayout.ItemRole.FieldRole)) for r in sorted(rows)]
