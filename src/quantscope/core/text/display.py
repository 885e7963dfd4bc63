"""Compact HTML tables for notebooks: what Jupyter shows for a report or a prepared tensor.

The numbers are :meth:`QuantReport.summary`'s, formatted as the window's panes format them
(4 significant digits, scales 6), so a notebook, the window and ``quantscope report`` agree.
"""

from __future__ import annotations

import html
import math

_STYLE = ("<style>.qs-table td,.qs-table th{padding:1px 8px;text-align:right}"
          ".qs-table th{text-align:left;font-weight:normal;opacity:.75}</style>")

_ROUNDING = {"half_even": "half to even", "half_away": "half away from zero"}


def _num(v: float, digits: int = 4) -> str:
    if isinstance(v, float) and math.isnan(v):
        return "n/a"
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "-∞"
    return f"{v:.{digits}g}"


def _table(caption: str, rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                   for k, v in rows)
    return (f"{_STYLE}<table class='qs-table'><caption style='text-align:left'>"
            f"{html.escape(caption)}</caption>{body}</table>")


def report_html(report) -> str:
    """A :class:`~quantscope.core.stats.report.QuantReport` as one two-column table."""
    s = report.summary()
    p = report.params
    fmt = getattr(p, "format", None)  # a number format's report names it, as its repr does
    kind = (str(fmt) if fmt is not None
            else f"{'symmetric' if s['symmetric'] else 'asymmetric'} int{p.bits}")
    where = {"tensor": "per tensor", "channel": f"per channel (axis {p.axis})",
             "group": f"per group of {p.group_size} (axis {p.axis})"}[s["granularity"]]
    if s["scale"] is not None:
        scale, zp = _num(s["scale"], 6), str(s["zero_point"])
    else:
        scale = (f"{_num(s['scale_min'], 3)} … {_num(s['scale_max'], 3)} "
                 f"(median {_num(s['scale_median'], 3)})")
        zp = (str(s["zero_point_min"]) if s["zero_point_min"] == s["zero_point_max"]
              else f"{s['zero_point_min']} … {s['zero_point_max']}")
    clipped = s["clipped_below"] + s["clipped_above"]
    rows = [
        ("codes", f"[{s['qmin']}, {s['qmax']}], rounding {_ROUNDING.get(p.rounding, p.rounding)}"),
        ("scale", scale),
        ("zero point", zp),
        ("SQNR", f"{s['sqnr_db']:.2f} dB" if math.isfinite(s["sqnr_db"])
         else f"{_num(s['sqnr_db'])} dB"),
        ("total MSE", _num(s["mse"])),
        ("rounding MSE", _num(s["rounding_mse"])),
        ("clipping MSE", _num(s["clipping_mse"])),
        ("max |error|", _num(s["max_abs_error"])),
        ("codes used", f"{s['codes_used']} of {s['levels']}"),
        ("clipped", f"{clipped:,} ({100 * s['clipped_fraction']:.3f}%: "
                    f"{s['clipped_below']:,} below, {s['clipped_above']:,} above)"),
        ("elements", f"{s['n']:,}" + (f" (+{s['n_nonfinite']:,} NaN/inf, excluded)"
                                      if s["n_nonfinite"] else "")),
    ]
    how = p.method + (f", {p.runtime}" if p.runtime else "")
    return _table(f"QuantReport: {kind}, {where}, {how}", rows)


def prepared_html(prepared) -> str:
    """A :class:`~quantscope.core.stats.prepared.Prepared` tensor: its shape and what is built."""
    layouts = ", ".join("per tensor" if axis is None else
                        (f"axis {axis}" + (f" groups of {group}" if group else ""))
                        for axis, group in prepared._layouts)
    rows = [("shape", " × ".join(map(str, prepared.shape)) or "()"),
            ("elements", f"{prepared.size:,}"),
            ("NaN / inf", f"{prepared.n_nonfinite:,} (excluded)"),
            ("sorted layouts", layouts)]
    return _table("Prepared tensor (exact reports in O(levels · log N))", rows)
