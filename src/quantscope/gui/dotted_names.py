"""Dotted tensor names shortened to a width without losing what tells them apart.

A checkpoint's names differ in their middle and end (``attention.self.query.weight`` beside
``attention.self.key.weight``, ``attention.output.dense.weight`` beside
``output.dense.weight``); cut in their middle, as Qt elides by default, two rows read alike
(``attention…se.weight``). Here the leading components give way first, each to its first
letter (``a.s.query.weight``, ``a.o.dense.weight``, ``o.dense.weight``): every component keeps
its place and its initial, the last ones stay whole, and layer numbers are never shortened.
Only when even that is too wide does the name lose its start, the whole-word tail kept.
:func:`fit_dotted` measures nothing (the caller says what fits); :class:`DottedNameDelegate`
draws a table's names so, at the width their column has.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

#: What stands for the part of a name that was left out.
ELLIPSIS = "…"


def _short(part: str) -> str:
    """A component as its first letter; numbers (layer and expert indices) and one-letter
    components as they are."""
    return part if part.isdigit() or len(part) <= 1 else part[0]


def initials(name: str) -> str:
    """``name`` at its shortest whole form: every component but the last as its initial."""
    parts = name.split(".")
    return ".".join([*map(_short, parts[:-1]), parts[-1]])


def fit_dotted(name: str, fits: Callable[[str], bool]) -> str:
    """``name`` as it reads in the room ``fits`` accepts: whole; else with its components
    from the first on shortened to their initials, the last component always whole; else
    that shortened name's tail after an ellipsis, from a component boundary where one fits.
    Returns the shortest form (just the ellipsis and the last component, cut by the caller's
    elision if need be) when nothing fits."""
    if fits(name):
        return name
    parts = name.split(".")
    for k in range(len(parts) - 1):
        parts[k] = _short(parts[k])
        text = ".".join(parts)
        if fits(text):
            return text
    for k in range(1, len(parts)):
        text = ELLIPSIS + ".".join(parts[k:])
        if fits(text):
            return text
    return ELLIPSIS + parts[-1]


class DottedNameDelegate(QStyledItemDelegate):
    """Draws a column of dotted names shortened by :func:`fit_dotted` to the cell's width
    (the model's text, its tooltip included, stays whole)."""

    def shown(self, option, index) -> tuple[QStyleOptionViewItem, QStyle | None]:
        """The cell's style option with its text as drawn, and the style drawing it."""
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        widget = opt.widget
        style = widget.style() if widget is not None else None
        if style is not None and opt.text:
            rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, widget)
            # the style insets the text by its focus frame's margin and a pixel each side
            margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None,
                                       widget) + 1
            room = rect.width() - 2 * margin
            metrics = opt.fontMetrics
            opt.text = fit_dotted(opt.text, lambda text: metrics.horizontalAdvance(text) <= room)
        return opt, style

    def paint(self, painter, option, index) -> None:
        opt, style = self.shown(option, index)
        if style is None:
            super().paint(painter, option, index)
        else:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
