"""``quantscope report --format NAME`` (repeatable): formats beyond int8 side by side.

Each element format and ``int8`` give two rows, one scale per tensor and one per channel (the
channel axis the tensor's role gives, or ``--axis``); block and group formats (MX, NVFP4, NF4,
INT4 g32/g64/g128) one row, their blocks along the last axis. The rows come through the
window's comparison panes' mapping (:func:`quantscope.state.formats.format_pane_params`), so
``--method``, ``--percentile`` and ``--clip`` apply as they do there, and each row equals the
pane showing that format. Every row is an exact engine report with its bits per element
(scales included): the table answers "int8 or FP8, and can it go to 4 bits?" for this tensor.
"""

from __future__ import annotations

import numpy as np

from quantscope.core import QuantReport
from quantscope.core.formats.catalog import FORMATS, check_format
from quantscope.core.text.formatting import fmt_cell
from quantscope.errors import UserError


def expand_names(names: list[str]) -> list[str]:
    """The formats asked for, in order, each once (``all`` means every format)."""
    out: list[str] = []
    for name in names:
        for n in FORMATS if name == "all" else (name,):
            try:
                check_format(n)
            except ValueError as exc:
                raise UserError(f"--format: {exc}") from None
            if n not in out:
                out.append(n)
    return out


def format_rows(x: np.ndarray, names: list[str], settings, prepared=None
                ) -> tuple[dict[str, QuantReport], dict[str, str]]:
    """Reports keyed ``"NAME/tensor"``, ``"NAME/channel"`` or ``"NAME"`` (block formats),
    through the comparison panes' mapping; and the rows the tensor cannot have, with why."""
    from quantscope.state.formats import format_reports, pane_specs

    return format_reports(x, pane_specs(expand_names(names)), settings, prepared)


def summaries(reports: dict[str, QuantReport]) -> dict[str, dict]:
    """JSON-ready numbers per row: the report summary, the format and bits per element."""
    from quantscope.state.numbers import format_summary

    return {key: format_summary(key, r) for key, r in reports.items()}


def format_table(label: str, shape: tuple, axis: int, reports: dict[str, QuantReport],
                 errors: dict[str, str] | None = None) -> str:
    """A plain-text table, one row per format and granularity, then the rows refused."""
    head = ("format", "bits/elem", "SQNR dB", "rounding MSE", "clipping MSE", "max |err|",
            "codes used", "clipped %")
    rows = [head]
    for key, s in summaries(reports).items():
        rows.append((key, f"{s['bits_per_element']:.3f}", f"{s['sqnr_db']:.2f}",
                     fmt_cell(s["rounding_mse"]), fmt_cell(s["clipping_mse"]),
                     fmt_cell(s["max_abs_error"]),
                     f"{s['codes_used']}/{s['levels']}", f"{100 * s['clipped_fraction']:.3f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [f"{label}: shape {tuple(shape)}, per-channel axis {axis}, blocks along the last "
             "axis"]
    for i, row in enumerate(rows):
        lines.append("  ".join(c.rjust(w) if i and j else c.ljust(w)
                               for j, (c, w) in enumerate(zip(row, widths, strict=True))))
    lines += [f"{spec}: {message}" for spec, message in (errors or {}).items()]
    return "\n".join(lines)


#: ``report --format --json``'s document version (see ``report.REPORT_SCHEMA``).
FORMAT_REPORT_SCHEMA = "quantscope.format-report/1"


def run(args, state) -> int:
    """``report --format``: the loaded tensor of ``state`` under its settings (the options,
    and the channel axis the window's rule chose) in every format asked for."""
    from quantscope.jsonable import dumps

    x, axis = state.tensor, state.settings.axis
    label = state.source.label() if state.source is not None else "tensor"
    reports, errors = format_rows(x, args.format, state.settings, state.prepared)
    if args.json:
        print(dumps({"schema": FORMAT_REPORT_SCHEMA, "source": label, "shape": list(x.shape),
                     "axis": axis,
                     "applied": state.applied(), "formats": summaries(reports),
                     "errors": errors}, indent=2))
    else:
        print(format_table(label, x.shape, axis, reports, errors))
    return 0
