"""One int pane's parameters from a tensor and the settings, and the one path from
parameters to a report: the rules the window, its views, ``quantscope report`` and the
comparison layout's int8 panes share (:mod:`quantscope.state.compute` runs them for the four
panes, :mod:`quantscope.state.formats` for the int8 format).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from quantscope.core import (
    Prepared,
    QuantParams,
    QuantReport,
    analyze,
    choose_qparams,
    params_from_range,
)
from quantscope.core.calibration.runtimes import preset_fixes
from quantscope.core.schemes.qparams import unit_min_max
from quantscope.core.schemes.quantize import COMPILED_MIN
from quantscope.state.axes import units
from quantscope.state.choices import PaneKey
from quantscope.state.errors import SettingsError
from quantscope.state.settings import Settings

if TYPE_CHECKING:  # for the annotations only: the format table loads Numba, a report must not
    from quantscope.core.formats.catalog import FormatParams

#: At most this many elements, reports take the direct pass (see :func:`analyze_with`): the
#: size below which that pass is NumPy alone (``quantscope.core.schemes.quantize.COMPILED_MIN``).
DIRECT_MAX = COMPILED_MIN

class RangeMemo(Protocol):
    """Where unit ranges are memoised: a dict, or a :class:`quantscope.state.compute.Memo`
    (whose look-ups hold a lock)."""

    def get(self, key: Any, default: Any = None) -> Any: ...

    def setdefault(self, key: Any, value: Any) -> Any: ...


def unit_range(x: np.ndarray, axis: int | None, group_size: int | None,
               ranges: RangeMemo | None = None) -> tuple[np.ndarray, np.ndarray]:
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


def preset_in_force(settings: Settings) -> str | None:
    """The runtime preset whose rules compute the panes: the one chosen, except under a
    manual clip window, which no preset has (the engine's rules and the controls' rounding
    and code range apply then, and :func:`quantscope.state.compute.applied_settings` says
    so)."""
    if settings.method == "manual" and settings.manual_clip is not None:
        return None
    return settings.runtime


def int_pane_params(x: np.ndarray, pane: PaneKey, settings: Settings,
                    ranges: RangeMemo | None = None, prepared: Prepared | None = None
                    ) -> QuantParams:
    """The parameters of one of the four int panes under ``settings`` (its comparison
    format, if any, is not looked at: :func:`quantscope.state.compute.pane_params` chooses).

    Ranges go
    through :func:`quantscope.core.choose_qparams`, with two exceptions that are the same
    engine calls on a range already known: min/max under the engine's rules is
    ``params_from_range`` of the units' min/max, exactly what ``choose_qparams`` computes (the
    ranges memoised in ``ranges``: a pass over 16M elements costs ~20 ms per pane per slider
    step; a test holds the two to identical parameters), and a manual clip is a range the user
    picked (per channel, each channel's own min/max capped by the window). A runtime preset has
    no manual window; under one the engine's rules apply (:func:`preset_in_force`).

    Per-channel panes use the channel axis; per-group panes the reduction axis
    (:mod:`quantscope.state.axes`). A layout the tensor cannot have raises
    :class:`SettingsError` with the reason, which the pane shows instead of numbers.
    """
    pane = PaneKey.parse(pane)
    symmetric = pane.symmetric
    axis = group = None
    granularity = "tensor"
    if not pane.per_tensor:
        u = units(x.shape, settings.axis, settings.group_size)
        if u.refusal:
            raise SettingsError(u.refusal)
        axis, group, granularity = u.engine_axis, u.group_size, u.kind
    preset = preset_in_force(settings)
    narrow = settings.narrow_range
    if preset is not None and preset_rules(preset, settings.bits)["code_range"] is not None:
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
    if method == "minmax" and preset is None:
        mins, maxs = unit_range(x, axis, group, ranges)
        return params_from_range(mins, maxs, axis=axis, group_size=group,
                                 rounding=settings.rounding, method="minmax", **common)
    options = {"percentile": settings.percentile} if method == "percentile" else {}
    kw = dict(granularity=granularity, axis=0 if axis is None else axis, group_size=group,
              method=method, prepared=prepared, **common, **options)
    if preset is not None:
        return choose_qparams(x, runtime=preset, **kw)
    return choose_qparams(x, rounding=settings.rounding, **kw)


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


class Reports(Protocol):
    """What :func:`analyze_with` asks of a preparation: a :class:`Prepared`, or a
    :class:`~quantscope.state.prepared_on_demand.PreparedOnDemand` that makes one on first
    need."""

    def analyze(self, params: QuantParams | FormatParams) -> QuantReport: ...


def analyze_with(x: np.ndarray, prepared: Reports | None, params: QuantParams | FormatParams
                 ) -> QuantReport:
    """The one place that picks the fast exact path or the direct pass. Both are exact to
    1e-9 but sum in different orders, so the window and ``quantscope report`` must take the
    same one to agree to the last digit: the prepared path when the tensor is prepared, except
    for a tensor of at most ``DIRECT_MAX`` elements, which takes the direct pass either way
    (NumPy alone, about a millisecond; a one-shot report on it then needs no preparation and
    loads no compiled loop, see :func:`needs_preparation`)."""
    if prepared is not None and x.size > DIRECT_MAX:
        return prepared.analyze(params)
    return analyze(x, params)


def needs_preparation(x: np.ndarray, settings: Settings) -> bool:
    """Whether reports on ``x`` under ``settings`` come out of the prepared path, so a caller
    that computes once (``quantscope report``) must prepare ``x`` to get the window's numbers:
    a tensor above ``DIRECT_MAX`` elements, or a calibration that searches the sorted values
    (min/max and a manual window need none)."""
    return x.size > DIRECT_MAX or settings.method not in ("minmax", "manual")


