"""What the Trade-off view computes, without Qt: one immutable request and its two sweeps.

A :class:`SweepRequest` captures the tensor, its preparation and the settings when the view
asks; :meth:`SweepRequest.run` evaluates the rounding-vs-clipping sweep of both schemes
(:func:`quantscope.core.stats.sweep.clip_sweep_curve`, exact reports) on the scheduler's thread,
polling its context between points so a superseded sweep stops early.

On a first run the curves' reports are computed by the NumPy twins while another process
compiles the loops (:mod:`quantscope.state.compile_ahead`). A window's sweep does not ask for
the MSE optimum then: its search's twin (:mod:`quantscope.core.stats.mse_twin`) serves long
rows only, and a short row would wait for the compiled loop. The curves are delivered first,
marked :attr:`Sweeps.optimum_pending` (no "best" is known, none may be drawn), and the optimum
follows once the compiled loops are in. A command (``--screenshot``), whose twins serve with
no other process to wait for, computes the optimum at once: by the twin for a long row.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from functools import partial

import numpy as np

from quantscope.core import choose_qparams
from quantscope.core.kernels import compiled
from quantscope.core.labs.captions import finite_range
from quantscope.core.stats.prepared import Prepared
from quantscope.core.stats.sweep import ClipSweep, clip_sweep_curve
from quantscope.state import compile_ahead
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
class Sweeps:
    """Both schemes' sweeps (by scheme name, as :data:`SCHEMES`). With ``optimum_pending`` the
    MSE optimum is still to come (its search is being compiled on a first run): the sweeps'
    own ``best`` is then only the curve's least point, not the optimum the panes show for
    ``method="mse"``, and is no "best" to draw."""

    by_scheme: dict[str, ClipSweep]
    optimum_pending: bool = False


#: Seconds between looks at the job's context while the optimum waits for the compiled loops.
POLL_S = 0.25


@dataclass(frozen=True, eq=False)
class SweepRequest:
    """An immutable snapshot of what one sweep needs; safe to hand to another thread.

    ``wait_for_optimum``: when the optimum's search is still being compiled in another
    process, deliver the curves as a partial result and wait for the optimum (a live view),
    or return the curves with the optimum pending (a still figure, drawn once)."""

    tensor: np.ndarray
    prepared: Prepared | None
    settings: Settings
    #: The tensor's finite range when the overview knows it (else computed in :meth:`run`).
    x_range: tuple[float, float] | None = None
    wait_for_optimum: bool = True

    @classmethod
    def of(cls, state, wait_for_optimum: bool = True) -> SweepRequest:
        """The request for an :class:`~quantscope.state.ExplorerState` as it is now."""
        ov = state.overview
        return cls(state.tensor, state.prepared, state.settings,
                   (ov.min, ov.max) if ov is not None else None, wait_for_optimum)

    @property
    def key(self) -> tuple:
        return sweep_key(self.settings)

    def run(self, ctx) -> tuple[tuple, Sweeps]:
        """Both schemes' sweeps, with ``(key, sweeps)``; ``ctx`` is the job's
        :class:`~quantscope.state.scheduler.JobContext` (stale, progress, partial)."""
        if self.prepared is None or not compiled.waits_for_another_process():
            return self.key, Sweeps(self._sweeps(ctx, with_optimum=True))
        # the twins serve the curves now; the optimum's search waits for the compiled loops
        curves = Sweeps(self._sweeps(ctx, with_optimum=False), optimum_pending=True)
        if not self.wait_for_optimum:
            return self.key, curves
        ctx.partial((self.key, curves))
        while not compile_ahead.compiled_ready.wait(POLL_S):
            ctx.check()  # a superseded sweep stops waiting
        return self.key, Sweeps({name: self._with_optimum(sweep, sym) for (name, sym), sweep
                                 in zip(SCHEMES, curves.by_scheme.values(), strict=True)})

    def _optimum(self, symmetric: bool):
        """The MSE optimum the panes show for ``method="mse"`` under these settings."""
        s = self.settings
        return choose_qparams(self.tensor, symmetric=symmetric, bits=s.bits,
                              narrow_range=s.narrow_range, rounding=s.rounding, method="mse",
                              prepared=self.prepared)

    def _with_optimum(self, sweep: ClipSweep, symmetric: bool) -> ClipSweep:
        """``sweep`` with the optimum :func:`clip_sweep_curve` would have put in it (the curve
        does not depend on it)."""
        optimum = self._optimum(symmetric)
        return dataclasses.replace(sweep, optimum=optimum,
                                   optimum_report=analyze_with(self.tensor, self.prepared,
                                                               optimum))

    def _sweeps(self, ctx, with_optimum: bool) -> dict[str, ClipSweep]:
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
            optimum = (self._optimum(sym) if prepared is not None and with_optimum
                       else None)
            sweeps[name] = clip_sweep_curve(
                lambda p: analyze_with(x, prepared, p), x_min=lo, x_max=hi, symmetric=sym,
                bits=s.bits, narrow_range=s.narrow_range, rounding=s.rounding, points=points,
                should_stop=yield_and_check, refine=24 if prepared is not None else 6,
                progress=partial(_overall, ctx, k),
                optimum=optimum)
        return sweeps


def _overall(ctx, scheme: int, fraction: float) -> None:
    """Progress of one scheme's sweep as a share of both."""
    ctx.progress((scheme + fraction) / len(SCHEMES))


__all__ = ["SCHEMES", "SweepRequest", "Sweeps", "sweep_key", "sweep_points"]
