"""``quantscope export FILE [--tensor NAME] [scheme options] -o OUT.npz``: the int codes, for use
elsewhere.

The archive holds ``codes`` (int8, or uint8 for an unsigned range), ``scale`` (float32),
``zero_point`` (int32) and ``metadata``: a JSON string (0-d unicode array) with the scheme —
bits, code range, symmetric, granularity, axis, group size, rounding, arithmetic — the source
and the error figures. Nothing in it needs pickle: ``np.load(OUT, allow_pickle=False)`` reads
it, and ``quantscope.dequantize(codes, scale, zero_point, axis=..., group_size=...)`` gives back
exactly the values the engine reports on.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np

from quantscope.commands.source import add_file_or_sample, resolve_file_or_sample
from quantscope.core import QuantParams, QuantReport, choose_qparams
from quantscope.core.tensors.validate import ARITHMETIC_RULES, ROUNDING_RULES
from quantscope.errors import UserError
from quantscope.io import load_for_analysis
from quantscope.io.archive import build_metadata, write_archive
from quantscope.io.checks import show_path
from quantscope.io.tensor_info import printable
from quantscope.io.writing import check_output


def add_parser(subparsers) -> None:
    """Register ``export`` on the command line."""
    p = subparsers.add_parser(
        "export", help="write a tensor's int codes, scales and zero points to .npz",
        description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_file_or_sample(p, "a tensor file (.npy, .npz, .safetensors, PyTorch .pt/.pth/.bin, "
                          ".onnx, .gguf...) or a Hugging Face folder / *.index.json")
    p.add_argument("--tensor", help="tensor name inside a multi-tensor file")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="archive to write")
    scheme = p.add_argument_group("scheme")
    scheme.add_argument("--asymmetric", action="store_true",
                        help="affine range with a zero point (default: symmetric)")
    scheme.add_argument("--granularity", choices=("tensor", "channel", "group"),
                        help="one scale per tensor (default), per channel "
                                               "along --axis, or per --group-size block")
    scheme.add_argument("--axis", type=int, help="channel / group axis (default 0)")
    scheme.add_argument("--group-size", type=int, help="block length for --granularity group")
    scheme.add_argument("--bits", type=int, help="bit width, 2 to 8 (default 8)")
    narrow = scheme.add_mutually_exclusive_group()
    narrow.add_argument("--narrow-range", dest="narrow_range", action="store_true",
                        default=None, help="drop the most negative code (default if symmetric)")
    narrow.add_argument("--full-range", dest="narrow_range", action="store_false")
    scheme.add_argument("--unsigned", action="store_true", help="codes 0..2^bits-1 (uint8)")
    scheme.add_argument("--rounding", choices=ROUNDING_RULES,
                        help="default: half_even, or the --preset's own rule")
    scheme.add_argument("--arithmetic", choices=ARITHMETIC_RULES,
                        help="how x/scale is formed (default: divide, or the --preset's own)")
    scheme.add_argument("--method", default="minmax",
                        help="range calibration: minmax (default) or, when available, "
                             "percentile / mse / entropy")
    scheme.add_argument("--preset", "--runtime", dest="runtime",
                        help="copy a runtime's rules (pytorch, pytorch-fake, onnxruntime, "
                             "tflite, tflite-xnnpack, tensorrt; --runtime is an alias)")
    scheme.add_argument("--format", default="int8",
                        help="number format (default int8 with --bits): fp8_e4m3, mxfp4, "
                             "nvfp4, nf4, int4_g128... (see quantscope report --help)")
    scheme.add_argument("--nonfinite", choices=("raise", "saturate"), default="raise",
                        help="NaN/inf elements: refuse (default) or saturate to the range ends")


def _check_optional_engine(args: argparse.Namespace) -> None:
    """Calibration and runtime presets are separate engine modules; say so if absent."""
    if args.method != "minmax" and importlib.util.find_spec(
            "quantscope.core.calibration.methods") is None:
        raise UserError(f"--method {args.method}: calibration is not available in this "
                        "version (use minmax)")
    if args.runtime and importlib.util.find_spec("quantscope.core.calibration.runtimes") is None:
        raise UserError(f"--preset {args.runtime}: runtime presets are not available in this "
                        "version")


def _refuse_what_the_format_sets(args: argparse.Namespace) -> None:
    """A number format other than int8 fixes its own bit width, code range, rounding and (for
    block formats) its blocks along the last axis: an option it cannot honour is refused, not
    dropped from an archive that would then claim to be what was asked."""
    from quantscope.core.formats.catalog import format_kind

    kind = format_kind(args.format)
    given = {"--bits": args.bits is not None, "--group-size": args.group_size is not None,
             "--unsigned": args.unsigned, "--runtime": args.runtime is not None,
             "--narrow-range/--full-range": args.narrow_range is not None,
             "--rounding": args.rounding is not None, "--arithmetic": args.arithmetic is not None}
    if kind != "element":  # blocks and groups run along the last axis
        given.update({"--granularity": args.granularity is not None,
                      "--axis": args.axis is not None})
    if kind not in ("element", "int"):  # element formats refuse it themselves; int groups
        given["--asymmetric"] = args.asymmetric  # take it
    refused = [option for option, present in given.items() if present]
    if refused:
        raise UserError(f"--format {args.format} sets its own bit width, code range, rounding"
                        f"{'' if kind == 'element' else ' and blocks'}: it does not take "
                        + ", ".join(refused))


def choose_from_args(x: np.ndarray, args: argparse.Namespace) -> QuantParams:
    """The engine's parameters for the scheme options."""
    granularity = args.granularity or "tensor"
    axis = 0 if args.axis is None else args.axis
    bits = 8 if args.bits is None else args.bits
    if granularity == "group" and args.group_size is None:
        raise UserError("--granularity group needs --group-size N")
    if args.group_size is not None and granularity != "group":
        raise UserError("--group-size only applies with --granularity group")
    if granularity != "tensor" and not -x.ndim <= axis < max(x.ndim, 1):
        raise UserError(f"--axis {axis} is out of range for shape {x.shape}")
    _check_optional_engine(args)
    return choose_qparams(
        x, symmetric=not args.asymmetric, granularity=granularity, axis=axis,
        group_size=args.group_size, bits=bits, narrow_range=args.narrow_range,
        signed=False if args.unsigned else None, method=args.method, rounding=args.rounding,
        arithmetic=args.arithmetic, runtime=args.runtime,
        **({"format": args.format} if getattr(args, "format", "int8") != "int8" else {}))


def recorded_report(x: np.ndarray, params) -> QuantReport:
    """The report an export prints and stores: the one ``quantscope report`` and the window
    give for these parameters, from the tensor prepared as they prepare it above
    :data:`~quantscope.state.pane_rules.DIRECT_MAX` elements (where its sorted prefix sums
    and a direct pass differ in the last digits), made only for the parameters that read it
    (:class:`~quantscope.state.prepared_on_demand.PreparedOnDemand`)."""
    from quantscope.state.pane_rules import analyze_with
    from quantscope.state.prepared_on_demand import PreparedOnDemand

    return analyze_with(x, PreparedOnDemand(x, None), params)


def run(args: argparse.Namespace) -> int:
    """Quantize the chosen tensor and write the archive; prints one summary line."""
    path, label = resolve_file_or_sample(args)
    out = Path(args.output)
    if path.exists() and out.exists() and out.resolve() == path.resolve():
        raise UserError(f"refusing to overwrite the input {show_path(path)} with the export")
    check_output(out, "-o")  # before the work, not after it
    if args.format != "int8":
        _refuse_what_the_format_sets(args)
    x, info = load_for_analysis(path, args.tensor)
    params = choose_from_args(x, args)
    if args.nonfinite == "raise":
        bad = ~np.isfinite(x)
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise UserError(f"{label}: tensor {info.name!r} has {int(bad.sum())} NaN/inf "
                            f"value(s), the first at index {first}; pass --nonfinite saturate "
                            "to map inf to the range ends and NaN to the zero point")
    codes = params.quantize(x, nonfinite=args.nonfinite)
    report = recorded_report(x, params)
    metadata = build_metadata(params, source=label, tensor=info.name, source_dtype=info.dtype,
                              shape=x.shape, report=report)
    members = None
    name = f"int{params.bits}"
    if not isinstance(params, QuantParams):
        from quantscope.commands.export_format import format_members, format_scheme

        metadata["scheme"] = format_scheme(params, x.size)
        metadata["dequantize"] = metadata["scheme"].pop("dequantize")
        members, name = format_members(params, codes), params.format
    elif "format" in params.extra:
        metadata["scheme"]["format"] = name = params.extra["format"]
    write_archive(out, codes, params, metadata, members)
    print(f"wrote {show_path(out)}: {printable(info.name)} {list(x.shape)} -> {codes.dtype} codes, "
          f"{params.granularity} {'symmetric' if params.symmetric else 'asymmetric'} "
          f"{name}, SQNR {report.sqnr_db:.2f} dB")
    return 0
