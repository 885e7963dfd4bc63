"""Where a per-channel or per-group pane's clipped values lie, binned as its histogram is.

A pane draws one window over all its units (the union of the channels' windows), but each
element is clipped against its own unit's window: a channel whose window is narrow clips
values that lie well inside the union, and shading "beyond the window" would show none of
them while the pane's table counts them. So the state finds the clipped elements themselves
and the pane draws their histogram on its bins, in the clipped colour.

Rounding is monotone in ``x`` (the scale is positive), so in each unit the elements clipped
below are exactly its ``clipped_below`` smallest finite values and those clipped above its
``clipped_above`` largest: taken from the unit's sorted row with the report's own counts, the
marked elements are the counted ones, ties at a boundary included. Qt-free.
"""

from __future__ import annotations

import numpy as np

from quantscope.core import Prepared, QuantParams, QuantReport
from quantscope.core.stats.sorted_stats import SortedRows


def clipped_values(rows: SortedRows, below: np.ndarray, above: np.ndarray) -> np.ndarray:
    """The finite values clipped in their own unit's window, sorted ascending.

    ``rows`` is the tensor's sorted layout for the report's granularity (one row per unit, in
    the parameter arrays' C order); ``below`` and ``above`` are the report's per-unit clipped
    counts. Costs ``O(clipped)`` to gather, whatever the tensor's size."""
    starts = np.asarray(rows.starts, np.int64)
    below = np.asarray(below, np.int64).reshape(-1)
    above = np.asarray(above, np.int64).reshape(-1)
    lengths = np.diff(starts)
    if below.size != lengths.size or above.size != lengths.size:
        raise ValueError(f"{below.size} and {above.size} per-unit counts for {lengths.size} "
                         "rows: the report and the layout are of different granularities")
    if np.any(below + above > lengths) or np.any(below < 0) or np.any(above < 0):
        raise ValueError("a unit's clipped counts exceed its number of finite values")
    first = _ranges(starts[:-1], below)
    last = _ranges(starts[1:] - above, above)
    return np.sort(rows.values[np.concatenate([first, last])])


def report_clipped(report: QuantReport, prepared: Prepared | None) -> np.ndarray | None:
    """The sorted values ``report``'s own units clip (:func:`clipped_values` on the prepared
    layout of its granularity), or None where the drawn window says it all: a per-tensor
    report, a number format's (its units are laid out by the format), no preparation."""
    p, units = report.params, report.per_channel
    if units is None or not isinstance(p, QuantParams) or p.granularity == "tensor" \
            or prepared is None:
        return None
    return clipped_values(prepared.layout(p.axis, p.group_size), units.clipped_below,
                          units.clipped_above)


def _ranges(begin: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Indices ``begin[r] .. begin[r] + count[r] - 1`` for every row, concatenated."""
    total = int(count.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(count) - count  # where each row's indices start in the output
    return np.repeat(begin - offsets, count) + np.arange(total, dtype=np.int64)


def binned(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """How many of the sorted ``values`` fall in each bin ``[edges[i], edges[i + 1])``, as
    :func:`quantscope.state.histogram.pane_histogram` counts the tensor on the same edges."""
    edges = np.asarray(edges, np.float64)
    with np.errstate(over="ignore"):
        needles = edges.astype(values.dtype) if values.size else edges
    cuts = np.searchsorted(values, needles, side="left")
    return np.diff(cuts).astype(np.int64)


__all__ = ["binned", "clipped_values", "report_clipped"]
