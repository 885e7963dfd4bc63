"""The explorer's settings (engine defaults throughout); the panes they fill are
:data:`~quantscope.state.choices.PANES`."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from quantscope.core.calibration.runtimes import PRESETS
from quantscope.core.tensors.validate import ROUNDING_RULES
from quantscope.state.choices import PANES, FormatChoice, check_formats
from quantscope.state.errors import SettingsError, short_repr

__all__ = ["CODE_RANGES", "MAX_GROUP_SIZE", "METHODS", "PANES", "ROUNDING_RULES",
           "RUNTIMES", "RUNTIME_DESCRIPTIONS", "Settings"]

METHODS = ("minmax", "percentile", "mse", "entropy", "manual")
#: Runtime presets (None: the engine's own rules) and what each reproduces.
RUNTIME_DESCRIPTIONS: dict[str | None, str] = {None: "the engine's own rules (the controls decide)"}
RUNTIME_DESCRIPTIONS.update(PRESETS)
RUNTIMES = tuple(RUNTIME_DESCRIPTIONS)
#: ``code_range`` option values (command line, ``view(code_range=...)``) ->
#: ``Settings.narrow_range`` (None: narrow for symmetric, full for asymmetric).
CODE_RANGES = {"default": None, "narrow": True, "full": False}
#: Largest group size a setting may hold (the controls' spin box range): longer than any axis
#: worth grouping, and the engine treats a group longer than its axis as the whole axis.
MAX_GROUP_SIZE = 1 << 24


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # True is not an axis


@dataclass(frozen=True)
class Settings:
    """Everything that turns a tensor into four quantizations (engine defaults throughout).

    ``manual_clip`` is the ``[lo, hi]`` window used when ``method == "manual"``; symmetric
    panes use ``max(|lo|, |hi|)``, and per-channel panes cap each channel's own range by it.
    ``group_size`` turns the per-channel panes into per-group panes along ``axis``.
    """

    method: str = "minmax"
    percentile: float = 99.99
    manual_clip: tuple[float, float] | None = None
    rounding: str = "half_even"
    narrow_range: bool | None = None
    bits: int = 8
    axis: int = 0
    group_size: int | None = None
    runtime: str | None = None
    #: One number format per pane (the comparison layout, see :mod:`quantscope.state.formats`),
    #: or None for the four int schemes; text given here is parsed into the typed choices.
    formats: tuple[FormatChoice, FormatChoice, FormatChoice, FormatChoice] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.formats, tuple) and all(isinstance(f, str) for f in self.formats):
            # parsed once here, so every reader gets the parts, never the text to split
            object.__setattr__(self, "formats", tuple(FormatChoice(f) for f in self.formats))

    def check(self, ndim: int | None = None) -> Settings:
        """Return self if every field is valid (for a tensor of ``ndim`` dims), else raise."""
        if self.method not in METHODS:
            raise SettingsError(f"method must be one of {METHODS}, got {self.method!r}")
        if not (isinstance(self.percentile, int | float) and not isinstance(self.percentile, bool)
                and 0 < self.percentile <= 100):
            raise SettingsError(f"percentile must be in (0, 100], got {self.percentile!r}")
        if self.manual_clip is not None:
            lo, hi = self.manual_clip
            if not (all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lo, hi))
                    and math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise SettingsError(f"manual clip needs finite lo < hi, got {self.manual_clip}")
        if self.rounding not in ROUNDING_RULES:
            raise SettingsError(f"rounding must be one of {ROUNDING_RULES}, got {self.rounding!r}")
        if self.narrow_range not in (None, True, False):
            raise SettingsError(f"narrow_range must be None, True or False, "
                                f"got {self.narrow_range!r}")
        if not (_is_int(self.bits) and 2 <= self.bits <= 8):
            raise SettingsError(f"bits must be an integer from 2 to 8, got {self.bits!r}")
        if not _is_int(self.axis):
            raise SettingsError(f"axis must be an integer, got {self.axis!r}")
        if ndim is not None and ndim > 0 and not -ndim <= self.axis < ndim:
            raise SettingsError(f"axis {self.axis} is out of range for a {ndim}-d tensor")
        if self.group_size is not None and not (_is_int(self.group_size)
                                                and 1 <= self.group_size <= MAX_GROUP_SIZE):
            raise SettingsError(f"group size must be None or an integer from 1 to "
                                f"{MAX_GROUP_SIZE}, got {short_repr(self.group_size)}")
        if self.runtime not in RUNTIMES:
            raise SettingsError(f"runtime must be one of {RUNTIMES}, got {self.runtime!r}")
        if self.formats is not None:
            if not isinstance(self.formats, tuple):
                raise SettingsError(f"formats must be None or a tuple of four pane formats, "
                                    f"got {short_repr(self.formats)}")
            check_formats(self.formats)
        return self

    def to_dict(self) -> dict:
        """JSON-ready form (for sessions and the metrics file)."""
        d = dataclasses.asdict(self)
        d["manual_clip"] = list(self.manual_clip) if self.manual_clip else None
        d["formats"] = [str(f) for f in self.formats] if self.formats else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Settings:
        """Inverse of :meth:`to_dict`; unknown keys are refused so typos do not pass silently."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise SettingsError(f"unknown setting(s) {sorted(unknown)}")
        d = dict(d)
        clip = d.get("manual_clip")
        if clip is not None:
            if not isinstance(clip, list | tuple) or len(clip) != 2:
                raise SettingsError(f"manual clip must be [lo, hi], got {short_repr(clip)}")
            d["manual_clip"] = tuple(clip)  # check() refuses what is not a number
        if d.get("formats") is not None:
            d["formats"] = tuple(d["formats"])
        return cls(**d).check()

