"""Typed names for what the user picks: which pane (:class:`PaneKey`) and which number format a
comparison pane shows (:class:`FormatChoice`).

Both are written as text wherever a person or a file sees them (``"symmetric/channel"`` in
``report --json`` and in sessions, ``"fp8_e4m3/tensor"`` in ``--compare`` and talks), and
both are ``str`` subclasses, so that text stays exactly what it was: a JSON key, a dict
look-up by the plain string and an old session file all still work. What changes is that
the code never splits the text again: the one parser is the constructor, which refuses a
malformed name with :class:`~quantscope.state.errors.SettingsError`, and the one printer is
``str()`` (built by :meth:`PaneKey.of` / :meth:`FormatChoice.of` from the parts). The parts are
attributes (``pane.symmetric``, ``pane.per_tensor``, ``choice.name``, ``choice.granularity``).

This module imports nothing heavy: the settings parse a choice here, and only
:func:`offered_formats` reads the engine's format table (which loads Numba).
"""

from __future__ import annotations

import enum
import functools

from quantscope.state.errors import SettingsError, short_repr

#: Where a pane's scale is shared: the whole tensor, or each channel (each group when the
#: settings hold a group size).
GRANULARITIES = ("tensor", "channel")


class PaneKey(enum.StrEnum):
    """One of the four panes: symmetric / asymmetric x per tensor / per channel (per group
    when ``Settings.group_size`` is set). Its value is the key of ``report --json``."""

    SYMMETRIC_TENSOR = "symmetric/tensor"
    SYMMETRIC_CHANNEL = "symmetric/channel"
    ASYMMETRIC_TENSOR = "asymmetric/tensor"
    ASYMMETRIC_CHANNEL = "asymmetric/channel"

    @property
    def scheme(self) -> str:
        """``"symmetric"`` or ``"asymmetric"``."""
        return self.value.partition("/")[0]

    @property
    def granularity(self) -> str:
        """``"tensor"`` or ``"channel"``."""
        return self.value.partition("/")[2]

    @property
    def symmetric(self) -> bool:
        return self.scheme == "symmetric"

    @property
    def per_tensor(self) -> bool:
        return self.granularity == "tensor"

    @classmethod
    def of(cls, symmetric: bool, granularity: str) -> PaneKey:
        """The pane of a scheme and a granularity (the one place that writes the text)."""
        if granularity not in GRANULARITIES:
            raise SettingsError(f"granularity must be one of {GRANULARITIES}, "
                                f"got {short_repr(granularity)}")
        return cls(f"{'symmetric' if symmetric else 'asymmetric'}/{granularity}")

    @classmethod
    def parse(cls, text: object) -> PaneKey:
        """The pane named by ``text`` (a :class:`PaneKey` is returned as it is); anything else
        raises :class:`SettingsError` naming the four panes."""
        try:
            if not isinstance(text, str):
                raise ValueError(text)
            return cls(text)
        except ValueError:
            raise SettingsError(f"unknown pane {short_repr(text)}; panes are "
                                f"{', '.join(p.value for p in cls)}") from None


#: The four panes in the window's order (their values are ``report --json``'s keys).
PANES: tuple[PaneKey, ...] = tuple(PaneKey)


class FormatChoice(str):
    """A comparison pane's number format: ``"NAME"`` for a block or group format
    (``"mxfp4"``, ``"int4_g128"``), ``"NAME/tensor"`` or ``"NAME/channel"`` for int8 and the
    element formats (``"fp8_e4m3/tensor"``), and ``"int{b}/channel"`` for the points of the
    Formats view's int curve.

    Constructing one parses the text (syntax only: whether ``name`` is a format of the
    engine's table is :func:`check_formats`'s question, since that table loads Numba)."""

    name: str
    granularity: str | None

    def __new__(cls, text: object) -> FormatChoice:
        if isinstance(text, FormatChoice):
            return text
        if not isinstance(text, str):
            raise SettingsError(f"a pane format is text, got {short_repr(text)}")
        name, sep, granularity = text.partition("/")
        if not name or (sep and granularity not in GRANULARITIES):
            raise SettingsError(f"pane format {short_repr(text)} is not NAME, NAME/tensor or "
                                "NAME/channel")
        self = super().__new__(cls, text)
        self.name = name
        self.granularity = granularity if sep else None
        return self

    @classmethod
    def of(cls, name: str, granularity: str | None = None) -> FormatChoice:
        """The choice of format ``name`` at ``granularity`` (None: the format's own blocks);
        the one place that writes the text."""
        return cls(name if granularity is None else f"{name}/{granularity}")

    @property
    def per_channel(self) -> bool:
        return self.granularity == "channel"

    @property
    def blocked(self) -> bool:
        """A block or group format: its scales come from its own blocks, no granularity."""
        return self.granularity is None

    def __getnewargs__(self) -> tuple[str]:  # copies and pickles rebuild through __new__
        return (str(self),)


@functools.cache
def offered_formats() -> tuple[FormatChoice, ...]:
    """Every pane format the window offers, in the engine's order: int8 and each element
    format per tensor and per channel, each block or group format once."""
    # the engine's format table loads Numba: only a comparison layout, which computes with
    # those formats anyway, pays for the import
    from quantscope.core.formats.catalog import FORMATS, format_kind

    out: list[FormatChoice] = []
    for name in FORMATS:
        if name == "int8" or format_kind(name) == "element":
            out += [FormatChoice.of(name, "tensor"), FormatChoice.of(name, "channel")]
        else:
            out.append(FormatChoice.of(name))
    return tuple(out)


def parse_formats(formats: object) -> tuple[FormatChoice, ...] | None:
    """``Settings.formats`` as typed values: None, or four parsed :class:`FormatChoice`
    (raises :class:`SettingsError` for anything else). Names are checked by
    :func:`check_formats`."""
    if formats is None:
        return None
    if not (isinstance(formats, tuple | list) and len(formats) == 4):
        raise SettingsError(f"formats must be None or four pane formats, "
                            f"got {short_repr(formats)}")
    return tuple(FormatChoice(f) for f in formats)


def check_formats(formats: object) -> None:
    """Refuse anything but None or four pane formats the window offers
    (:func:`offered_formats`)."""
    choices = parse_formats(formats)
    if choices is None:
        return
    offered = offered_formats()
    bad = [str(f) for f in choices if f not in offered]
    if bad:
        raise SettingsError(f"unknown pane format(s) {bad}; choose from {', '.join(offered)}")
