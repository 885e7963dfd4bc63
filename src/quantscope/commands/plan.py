"""``quantscope plan CHECKPOINT --budget BITS``: one number format per tensor, the model's bits
within the budget, the total quantization error least.

Every candidate format (all of them by default, or --formats) is measured exactly on every
tensor, as the comparison panes measure it: the bits it stores (elements, block and tensor
scales, zero points) and its error (MSE relative to the tensor's signal by default). The
choice of one format per tensor under the budget with the least summed error is a
multiple-choice knapsack, solved exactly (a dynamic programme over the integer bit counts
that keeps only the non-dominated (bits, error) cells). The budget is the average bits per
element of the planned tensors; tensors matching a --keep pattern (embeddings, lm_head and
norms unless --no-default-keep) and 1-D tensors stay in their stored precision.

--compressed-tensors, --modelopt and --plan-json write the plan as a compressed-tensors /
llm-compressor quantization_config, a ModelOpt quantization config, and quantscope's own
per-tensor JSON (formats, scales, zero points). An ONNX model (CHECKPOINT ending in .onnx)
is planned over its float initializers, and --onnx-out writes it with the int8 weights in
QDQ form. A tensor a target cannot express as planned is named on stderr and left out of
that target's config, never changed to another format.
"""

from __future__ import annotations

import argparse
import sys

from quantscope.errors import UserError
from quantscope.jsonable import dumps
from quantscope.state.setting_names import add_setting_options


def add_parser(subparsers) -> None:
    """Register ``plan`` on the command line."""
    p = subparsers.add_parser(
        "plan", help="one format per tensor under a bits budget, least total error",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="CHECKPOINT",
                   help=".safetensors file, sharded folder or *.index.json, .npz, folder of "
                        ".npy files, or an .onnx model")
    p.add_argument("--budget", type=float, required=True, metavar="BITS",
                   help="average bits per element of the planned tensors, scales included")
    p.add_argument("--formats", action="append", metavar="F[,F...]",
                   help="candidate formats (names such as int8, fp8_e4m3, int4_g128, nvfp4, "
                        "or pane formats such as int8/channel); default all")
    p.add_argument("--target", choices=("compressed-tensors", "modelopt", "onnx"),
                   help="choose only among the formats this tool runs")
    p.add_argument("--keep", action="append", default=[], metavar="PATTERN",
                   help="keep tensors whose name matches this regex in stored precision "
                        "(repeatable; added to embed, lm_head, norm)")
    p.add_argument("--no-default-keep", action="store_true",
                   help="plan embeddings, lm_head and norms too")
    p.add_argument("--pin", action="append", default=[], metavar="NAME=FORMAT",
                   help="fix a tensor's format (FORMAT 'keep' keeps it); the rest is planned "
                        "around it")
    p.add_argument("--objective", choices=("relative", "sse", "params"), default="relative",
                   help="summed MSE relative to each tensor's signal (default), summed "
                        "squared error, or relative MSE weighted by elements")
    add_setting_options(p, fields=("method",),
                        choices={"method": ("minmax", "percentile", "mse", "entropy")},
                        defaults={"method": "minmax"},
                        helps={"method": "range method of the calibrated formats"})
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--compressed-tensors", metavar="OUT.json",
                   help="write a compressed-tensors quantization_config")
    p.add_argument("--modelopt", metavar="OUT.yaml",
                   help="write a ModelOpt quantization config (YAML, as its load_config reads)")
    p.add_argument("--plan-json", metavar="OUT.json",
                   help="write every tensor's format, scales and zero points")
    p.add_argument("--onnx-out", metavar="OUT.onnx",
                   help="for an .onnx CHECKPOINT: the model with its int8 weights as QDQ")


def _formats(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [f.strip() for v in values for f in v.split(",") if f.strip()]


def _pins(values: list[str]) -> dict[str, str | None]:
    pins: dict[str, str | None] = {}
    for v in values:
        name, eq, spec = v.rpartition("=")
        if not eq or not name or not spec:
            raise UserError(f"--pin takes NAME=FORMAT, got {v!r}")
        pins[name] = None if spec == "keep" else spec
    return pins


def run(args: argparse.Namespace) -> int:
    """Scan, plan, print the plan, write the exports asked for."""
    from quantscope.core.kernels.compile_notice import announce_compiles
    from quantscope.io.writing import write_text
    from quantscope.state.plan import DEFAULT_KEEP, plan
    from quantscope.state.plan_export import (
        PLAN_SCHEMA,
        compressed_tensors_config,
        modelopt_config,
        onnx_qdq,
        plan_json,
    )
    from quantscope.state.scan_api import scan

    is_onnx = args.file.endswith(".onnx")
    if args.onnx_out and not is_onnx:
        raise UserError("--onnx-out needs an .onnx CHECKPOINT")
    announce_compiles()
    if is_onnx:
        from quantscope.io.onnx_qdq import initializers, weight_axes

        table = scan(initializers(args.file), label=args.file, method=args.method,
                     axes=weight_axes(args.file))
    else:
        table = scan(args.file, method=args.method)
    keep = ([] if args.no_default_keep else list(DEFAULT_KEEP)) + list(args.keep)
    result = plan(table, args.budget, formats=_formats(args.formats), target=args.target,
                  keep=keep,
                  objective=args.objective, pins=_pins(args.pin))
    print(dumps({"schema": PLAN_SCHEMA, **result.record()}, indent=2) if args.json
          else result.summary())
    exports = []
    if args.compressed_tensors:
        exports.append((compressed_tensors_config(result), args.compressed_tensors,
                        "--compressed-tensors"))
    if args.modelopt:
        exports.append((modelopt_config(result), args.modelopt, "--modelopt"))
    if args.plan_json:
        exports.append((plan_json(result), args.plan_json, "--plan-json"))
    for export, path, option in exports:
        text = export.to_yaml() if option == "--modelopt" else export.to_json() + "\n"
        write_text(path, text, option)
    if args.onnx_out:
        exports.append((onnx_qdq(result, args.file, args.onnx_out), args.onnx_out, ""))
    for export, path, _ in exports:
        print(f"quantscope: wrote {export.target} to {path}", file=sys.stderr)
        for note in export.notes():
            print(f"quantscope: warning: {note}", file=sys.stderr)
    return 0
