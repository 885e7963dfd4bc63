"""``quantscope report [FILE] [--tensor NAME] [--json]``: the four schemes side by side.

Symmetric and asymmetric, per tensor and per channel, with the engine's defaults (min/max range,
half to even, narrow-range symmetric), so the numbers equal what the window shows first.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from quantscope.core import QuantReport, analyze, choose_qparams
from quantscope.errors import UserError
from quantscope.jsonable import dumps

#: The built-in demo: real GELU activations of a BERT-family FFN, with one feature at 24.8 while
#: 99.9% of |x| stays under 2.8 -- the case where per-tensor min/max scaling wastes the buckets.
DEMO_SAMPLE = "gelu_activations"
#: Channel axis of the demo tensor ([tokens, features]: features are the channels).
DEMO_AXIS = -1

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
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--bits", type=int, default=8, help="bit width, 2 to 8 (default 8)")


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """FILE, --tensor, --sample and --axis: where the tensor comes from (shared with the window)."""
    p.add_argument("file", nargs="?", help=".npy, .npz or .safetensors (default: the demo tensor)")
    p.add_argument("--tensor", help="tensor name inside a multi-tensor file")
    p.add_argument("--sample", help="a bundled sample tensor by name")
    p.add_argument("--axis", type=int, default=None,
                   help="channel axis for per-channel schemes (default 0; the demo uses -1)")


def load_source(args: argparse.Namespace) -> tuple[np.ndarray, str, int]:
    """Return (float32 tensor, label, channel axis) for the parsed source arguments."""
    from quantscope.commands.source import resolve_file_or_sample
    from quantscope.io import load_for_analysis

    path, label = resolve_file_or_sample(args, default_sample=DEMO_SAMPLE)
    x, _ = load_for_analysis(path, args.tensor)
    if args.tensor:
        label += f" [{args.tensor}]"
    axis = args.axis
    if axis is None and not args.file and (args.sample or DEMO_SAMPLE) == DEMO_SAMPLE:
        axis = DEMO_AXIS
    return x, label, 0 if axis is None else axis


def four_reports(x: np.ndarray, axis: int, bits: int = 8) -> dict[str, QuantReport]:
    """The four schemes' reports keyed ``"symmetric/tensor"`` ... ``"asymmetric/channel"``."""
    out = {}
    for sym, gran in SCHEMES:
        if gran == "channel" and x.ndim == 0:
            continue
        params = choose_qparams(x, symmetric=sym == "symmetric", granularity=gran, axis=axis,
                                bits=bits)
        out[f"{sym}/{gran}"] = analyze(x, params)
    return out


def _fmt(v: float) -> str:
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.4g}"


def format_table(label: str, shape: tuple, axis: int, reports: dict[str, QuantReport]) -> str:
    """A plain-text table, one row per scheme."""
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
    lines = [f"{label}: shape {tuple(shape)}, per-channel axis {axis}"]
    for i, row in enumerate(rows):
        lines.append("  ".join(c.rjust(w) if i and j else c.ljust(w)
                               for j, (c, w) in enumerate(zip(row, widths, strict=True))))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the report; returns the exit code."""
    x, label, axis = load_source(args)
    if x.size == 0:
        raise UserError(f"{label}: the tensor is empty (shape {x.shape}); nothing to quantize")
    if x.ndim == 0:
        axis = 0
    elif not -x.ndim <= axis < x.ndim:
        raise UserError(f"--axis {axis} is out of range for shape {x.shape}")
    reports = four_reports(x, axis, args.bits)
    if args.json:
        doc = {"source": label, "shape": list(x.shape), "axis": axis,
               "schemes": {k: r.summary() for k, r in reports.items()}}
        print(dumps(doc, indent=2))
    else:
        print(format_table(label, x.shape, axis, reports))
    return 0
