"""The source and the settings as command-line options: one spelling for the window
(``quantscope [FILE] [settings]``) and ``quantscope report``, which both map them to the same
:class:`~quantscope.state.settings.Settings`, so their numbers agree by construction."""

from __future__ import annotations

import argparse

from quantscope.errors import UserError
from quantscope.state.axes import ROLES
from quantscope.state.errors import SettingsError
from quantscope.state.setting_names import add_setting_options, changes_from_args
from quantscope.state.settings import Settings


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """FILE, --tensor, --sample, --axis and --role: where the tensor comes from and what it is
    (shared with the window)."""
    p.add_argument("file", nargs="?", help="a tensor file (.npy, .npz, .safetensors, PyTorch "
                   ".pt/.pth/.bin, .onnx, .gguf...) or a Hugging Face folder (default: the demo "
                   "tensor)")
    p.add_argument("--tensor", help="tensor name inside a multi-tensor file")
    p.add_argument("--sample", help="a bundled sample tensor by name")
    add_setting_options(p, "source")
    p.add_argument("--role", choices=[r for r in ROLES if r],
                   help="what the tensor is, when its name does not say (sets the axis)")


def add_settings_arguments(p: argparse.ArgumentParser) -> None:
    """The quantization settings, one option per control of the window (the names are
    :data:`quantscope.state.setting_names.SETTING_NAMES`')."""
    add_setting_options(p, "settings")


def settings_from_args(args: argparse.Namespace, base: Settings | None = None,
                       groups: tuple[str, ...] = ("settings",)) -> Settings:
    """The :class:`~quantscope.state.Settings` the options of ``groups`` ask for, over
    ``base`` (a session's settings, or the defaults); refused values raise UserError."""
    try:
        return changes_from_args(args, base, groups)
    except SettingsError as exc:
        raise UserError(str(exc)) from None
