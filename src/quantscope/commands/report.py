"""``quantscope report [FILE] [settings] [--json]``: the four panes' numbers, without a window.

Every setting the window has is an option here (``--method``, ``--percentile``, ``--clip``,
``--rounding``, ``--code-range``, ``--bits``, ``--axis``, ``--role``, ``--group-size``,
``--preset`` (alias ``--runtime``), ``--session``), and the numbers come from the window's own
state object and mapping (:class:`quantscope.state.ExplorerState`), on the tensor prepared as
the window prepares it, so for the same tensor and settings the report equals the window by
construction, bit for bit. Without options: the engine's defaults (min/max, half to even,
narrow-range symmetric) and the channel axis the tensor's role implies.
"""

from __future__ import annotations

import argparse

import numpy as np

from quantscope.core import QuantReport
from quantscope.core.text.formatting import fmt_cell
from quantscope.errors import UserError
from quantscope.jsonable import dumps
from quantscope.state.options import (
    add_settings_arguments,
    add_source_arguments,
    settings_from_args,
)
from quantscope.state.source import DEMO_SAMPLE

#: ``report --json``'s document version: bumped when a key changes meaning or name. Numbers
#: are numbers; an infinite one (an exact quantization's SQNR) is ``null`` with a flag in the
#: same object's ``"nonfinite"`` (:mod:`quantscope.jsonable`).
REPORT_SCHEMA = "quantscope.report/1"

SCHEMES = (
    ("symmetric", "tensor"),
    ("symmetric", "channel"),
    ("asymmetric", "tensor"),
    ("asymmetric", "channel"),
)


def add_parser(subparsers) -> None:
    """Register ``report`` on the command line."""
    p = subparsers.add_parser("report", help="print the four schemes' numbers for a tensor",
                              description=__doc__)
    add_source_arguments(p)
    add_settings_arguments(p)
    p.add_argument("--session", metavar="FILE.json",
                   help="a saved session of the window: its source and settings (options "
                        "given here override them)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--format", action="append", metavar="NAME",
                   # written out, not read from the catalog (which loads Numba, and a plain
                   # report must start without it); a test checks it names every format
                   help="compare number formats instead (repeatable; 'all' for every one): "
                        "int8, int4_g32, int4_g64, int4_g128 (narrow symmetric, -7..7), "
                        "gptq_int4_g128, gptq_int4_g128_asym, awq_int4_g128, torchao_int4_g32, "
                        "torchao_int4_g64, torchao_int4_g128, fp8_e4m3, fp8_e5m2, fp8_e4m3fnuz, "
                        "fp8_e5m2fnuz, fp6_e2m3, fp6_e3m2, fp4_e2m1, mxfp8_e4m3, mxfp8_e5m2, "
                        "mxfp6_e2m3, mxfp6_e3m2, mxfp4, mxint8, nvfp4 (torchao's rule), "
                        "nvfp4_modelopt, nf4, and llama.cpp's types gguf_q8_0, gguf_q4_0, "
                        "gguf_q4_1, gguf_q5_0, gguf_q5_1, gguf_q2_k, gguf_q3_k, gguf_q4_k, "
                        "gguf_q5_k, gguf_q6_k")


def source_from_args(args: argparse.Namespace):
    """The :class:`~quantscope.state.Source` the options name (the demo when none is)."""
    from quantscope.state import Source

    if args.file and args.sample:
        raise UserError("give either FILE or --sample NAME, not both")
    if args.file:
        src = Source("file", str(args.file), tensor=args.tensor)
    else:
        src = Source("sample", args.sample or DEMO_SAMPLE, tensor=args.tensor)
    return src


def read_session(path: str):
    """(source, settings) of a session file the window saved, read and validated as the
    window reads it (a regular file of bounded size, every field typed); a file that is no
    session raises UserError naming it. Settings a tensor cannot have are refused when the
    tensor loads."""
    from quantscope.state.session import SessionError, load_session

    try:
        session = load_session(path, check_source=False)
    except SessionError as exc:
        raise UserError(f"--session {exc}") from None
    return session.source, session.settings


def explore(args: argparse.Namespace):
    """Load the tensor and compute the panes as the window would; return the state."""
    import dataclasses

    from quantscope.core.kernels.compile_notice import announce_compiles
    from quantscope.state import ExplorerState, Settings, load_source
    from quantscope.state.compute import needs_preparation

    session_source, session_settings = (read_session(args.session)
                                        if getattr(args, "session", None) else (None, None))
    if session_source is not None and not (args.file or args.sample):
        source = dataclasses.replace(session_source, axis=session_settings.axis)
    else:
        source = source_from_args(args)
    if args.axis is not None or getattr(args, "role", None):
        source = dataclasses.replace(source, axis=args.axis, role=args.role)
    settings = settings_from_args(args, session_settings or Settings())
    x, _ = load_source(source)
    if source.axis is not None and np.ndim(x) > 0 and not -np.ndim(x) <= source.axis < np.ndim(x):
        raise UserError(f"--axis {source.axis} is out of range for shape {np.shape(x)}")
    state = ExplorerState()
    errors: list[str] = []
    state.error.connect(errors.append)
    if not state.set_tensor(x, source, settings=settings):
        raise UserError(errors[-1])
    if getattr(args, "format", None) or needs_preparation(x, state.settings):
        from quantscope.state.compile_ahead import stand_in_for_command

        # only what is prepared runs compiled loops (above DIRECT_MAX); on a first run their
        # NumPy twins compute the panes, and another process compiles them for the next run
        stand_in_for_command()
        announce_compiles()
        state.prepare()  # the window's engine path, so the numbers are the window's to the bit
    state.compute()
    return state


def format_table(doc: dict, reports: dict[str, QuantReport]) -> str:
    """A plain-text table, one row per scheme, under a line of the settings applied."""
    head = ("scheme", "scale", "zero point", "rounding MSE", "clipping MSE", "SQNR dB",
            "codes used", "clipped %")
    rows = [head]
    for key, r in reports.items():
        s = r.summary()
        if s["scale"] is not None:
            scale = fmt_cell(s["scale"])
            zp = str(s["zero_point"])
        else:
            scale = f"{fmt_cell(s['scale_min'])}..{fmt_cell(s['scale_max'])}"
            zp = (str(s["zero_point_min"]) if s["zero_point_min"] == s["zero_point_max"]
                  else f"{s['zero_point_min']}..{s['zero_point_max']}")
        rows.append((key, scale, zp, fmt_cell(r.rounding_mse), fmt_cell(r.clipping_mse),
                     f"{r.sqnr_db:.2f}", f"{r.codes_used}/{r.params.levels}",
                     f"{100 * r.clipped_fraction:.3f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    a = doc["applied"]
    lines = [f"{doc['source']}: shape {tuple(doc['shape'])}, per-channel axis {a['axis']} "
             f"({a['axis_rule']}); {a['units']}; method {a['method']}, preset "
             f"{a['preset'] or 'none'}"]
    for i, row in enumerate(rows):
        lines.append("  ".join(c.rjust(w) if i and j else c.ljust(w)
                               for j, (c, w) in enumerate(zip(row, widths, strict=True))))
    lines += [f"{pane}: {message}" for pane, message in doc["errors"].items()]
    lines += [f"note: {note}" for note in a["notes"]]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the report; returns the exit code."""
    state = explore(args)
    if getattr(args, "format", None):
        from quantscope.commands import format_report

        return format_report.run(args, state)
    doc = state.describe()
    if args.json:
        print(dumps({"schema": REPORT_SCHEMA, **doc}, indent=2))
    else:
        print(format_table(doc, state.results))
    return 0
