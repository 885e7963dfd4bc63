"""The one table of setting names: each setting's field, the keywords the Python handle takes
(``qs.view``, ``qs.figure``, ``Viewer.set``, ``qs.widget``), its command-line options and the
key that session and talk files store it under.

Every way in reads this table: :func:`settings_changes` turns keywords into field changes,
:func:`add_setting_options` writes the command-line options and :func:`changes_from_args`
reads them back, and :meth:`Settings.from_dict <quantscope.state.settings.Settings.from_dict>`
accepts exactly the fields named here. A name is added or renamed here once, and a test holds
every entry to the table in both directions (each name it lists is accepted, no other is).
"""

from __future__ import annotations

import argparse
import dataclasses
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quantscope.state.errors import SettingsError, short_repr
from quantscope.state.settings import (
    CODE_RANGES,
    METHODS,
    ROUNDING_RULES,
    RUNTIMES,
    Settings,
)

#: Where a command-line option is offered: with the settings (the window and ``report``),
#: with the source (the channel axis belongs to the tensor's role), or by the window only.
OPTION_GROUPS = ("settings", "source", "window")


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class SettingName:
    """One setting's names. ``keywords[0]`` is the field itself; the others are aliases that
    write it another way (``clip=(lo, hi)`` also selects the manual method, ``code_range``
    says narrow/full/default in words). ``flags[0]`` is the option's name, the others its
    aliases; the option's value goes to keyword ``dest`` through ``from_option``."""

    field: str
    keywords: tuple[str, ...]
    flags: tuple[str, ...]
    dest: str
    group: str
    help: str
    option: dict = dataclasses.field(default_factory=dict)
    from_option: Callable[[Any], Any] = dataclasses.field(default=_same, compare=False)

    @property
    def session_key(self) -> str:
        """The key of session and talk files: the field, as :meth:`Settings.to_dict`
        writes it (files stay as they were written)."""
        return self.field


def _code_range_words() -> str:
    return ", ".join(repr(k) for k in CODE_RANGES)


SETTING_NAMES: tuple[SettingName, ...] = (
    SettingName("method", ("method",), ("--method",), "method", "settings",
                "range method (default minmax); mse also gives MX and NVFP4 blocks their "
                "scale of least error", {"choices": METHODS}),
    SettingName("percentile", ("percentile",), ("--percentile",), "percentile", "settings",
                "percentile for --method percentile (default 99.99)", {"type": float}),
    SettingName("manual_clip", ("manual_clip", "clip"), ("--clip",), "clip", "settings",
                "manual clip window (implies --method manual)",
                {"nargs": 2, "type": float, "metavar": ("LO", "HI")}),
    SettingName("rounding", ("rounding",), ("--rounding",), "rounding", "settings",
                "rounding rule (default half_even)", {"choices": ROUNDING_RULES}),
    SettingName("narrow_range", ("narrow_range", "code_range"), ("--code-range",),
                "code_range", "settings",
                "narrow drops the most negative code; default: narrow for symmetric, full for "
                "asymmetric", {"choices": list(CODE_RANGES)}),
    SettingName("bits", ("bits",), ("--bits",), "bits", "settings",
                "bit width, 2 to 8 (default 8)", {"type": int}),
    SettingName("axis", ("axis",), ("--axis",), "axis", "source",
                "channel axis (default: from the tensor's role: 0 for weights [out, in, ...], "
                "-1 for activations [..., features])", {"type": int}),
    SettingName("group_size", ("group_size",), ("--group-size",), "group_size", "settings",
                "per-group panes: groups of this many consecutive elements along the "
                "reduction (input) dimension (0: per channel)", {"type": int},
                from_option=lambda n: n or None),
    SettingName("runtime", ("runtime", "preset"), ("--preset", "--runtime"), "runtime",
                "settings",
                "reproduce a runtime's parameter rules and arithmetic: "
                f"{', '.join(r for r in RUNTIMES if r)} (--runtime is an alias)",
                {"choices": [r for r in RUNTIMES if r], "metavar": "PRESET"}),
    SettingName("formats", ("formats",), ("--compare",), "formats", "window",
                "the four panes show these number formats (default int8/channel,"
                "fp8_e4m3/tensor,mxfp4,int4_g128), e.g. nvfp4 or fp8_e5m2/channel",
                {"nargs": "?", "const": "int8/channel,fp8_e4m3/tensor,mxfp4,int4_g128",
                 "metavar": "F1,F2,F3,F4"},
                from_option=lambda text: tuple(text.split(","))),
)

#: Each keyword (name or alias) the Python handle takes -> its row.
BY_KEYWORD: dict[str, SettingName] = {k: row for row in SETTING_NAMES for k in row.keywords}
#: Each field -> its row.
BY_FIELD: dict[str, SettingName] = {row.field: row for row in SETTING_NAMES}


def settings_changes(current: Settings, options: dict, ndim: int | None = None) -> dict:
    """Turn ``set(**options)`` into Settings field changes, checked against a tensor of
    ``ndim`` dimensions; raises SettingsError (nothing changes) for an unknown name or value.

    ``clip=(lo, hi)`` is the manual clip window and selects the manual method unless
    ``method`` is given too; ``clip=None`` drops it. ``code_range`` takes ``"narrow"``,
    ``"full"`` or ``"default"``; ``preset`` is ``runtime`` by the command line's name.
    Integral values (NumPy's too) become ints.
    """
    changes: dict = {}
    for key, value in options.items():
        row = BY_KEYWORD.get(key)
        if row is None:
            raise SettingsError(f"unknown setting {key!r}; settings are "
                                f"{', '.join(sorted(BY_KEYWORD))}")
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            value = int(value)
        if row.field == "manual_clip":
            value = None if value is None else tuple(float(v) for v in value)
            if value is not None and len(value) != 2:
                raise SettingsError(f"{key} must be (lo, hi), got {short_repr(options[key])}")
            if key == "clip" and value is not None and "method" not in options:
                changes["method"] = "manual"
        elif key == "code_range":
            if not isinstance(value, str) or value not in CODE_RANGES:
                raise SettingsError(f"code_range must be one of {list(CODE_RANGES)}, "
                                    f"got {short_repr(value)}")
            value = CODE_RANGES[value]
        if row.field in changes and changes[row.field] != value:
            given = [k for k in row.keywords if k in options]
            raise SettingsError(f"{' and '.join(given)} name the same setting with "
                                "different values")
        changes[row.field] = value
    dataclasses.replace(current, **changes).check(ndim)
    return changes


def add_setting_options(parser: argparse.ArgumentParser, group: str | None = None, *,
                        fields: tuple[str, ...] = (), choices: dict | None = None,
                        helps: dict | None = None, defaults: dict | None = None) -> None:
    """The command-line options of the rows of ``group`` (see :data:`OPTION_GROUPS`), or of
    the rows of ``fields``, in the table's order. A command that takes a narrower setting
    (``scan`` has no manual window, a few presets) passes its own ``choices``, ``helps`` and
    ``defaults`` by field; the names stay the table's."""
    if group is not None and group not in OPTION_GROUPS:
        raise ValueError(f"group must be one of {OPTION_GROUPS}, got {group!r}")
    unknown = set(fields) - set(BY_FIELD)
    if unknown:
        raise ValueError(f"no setting named {sorted(unknown)}")
    for row in SETTING_NAMES:
        if row.group == group or row.field in fields:
            option = dict(row.option)
            if choices and row.field in choices:
                option["choices"] = choices[row.field]
            if defaults and row.field in defaults:
                option["default"] = defaults[row.field]
            text = (helps or {}).get(row.field, row.help)
            parser.add_argument(*row.flags, dest=row.dest, help=text, **option)


def option_keywords(args: argparse.Namespace, groups: tuple[str, ...] = ("settings",)
                    ) -> dict:
    """The keywords (for :func:`settings_changes`) that the options of ``groups`` were given
    on the command line, their values as the options' ``from_option`` turn them."""
    out = {}
    for row in SETTING_NAMES:
        if row.group in groups:
            value = getattr(args, row.dest, None)
            if value is not None:
                out[row.dest] = row.from_option(value)
    return out


def changes_from_args(args: argparse.Namespace, base: Settings | None = None,
                      groups: tuple[str, ...] = ("settings",)) -> Settings:
    """The :class:`Settings` the options of ``groups`` ask for, over ``base`` (a session's
    settings, or the defaults); refused values raise :class:`SettingsError`."""
    base = base or Settings()
    return dataclasses.replace(base, **settings_changes(base, option_keywords(args, groups)))
