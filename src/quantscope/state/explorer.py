"""The explorer's state: one tensor, the settings, and the four panes' reports. Qt-free.

The window and every view only *subscribe* to this object (psygnal signals, as napari's models
do) and call its methods; none of them computes a number. That keeps three promises:

* the numbers on screen are the engine's, for exactly the settings shown (tests drive the state
  without a window and compare with :mod:`quantscope.core` directly);
* work can move off the GUI thread safely: :meth:`ExplorerState.request` takes an immutable
  snapshot, :func:`compute_reports` is a pure function of it (run it in any thread), and
  :meth:`ExplorerState.accept` installs the result on the owning thread, dropping it if the
  tensor or settings changed meanwhile (its generation stamp is stale);
* defaults are the engine's (min/max range, half to even, narrow-range symmetric), so the first
  numbers equal ``quantscope report``'s for the same tensor.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
from psygnal import Signal

from quantscope.core import Prepared, QuantParams, QuantReport
from quantscope.core.labs.explain import clip_window
from quantscope.core.tensors.validate import in_memory
from quantscope.state.axes import ROLES, AxisChoice, choose_axis
from quantscope.state.choices import PANES, PaneKey
from quantscope.state.clipped_histogram import binned, report_clipped
from quantscope.state.compute import (
    ComputeRequest,
    ComputeResult,
    ReportCache,
    applied_settings,
    compute_reports,
    pane_params,
)
from quantscope.state.display import PaneDisplay
from quantscope.state.drawing import Drawings
from quantscope.state.errors import SettingsError
from quantscope.state.numbers import pane_numbers
from quantscope.state.settings import Settings
from quantscope.state.source import Source, TensorOverview, prepare_tensor, tensor_problem

if TYPE_CHECKING:  # for the annotations only: formats loads Numba, a report must not
    from quantscope.core.formats.catalog import FormatParams


class ExplorerState:
    """The evented model behind the window (see the module docstring for the contract).

    Signals
    -------
    tensor_changed()
        A new tensor (and source) is in place; results are cleared until recomputed.
    settings_changed()
        ``settings`` changed; results are cleared until recomputed.
    results_changed()
        ``results`` now hold reports for the current tensor and settings.
    partial_results()
        Some panes' reports for the current settings arrived ahead of the others (the
        per-tensor ones, while the per-channel ones are still computing).
    prepared_changed()
        ``prepared`` / ``overview`` (the one-time preparation of the tensor) became available.
    error(str)
        A refused input or setting, as one readable sentence; the state did not change.
    """

    tensor_changed = Signal()
    settings_changed = Signal()
    results_changed = Signal()
    partial_results = Signal()
    prepared_changed = Signal()
    error = Signal(str)

    def __init__(self, settings: Settings | None = None, *, cache_reports: bool = True) -> None:
        self.tensor: np.ndarray | None = None
        self.source: Source | None = None
        self.settings: Settings = (settings or Settings()).check()
        self.results: dict[str, QuantReport] = {}
        self.errors: dict[str, str] = {}
        self.prepared: Prepared | None = None
        self.overview: TensorOverview | None = None
        self.generation = 0
        #: The channel axis of the current tensor and the rule that chose it (shown).
        self.axis_choice = AxisChoice(self.settings.axis, "default")
        self._cache = ReportCache()  # the one owner of this tensor's memos
        #: Reuse reports for identical parameters (off: every change runs the engine, as the
        #: latency benchmark needs to measure).
        self.cache_reports = cache_reports
        #: what the panes draw of the results on show, shaped with them (see
        #: :mod:`quantscope.state.drawing`)
        self.drawings = Drawings()

    # -- inputs ---------------------------------------------------------------------------
    def set_tensor(self, x, source: Source | None = None, *, prepared: Prepared | None = None,
                   overview: TensorOverview | None = None, checked: bool = False,
                   settings: Settings | None = None) -> bool:
        """Install a new tensor; refuse empty, 0-d, non-numeric or all-NaN/inf input, and an
        explicit ``source.axis`` the tensor lacks.

        On refusal ``error`` is emitted with the reason, the previous tensor and settings
        stay, and False is returned. The settings that depend on the tensor are derived for
        it: the channel axis from its role (:func:`quantscope.state.axes.choose_axis`; an
        explicit ``source.axis`` wins) and the manual clip window reset (the old one is the old
        tensor's range); the others (method, bits, rounding, preset...) stay. ``settings``
        (a saved session's, or the command line's) replace the current ones, window included.
        ``prepared``/``overview`` may be passed when a worker already computed them for this
        very array; ``checked=True`` says a worker also ran :func:`tensor_problem` on it and
        made it float32, so nothing here is O(N) (the GUI thread installs a 10^9-element
        tensor in microseconds).
        """
        source = source or Source("array", "array")
        problem = None if checked else tensor_problem(x)
        ndim = np.ndim(x)
        if problem is None and source.axis is not None and not -ndim <= source.axis < ndim:
            # an explicit axis is the user's word: one the tensor lacks is refused, as the
            # window's loader and ``report --axis`` refuse it, never replaced by the default
            problem = f"channel axis {source.axis} is out of range for shape {np.shape(x)}"
        if problem is not None:
            self.error.emit(f"{source.label()}: {problem}")
            return False
        choice = choose_axis(np.shape(x), source)
        base = settings if settings is not None else dataclasses.replace(self.settings,
                                                                         manual_clip=None)
        new = dataclasses.replace(base, axis=choice.axis)
        try:
            new.check(np.ndim(x))
        except SettingsError as exc:
            self.error.emit(f"{source.label()}: {exc}")
            return False
        arr = in_memory(np.asarray(x, dtype=np.float32)).view()  # a mapping could SIGBUS
        arr.flags.writeable = False  # shared with worker threads: nobody may edit it in place
        self.tensor, self.source = arr, source
        self._cache = ReportCache()
        self.drawings = Drawings()  # the views asked were of the old tensor's range
        self.settings = new
        self.axis_choice = choice
        self.prepared, self.overview = prepared, overview
        self._invalidate()
        self.tensor_changed.emit()
        if prepared is not None or overview is not None:
            self.prepared_changed.emit()
        return True

    def set_role(self, role: str | None) -> bool:
        """Say what the tensor is (``"weight"``, ``"activation"``, or None to let its name and
        shape decide): the channel axis follows. Returns True when the settings changed."""
        if self.tensor is None:
            return False
        if role not in ROLES:
            self.error.emit(f"role must be one of {ROLES}, got {role!r}")
            return False
        self.source = dataclasses.replace(self.source or Source("array", "array"), axis=None,
                                          role=role)
        choice = choose_axis(self.tensor.shape, self.source)
        self.axis_choice = choice
        changed = self._apply(dataclasses.replace(self.settings, axis=choice.axis))
        if not changed:
            self.settings_changed.emit()  # the rule shown changed even if the axis did not
        return True

    @property
    def stored_dtype(self) -> str:
        """The dtype the tensor was stored in (``bfloat16`` for a bf16 checkpoint), known once
        the tensor is prepared; the state itself always holds float32."""
        return self.overview.dtype if self.overview is not None else "float32"

    def histogram(self, boundaries: np.ndarray, view: tuple[float, float], max_bins: int):
        """(edges, counts) of the tensor binned on a pane's code ``boundaries`` over ``view``
        (:func:`quantscope.state.histogram.pane_histogram`), or None before the tensor is
        prepared (its sorted values are what the bins count)."""
        if self.prepared is None or self.tensor is None:
            return None
        values = self.prepared.layout(None, None).values
        return self.drawings.histogram(values, boundaries, view, max_bins, self.stored_dtype)

    def display(self, report: QuantReport) -> PaneDisplay:
        """What a pane shows of ``report``: shaped with its result on the compute job's
        thread, else now (:func:`quantscope.state.display.pane_display`)."""
        return self.drawings.display(report)

    def clipped_histogram(self, report: QuantReport, edges: np.ndarray) -> np.ndarray | None:
        """Per bin of ``edges``, how many of ``report``'s elements are clipped in their own
        channel's or group's window (:mod:`quantscope.state.clipped_histogram`); None for a
        per-tensor report, whose window is the one drawn, for a number format's (its units
        are laid out by the format), before the tensor is prepared, and for a report that is
        no longer among the results (a pane still showing the previous tensor's: its units
        are not the prepared tensor's)."""
        if not any(r is report for r in self.results.values()):
            return None
        cache: dict = self.__dict__.setdefault("_clipped", {})
        hit = cache.get(id(report))
        if hit is None or hit[0] is not report:  # not gathered with the result: here
            hit = (report, report_clipped(report, self.prepared))
            self._keep_clipped({id(report): hit})
        return None if hit[1] is None else binned(hit[1], edges)

    def _keep_clipped(self, new: dict) -> None:
        """Cache clipped values by report (``id -> (report, values)``); those of reports no
        longer shown go."""
        cache: dict = self.__dict__.setdefault("_clipped", {})
        shown = {id(r) for r in self.results.values()}
        for stale in [k for k in cache if k not in shown]:
            del cache[stale]
        cache.update(new)

    def window_in_use(self) -> tuple[float, float] | None:
        """The per-tensor clip window the panes use now: the manual window, else the
        asymmetric per-tensor pane's ``[scale (qmin - zp), scale (qmax - zp)]`` (the
        symmetric pane's when asymmetric is refused); None before any result."""
        s = self.settings
        if s.method == "manual" and s.manual_clip is not None:
            return s.manual_clip
        if s.formats is not None:  # the comparison layout: the first per-tensor format's
            from quantscope.state.formats import tensor_window  # Numba: comparison only

            windows = (tensor_window(self.results[p].params) for p in PANES if p in self.results)
            return next((w for w in windows if w is not None), None)
        for pane in (PaneKey.ASYMMETRIC_TENSOR, PaneKey.SYMMETRIC_TENSOR):
            rep = self.results.get(pane)
            if rep is not None and isinstance(rep.params, QuantParams):  # the int panes'
                return clip_window(rep.params)
        return None

    def applied(self) -> dict:
        """The settings the panes actually compute (see :func:`applied_settings`)."""
        shape = self.tensor.shape if self.tensor is not None else (0,)
        return applied_settings(shape, self.settings, self.axis_choice.rule)

    def set_prepared(self, tensor: np.ndarray, prepared: Prepared | None,
                     overview: TensorOverview | None) -> bool:
        """Install the preparation computed (off-thread) for ``tensor``; ignored if stale."""
        if tensor is not self.tensor:
            return False
        self.prepared = prepared if prepared is not None else self.prepared
        self.overview = overview if overview is not None else self.overview
        self.prepared_changed.emit()
        return True

    def prepare(self) -> Prepared:
        """Prepare the current tensor now, on this thread, as the window's loader does
        (:func:`~quantscope.state.source.prepare_tensor` with the current settings), unless it
        is prepared already; returns the preparation.

        From then on every report comes through the engine's prepared path, the one the window
        computes with: ``quantscope report`` calls this so its numbers equal the window's bit
        for bit (the direct pass agrees with that path to 1e-9, its sums taken in another
        order, not to the last digit). Only the compiled loops it runs are loaded: a
        one-shot report has no later change to warm up for."""
        if self.tensor is None:
            raise SettingsError("no tensor loaded")
        if self.prepared is None:
            self.set_prepared(self.tensor, prepare_tensor(self.tensor, self.settings, warm=False),
                              None)
        assert self.prepared is not None
        return self.prepared

    def update_settings(self, **changes) -> bool:
        """Change some settings; invalid values emit ``error`` and change nothing.

        Returns True when the settings changed (False when refused or already equal), so a
        control that echoes a value back does not trigger a recomputation.
        """
        try:
            new = dataclasses.replace(self.settings, **changes)
            new.check(None if self.tensor is None else self.tensor.ndim)
        except (TypeError, SettingsError) as exc:
            self.error.emit(str(exc))
            return False
        if "axis" in changes and new.axis != self.axis_choice.axis:
            self.axis_choice = AxisChoice(new.axis, f"axis {new.axis} set by you")
        return self._apply(new)

    def _apply(self, new: Settings) -> bool:
        if new == self.settings:
            return False
        self.settings = new
        self._invalidate()
        self.settings_changed.emit()
        return True

    def _invalidate(self) -> None:
        self.generation += 1
        self.results, self.errors = {}, {}

    # -- computing ------------------------------------------------------------------------
    def params_for(self, pane: str) -> QuantParams | FormatParams:
        """The parameters ``pane`` uses for the current tensor and settings."""
        if self.tensor is None:
            raise SettingsError("no tensor loaded")
        return pane_params(self.tensor, pane, self.settings, self._cache.ranges, self.prepared)

    def request(self) -> ComputeRequest:
        """Snapshot the current tensor and settings for :func:`compute_reports`."""
        if self.tensor is None:
            raise SettingsError("no tensor loaded")
        return ComputeRequest(self.generation, self.tensor, self.settings, self.prepared,
                              ranges=self._cache.ranges,
                              reports=self._cache.reports if self.cache_reports else None)

    def accept(self, result: ComputeResult) -> bool:
        """Install a result if it is still current (same generation); drop it otherwise.

        A partial result (``result.complete`` False: the panes that were ready first) is
        added to the current results and announced by ``partial_results``; a complete one
        replaces them and is announced by ``results_changed``."""
        if result.generation != self.generation:
            return False
        if not result.complete:
            self.results.update(result.reports)
            self.errors.update(result.errors)
            self.drawings.keep(result, list(self.results.values()))
            self.partial_results.emit()
            return True
        self.results, self.errors = dict(result.reports), dict(result.errors)
        self.drawings.keep(result, list(self.results.values()))
        self._keep_clipped({id(result.reports[k]): (result.reports[k], v)
                            for k, v in result.clipped.items() if k in result.reports})
        self.results_changed.emit()
        return True

    def compute(self) -> dict[str, QuantReport]:
        """Compute and install the results synchronously (tests, scripts, the command line)."""
        self.accept(compute_reports(self.request()))
        return self.results

    def describe(self) -> dict:
        """The numbers of every pane and the settings applied, JSON-ready: what
        ``quantscope report --json`` prints and ``--metrics`` writes (same keys): ``schemes``
        by pane, or in the comparison layout ``formats`` by format
        (:func:`quantscope.state.numbers.pane_numbers`)."""
        src = self.source
        return {"source": src.label() if src else None,
                "shape": list(self.tensor.shape) if self.tensor is not None else None,
                "axis": self.settings.axis, "applied": self.applied(),
                "settings": self.settings.to_dict(),
                **pane_numbers(self.settings, self.results, self.errors)}
