"""What each pane displays, as text, and where its bucket grid lies: formatting only, no Qt
(the window's panes and the notebook widget both draw from here).

Every string is a fixed format of a number the engine reported (``QuantReport.summary()``), so
tests compare the pane's labels with the engine's numbers formatted the same way, and the
``--metrics`` file records exactly these strings next to the numbers they come from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from quantscope.core import QuantReport
from quantscope.core.text.formatting import fmt_count_percent, fmt_float

#: (key, label) of each number in a pane's table, in reading order. The scale has a row of its
#: own (per channel it is three numbers); the others go two per row.
FIELDS: tuple[tuple[str, str], ...] = (
    ("scale", "scale"),
    ("zero_point", "zero point"),
    ("sqnr_db", "SQNR"),
    ("rounding_mse", "rounding MSE"),
    ("clipping_mse", "clipping MSE"),
    ("mse", "total MSE"),
    ("max_abs_error", "max |error|"),
    ("codes_used", "codes used"),
    ("clipped_fraction", "clipped"),
    ("clipped_below", "clipped below"),
    ("clipped_above", "clipped above"),
)

#: A long text of each field (the formats below bound most lengths): a pane reserves this
#: width from the start, so the usual numbers never move its table or resize its plots.
#: Rarer, wider texts (a negative SQNR, millions of clipped values) widen a column once.
WIDE: dict[str, str] = {
    "scale": "8.88888e-05",
    "zero_point": "-128 … 127",
    "sqnr_db": "88.88 dB",
    "rounding_mse": "8.888e-05",
    "clipping_mse": "8.888e-05",
    "mse": "8.888e-05",
    "max_abs_error": "8.888e-05",
    "codes_used": "256 of 256",
    "clipped_fraction": "888,888",
    "clipped_below": "10.000%",
    "clipped_above": "10.000%",
}
#: The widest per-channel (or per-group) scales text: each of its three 3-digit numbers takes
#: at most 8 characters ("0.000123", "1.23e-05").
WIDE_UNIT_SCALES = "0.000888 … 0.000888 (median 0.000888)"


def display_values(report: QuantReport) -> dict[str, str]:
    """The text of every field of :data:`FIELDS` for one pane's report."""
    s = report.summary()
    sq = s["sqnr_db"]
    if s["scale"] is not None:
        scale = fmt_float(s["scale"], 6)
        zp = str(s["zero_point"])
    else:
        scale = (f"{fmt_float(s['scale_min'], 3)} … {fmt_float(s['scale_max'], 3)} "
                 f"(median {fmt_float(s['scale_median'], 3)})")
        zp = (str(s["zero_point_min"]) if s["zero_point_min"] == s["zero_point_max"]
              else f"{s['zero_point_min']} … {s['zero_point_max']}")
    return {
        "scale": scale,
        "zero_point": zp,
        "rounding_mse": fmt_float(s["rounding_mse"]),
        "clipping_mse": fmt_float(s["clipping_mse"]),
        "mse": fmt_float(s["mse"]),
        "sqnr_db": f"{sq:.2f} dB" if math.isfinite(sq) else f"{fmt_float(sq)} dB",
        "max_abs_error": fmt_float(s["max_abs_error"]),
        "codes_used": f"{s['codes_used']} of {s['levels']}",
        "clipped_fraction": f"{s['clipped_below'] + s['clipped_above']:,}",
        "clipped_below": fmt_count_percent(s["clipped_below"], s["n"]),
        "clipped_above": fmt_count_percent(s["clipped_above"], s["n"]),
    }


def field_label(key: str, report: QuantReport | None) -> str:
    """A field's label; per-channel / per-group scales and zero points are ranges."""
    label = dict(FIELDS)[key]
    if key in ("scale", "zero_point") and report is not None and report.per_channel is not None:
        return label + "s"
    return label


def metrics_entry(title: str, report: QuantReport) -> dict:
    """One pane's entry in the ``--metrics`` JSON: the displayed strings and their numbers."""
    return {"title": title, "displayed": display_values(report), "values": report.summary()}


@dataclass(frozen=True)
class Grid:
    """Where one pane's buckets lie on the value axis (float64, for drawing only).

    ``boundaries`` are the rounding boundaries between neighbouring codes; ``window`` is the
    representable range (values beyond it are clipped); ``zero`` is the value of the zero point
    (0.0 by construction). For per-channel panes the grid is that of the median-scale channel
    and the window the union of all channels' windows (``note`` says so).
    """

    boundaries: np.ndarray
    window: tuple[float, float]
    zero: float
    note: str
    #: The spacing the grid's pen fades by (None: the median gap). A format's grid is dense
    #: near zero and sparse at the ends, and faded by its median gap its wide buckets vanish.
    spacing: float | None = None


def bucket_grid(report: QuantReport) -> Grid:
    """The bucket boundaries and representable window of a report's parameters.

    An element ``x`` gets code ``round(x / s) + z``; the boundary between codes ``q`` and
    ``q + 1`` is at ``(q - z + 1/2) s``, and ``x`` is clipped beyond ``(qmin - z - 1/2) s`` or
    ``(qmax - z + 1/2) s``.
    """
    p = report.params
    if getattr(p, "format", None) is not None:
        return format_grid(p)
    scale = np.asarray(p.scale, np.float64).reshape(-1)
    zp = np.asarray(p.zero_point, np.int64).reshape(-1)
    lo_all = (p.qmin - zp - 0.5) * scale
    hi_all = (p.qmax - zp + 0.5) * scale
    if scale.size == 1:
        s, z, note = float(scale[0]), int(zp[0]), ""
    else:
        i = int(np.argsort(scale, kind="stable")[scale.size // 2])
        s, z = float(scale[i]), int(zp[i])
        note = f"grid of the median-scale unit #{i}; window spans all units"
    q = np.arange(p.qmin, p.qmax, dtype=np.float64)
    return Grid((q - z + 0.5) * s, (float(lo_all.min()), float(hi_all.max())), 0.0, note)


def format_grid(p) -> Grid:
    """A format's grid: a line at every representable value times the scale (FP8's values
    crowd near zero and spread out towards the ends, so its buckets are not uniform), the
    window out to where values start to clip. Per channel or per block: the grid of the
    median-scale unit, the window of the largest scale."""
    # the number formats' modules load Numba: the window's int panes import this module and
    # must not pay for them
    from quantscope.core.stats.format_stats import element_edges

    scale = np.asarray(p.scale, np.float64).reshape(-1)
    if p.kind == "gguf":  # stored blocks: the codes' values in the median-scale block
        # Numba, as above
        from quantscope.core.formats.gguf import block_code_values, representable_span

        i = int(np.argsort(scale, kind="stable")[scale.size // 2])
        lines = block_code_values(p, i)
        lo, hi = representable_span(p)
        note = (f"grid of the median-scale block #{i} (its first sub-block); window spans "
                "all blocks\nlines: the representable values")
        return Grid(lines, (lo, hi), 0.0, note,
                    float(np.percentile(np.diff(lines), 90)) if lines.size > 1 else 0.0)
    if p.kind == "torchao":  # codes around a float zero: the median-scale group's values
        i = int(np.argsort(scale, kind="stable")[scale.size // 2])
        zero = np.asarray(p.zero, np.float64).reshape(-1)
        lines = zero[i] + p.values * scale[i]
        lo = float(np.min(zero - 8.5 * scale))
        hi = float(np.max(zero + 7.5 * scale))
        note = (f"grid of the median-scale group #{i}; window spans all groups\n"
                "lines: the representable values")
        return Grid(lines, (lo, hi), 0.0, note, float(scale[i]))
    over = float(element_edges(p.element)[-1])
    if scale.size == 1:
        s, note = float(scale[0]), ""
    else:
        i = int(np.argsort(scale, kind="stable")[scale.size // 2])
        s = float(scale[i])
        unit = "block" if p.group_size else "channel"
        note = f"grid of the median-scale {unit} #{i}; window spans all {unit}s"
    note = (note + "\n" if note else "") + "lines: the representable values"
    top = over * float(scale.max())
    lines = p.values * s
    return Grid(lines, (-top, top), 0.0, note, float(np.percentile(np.diff(lines), 90)))


def grid_words(params) -> str:
    """What a pane's grid lines are, for its key: an int scheme's rounding boundaries, a
    format's representable values (the tooltip says which); of the median-scale channel,
    group or block when there are several (no longer than the int panes' words: the key
    sets the pane's smallest width)."""
    fmt = getattr(params, "format", None) is not None
    unit = {"tensor": "", "channel": "median channel's ",
            "group": "median block's " if fmt else "median group's "}.get(
        params.granularity, "median unit's ")
    if not unit:
        return "representable values" if fmt else "code grid"
    return f"{unit}grid"


@dataclass(frozen=True)
class CodeStrip:
    """The code-occupancy strip under a pane: one bar per code from ``qmin`` to ``qmax``,
    ``log10(1 + count)`` high, on an axis ``top`` high: ``log10(n + 1)`` (at least 1), a fixed
    height per tensor (every value in one code), so bars compare across settings and the axis
    is not regenerated on every update."""

    edges: np.ndarray
    heights: np.ndarray
    top: float
    qmin: int
    qmax: int


@dataclass(frozen=True)
class PaneDisplay:
    """Everything a pane draws of one report, formed in one call so the pane only draws: the
    text and label of every field of :data:`FIELDS`, what its grid lines are (and whether
    they are a format's values), the bucket grid and the code strip."""

    texts: dict[str, str]
    labels: dict[str, str]
    grid_words: str
    is_format: bool
    grid: Grid
    strip: CodeStrip


def pane_display(report: QuantReport) -> PaneDisplay:
    """What a pane shows for ``report`` (see :class:`PaneDisplay`)."""
    edges = np.arange(report.qmin - 0.5, report.qmax + 1.0, dtype=np.float64)
    strip = CodeStrip(edges, np.log10(report.code_histogram + 1.0),
                      max(float(np.log10(report.n + 1.0)), 1.0), report.qmin, report.qmax)
    labels = {key: field_label(key, report) for key, _ in FIELDS}
    is_format = getattr(report.params, "format", None) is not None
    return PaneDisplay(display_values(report), labels, grid_words(report.params), is_format,
                       bucket_grid(report), strip)
