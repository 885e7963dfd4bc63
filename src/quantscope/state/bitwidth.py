"""What the Bit width view computes, without Qt: one immutable request and four curves.

Each curve is :func:`quantscope.core.labs.bitwidth.bitwidth_curve` over a pane's own parameter rules
(:func:`quantscope.state.compute.pane_params` with ``bits`` changed), so every point is the
report that pane would show at that width.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from quantscope.core.labs.bitwidth import BitwidthCurve, bitwidth_curve
from quantscope.errors import Cancelled
from quantscope.state.compute import analyze_with, pane_params
from quantscope.state.settings import PANES, Settings


def bitwidth_curves(x: np.ndarray, prepared, settings: Settings,
                    should_stop=lambda: False) -> dict[str, BitwidthCurve]:
    """The four panes' curves for one tensor and settings; stops early with
    :class:`Cancelled` when ``should_stop()`` says the result is no longer wanted."""
    curves: dict[str, BitwidthCurve] = {}
    for pane in PANES:
        def params_for_bits(b: int, pane: str = pane):
            time.sleep(0)  # let the GUI thread run between reports
            if should_stop():
                raise Cancelled
            # the int schemes at every width, also while the panes compare formats
            return pane_params(x, pane, dataclasses.replace(settings, bits=b, formats=None),
                               prepared=prepared)

        curves[pane] = bitwidth_curve(params_for_bits, lambda p: analyze_with(x, prepared, p))
    return curves


def curve_key(settings: Settings) -> Settings:
    """The settings the curves depend on: they span every width, and stay the int schemes'
    in the comparison layout."""
    return dataclasses.replace(settings, bits=8, formats=None)


@dataclass(frozen=True, eq=False)
class CurvesRequest:
    """An immutable snapshot of what the curves need; safe to hand to another thread."""

    tensor: np.ndarray
    prepared: object | None
    settings: Settings

    @classmethod
    def of(cls, state) -> CurvesRequest:
        return cls(state.tensor, state.prepared, state.settings)

    @property
    def key(self) -> Settings:
        return curve_key(self.settings)

    def run(self, ctx) -> tuple[Settings, dict[str, BitwidthCurve]]:
        """``(key, curves)``; ``ctx`` is the job's context (its ``stale`` stops the work)."""
        return self.key, bitwidth_curves(self.tensor, self.prepared, self.settings, ctx.stale)


__all__ = ["CurvesRequest", "bitwidth_curves", "curve_key"]
