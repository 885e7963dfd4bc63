"""What the panes draw of a result, shaped on the compute job's thread. Qt-free.

Each pane's texts, bucket grid and code strip (:func:`~quantscope.state.display.pane_display`)
and its value histogram binned on its new buckets over the view it shows
(:func:`~quantscope.state.histogram.pane_histogram`) are formed beside the engine, so the
window's thread only hands them to its plot items. Shaped there, on the window's thread, they
took about a tenth of its time per settings change at 16M elements (a pane's summary, grid
and strip, then a binary search of some 2,000 edges in the sorted tensor), in the turns that
the change's repaint waits for.

The view a pane shows is the window's (its zoom, its width in bins): :class:`Drawings` keeps
the views the panes asked to be binned on since the last request, and the next request bins
each new report on those. A pane that asks for another view (a zoom while the reports were
computed) gets its bins computed on its own thread, as before.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from quantscope.core import QuantReport
from quantscope.state.compute import ComputeResult
from quantscope.state.display import PaneDisplay, pane_display
from quantscope.state.histogram import pane_histogram

#: ``(view, max_bins)``: the value range a pane shows and the most bins it draws there.
View = tuple[tuple[float, float], int]
#: ``(boundaries' bytes, view, max_bins)``: a histogram's identity.
HistogramKey = tuple[bytes, tuple[float, float], int]


def histogram_key(boundaries: np.ndarray, view: tuple[float, float],
                  max_bins: int) -> HistogramKey:
    """The key of the histogram binned on ``boundaries`` over ``view``: equal keys, equal
    bins (the boundaries compared bit for bit)."""
    return (np.asarray(boundaries, np.float64).tobytes(), (float(view[0]), float(view[1])),
            int(max_bins))


def with_drawing(result: ComputeResult, values: np.ndarray | None, views: tuple[View, ...],
                 dtype: str, made: dict | None = None) -> ComputeResult:
    """``result`` with every report's :class:`~quantscope.state.display.PaneDisplay` and its
    histogram on each of ``views`` (over the sorted finite ``values``, stored as ``dtype``;
    none without values). ``made`` (a dict the caller keeps across a job's partial and
    complete results) spares the panes delivered early a second shaping."""
    made = {} if made is None else made
    displays: dict[str, PaneDisplay] = {}
    histograms: dict[HistogramKey, tuple[np.ndarray, np.ndarray]] = {}
    for pane, report in result.reports.items():
        hit = made.get(id(report))
        if hit is None or hit[0] is not report:
            hit = made[id(report)] = (report, pane_display(report))
        displays[pane] = shown = hit[1]
        if values is None:
            continue
        for view, bins in views:
            key = histogram_key(shown.grid.boundaries, view, bins)
            if key not in histograms:
                binned = made.get(key)
                if binned is None:
                    binned = made[key] = pane_histogram(values, shown.grid.boundaries, view,
                                                        bins, dtype)
                histograms[key] = binned
    return dataclasses.replace(result, displays=displays, histograms=histograms)


class Drawings:
    """The drawings of the reports on show, and the views the panes draw them on.

    Displays are kept by report (identity, as the reports shown are the state's own objects),
    histograms by :func:`histogram_key`; both only for the results on show."""

    def __init__(self) -> None:
        self._displays: dict[int, tuple[QuantReport, PaneDisplay]] = {}
        self._histograms: dict[HistogramKey, tuple[np.ndarray, np.ndarray]] = {}
        self._asked: dict[View, None] = {}  # asked since the last request, in order
        self._views: tuple[View, ...] = ()  # what the last request bins on

    def display(self, report: QuantReport) -> PaneDisplay:
        """``report``'s display: the one shaped with its result, else shaped now."""
        hit = self._displays.get(id(report))
        if hit is None or hit[0] is not report:
            hit = self._displays[id(report)] = (report, pane_display(report))
        return hit[1]

    def histogram(self, values: np.ndarray, boundaries: np.ndarray,
                  view: tuple[float, float], max_bins: int, dtype: str
                  ) -> tuple[np.ndarray, np.ndarray]:
        """(edges, counts) on ``boundaries`` over ``view``: the ones binned with the result,
        else binned now; the view is noted for the next request."""
        self._asked[((float(view[0]), float(view[1])), int(max_bins))] = None
        hit = self._histograms.get(histogram_key(boundaries, view, max_bins))
        return hit if hit is not None else pane_histogram(values, boundaries, view, max_bins,
                                                          dtype)

    def views(self) -> tuple[View, ...]:
        """The views to bin a new request's reports on: those asked since the last request
        (the panes' now), else the last request's (nothing was drawn meanwhile)."""
        if self._asked:
            self._views, self._asked = tuple(self._asked), {}
        return self._views

    def keep(self, result: ComputeResult, shown: list[QuantReport]) -> None:
        """Take ``result``'s drawings; drop those of reports no longer ``shown`` (a complete
        result's histograms replace all others: they cover every pane)."""
        keep = {id(r) for r in shown}
        self._displays = {k: v for k, v in self._displays.items() if k in keep}
        for pane, shown_display in result.displays.items():
            report = result.reports.get(pane)
            if report is not None:
                self._displays[id(report)] = (report, shown_display)
        if result.complete:
            self._histograms = dict(result.histograms)
        else:
            self._histograms.update(result.histograms)
