"""The comparison layout: each of the four panes shows a number format of its own.

``Settings.formats`` names one format per pane (in the order of :data:`PANES`), each
``"NAME"`` for a block or group format (``"mxfp4"``, ``"nvfp4"``, ``"int4_g128"``...) or
``"NAME/tensor"`` / ``"NAME/channel"`` for int8 and the element formats (``"fp8_e4m3/tensor"``,
``"int8/channel"``); None is the classic layout of four int schemes. The method applies where a
format has a calibrated scale (int8 and the element formats; a manual clip caps each unit's
amax); block formats take their scales from each block's amax, as their specifications say,
except that the MSE method gives the formats of ``BLOCK_MSE_KINDS`` each block's stored scale
of least error (:func:`quantscope.core.calibration.format_choose.block_params`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from quantscope.core import QuantParams, choose_qparams
from quantscope.core.formats.catalog import (
    BLOCK_MSE_KINDS,
    FORMAT_TABLE,
    FormatParams,
    bits_per_element,
    element_of,
    format_kind,
)
from quantscope.core.formats.gguf_types import GGUF_TYPES
from quantscope.core.formats.int4_tools import TOOL_INT4
from quantscope.core.labs.explain import clip_window
from quantscope.core.stats.format_sweep import ErrorScreen, bounds, screenable, signal_sum
from quantscope.core.tensors.validate import as_float32
from quantscope.errors import Cancelled, QuantscopeError
from quantscope.state.axes import units
from quantscope.state.choices import FormatChoice, PaneKey, offered_formats
from quantscope.state.errors import SettingsError
from quantscope.state.pane_rules import RangeMemo, analyze_with, int_pane_params, unit_range
from quantscope.state.prepared_on_demand import PreparedOnDemand
from quantscope.state.row_slices import GgufSliceScreen, RowSliceScreen, row_local

#: The comparison shown first (``--compare`` without a list): int8 per channel, FP8 E4M3 per
#: tensor, MXFP4 and INT4 g128 on the same tensor.
DEFAULT_COMPARISON = tuple(map(FormatChoice, ("int8/channel", "fp8_e4m3/tensor", "mxfp4",
                                              "int4_g128")))

_LABELS = {
    "int8": "int8", "int4_g32": "INT4 g32", "int4_g64": "INT4 g64", "int4_g128": "INT4 g128",
    "gptq_int4_g128": "GPTQ INT4 g128", "gptq_int4_g128_asym": "GPTQ INT4 g128 asym",
    "awq_int4_g128": "AWQ INT4 g128", "torchao_int4_g32": "torchao INT4 g32",
    "torchao_int4_g64": "torchao INT4 g64", "torchao_int4_g128": "torchao INT4 g128",
    "fp8_e4m3": "FP8 E4M3", "fp8_e5m2": "FP8 E5M2", "fp8_e4m3fnuz": "FP8 E4M3FNUZ",
    "fp8_e5m2fnuz": "FP8 E5M2FNUZ", "fp6_e2m3": "FP6 E2M3", "fp6_e3m2": "FP6 E3M2",
    "fp4_e2m1": "FP4 E2M1", "mxfp8_e4m3": "MXFP8 E4M3", "mxfp8_e5m2": "MXFP8 E5M2",
    "mxfp6_e2m3": "MXFP6 E2M3", "mxfp6_e3m2": "MXFP6 E3M2", "mxfp4": "MXFP4",
    "mxint8": "MXINT8", "nvfp4": "NVFP4 (torchao)",
    "nvfp4_modelopt": "NVFP4 (ModelOpt)", "nf4": "NF4",
    **{name: f"GGUF {t.ggml_name}" for name, t in GGUF_TYPES.items()},
}
#: After the name: the blocks (the pane's heading), then their scales (its detail line).
_BLOCK_NOTE = {"mx": "blocks of 32 · E8M0 scales", "nvfp4": "blocks of 16 · E4M3 + FP32 scales",
               "nf4": "blocks of 64 · absmax scales", "int": "fp16 scales",
               "torchao": "bf16 scales + float zeros"}
#: The same under the MSE method, for the formats of ``BLOCK_MSE_KINDS``: what is searched.
_MSE_NOTE = {"mx": "blocks of 32 · MSE-optimal E8M0 scales",
             "nvfp4": "blocks of 16 · MSE-optimal E4M3 scales, FP32 from amax",
             "nf4": "blocks of 64 · MSE-optimal float32 scales"}


#: Every pane format the window offers (see :func:`quantscope.state.choices.offered_formats`).
CHOICES = offered_formats()


def format_title(spec: str, settings=None, shape: tuple[int, ...] | None = None) -> str:
    """``"FP8 E4M3 · per-tensor"``, ``"MXFP4 · blocks of 32 · E8M0 scales"``...; a per-channel
    format with the tensor's ``shape`` says its axis and channels, as the int panes do."""
    choice = FormatChoice(spec)
    name, gran = choice.name, choice.granularity
    if gran == "channel" and settings is not None and shape is not None:
        return f"{_LABELS[name]} · {units(tuple(shape), settings.axis, None).title()}"
    if gran:
        return f"{_LABELS[name]} · per-{gran}"
    kind = format_kind(name)
    if kind == "gguf":
        t = GGUF_TYPES[name]
        note = (f"super-blocks of {t.block} · fp16 + quantized sub-block scales"
                if t.block == 256 else f"blocks of {t.block} · fp16 scales")
        return f"{_LABELS[name]} · {note}"
    if block_mse(name, settings):
        return f"{_LABELS[name]} · {_MSE_NOTE[kind]}"
    return f"{_LABELS[name]} · {_BLOCK_NOTE[kind]}"


def block_mse(name: str, settings) -> bool:
    """Whether the pane of block format ``name`` searches each block's stored scale for the
    least error under ``settings`` (the MSE method, a format of ``BLOCK_MSE_KINDS``)."""
    return (settings is not None and settings.method == "mse"
            and format_kind(name) in BLOCK_MSE_KINDS)


def format_pane_params(x: np.ndarray, spec: str, settings, prepared=None,
                       ranges: RangeMemo | None = None) -> QuantParams | FormatParams:
    """The parameters of one comparison pane (see the module docstring). ``ranges`` memoises
    the units' min/max (:func:`~quantscope.state.pane_rules.unit_range`, one memo per tensor):
    int8 and the element formats under min/max ranges then share one pass over the tensor
    per layout instead of one per format."""
    choice = FormatChoice(spec)
    name, gran = choice.name, choice.granularity
    kind = format_kind(name)
    method = settings.method
    options = {"percentile": settings.percentile} if method == "percentile" else {}
    if name != "int8" and kind != "element":
        if kind == "int" and name in TOOL_INT4:  # the tool's own range rule, nothing else
            return choose_qparams(x, format=name, prepared=prepared)
        if kind == "int":  # INT4 groups: the integer calibration methods apply
            m = "minmax" if method == "manual" else method
            opts = options if m == "percentile" else {}
            return choose_qparams(x, format=name, method=m, prepared=prepared, **opts)
        if block_mse(name, settings):  # each block's stored scale of least error
            return choose_qparams(x, format=name, method="mse", prepared=prepared)
        return choose_qparams(x, format=name, prepared=prepared)
    if name == "int8":  # the classic symmetric pane's rules, at 8 bits
        plain = dataclasses.replace(settings, formats=None, bits=8, group_size=None)
        return int_pane_params(x, PaneKey.of(True, gran or "tensor"), plain, ranges=ranges,
                               prepared=prepared)
    if gran is None:
        raise SettingsError(f"format {name} needs a granularity: {name}/tensor or "
                            f"{name}/channel")
    axis = None
    if gran == "channel":  # the channel axis exactly as the int panes take it
        u = units(x.shape, settings.axis, None)
        if u.refusal:
            raise SettingsError(u.refusal)
        axis = u.engine_axis
    if method == "manual":
        p = _element_minmax(x, name, gran, axis, prepared, ranges)
        if settings.manual_clip is None:
            return p
        cap = max(abs(settings.manual_clip[0]), abs(settings.manual_clip[1]))
        scale = np.minimum(p.scale, np.float32(cap / p.element.max_finite))
        scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
        return FormatParams(name, scale, axis=p.axis, method="manual")
    if method == "minmax":
        return _element_minmax(x, name, gran, axis, prepared, ranges)
    return choose_qparams(x, format=name, granularity=gran, axis=axis, method=method,
                          prepared=prepared, **options)


def _element_minmax(x: np.ndarray, name: str, gran: str, axis: int | None, prepared,
                    ranges: RangeMemo | None) -> FormatParams:
    """Element format ``name``'s parameters from its units' min/max: the engine's
    (``choose_qparams``), or its very rule on the ranges memoised in ``ranges``."""
    if ranges is not None and prepared is None:
        # the format choosers load ml_dtypes: the window's int panes import this module and
        # must not pay for it
        from quantscope.core.calibration.format_choose import element_params_from_range

        lo, hi = unit_range(as_float32(x), axis, None, ranges)
        return element_params_from_range(name, lo, hi, axis=axis)
    p = choose_qparams(x, format=name, granularity=gran, axis=axis, prepared=prepared)
    assert isinstance(p, FormatParams)  # an element format's parameters
    return p


def tensor_window(params) -> tuple[float, float] | None:
    """The values a per-tensor pane represents without clipping: an int pane's clip window,
    an element format's ``±max_finite · scale``; None for per-channel and block panes."""
    if params.granularity != "tensor":
        return None
    if isinstance(params, FormatParams):
        t = float(params.element.max_finite) * float(params.scale)
        return -t, t
    return clip_window(params)


@dataclasses.dataclass(frozen=True)
class FormatPoint:
    """One format on one tensor: where it sits in SQNR against storage."""

    spec: FormatChoice
    bits_per_element: float
    sqnr_db: float
    rounding_mse: float
    clipping_mse: float


def format_points(x: np.ndarray, prepared, settings, specs=CHOICES,
                  should_stop=lambda: False, curve: bool = True) -> list[FormatPoint]:
    """Every format of ``specs`` on ``x`` under ``settings`` (the panes' own rules), plus (if
    ``curve``) the int2..int7 per-channel curve as ``"int{b}/channel"`` points: the Formats
    view's data.
    ``should_stop()`` is asked between formats (a background job stops early with
    :class:`~quantscope.errors.Cancelled`)."""
    def point(spec, params) -> FormatPoint:
        if should_stop():
            raise Cancelled
        return format_point(x, prepared, spec, params)

    out = [point(spec, format_pane_params(x, spec, settings, prepared))
           for spec in point_specs(x, specs)]
    if x.ndim and curve:
        plain = dataclasses.replace(settings, formats=None, group_size=None)
        for b in range(2, 8):
            p = int_pane_params(x, PaneKey.SYMMETRIC_CHANNEL, dataclasses.replace(plain, bits=b),
                                prepared=prepared)
            out.append(point(FormatChoice.of(f"int{b}", "channel"), p))
    return out


def point_specs(x: np.ndarray, specs) -> list[FormatChoice]:
    """The formats of ``specs`` that have a point on ``x``: a 0-d tensor has per-tensor ones
    only, and a tool whose blocks do not fit the rows has none."""
    out = []
    for spec in map(FormatChoice, specs):
        if x.ndim == 0 and not spec.granularity == "tensor":
            continue
        if whole_blocks_only(spec) and x.shape[-1] % whole_blocks_only(spec):
            continue  # the tool's blocks do not fit this tensor's rows: no point to plot
        out.append(spec)
    return out


def format_point(x: np.ndarray, prepared, spec: FormatChoice, params) -> FormatPoint:
    """One format's point: its exact report's SQNR and error split, its bits per element."""
    return report_point(spec, params, analyze_with(x, prepared, params), x.size)


def report_point(spec: FormatChoice, params, report, size: int) -> FormatPoint:
    """The point of format ``spec`` whose exact report on a tensor of ``size`` elements is
    ``report``."""
    return FormatPoint(spec, bits_per_element(params, size), report.sqnr_db,
                       report.rounding_mse, report.clipping_mse)


def whole_blocks_only(spec: str) -> int:
    """The block of a format that refuses rows of a partial block (llama.cpp's types,
    torchao's int4, which would pad them with zeros), else 0."""
    if spec in GGUF_TYPES:
        return GGUF_TYPES[spec].block
    choice = FormatChoice(spec)
    if choice.blocked and format_kind(choice.name) == "torchao":
        return int(FORMAT_TABLE[spec][2] or 0)
    return 0


def element_bits(name: str) -> int:
    """Bits of one stored element of format ``name`` (its scales not counted)."""
    if name == "int8":
        return 8
    if format_kind(name) in ("int", "torchao"):
        return 4
    if name in GGUF_TYPES:
        return GGUF_TYPES[name].bits
    return element_of(name).bits


def candidates(bits: int, per_channel: bool = True) -> tuple[str, ...]:
    """The pane formats whose elements have ``bits`` bits (per-channel ones if asked)."""
    return tuple(c for c in CHOICES if element_bits(c.name) == bits
                 and (per_channel or not c.per_channel))


@dataclasses.dataclass(frozen=True)
class BestFormats:
    """A tensor's highest-SQNR format among the 8-bit and among the 4-bit ones."""

    best8: FormatPoint
    best4: FormatPoint


def best_formats(x: np.ndarray, settings, *, per_channel: bool = True, prepared=None
                 ) -> BestFormats:
    """Every 8-bit and every 4-bit format of :func:`candidates` on ``x`` under ``settings``
    (the panes' own rules, so each number is the one its pane shows), the best of each kind
    by SQNR; a tie goes to fewer bits per element, then to the earlier format. A tensor
    without channels (``per_channel`` False) is compared per tensor and per block only.

    On a large tensor (at least :data:`SCREEN_MIN` elements, not prepared) the formats the
    error screen bounds (:mod:`quantscope.core.stats.format_sweep`) get their exact report
    only if their SQNR may reach the best one's: the others certainly lose, and the best
    point is the exact report's either way (``tests/core/test_format_sweep.py``)."""
    if prepared is None and x.size >= SCREEN_MIN:
        return screened_best(x, settings, per_channel)

    def best(bits: int) -> FormatPoint:
        specs = candidates(bits, per_channel)
        points = (shown_points(x, settings, specs) if prepared is None
                  else format_points(x, prepared, settings, specs, curve=False))
        return max(points, key=best_key)

    return BestFormats(best(8), best(4))


#: Elements from which :func:`best_formats` screens the formats first: below, a full report
#: costs little more than the screen (and small tensors are batched, see ``format_batch``).
SCREEN_MIN = 1 << 16


def best_key(p: FormatPoint) -> tuple[float, float]:
    """What :func:`best_formats` maximises: SQNR, then fewer bits per element (``max`` keeps
    the first of equals)."""
    return (p.sqnr_db, -p.bits_per_element)


def screened_best(x: np.ndarray, settings, per_channel: bool) -> BestFormats:
    """:func:`best_formats` of a tensor not prepared, with an exact report only for the
    formats that may win, equal to comparing every one's.

    Each format's parameters are chosen as always; a format the error screen bounds
    (:func:`quantscope.core.stats.format_sweep.screenable`) gets an interval certain to hold
    its exact report's SQNR, at a fraction of the report's cost, every other one its exact
    report. A screened format whose interval reaches the highest lower end (or exact SQNR) of
    all gets its exact report too; one wholly below cannot be the best nor tie with it. The
    best is taken among the exact reports in the candidates' order with the same key."""
    signal = signal_sum(x)
    reports = PreparedOnDemand(x, settings)
    if signal == 0:  # every finite value 0 (or none): every error is 0, all tie
        def plain(bits: int) -> FormatPoint:
            return max(shown_points(x, settings, candidates(bits, per_channel), reports),
                       key=best_key)

        return BestFormats(plain(8), plain(4))
    ranges: dict = {}  # the units' min/max, shared by the formats of either kind
    return BestFormats(*(best_of(x, settings, candidates(bits, per_channel), signal,
                                 reports, ranges)[0] for bits in (8, 4)))


def shown_points(x: np.ndarray, settings, specs, reports: PreparedOnDemand | None = None
                 ) -> list[FormatPoint]:
    """Every format of ``specs`` on ``x`` not prepared, each point the one ``quantscope
    report`` and the window show (their preparation made where a report reads it:
    ``reports``, or a new :class:`PreparedOnDemand`)."""
    reports = PreparedOnDemand(x, settings) if reports is None else reports
    return [format_point(x, reports, spec, format_pane_params(x, spec, settings))
            for spec in point_specs(x, specs)]


def best_of(x: np.ndarray, settings, specs, signal: float,
            reports: PreparedOnDemand | None = None, ranges: RangeMemo | None = None
            ) -> tuple[FormatPoint, list[FormatPoint]]:
    """The best point among ``specs`` on ``x`` and every exact point computed for it
    (``signal``: Σx² of the finite values, not 0; see :func:`screened_best`).

    The exact points are the reports of ``x`` prepared as ``quantscope report`` and the window
    prepare it (made only if a format needs its sorted rows, :class:`PreparedOnDemand`; a new
    one when ``reports`` is None), so the best point's SQNR is the one they print to the last
    digit; the screen's intervals hold those numbers too
    (:func:`quantscope.core.stats.format_sweep.bounds`).

    The screened formats' errors are summed a slice at a time
    (:class:`~quantscope.core.stats.format_sweep.ErrorScreen`): every format's first slice,
    then the most promising format whole (the floor), then each other one until its partial
    error alone puts it below the floor (a partial sum only lowers the SQNR bound's error).
    A block format chosen block by block (:func:`~quantscope.state.row_slices.row_local`)
    has its parameters chosen a slice at a time as its error is summed, so a format ruled out
    early never encodes the rest of the tensor. The formats chosen on the whole tensor from
    its units' min/max (int8, the element formats) share them (``ranges``, a memo of
    :func:`format_pane_params`; a new one when None); a llama.cpp type's blocks are measured
    as they are encoded, so its exact report is joined from its slices'
    (:class:`~quantscope.state.row_slices.GgufSliceScreen`)."""
    if reports is None:
        reports = PreparedOnDemand(x, settings)
    if ranges is None:
        ranges = {}
    exact: dict[int, FormatPoint] = {}
    screens: dict[int, tuple[FormatChoice, ErrorScreen | RowSliceScreen]] = {}
    for i, spec in enumerate(point_specs(x, specs)):
        if row_local(spec, x, settings, SLICES):  # parameters chosen as the screen reads
            screens[i] = (spec, _slice_screen(x, spec, settings))
            continue
        params = format_pane_params(x, spec, settings, ranges=ranges)
        if screenable(params):
            screens[i] = (spec, ErrorScreen(x, params))
        else:
            exact[i] = format_point(x, reports, spec, params)
    error = {i: scr.slice_sum(0, SLICES) for i, (_, scr) in screens.items()}
    done = dict.fromkeys(screens, 1)
    floor = max([p.sqnr_db for p in exact.values()], default=-math.inf)
    for rank, i in enumerate(sorted(screens, key=lambda i: error[i])):
        scr = screens[i][1]  # the likeliest winner first
        if rank == 0 and isinstance(scr, RowSliceScreen):
            scr.likely_best()
        while done[i] < SLICES and bounds(signal, error[i], x.size).high >= floor:
            error[i] += scr.slice_sum(done[i], SLICES)
            done[i] += 1
        if done[i] == SLICES:
            floor = max(floor, bounds(signal, error[i], x.size).low)
    for i, (spec, scr) in screens.items():
        if bounds(signal, error[i], x.size).high >= floor:  # it may reach the best
            if isinstance(scr, RowSliceScreen):
                params, measured = scr.point_params()
            else:
                params, measured = scr.params, None
            exact[i] = (format_point(x, reports, spec, params) if measured is None
                        else report_point(spec, params, measured, x.size))
    points = [exact[i] for i in sorted(exact)]
    return max(points, key=best_key), points


#: Slices a screened format's error is summed in (see :func:`best_of`).
SLICES = 8


def _slice_screen(x: np.ndarray, spec: FormatChoice, settings) -> RowSliceScreen:
    """The screen of a :func:`row_local` format: its parameters
    ``format_pane_params(rows, spec, settings)`` chosen a slice of rows at a time; a llama.cpp
    type's blocks measured as they are encoded (its exact report then costs no pass)."""
    if format_kind(spec.name) == "gguf":  # the pane's mapping: llama.cpp's encoder, as is
        return GgufSliceScreen(x, SLICES, spec.name,
                               lambda: format_pane_params(x, spec, settings))
    return RowSliceScreen(x, SLICES, lambda rows: format_pane_params(rows, spec, settings))


def pane_specs(names) -> list[FormatChoice]:
    """Format names as pane formats: int8 and each element format per tensor and per channel,
    block and group formats as they are (each once, in order)."""
    out: list[FormatChoice] = []
    for name in names:
        for spec in ((FormatChoice.of(name, "tensor"), FormatChoice.of(name, "channel"))
                     if name == "int8" or format_kind(name) == "element"
                     else (FormatChoice.of(name),)):
            if spec not in out:
                out.append(spec)
    return out


def format_reports(x: np.ndarray, specs, settings, prepared=None
                   ) -> tuple[dict, dict[str, str]]:
    """Each pane format of ``specs`` on ``x`` under ``settings``, through the panes' mapping
    (:func:`format_pane_params`), so ``quantscope report --format`` prints what a comparison
    pane shows: (reports by spec, refusals by spec -- a layout the tensor cannot have)."""
    reports, errors = {}, {}
    for spec in specs:
        try:
            reports[spec] = analyze_with(x, prepared,
                                         format_pane_params(x, spec, settings, prepared))
        except QuantscopeError as exc:
            errors[spec] = str(exc)
    return reports, errors


@dataclasses.dataclass(frozen=True, eq=False)
class PointsRequest:
    """What the Formats view computes: an immutable snapshot of the tensor, its preparation
    and the settings; :meth:`run` gives every format's point (:func:`format_points`)."""

    tensor: np.ndarray
    prepared: object | None
    settings: object

    @classmethod
    def of(cls, state) -> PointsRequest:
        return cls(state.tensor, state.prepared, state.settings)

    @property
    def key(self):
        """The points depend on every setting (the ringed formats too)."""
        return self.settings

    def run(self, ctx) -> tuple[object, list[FormatPoint]]:
        """``(settings, points)``; ``ctx`` is the job's context (its ``stale`` stops the work
        between formats)."""
        # the plot holds llama.cpp's types only when a pane shows one: ten more names do not
        # fit beside the others at a laptop's size (``report --format`` lists them all)
        panes = set(getattr(self.settings, "formats", None) or ())
        specs = tuple(c for c in CHOICES if c not in GGUF_TYPES or c in panes)
        return self.settings, format_points(self.tensor, self.prepared, self.settings, specs,
                                            should_stop=ctx.stale)
