"""What each pane displays, as text, and where its bucket grid lies: re-exported from the
Qt-free :mod:`quantscope.state.display`, which the notebook widget draws from as well, so the
window and the widget show the same strings for the same report."""

from quantscope.state.display import (
    FIELDS,
    WIDE,
    WIDE_UNIT_SCALES,
    Grid,
    bucket_grid,
    display_values,
    field_label,
    format_grid,
    metrics_entry,
)

__all__ = ["FIELDS", "WIDE", "WIDE_UNIT_SCALES", "Grid", "bucket_grid", "display_values",
           "field_label", "format_grid", "metrics_entry"]
