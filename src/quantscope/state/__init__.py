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
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from psygnal import Signal

from quantscope.core import QuantParams, QuantReport, choose_qparams, params_from_range
from quantscope.core.qparams import unit_min_max
from quantscope.core.validate import ROUNDING_RULES
from quantscope.errors import QuantscopeError
from quantscope.state.errors import SettingsError
from quantscope.state.source import (
    Source,
    TensorOverview,
    load_source,
    overview,
    prepare_tensor,
    tensor_problem,
)

__all__ = [
    "METHODS",
    "PANES",
    "RUNTIMES",
    "ComputeRequest",
    "ComputeResult",
    "ExplorerState",
    "Settings",
    "SettingsError",
    "Source",
    "TensorOverview",
    "compute_reports",
    "load_source",
    "overview",
    "pane_params",
    "pane_title",
    "params_key",
    "prepare_tensor",
    "tensor_problem",
]

#: The four panes: symmetric / asymmetric x per tensor / per channel (per group when
#: ``Settings.group_size`` is set).
PANES = ("symmetric/tensor", "symmetric/channel", "asymmetric/tensor", "asymmetric/channel")
METHODS = ("minmax", "percentile", "mse", "entropy", "manual")
RUNTIMES = (None, "pytorch", "onnxruntime", "tflite", "tensorrt")


@dataclass(frozen=True)
class Settings:
    """Everything that turns a tensor into four quantizations (engine defaults throughout).

    ``manual_clip`` is the ``[lo, hi]`` window used when ``method == "manual"``; symmetric
    panes use ``max(|lo|, |hi|)``, and per-channel panes cap each channel's own range by it.
    ``group_size`` turns the per-channel panes into per-group panes along ``axis``.
    """

    method: str = "minmax"
    percentile: float = 99.99
    manual_clip: tuple[float, float] | None = None
    rounding: str = "half_even"
    narrow_range: bool | None = None
    bits: int = 8
    axis: int = 0
    group_size: int | None = None
    runtime: str | None = None

    def check(self, ndim: int | None = None) -> Settings:
        """Return self if every field is valid (for a tensor of ``ndim`` dims), else raise."""
        if self.method not in METHODS:
            raise SettingsError(f"method must be one of {METHODS}, got {self.method!r}")
        if not (isinstance(self.percentile, int | float) and 0 < self.percentile <= 100):
            raise SettingsError(f"percentile must be in (0, 100], got {self.percentile!r}")
        if self.manual_clip is not None:
            lo, hi = self.manual_clip
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise SettingsError(f"manual clip needs finite lo < hi, got {self.manual_clip}")
        if self.rounding not in ROUNDING_RULES:
            raise SettingsError(f"rounding must be one of {ROUNDING_RULES}, got {self.rounding!r}")
        if self.narrow_range not in (None, True, False):
            raise SettingsError(f"narrow_range must be None, True or False, "
                                f"got {self.narrow_range!r}")
        if not (isinstance(self.bits, int) and 2 <= self.bits <= 8):
            raise SettingsError(f"bits must be an integer from 2 to 8, got {self.bits!r}")
        if not isinstance(self.axis, int):
            raise SettingsError(f"axis must be an integer, got {self.axis!r}")
        if ndim is not None and ndim > 0 and not -ndim <= self.axis < ndim:
            raise SettingsError(f"axis {self.axis} is out of range for a {ndim}-d tensor")
        if self.group_size is not None and not (isinstance(self.group_size, int)
                                                and self.group_size >= 1):
            raise SettingsError(f"group size must be None or an integer >= 1, "
                                f"got {self.group_size!r}")
        if self.runtime not in RUNTIMES:
            raise SettingsError(f"runtime must be one of {RUNTIMES}, got {self.runtime!r}")
        return self

    def to_dict(self) -> dict:
        """JSON-ready form (for sessions and the metrics file)."""
        d = dataclasses.asdict(self)
        d["manual_clip"] = list(self.manual_clip) if self.manual_clip else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Settings:
        """Inverse of :meth:`to_dict`; unknown keys are refused so typos do not pass silently."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise SettingsError(f"unknown setting(s) {sorted(unknown)}")
        d = dict(d)
        if d.get("manual_clip") is not None:
            d["manual_clip"] = tuple(float(v) for v in d["manual_clip"])
        return cls(**d).check()


def pane_title(pane: str, settings: Settings | None = None) -> str:
    """``"Symmetric · per-tensor"`` ...; per-channel panes say per-group when groups are on."""
    sym, gran = pane.split("/")
    if gran == "channel" and settings is not None and settings.group_size:
        gran_text = f"per-group ({settings.group_size})"
    else:
        gran_text = f"per-{gran}"
    return f"{sym.capitalize()} · {gran_text}"


def unit_range(x: np.ndarray, axis: int | None, group_size: int | None,
               ranges: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each unit's finite (min, max) by the engine's :func:`unit_min_max`, memoised in
    ``ranges`` (one dict per tensor): a 16M-element pass costs ~20 ms, and a slider drag
    would otherwise repeat it for every pane on every step."""
    key = (axis, group_size)
    if ranges is not None and key in ranges:
        return ranges[key]
    lo, hi, _ = unit_min_max(x, axis, group_size)
    if ranges is not None:
        ranges[key] = (lo, hi)
    return lo, hi


def pane_params(x: np.ndarray, pane: str, settings: Settings,
                ranges: dict | None = None) -> QuantParams:
    """The engine call that builds one pane's parameters from the settings.

    Everything goes through :func:`quantscope.core.choose_qparams` except two ranges that are
    already known: min/max under the engine's own rules is exactly ``params_from_range`` of the
    units' min/max (what ``choose_qparams`` does, with the ranges memoised in ``ranges``), and a
    manual clip is a range the user picked (per channel, each channel's own min/max capped by
    the window; the engine's rules apply even with a runtime preset, which has no manual mode).
    """
    if pane not in PANES:
        raise SettingsError(f"unknown pane {pane!r}; panes are {PANES}")
    sym, gran = pane.split("/")
    symmetric = sym == "symmetric"
    granularity = "tensor" if gran == "tensor" else ("group" if settings.group_size else "channel")
    common = dict(symmetric=symmetric, bits=settings.bits, narrow_range=settings.narrow_range)
    axis = None if granularity == "tensor" else settings.axis
    group = settings.group_size if granularity == "group" else None
    method = "minmax" if settings.method == "manual" else settings.method
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
    if method == "minmax" and settings.runtime is None:
        if x.ndim == 0 and axis is not None:  # let the engine refuse it with its message
            return choose_qparams(x, granularity=granularity, axis=settings.axis)
        lo, hi = unit_range(x, axis, group, ranges)
        return params_from_range(lo, hi, axis=axis, group_size=group,
                                 rounding=settings.rounding, method="minmax", **common)
    options = {"percentile": settings.percentile} if method == "percentile" else {}
    kw = dict(granularity=granularity, axis=settings.axis, group_size=settings.group_size,
              method=method, **common, **options)
    if settings.runtime is not None:
        return choose_qparams(x, runtime=settings.runtime, **kw)
    return choose_qparams(x, rounding=settings.rounding, **kw)


def analyze_with(x: np.ndarray, prepared, params: QuantParams) -> QuantReport:
    """The one place that picks the fast exact path or the direct pass (same numbers)."""
    if prepared is not None:
        return prepared.analyze(params)
    from quantscope.core import analyze

    return analyze(x, params)


@dataclass(frozen=True, eq=False)
class ComputeRequest:
    """An immutable snapshot of what to compute; safe to hand to a worker thread."""

    generation: int
    tensor: np.ndarray
    settings: Settings
    prepared: object | None = None
    panes: tuple[str, ...] = PANES
    ranges: dict | None = None  # per-unit min/max memo shared by requests on this tensor
    reports: dict | None = None  # params fingerprint -> report, shared likewise


@dataclass(frozen=True, eq=False)
class ComputeResult:
    """Reports (and per-pane error messages) for one request, stamped with its generation."""

    generation: int
    settings: Settings
    reports: dict[str, QuantReport]
    errors: dict[str, str] = field(default_factory=dict)


def compute_reports(request: ComputeRequest) -> ComputeResult:
    """Run the engine for every pane of ``request``: a pure function, callable from any thread.

    A pane whose settings the engine refuses (e.g. per-channel on a 1-element axis with a
    runtime that forbids it) gets an error message instead of a report; the others still
    compute, so one odd pane never blanks the window.
    """
    reports: dict[str, QuantReport] = {}
    errors: dict[str, str] = {}

    cache = request.reports

    def one(pane: str) -> None:
        try:
            params = pane_params(request.tensor, pane, request.settings, request.ranges)
            key = params_key(params) if cache is not None else None
            hit = cache.get(key) if key is not None else None
            reports[pane] = hit or analyze_with(request.tensor, request.prepared, params)
            if key is not None and hit is None:
                if len(cache) >= REPORT_CACHE_SIZE:
                    cache.pop(next(iter(cache)))  # oldest first (dicts keep insertion order)
                cache[key] = reports[pane]
        except QuantscopeError as exc:
            errors[pane] = str(exc)

    units = [p for p in request.panes if not p.endswith("/tensor")]
    big = request.prepared is not None and request.tensor.size >= PARALLEL_MIN_SIZE
    if big and len(units) > 1 and PARALLEL_CORES and _warm_layout(request):
        # the per-channel reports dominate (100+ ms each at 16M); the engine's searches
        # release the GIL, so the two run side by side while this thread does the rest
        with ThreadPoolExecutor(len(units), thread_name_prefix="quantscope-pane") as pool:
            futures = [pool.submit(one, p) for p in units]
            for pane in request.panes:
                if pane not in units:
                    one(pane)
            for f in futures:
                f.result()
    else:
        for pane in request.panes:
            one(pane)
    order = {p: i for i, p in enumerate(request.panes)}
    return ComputeResult(request.generation, request.settings,
                         dict(sorted(reports.items(), key=lambda kv: order[kv[0]])), errors)


#: Reports remembered per tensor: dragging a slider back over positions already seen, or a
#: change that leaves a pane's parameters as they were (narrow range and the asymmetric panes),
#: then costs a dictionary look-up instead of an engine pass.
REPORT_CACHE_SIZE = 64


def params_key(params: QuantParams):
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
#: Two extra busy threads only where they leave a core for the GUI thread: on a 2-core machine
#: they made the per-change latency ~20% shorter but the GUI's longest stall ~30 ms longer.
PARALLEL_CORES = (os.cpu_count() or 1) >= 4


def _warm_layout(request: ComputeRequest) -> bool:
    """Build the prepared per-unit layout before two threads ask for it at once."""
    s = request.settings
    try:
        request.prepared.layout(s.axis, s.group_size)
    except (QuantscopeError, AttributeError):
        return False
    return True


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
    prepared_changed()
        ``prepared`` / ``overview`` (the one-time preparation of the tensor) became available.
    error(str)
        A refused input or setting, as one readable sentence; the state did not change.
    """

    tensor_changed = Signal()
    settings_changed = Signal()
    results_changed = Signal()
    prepared_changed = Signal()
    error = Signal(str)

    def __init__(self, settings: Settings | None = None, *, cache_reports: bool = True) -> None:
        self.tensor: np.ndarray | None = None
        self.source: Source | None = None
        self.settings: Settings = (settings or Settings()).check()
        self.results: dict[str, QuantReport] = {}
        self.errors: dict[str, str] = {}
        self.prepared: object | None = None
        self.overview: TensorOverview | None = None
        self.generation = 0
        self._ranges: dict = {}
        self._reports: dict = {}
        #: Reuse reports for identical parameters (off: every change runs the engine, as the
        #: latency benchmark needs to measure).
        self.cache_reports = cache_reports

    # -- inputs ---------------------------------------------------------------------------
    def set_tensor(self, x, source: Source | None = None, *, prepared: object | None = None,
                   overview: TensorOverview | None = None) -> bool:
        """Install a new tensor; refuse empty, 0-d, non-numeric or all-NaN/inf input.

        On refusal ``error`` is emitted with the reason, the previous tensor and settings
        stay, and False is returned. ``source.axis`` (a suggested channel axis, e.g. -1 for
        [tokens, features] activations) sets ``settings.axis``; otherwise an axis the new
        tensor lacks falls back to 0. ``prepared``/``overview`` may be passed when a worker
        already computed them for this very array.
        """
        source = source or Source("array", "array")
        problem = tensor_problem(x)
        if problem is not None:
            self.error.emit(f"{source.label()}: {problem}")
            return False
        arr = np.asarray(x, dtype=np.float32).view()
        arr.flags.writeable = False  # shared with worker threads: nobody may edit it in place
        axis = self.settings.axis if source.axis is None else source.axis
        if not -arr.ndim <= axis < arr.ndim:
            axis = 0
        self.tensor, self.source = arr, source
        self._ranges, self._reports = {}, {}
        self.settings = dataclasses.replace(self.settings, axis=axis)
        self.prepared, self.overview = prepared, overview
        self._invalidate()
        self.tensor_changed.emit()
        if prepared is not None or overview is not None:
            self.prepared_changed.emit()
        return True

    def set_prepared(self, tensor: np.ndarray, prepared: object | None,
                     overview: TensorOverview | None) -> bool:
        """Install the preparation computed (off-thread) for ``tensor``; ignored if stale."""
        if tensor is not self.tensor:
            return False
        self.prepared = prepared if prepared is not None else self.prepared
        self.overview = overview if overview is not None else self.overview
        self.prepared_changed.emit()
        return True

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
    def params_for(self, pane: str) -> QuantParams:
        """The parameters ``pane`` uses for the current tensor and settings."""
        if self.tensor is None:
            raise SettingsError("no tensor loaded")
        return pane_params(self.tensor, pane, self.settings, self._ranges)

    def request(self) -> ComputeRequest:
        """Snapshot the current tensor and settings for :func:`compute_reports`."""
        if self.tensor is None:
            raise SettingsError("no tensor loaded")
        return ComputeRequest(self.generation, self.tensor, self.settings, self.prepared,
                              ranges=self._ranges,
                              reports=self._reports if self.cache_reports else None)

    def accept(self, result: ComputeResult) -> bool:
        """Install a result if it is still current (same generation); drop it otherwise."""
        if result.generation != self.generation:
            return False
        self.results, self.errors = dict(result.reports), dict(result.errors)
        self.results_changed.emit()
        return True

    def compute(self) -> dict[str, QuantReport]:
        """Compute and install the results synchronously (tests, scripts, the command line)."""
        self.accept(compute_reports(self.request()))
        return self.results
