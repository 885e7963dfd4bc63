"""``quantscope scan QUANTIZED [--reference ORIGINAL]``: what a shipped quantization lost.

A checkpoint whose config.json declares a ``quantization_config`` (compressed-tensors, FP8,
GPTQ, AWQ, bitsandbytes) is decoded weight by weight, exactly as its package decodes it
(:mod:`quantscope.io.stored`). With ``--reference`` each decoded weight is measured against the
original of the same name: the stored format, its bits per element (scales and zero points
included), SQNR, the rounding / clipping split, and beside it the best of the engine's formats
at the same or fewer bits, run on the original (:mod:`quantscope.state.stored_compare`); worst
first. Without an original: each weight's code occupancy and the spread of its scales
(:mod:`quantscope.state.stored_overview`).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from quantscope.errors import QuantscopeError, UserError
from quantscope.io.checks import show_path
from quantscope.io.tensor_info import printable
from quantscope.jsonable import dumps

#: ``scan QUANTIZED --json``'s document version (the stored codes and scales overview), and
#: ``scan QUANTIZED --reference ORIGINAL --json``'s; bumped when a key changes meaning or name.
#: Numbers are numbers: an infinite one is ``null`` with a ``"nonfinite"`` flag.
STORED_SCHEMA = "quantscope.scan-stored/1"
REFERENCE_SCHEMA = "quantscope.scan-reference/1"


def _db(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.2f}"


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return ["  ".join(c.rjust(w) if j in right else c.ljust(w)
                      for j, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
            for row in [head, *rows]]


def compare_table(result, rows) -> str:
    """The "what it lost" table: one line per stored weight, most lost first."""
    lines = [f"{show_path(result.quantized)} ({result.method}) against "
             f"{show_path(result.reference)}: {sum(r.stored is not None for r in rows)} stored "
             "weights measured, most lost first; best alternative = the engine's best format "
             "at the same or fewer bits per element, on the original"]
    head = ("#", "tensor", "shape", "stored format", "bits", "SQNR dB", "rounding MSE",
            "clipping MSE", "clip %", "best alternative", "bits", "dB", "gain dB")
    body = []
    for i, r in enumerate(rows, 1):
        s, b = r.stored, r.best
        if s is None:
            continue
        gain = (b.sqnr_db - s.sqnr_db) if b is not None else None
        body.append((str(i), printable(r.name), "x".join(map(str, r.shape)), s.format,
                     f"{s.bits_per_element:.3f}", _db(s.sqnr_db), f"{s.rounding_mse:.3e}",
                     f"{s.clipping_mse:.3e}", f"{100 * s.clipped_fraction:.3f}",
                     b.spec if b else "-", f"{b.bits_per_element:.3f}" if b else "-",
                     _db(b.sqnr_db if b else None), _db(gain)))
    if body:
        lines += _table(head, body, {0, 4, 5, 6, 7, 8, 10, 11, 12})
    for r in rows:
        if r.problem is not None:
            lines.append(f"not measured: {printable(r.name)} ({r.problem})")
    if result.unmatched_reference:
        shown = ", ".join(printable(n) for n in result.unmatched_reference[:5])
        more = f" and {len(result.unmatched_reference) - 5} more" if len(
            result.unmatched_reference) > 5 else ""
        lines.append(f"in the original only (stored unquantized or absent): {shown}{more}")
    return "\n".join(lines)


def compare_json(result, rows) -> str:
    """``--json``: each row with its ``stored`` object and its ranked alternatives."""
    def alt(a) -> dict[str, Any]:
        return {"format": a.spec, "bits_per_element": a.bits_per_element,
                "sqnr_db": a.sqnr_db, "rounding_mse": a.rounding_mse,
                "clipping_mse": a.clipping_mse}

    records = []
    for i, r in enumerate(rows, 1):
        rec: dict[str, Any] = {"rank": i, "name": r.name, "reference": r.reference,
                               "shape": list(r.shape)}
        if r.stored is not None:
            s = r.stored
            rec["stored"] = {"format": s.format, "bits_per_element": s.bits_per_element,
                             "sqnr_db": s.sqnr_db, "rounding_mse": s.rounding_mse,
                             "clipping_mse": s.clipping_mse,
                             "clipped_fraction": s.clipped_fraction}
            rec["best_alternative"] = alt(r.best) if r.best is not None else None
            rec["alternatives"] = [alt(a) for a in r.alternatives]
        if r.problem is not None:
            rec["problem"] = r.problem
        records.append(rec)
    doc = {"schema": REFERENCE_SCHEMA, "quantized": str(result.quantized),
           "reference": str(result.reference), "method": result.method, "tensors": records,
           "reference_only": result.unmatched_reference, "stored_plain": result.plain}
    return dumps(doc, indent=2)  # infinities: null with a "nonfinite" flag


def overview_table(label: str, method: str, items, problems) -> str:
    lines = [f"{label} ({method}): {len(items)} stored weights; code occupancy and scale "
             "spread (no original given: --reference ORIGINAL measures what was lost)"]
    head = ("#", "tensor", "shape", "stored format", "bits", "codes used", "occupancy %",
            "scales", "min", "median", "max", "zero")
    body = [(str(i), printable(o.name), "x".join(map(str, o.shape)), o.format,
             f"{o.bits_per_element:.3f}", f"{o.codes_used}/{o.levels}",
             f"{100 * o.occupancy:.1f}", str(o.scales), f"{o.scale_quantiles[0]:.3g}",
             f"{o.scale_quantiles[2]:.3g}", f"{o.scale_quantiles[4]:.3g}", str(o.zero_scales))
            for i, o in enumerate(items, 1)]
    if body:
        lines += _table(head, body, {0, 4, 5, 6, 7, 8, 9, 10, 11})
    lines += [f"not decoded: {printable(n)} ({why})" for n, why in problems]
    return "\n".join(lines)


def run(args: argparse.Namespace, path, label: str) -> int:
    """``scan`` of a quantized checkpoint (with or without ``--reference``)."""
    if args.reference is not None:
        return _run_compare(args, path)
    from quantscope.state.stored_compare import open_quantized
    from quantscope.state.stored_overview import overview

    stored = open_quantized(path)
    items, problems = [], []
    for name in stored.names:
        try:
            items.append(overview(stored.decode(name)))
        except QuantscopeError as exc:
            problems.append((name, str(exc)))
    if stored.names and not items:
        raise QuantscopeError(problems[0][1])
    if args.json:
        print(dumps({"schema": STORED_SCHEMA, "source": label,
                     "method": stored.config.method, "tensors": [o.as_dict() for o in items],
                     "errors": [{"name": n, "reason": r} for n, r in problems]}, indent=2))
    else:
        print(overview_table(label, stored.config.method, items, problems))
    return 1 if problems else 0


def _run_compare(args: argparse.Namespace, path) -> int:
    from quantscope.state.stored_compare import compare

    if args.csv:
        raise UserError("--reference prints a table or --json, not --csv")
    result = compare(path, args.reference)
    rows = result.ranked()
    if args.top:
        measured = [r for r in rows if r.stored is not None][: args.top]
        rows = measured + [r for r in rows if r.stored is None]
    if args.json:
        print(compare_json(result, rows))
    else:
        print(compare_table(result, rows))
    failed = [r for r in result.rows if r.stored is None]
    if result.rows and len(failed) == len(result.rows):
        raise QuantscopeError(failed[0].problem or "no stored weight could be measured")
    for r in failed:
        print(f"quantscope: warning: {printable(r.name)}: {r.problem}", file=sys.stderr)
    return 1 if failed else 0
