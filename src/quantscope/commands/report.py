"""``quantscope report [FILE] [settings] [--json]``: the four panes' numbers, without a window.

Every setting the window has is an option here (``--method``, ``--percentile``, ``--clip``,
``--rounding``, ``--code-range``, ``--bits``, ``--axis``, ``--role``, ``--group-size``,
``--runtime``, ``--session``), and the numbers come from the window's own state object and
mapping (:class:`quantscope.state.ExplorerState`), so for the same tensor and settings the
report equals the window by construction. Without options: the engine's defaults (min/max,
half to even, narrow-range symmetric) and the channel axis the tensor's role implies.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from quantscope.core import QuantReport
from quantscope.errors import UserError
from quantscope.jsonable import dumps

#: The built-in demo: real GELU activations of a BERT-family FFN, with one feature at 24.8 while
#: 99.9% of |x| stays under 2.8 -- the case where per-tensor min/max scaling wastes the buckets.
DEMO_SAMPLE = "gelu_activations"
#: Channel axis of the demo tensor ([tokens, features]: features are the channels); its name
#: says "activations", so the axis rule picks it.
DEMO_AXIS = -1

SCHEMES = (
    ("symmetric", "tensor"),
    ("symmetric", "channel"),
    ("asymmetric", "tensor"),
    ("asymmetric", "channel"),
)
CODE_RANGES = {"default": None, "narrow": True, "full": False}


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
                   help="compare number formats instead (repeatable; 'all' for every one): "
                        "int8, int4_g32/64/128, fp8_e4m3, fp8_e5m2, fp8_e4m3fnuz, fp8_e5m2fnuz, "
                        "fp6_e2m3, fp6_e3m2, fp4_e2m1, mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, "
                        "mxfp6_e3m2, mxfp4, mxint8, nvfp4, nf4")


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """FILE, --tensor, --sample, --axis and --role: where the tensor comes from and what it is
    (shared with the window)."""
    from quantscope.state import ROLES

    p.add_argument("file", nargs="?", help=".npy, .npz or .safetensors (default: the demo tensor)")
    p.add_argument("--tensor", help="tensor name inside a multi-tensor file")
    p.add_argument("--sample", help="a bundled sample tensor by name")
    p.add_argument("--axis", type=int, default=None,
                   help="channel axis (default: from the tensor's role: 0 for weights "
                        "[out, in, ...], -1 for activations [..., features])")
    p.add_argument("--role", choices=[r for r in ROLES if r],
                   help="what the tensor is, when its name does not say (sets the axis)")


def add_settings_arguments(p: argparse.ArgumentParser) -> None:
    """The quantization settings, one option per control of the window."""
    from quantscope.state import METHODS, RUNTIMES
    from quantscope.state.settings import ROUNDING_RULES

    p.add_argument("--method", choices=METHODS, help="range method (default minmax)")
    p.add_argument("--percentile", type=float, help="percentile for --method percentile "
                                                    "(default 99.99)")
    p.add_argument("--clip", nargs=2, type=float, metavar=("LO", "HI"),
                   help="manual clip window (implies --method manual)")
    p.add_argument("--rounding", choices=ROUNDING_RULES, help="rounding rule (default "
                                                              "half_even)")
    p.add_argument("--code-range", choices=list(CODE_RANGES),
                   help="narrow drops the most negative code; default: narrow for symmetric, "
                        "full for asymmetric")
    p.add_argument("--bits", type=int, help="bit width, 2 to 8 (default 8)")
    p.add_argument("--group-size", type=int,
                   help="per-group panes: groups of this many consecutive elements along the "
                        "reduction (input) dimension (0: per channel)")
    p.add_argument("--runtime", choices=[r for r in RUNTIMES if r],
                   help="reproduce a runtime's parameter rules and arithmetic")


def settings_from_args(args: argparse.Namespace, base=None):
    """The :class:`~quantscope.state.Settings` the options ask for, over ``base`` (a
    session's settings, or the defaults); refused values raise UserError."""
    import dataclasses

    from quantscope.state import Settings, SettingsError

    changes = {}
    for name in ("method", "percentile", "rounding", "bits", "runtime"):
        value = getattr(args, name, None)
        if value is not None:
            changes[name] = value
    if getattr(args, "code_range", None) is not None:
        changes["narrow_range"] = CODE_RANGES[args.code_range]
    if getattr(args, "group_size", None) is not None:
        changes["group_size"] = args.group_size or None
    if getattr(args, "clip", None) is not None:
        changes["manual_clip"] = (float(args.clip[0]), float(args.clip[1]))
        changes.setdefault("method", "manual")
    try:
        return dataclasses.replace(base or Settings(), **changes).check()
    except SettingsError as exc:
        raise UserError(str(exc)) from None


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

    from quantscope.state import ExplorerState, Settings, load_source

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
    state.compute()
    return state


def _fmt(v: float) -> str:
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.4g}"


def format_table(doc: dict, reports: dict[str, QuantReport]) -> str:
    """A plain-text table, one row per scheme, under a line of the settings applied."""
    head = ("scheme", "scale", "zero point", "rounding MSE", "clipping MSE", "SQNR dB",
            "codes used", "clipped %")
    rows = [head]
    for key, r in reports.items():
        s = r.summary()
        if s["scale"] is not None:
            scale = _fmt(s["scale"])
            zp = str(s["zero_point"])
        else:
            scale = f"{_fmt(s['scale_min'])}..{_fmt(s['scale_max'])}"
            zp = (str(s["zero_point_min"]) if s["zero_point_min"] == s["zero_point_max"]
                  else f"{s['zero_point_min']}..{s['zero_point_max']}")
        rows.append((key, scale, zp, _fmt(r.rounding_mse), _fmt(r.clipping_mse),
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
        print(dumps(doc, indent=2))
    else:
        print(format_table(doc, state.results))
    return 0
