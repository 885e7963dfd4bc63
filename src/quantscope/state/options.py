"""The source and the settings as command-line options: one spelling for the window
(``quantscope [FILE] [settings]``) and ``quantscope report``, which both map them to the same
:class:`~quantscope.state.settings.Settings`, so their numbers agree by construction."""

from __future__ import annotations

import argparse
import dataclasses

from quantscope.errors import UserError
from quantscope.state.axes import ROLES
from quantscope.state.errors import SettingsError
from quantscope.state.settings import CODE_RANGES, METHODS, ROUNDING_RULES, RUNTIMES, Settings


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """FILE, --tensor, --sample, --axis and --role: where the tensor comes from and what it is
    (shared with the window)."""
    p.add_argument("file", nargs="?", help="a tensor file (.npy, .npz, .safetensors, PyTorch "
                   ".pt/.pth/.bin, .onnx, .gguf...) or a Hugging Face folder (default: the demo "
                   "tensor)")
    p.add_argument("--tensor", help="tensor name inside a multi-tensor file")
    p.add_argument("--sample", help="a bundled sample tensor by name")
    p.add_argument("--axis", type=int, default=None,
                   help="channel axis (default: from the tensor's role: 0 for weights "
                        "[out, in, ...], -1 for activations [..., features])")
    p.add_argument("--role", choices=[r for r in ROLES if r],
                   help="what the tensor is, when its name does not say (sets the axis)")


def add_settings_arguments(p: argparse.ArgumentParser) -> None:
    """The quantization settings, one option per control of the window."""
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
    p.add_argument("--preset", "--runtime", dest="runtime", metavar="PRESET",
                   choices=[r for r in RUNTIMES if r],
                   help="reproduce a runtime's parameter rules and arithmetic: "
                        f"{', '.join(r for r in RUNTIMES if r)} (--runtime is an alias)")


def settings_from_args(args: argparse.Namespace, base=None):
    """The :class:`~quantscope.state.Settings` the options ask for, over ``base`` (a
    session's settings, or the defaults); refused values raise UserError."""
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
