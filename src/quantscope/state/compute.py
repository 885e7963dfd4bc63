"""Turning a tensor and settings into the four panes' reports: pure functions, any thread.

:func:`compute_reports` is what the window's compute job runs on an immutable
:class:`ComputeRequest`. What is memoised per tensor (unit ranges, reports by parameters) has
one owner, a :class:`ReportCache`: requests carry its memos, so what one slider step computed
is not recomputed on the next, and only the cache's own locked methods change them.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from quantscope.core import Prepared, QuantParams, QuantReport
from quantscope.core.kernels.parallel import (
    process_niceness,
    set_thread_niceness,
    share_niceness,
    shares_at,
    thread_niceness,
)
from quantscope.errors import QuantscopeError
from quantscope.state.axes import units
from quantscope.state.choices import PANES, PaneKey
from quantscope.state.pane_rules import (
    DIRECT_MAX,
    analyze_with,
    int_pane_params,
    needs_preparation,
    preset_in_force,
    preset_rules,
    unit_range,
)
from quantscope.state.settings import Settings

__all__ = ["DIRECT_MAX", "ComputeRequest", "ComputeResult", "Memo", "ReportCache",
           "analyze_with", "applied_settings", "compute_reports", "needs_preparation",
           "pane_params", "params_key", "preset_in_force", "preset_rules", "unit_range"]

if TYPE_CHECKING:  # for the annotations only: formats loads Numba, a report must not
    from quantscope.core.formats.catalog import FormatParams


def pane_params(x: np.ndarray, pane: str, settings: Settings,
                ranges: dict | Memo | None = None, prepared: Prepared | None = None
                ) -> QuantParams | FormatParams:
    """The parameters of one pane: the one mapping from (tensor, settings) to numbers.

    The window's panes, its views and ``quantscope report`` all come through here: an int
    pane by :func:`~quantscope.state.pane_rules.int_pane_params`, a comparison pane (when
    ``settings.formats`` is set) by its format's rules
    (:func:`~quantscope.state.formats.format_pane_params`). A layout the tensor cannot have
    raises :class:`SettingsError` with the reason, which the pane shows instead of numbers.
    """
    key = PaneKey.parse(pane)
    if settings.formats is not None:  # the comparison layout: a format per pane
        # the formats' module loads Numba, which the int panes never need
        from quantscope.state.formats import format_pane_params

        return format_pane_params(x, settings.formats[PANES.index(key)], settings, prepared)
    return int_pane_params(x, key, settings, ranges, prepared)


def applied_settings(shape: tuple[int, ...], settings: Settings,
                     axis_rule: str | None = None) -> dict:
    """What the panes actually compute for a tensor of ``shape`` (JSON-ready): the channel
    axis and the rule that chose it, the per-channel / per-group layout, the range method and
    the preset in force, and ``notes`` for every setting that could not be honoured as shown
    (a layout the tensor cannot have is each pane's error instead).
    """
    u = units(tuple(shape), settings.axis, settings.group_size)
    manual = settings.method == "manual" and settings.manual_clip is not None
    method = "manual" if manual else ("minmax" if settings.method == "manual"
                                      else settings.method)
    preset = preset_in_force(settings)
    notes = []
    if settings.runtime is not None and preset is None:
        notes.append(f"the {settings.runtime} preset has no manual clip window: the engine's "
                     "rules compute the panes")
    doc = {
        "axis": settings.axis, "axis_rule": axis_rule, "channels": u.n_channels,
        "units": u.title(), "group_size": settings.group_size,
        "group_axis": u.engine_axis if u.kind == "group" else None,
        "groups": u.n_units if u.kind == "group" and not u.refusal else None,
        "last_group": u.last_group, "method": method,
        "percentile": settings.percentile if method == "percentile" else None,
        "manual_clip": (list(settings.manual_clip)
                        if manual and settings.manual_clip is not None else None),
        "preset": preset, "bits": settings.bits,
        "rounding": settings.rounding if preset is None else "by preset",
        "narrow_range": settings.narrow_range, "notes": notes,
    }
    return doc


@dataclass(frozen=True, eq=False)
class ComputeRequest:
    """An immutable snapshot of what to compute; safe to hand to a worker thread."""

    generation: int
    tensor: np.ndarray
    settings: Settings
    prepared: Prepared | None = None
    panes: tuple[str, ...] = PANES
    ranges: Memo | None = None  # per-unit min/max, a ReportCache's: shared on this tensor
    reports: Memo | None = None  # params fingerprint -> report, shared likewise


@dataclass(frozen=True, eq=False)
class ComputeResult:
    """Reports (and per-pane error messages) for one request, stamped with its generation."""

    generation: int
    settings: Settings
    reports: dict[str, QuantReport]
    errors: dict[str, str] = field(default_factory=dict)
    complete: bool = True  # False: the panes ready first, ahead of the rest
    #: pane -> the sorted values its own units clip (per channel or group), gathered on the
    #: job's thread so that drawing them costs the owner's only a binning
    clipped: dict[str, Any] = field(default_factory=dict)
    #: pane -> what it draws of its report, and histograms by key, shaped on the job's thread
    #: (:func:`quantscope.state.drawing.with_drawing`)
    displays: dict[str, Any] = field(default_factory=dict)
    histograms: dict[Any, Any] = field(default_factory=dict)


def compute_reports(request: ComputeRequest,
                    on_partial: Callable[[ComputeResult], None] | None = None,
                    beside: Beside | None = None) -> ComputeResult:
    """Run the engine for every pane of ``request``: a pure function, callable from any thread.

    A pane whose settings the engine refuses (e.g. per-channel on a 1-element axis with a
    runtime that forbids it) gets an error message instead of a report; the others still
    compute, so one odd pane never blanks the window. When the per-channel panes run on their
    own threads, ``on_partial`` receives the per-tensor panes (ready in about a millisecond)
    while they do, so the window can draw those meanwhile. ``beside(fns)`` starts those
    threads' work and returns the function that waits for it: the scheduler's helpers
    (:meth:`quantscope.state.scheduler.JobContext.beside`) in the window; without it, threads
    made for this call and joined before it returns.
    """
    reports: dict[str, QuantReport] = {}
    errors: dict[str, str] = {}

    cache = request.reports

    def one(pane: str) -> None:
        try:
            params = pane_params(request.tensor, pane, request.settings, request.ranges,
                                 request.prepared)
            key = params_key(params) if cache is not None else None
            hit = cache.get(key) if cache is not None and key is not None else None
            reports[pane] = hit or analyze_with(request.tensor, request.prepared, params)
            if cache is not None and key is not None and hit is None:
                cache.setdefault(key, reports[pane])
        except QuantscopeError as exc:
            errors[pane] = str(exc)

    units = [p for p in request.panes if not PaneKey.parse(p).per_tensor]
    big = request.prepared is not None and request.tensor.size >= PARALLEL_MIN_SIZE
    if big and len(units) > 1 and PARALLEL_CORES and _warm_layout(request):
        # the per-channel reports dominate (60+ ms each at 16M); the engine's kernel releases
        # the GIL, so the two run side by side while this thread does the rest
        start = beside or _threads_beside
        ready = [p for p in request.panes if p not in units]
        first = None
        if request.settings.method == "mse" and len(ready) > 1:
            # the per-tensor searches (tens of ms each) go first, side by side on the helpers,
            # whose searches then take the engine's threads ahead of the per-channel ones'
            # hundreds of shares: on this thread they ran one after the other, niced, and
            # ended last, the second on one core while the other had nothing left to do
            first = start([functools.partial(one, p) for p in ready])
        try:
            wait = start([functools.partial(one, p) for p in units])
        except BaseException:
            if first is not None:
                first()  # never raise while the per-tensor panes still run either
            raise
        try:
            if first is not None:
                first()
            else:
                for pane in ready:
                    one(pane)
            if on_partial is not None:  # the unit panes' threads still write to the dicts
                on_partial(ComputeResult(
                    request.generation, request.settings,
                    {p: reports[p] for p in ready if p in reports},
                    {p: errors[p] for p in ready if p in errors}, complete=False))
        finally:
            wait()  # never return (or raise) while the unit panes still run
    else:
        for pane in request.panes:
            one(pane)
    order = {p: i for i, p in enumerate(request.panes)}
    return ComputeResult(request.generation, request.settings,
                         dict(sorted(reports.items(), key=lambda kv: order[kv[0]])), errors)


#: ``beside(fns) -> wait``: run ``fns`` on other threads; ``wait()`` gives their results.
Beside = Callable[[list[Callable[[], object]]], Callable[[], list]]


def _threads_beside(fns: list[Callable[[], object]]) -> Callable[[], list]:
    """``beside`` for a caller without a scheduler: a thread per function, joined by
    ``wait()``. The threads keep the caller's priorities: the caller waits for them."""
    pool = ThreadPoolExecutor(len(fns), thread_name_prefix="quantscope-pane",
                              initializer=shares_at, initargs=(share_niceness(),))
    futures = [pool.submit(fn) for fn in fns]

    def wait() -> list:
        try:
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=True)

    return wait


#: Reports remembered per tensor: dragging a slider back over positions already seen, or a
#: change that leaves a pane's parameters as they were (narrow range and the asymmetric panes),
#: then costs a dictionary look-up instead of an engine pass.
REPORT_CACHE_SIZE = 64


class Memo:
    """A dictionary whose every look-up and insertion holds one lock; past ``size`` entries
    the oldest goes first. The compute job, its helper threads and the GUI thread share a
    tensor's memos: a plain dict's eviction (``pop(next(iter(d)))``) could meet another
    thread's insertion half-way."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: dict = {}

    def get(self, key, default=None):
        with self._lock:
            return self._items.get(key, default)

    def setdefault(self, key, value):
        """``value`` stored under ``key`` unless one is already there; the stored one."""
        with self._lock:
            if key not in self._items:
                if self.size is not None and len(self._items) >= self.size:
                    self._items.pop(next(iter(self._items)))  # oldest (insertion order)
                self._items[key] = value
            return self._items[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class ReportCache:
    """The one owner of a tensor's memos: each unit layout's finite (min, max) and, unless
    ``reports`` is False, the reports by their parameters' fingerprint
    (:data:`REPORT_CACHE_SIZE` of them). The explorer's state makes one per tensor; requests
    carry its memos, never a memo of their own, and change them only through
    :class:`Memo`'s locked methods (the engine call itself runs outside the lock)."""

    def __init__(self, reports: bool = True) -> None:
        self.ranges = Memo()
        self.reports = Memo(REPORT_CACHE_SIZE) if reports else None


def params_key(params: QuantParams | FormatParams) -> tuple | None:
    """A hashable fingerprint of every field of ``params`` (arrays by shape, dtype and bytes),
    or None when a field cannot be fingerprinted (then the report is simply not cached)."""
    def freeze(v):
        if isinstance(v, np.ndarray):
            return ("array", v.shape, v.dtype.str, v.tobytes())
        if isinstance(v, dict):
            return tuple(sorted((k, freeze(x)) for k, x in v.items()))
        if isinstance(v, list | tuple):
            return tuple(freeze(x) for x in v)
        hash(v)
        return v

    try:
        return tuple((f.name, freeze(getattr(params, f.name)))
                     for f in dataclasses.fields(params))
    except TypeError:
        return None


#: Below this many elements every pane is computed on one thread (threads would cost more).
PARALLEL_MIN_SIZE = 1 << 20
#: The per-channel panes on threads of their own wherever there are two cores: the kernel
#: releases the GIL.
PARALLEL_CORES = (os.cpu_count() or 1) >= 2


#: How much nicer than the window's thread background threads run (Linux: per thread).
BACKGROUND_NICENESS = 5


def lower_thread_priority() -> None:
    """Make the calling thread background work: :data:`BACKGROUND_NICENESS` nicer than the
    process's main thread (the window's), whatever the thread was born with.

    A view's sweep or a model scan can keep both cores busy for seconds; at equal priority the
    GUI thread queued behind them for its paints and timers. Lowering only these threads
    (Linux keeps a nice value per thread) keeps the window responsive and costs them nothing
    when it is idle. The level counts from the main thread, not from the caller's own value:
    a thread made by a lowered thread is born lowered, and lowering it again compounded (nice
    10, a tenth of a core's share beside one busy process). The compiled shares of the work a
    user waits for still run at the window's priority (:mod:`quantscope.state.scheduler`).
    Elsewhere, or when not permitted, it does nothing.
    """
    target = min(process_niceness() + BACKGROUND_NICENESS, 19)
    if thread_niceness() < target:
        set_thread_niceness(target)


def _warm_layout(request: ComputeRequest) -> bool:
    """Build the prepared per-unit layout before two threads ask for it at once."""
    s = request.settings
    u = units(request.tensor.shape, s.axis, s.group_size)
    if u.refusal:
        return False
    if request.prepared is None:
        return False
    try:
        request.prepared.layout(u.engine_axis, u.group_size)
    except (QuantscopeError, AttributeError):
        return False
    return True
