"""A plot legend in a row under the x axis instead of floating over the curves.

A floating legend always covers something in these views: every corner of the trade-off
plot holds a curve, and the bit-width curves climb into the top-left corner where pyqtgraph
puts it. At presentation font sizes it also grew past a narrow tab and was cut off.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSizePolicy

from quantscope.gui.theme import current_theme

#: The plot's own margins and layout spacing around the legend row, in pixels.
_SLACK = 24
#: Smallest legend font when shrinking it to fit (still legible on a projector).
MIN_LABEL_PT = 10

#: Row of a PlotItem's grid layout below the bottom axis (title 0, top axis 1, view 2,
#: bottom axis 3).
_BELOW_AXIS = (4, 1)
#: The cell right of the right axis (left axis 0, view 1, right axis 2), level with the view.
_BESIDE_VIEW = (2, 3)


class LayoutLegend(pg.LegendItem):
    """A legend placed by its plot's grid layout: pyqtgraph's legend sizes itself with
    ``setGeometry(0, 0, ...)``, which would pull it to the plot's corner; in a layout its own
    grid's size hint is enough."""

    def updateSize(self) -> None:
        self.updateGeometry()

    def mouseDragEvent(self, ev) -> None:
        ev.ignore()  # the layout places it; a drag would tear it out


def legend_below(plot: pg.PlotItem, **kwargs) -> LayoutLegend:
    """Give ``plot`` a legend under its x axis (items named later are added to it, as with
    ``plot.addLegend``)."""
    plot.legend = LayoutLegend(offset=None, colCount=2, **kwargs)
    plot.layout.addItem(plot.legend, *_BELOW_AXIS)
    return plot.legend


def place_legend(plot: pg.PlotItem, beside: bool) -> None:
    """Move ``plot``'s legend (made by :func:`legend_below`) right of its view, or back under
    its x axis: a wide, short plot has more room beside it than under it."""
    legend = plot.legend
    plot.layout.removeItem(legend)
    plot.layout.addItem(legend, *(_BESIDE_VIEW if beside else _BELOW_AXIS))
    # beside a tall view its rows keep their height, at the top (stretched, they drifted
    # apart and each label rose above its sample)
    legend.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed if beside
                         else QSizePolicy.Policy.Preferred)
    plot.layout.setAlignment(legend, Qt.AlignmentFlag.AlignTop if beside
                             else Qt.AlignmentFlag.AlignCenter)


def fit_columns(plot: pg.PlotItem, width: float, columns: tuple[int, ...] = (2, 1),
                height: float | None = None, room: float | None = None) -> None:
    """Fit the legend of a plot ``width`` pixels wide between its axes: the first of
    ``columns`` that fits (two columns, else one), else the last in a smaller font. The legend
    row sets the plot's minimum width, and one wider than its widget cut off the right-hand
    axis and the labels themselves.

    With ``height``, the legend must also be no taller than that: the first count that fits
    both ways at the full font, else the count that needs the least shrinking, in the font
    that fits it (not below :data:`MIN_LABEL_PT`). A legend of many entries in one column
    was taller than the plot above it at a talk's 720 rows.

    With ``room``, that is the legend's width (a legend beside its plot: ``width`` is not
    read)."""
    legend = plot.legend
    if room is None:
        room = width - _SLACK - sum(plot.getAxis(side).width() for side in ("left", "right")
                                    if plot.getAxis(side).isVisible())
    full = current_theme().axis_font_pt
    _label_size(legend, full)
    scales = {}
    for count in columns:
        legend.setColumnCount(count)
        need = legend.layout.preferredWidth()
        scale = room / need
        if height is not None:
            scale = min(scale, height / legend.layout.preferredHeight())
        if scale >= 1:
            return
        scales[count] = scale
    # the count that keeps the largest font, the fewest columns among equals
    count = max(columns, key=lambda c: (scales[c], -c)) if height is not None else columns[-1]
    legend.setColumnCount(count)
    points = max(MIN_LABEL_PT, int(full * scales[count]))
    _label_size(legend, points)
    # a row's height is not all text (the sample, the spacing): a point less until it fits
    while height is not None and points > MIN_LABEL_PT and (
            legend.layout.preferredHeight() > height or legend.layout.preferredWidth() > room):
        points -= 1
        _label_size(legend, points)


def _label_size(legend: pg.LegendItem, points: int) -> None:
    legend.setLabelTextSize(f"{points}pt")
    for _, label in legend.items:  # setLabelTextSize alone does not re-render the labels
        label.setText(label.text)
