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

from quantscope.core import Prepared, QuantParams, QuantReport, choose_qparams, params_from_range
from quantscope.core.kernels.parallel import (
    process_niceness,
    set_thread_niceness,
    share_niceness,
    shares_at,
    thread_niceness,
)
from quantscope.core.schemes.qparams import unit_min_max
from quantscope.core.schemes.quantize import COMPILED_MIN
from quantscope.errors import QuantscopeError
from quantscope.state.axes import units
from quantscope.state.errors import SettingsError
from quantscope.state.settings import PANES, Settings

if TYPE_CHECKING:  # for the annotations only: formats loads Numba, a report must not
    from quantscope.core.formats.catalog import FormatParams


def unit_range(x: np.ndarray, axis: int | None, group_size: int | None,
               ranges: dict | Memo | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each unit's finite (min, max) by the engine's :func:`unit_min_max`, memoised in
    ``ranges`` (a :class:`ReportCache`'s memo, or any dict; one per tensor): a 16M-element
    pass costs ~20 ms, and a slider drag would otherwise repeat it for every pane on every
    step."""
    key = (axis, group_size)
    hit = ranges.get(key) if ranges is not None else None
    if hit is not None:
        return hit
    lo, hi, _ = unit_min_max(x, axis, group_size)
    return (lo, hi) if ranges is None else ranges.setdefault(key, (lo, hi))


def pane_params(x: np.ndarray, pane: str, settings: Settings,
                ranges: dict | Memo | None = None, prepared: Prepared | None = None
                ) -> QuantParams | FormatParams:
    """The parameters of one pane: the one mapping from (tensor, settings) to numbers.

    The window's panes, its views and ``quantscope report`` all come through here. Ranges go
    through :func:`quantscope.core.choose_qparams`, with two exceptions that are the same
    engine calls on a range already known: min/max under the engine's rules is
    ``params_from_range`` of the units' min/max, exactly what ``choose_qparams`` computes (the
    ranges memoised in ``ranges``: a pass over 16M elements costs ~20 ms per pane per slider
    step; a test holds the two to identical parameters), and a manual clip is a range the user
    picked (per channel, each channel's own min/max capped by the window). A runtime preset has
    no manual window; under one the engine's rules apply and :func:`applied_settings` says so.

    Per-channel panes use the channel axis; per-group panes the reduction axis
    (:mod:`quantscope.state.axes`). A layout the tensor cannot have raises
    :class:`SettingsError` with the reason, which the pane shows instead of numbers.
    """
    if pane not in PANES:
        raise SettingsError(f"unknown pane {pane!r}; panes are {PANES}")
    if settings.formats is not None:  # the comparison layout: a format per pane
        from quantscope.state.formats import format_pane_params

        return format_pane_params(x, settings.formats[PANES.index(pane)], settings, prepared)
    sym, gran = pane.split("/")
    symmetric = sym == "symmetric"
    axis = group = None
    granularity = "tensor"
    if gran != "tensor":
        u = units(x.shape, settings.axis, settings.group_size)
        if u.refusal:
            raise SettingsError(u.refusal)
        axis, group, granularity = u.engine_axis, u.group_size, u.kind
    narrow = settings.narrow_range
    if settings.runtime is not None and preset_rules(settings.runtime, settings.bits)[
            "code_range"] is not None:
        narrow = None  # the preset decides the code range (the control shows its value)
    common: dict[str, Any] = dict(symmetric=symmetric, bits=settings.bits, narrow_range=narrow)
    if settings.method == "manual" and settings.manual_clip is not None:
        lo, hi = settings.manual_clip
        if symmetric:
            t = max(abs(lo), abs(hi))
            lo, hi = -t, t
        if granularity == "tensor":
            return params_from_range(lo, hi, rounding=settings.rounding, method="manual",
                                     **common)
        u_lo, u_hi = unit_range(x, axis, group, ranges)
        return params_from_range(np.maximum(u_lo, lo), np.minimum(u_hi, hi), axis=axis,
                                 group_size=group, rounding=settings.rounding, method="manual",
                                 **common)
    method = "minmax" if settings.method == "manual" else settings.method
    if method == "minmax" and settings.runtime is None:
        mins, maxs = unit_range(x, axis, group, ranges)
        return params_from_range(mins, maxs, axis=axis, group_size=group,
                                 rounding=settings.rounding, method="minmax", **common)
    options = {"percentile": settings.percentile} if method == "percentile" else {}
    kw = dict(granularity=granularity, axis=0 if axis is None else axis, group_size=group,
              method=method, prepared=prepared, **common, **options)
    if settings.runtime is not None:
        return choose_qparams(x, runtime=settings.runtime, **kw)
    return choose_qparams(x, rounding=settings.rounding, **kw)


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
    preset = settings.runtime
    notes = []
    if manual and preset is not None:
        notes.append(f"the {preset} preset has no manual clip window: the engine's rules "
                     "compute the panes")
        preset = None
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


@functools.lru_cache(maxsize=64)
def preset_rules(runtime: str | None, bits: int = 8) -> dict:
    """What a runtime preset decides instead of the controls, as the preset declares it
    (:func:`quantscope.core.calibration.runtimes.preset_fixes`): ``"rounding"``, its rule
    when both schemes round alike, else None; ``"rounding_text"``, what the rounding control
    shows greyed (``"sym half_away / asym half_even"`` where the schemes differ), None when
    the control decides; ``"code_range"``, the symmetric and asymmetric code ranges as text
    when the preset fixes them, else None."""
    out: dict = {"rounding": None, "rounding_text": None, "code_range": None}
    if runtime is None:
        return out
    from quantscope.core.calibration.runtimes import preset_fixes

    fixes = {k[:4] if k.startswith("asym") else k[:3]: v
             for k, v in preset_fixes(runtime, bits).items() if v is not None}
    roundings = {v["rounding"] for v in fixes.values()}
    if len(roundings) == 1:
        out["rounding"] = out["rounding_text"] = roundings.pop()
    else:
        out["rounding_text"] = " / ".join(f"{k} {v['rounding']}" for k, v in fixes.items())
    if all(v["narrow_range"] is not None for v in fixes.values()):
        out["code_range"] = " / ".join(f"{k} {v['qmin']}…{v['qmax']}"
                                       for k, v in fixes.items()) or None
    return out


def analyze_with(x: np.ndarray, prepared: Prepared | None, params: QuantParams | FormatParams
                 ) -> QuantReport:
    """The one place that picks the fast exact path or the direct pass. Both are exact to
    1e-9 but sum in different orders, so the window and ``quantscope report`` must take the
    same one to agree to the last digit: the prepared path when the tensor is prepared, except
    for a tensor of at most ``DIRECT_MAX`` elements, which takes the direct pass either way
    (NumPy alone, about a millisecond; a one-shot report on it then needs no preparation and
    loads no compiled loop, see :func:`needs_preparation`)."""
    if prepared is not None and x.size > DIRECT_MAX:
        return prepared.analyze(params)
    from quantscope.core import analyze

    return analyze(x, params)


def needs_preparation(x: np.ndarray, settings: Settings) -> bool:
    """Whether reports on ``x`` under ``settings`` come out of the prepared path, so a caller
    that computes once (``quantscope report``) must prepare ``x`` to get the window's numbers:
    a tensor above ``DIRECT_MAX`` elements, or a calibration that searches the sorted values
    (min/max and a manual window need none)."""
    return x.size > DIRECT_MAX or settings.method not in ("minmax", "manual")


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

    units = [p for p in request.panes if not p.endswith("/tensor")]
    big = request.prepared is not None and request.tensor.size >= PARALLEL_MIN_SIZE
    if big and len(units) > 1 and PARALLEL_CORES and _warm_layout(request):
        # the per-channel reports dominate (60+ ms each at 16M); the engine's kernel releases
        # the GIL, so the two run side by side while this thread does the rest
        wait = (beside or _threads_beside)([functools.partial(one, p) for p in units])
        try:
            for pane in request.panes:
                if pane not in units:
                    one(pane)
            if on_partial is not None:  # the unit panes' threads still write to the dicts
                ready = [p for p in request.panes if p not in units]
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
#: At most this many elements, reports take the direct pass (see :func:`analyze_with`): the
#: size below which that pass is NumPy alone (``quantscope.core.schemes.quantize.COMPILED_MIN``).
DIRECT_MAX = COMPILED_MIN
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
