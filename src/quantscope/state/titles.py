"""A pane's title as the window, the figures and the notebook widget show it."""

from __future__ import annotations

from quantscope.state.axes import units
from quantscope.state.choices import PANES, PaneKey
from quantscope.state.settings import Settings


def pane_title(pane: str, settings: Settings | None = None,
               shape: tuple[int, ...] | None = None) -> str:
    """``"Symmetric · per-tensor"`` ...; per-channel panes say per-group when groups are on,
    and with the tensor's ``shape`` which axis holds the channels and how many there are
    (``"Asymmetric · per-channel · axis -1: 1,536 channels"``); in the comparison layout,
    the pane's format."""
    key = PaneKey.parse(pane)
    if settings is not None and settings.formats is not None:
        # a format's title reads the engine's format table, which loads Numba: only the
        # comparison layout, which computes with those formats anyway, pays for it
        from quantscope.state.formats import format_title

        return format_title(settings.formats[PANES.index(key)], settings, shape)
    if not key.per_tensor and settings is not None and shape is not None:
        gran_text = units(tuple(shape), settings.axis, settings.group_size).title()
    elif not key.per_tensor and settings is not None and settings.group_size:
        gran_text = f"per-group ({settings.group_size})"
    else:
        gran_text = f"per-{key.granularity}"
    return f"{key.scheme.capitalize()} · {gran_text}"
