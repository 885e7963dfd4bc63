"""What the Trade-off view computes, without Qt: one immutable request and its two sweeps.

A :class:`SweepRequest` captures the tensor, its preparation and the settings when the view
asks; :meth:`SweepRequest.run` evaluates the rounding-vs-clipping sweep of both schemes
(:func:`quantscope.core.stats.sweep.clip_sweep_curve`, exact reports) on the scheduler's thread,
polling its context between points so a superseded sweep stops early.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import numpy as np

from quantscope.core import choose_qparams
from quantscope.core.labs.captions import finite_range
from quantscope.core.stats.prepared import Prepared
from quantscope.core.stats.sweep import ClipSweep, clip_sweep_curve
from quantscope.state.compute import analyze_with
from quantscope.state.settings import Settings

SCHEMES = (("symmetric", True), ("asymmetric", False))
#: Sweep resolution with the fast prepared path; the direct pass gets fewer points on big
#: tensors so a sweep stays around a second.
POINTS_PREPARED = 128
DIRECT_BUDGET = 40_000_000  # elements x points


def sweep_points(size: int, prepared: bool) -> int:
    """How many thresholds to evaluate for a tensor of ``size`` elements."""
    if prepared:
        return POINTS_PREPARED
    return int(min(POINTS_PREPARED, max(24, DIRECT_BUDGET // max(size, 1))))


def sweep_key(settings: Settings) -> tuple:
    """The settings a sweep depends on (method and manual clip are what it varies)."""
    return (settings.bits, settings.narrow_range, settings.rounding)


@dataclass(frozen=True, eq=False)
class SweepRequest:
    """An immutable snapshot of what one sweep needs; safe to hand to another thread."""

    tensor: np.ndarray
    prepared: Prepared | None
    settings: Settings
    #: The tensor's finite range when the overview knows it (else computed in :meth:`run`).
    x_range: tuple[float, float] | None = None

    @classmethod
    def of(cls, state) -> SweepRequest:
        """The request for an :class:`~quantscope.state.ExplorerState` as it is now."""
        ov = state.overview
        return cls(state.tensor, state.prepared, state.settings,
                   (ov.min, ov.max) if ov is not None else None)

    @property
    def key(self) -> tuple:
        return sweep_key(self.settings)

    def run(self, ctx) -> tuple[tuple, dict[str, ClipSweep]]:
        """Both schemes' sweeps, with ``(key, sweeps)``; ``ctx`` is the job's
        :class:`~quantscope.state.scheduler.JobContext` (stale, progress)."""
        x, prepared, s = self.tensor, self.prepared, self.settings

        def yield_and_check() -> bool:
            time.sleep(0)  # hand the interpreter to the GUI thread between sweep points
            return ctx.stale()

        lo, hi = self.x_range if self.x_range is not None else finite_range(x)
        points = sweep_points(x.size, prepared is not None)
        sweeps = {}
        for k, (name, sym) in enumerate(SCHEMES):
            # "best" is the MSE optimum the panes show for method="mse" (needs the prepared
            # statistics; without them the curve's own least point)
            optimum = None if prepared is None else choose_qparams(
                x, symmetric=sym, bits=s.bits, narrow_range=s.narrow_range,
                rounding=s.rounding, method="mse", prepared=prepared)
            sweeps[name] = clip_sweep_curve(
                lambda p: analyze_with(x, prepared, p), x_min=lo, x_max=hi, symmetric=sym,
                bits=s.bits, narrow_range=s.narrow_range, rounding=s.rounding, points=points,
                should_stop=yield_and_check, refine=24 if prepared is not None else 6,
                progress=partial(_overall, ctx, k),
                optimum=optimum)
        return self.key, sweeps


def _overall(ctx, scheme: int, fraction: float) -> None:
    """Progress of one scheme's sweep as a share of both."""
    ctx.progress((scheme + fraction) / len(SCHEMES))


__all__ = ["SCHEMES", "SweepRequest", "sweep_key", "sweep_points"]
