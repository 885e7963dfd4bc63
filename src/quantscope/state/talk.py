"""Talks: an ordered list of saved scenes (tensor, settings, tab, zoom, which panes), stepped
through with PageDown / PageUp, and the built-in talk on the bundled tensors.

A talk file is JSON (never pickle), versioned and validated as a whole before anything
changes, like a session: a wrong key, an unknown tab or pane pair, a bad setting or source
raises :class:`TalkError` saying which scene and why.

Each built-in scene names a caption rule; :func:`scene_caption` writes the caption from the
numbers the window computed for that scene (the panes' reports), so a caption never says
something the screen does not show.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from quantscope.core.labs.mapping import DEFAULT_VALUES, map_values
from quantscope.core.text.formatting import fmt_db
from quantscope.errors import QuantscopeError, one_line
from quantscope.io.samples import sample_path
from quantscope.state.choices import PaneKey
from quantscope.state.session import SessionError, _read_session_text, decode_json
from quantscope.state.settings import Settings
from quantscope.state.source import Source

TALK_FORMAT = "quantscope-talk"
TALK_VERSION = 1
#: "panes", or the title of a view tab.
TABS = ("panes", "Trade-off", "Channels", "Bit width", "Matmul", "Mapping")
PAIR_KEYS = ("1", "2", "3", "4")
CAPTIONS = ("zero_point", "symmetric_limits", "derive", "clipping", "outliers", "")
_SCENE_KEYS = {"title", "source", "settings", "tab", "pair", "zoom", "caption"}


class TalkError(QuantscopeError, ValueError):
    """A talk file that cannot be used; the message says which scene and why."""


@dataclass(frozen=True)
class Scene:
    """One step of a talk: what to load and how to show it."""

    title: str
    source: Source
    settings: Settings = field(default_factory=Settings)
    tab: str = "panes"
    pair: str = "1"
    zoom: tuple[float, float] | None = None
    caption: str = ""  # a rule of :func:`scene_caption`, or "" for none

    def to_dict(self) -> dict:
        return {"title": self.title, "source": self.source.to_dict(),
                "settings": self.settings.to_dict(), "tab": self.tab, "pair": self.pair,
                "zoom": list(self.zoom) if self.zoom else None, "caption": self.caption}


@dataclass(frozen=True)
class Talk:
    title: str
    scenes: tuple[Scene, ...]

    def to_dict(self) -> dict:
        return {"format": TALK_FORMAT, "version": TALK_VERSION, "title": self.title,
                "scenes": [s.to_dict() for s in self.scenes]}

    def scene(self, number: int) -> Scene:
        """Scene ``number``, counted from 1 as on the command line."""
        if not 1 <= number <= len(self.scenes):
            raise TalkError(f"scene {number} does not exist: the talk has scenes 1 to "
                            f"{len(self.scenes)}")
        return self.scenes[number - 1]


def _scene(d, i: int) -> Scene:
    where = f"scene {i}"
    if not isinstance(d, dict):
        raise TalkError(f"{where} must be an object")
    unknown = set(d) - _SCENE_KEYS
    if unknown:
        raise TalkError(f"{where}: unknown key(s) {sorted(unknown)}")
    if not isinstance(d.get("title", ""), str):
        raise TalkError(f"{where}: 'title' must be text")
    try:
        source = Source.from_dict(d["source"])
    except KeyError:
        raise TalkError(f"{where}: 'source' is missing") from None
    except (TypeError, ValueError, QuantscopeError) as exc:
        raise TalkError(f"{where}: bad source: {exc}") from None
    if source.kind == "sample":
        try:
            sample_path(source.name)
        except QuantscopeError as exc:
            raise TalkError(f"{where}: {exc}") from None
    elif source.kind == "file" and not Path(source.name).is_file():
        raise TalkError(f"{where}: file {source.name} does not exist")
    elif source.kind not in ("sample", "file", "generator"):
        raise TalkError(f"{where}: a scene's source is a sample, a file or a generator")
    try:
        settings = Settings.from_dict(d.get("settings") or {})
    except (TypeError, ValueError, QuantscopeError) as exc:
        raise TalkError(f"{where}: bad settings: {exc}") from None
    tab = d.get("tab", "panes")
    if tab not in TABS:
        raise TalkError(f"{where}: tab must be one of {', '.join(TABS)}, got {tab!r}")
    pair = str(d.get("pair", "1"))
    if pair not in PAIR_KEYS:
        raise TalkError(f"{where}: pair must be one of {', '.join(PAIR_KEYS)}, got {pair!r}")
    zoom = _zoom(d.get("zoom"), where)
    caption = d.get("caption", "")
    if caption not in CAPTIONS:
        raise TalkError(f"{where}: caption must be one of {[c for c in CAPTIONS if c]} or "
                        f"empty, got {caption!r}")
    return Scene(d.get("title", f"scene {i}"), source, settings, tab, pair, zoom, caption)


#: The largest |value| a zoom may reach: float32's range, where every tensor's values lie (a
#: wider window has no histogram to show, and past ~1e308 its width overflows to inf).
ZOOM_LIMIT = float(np.finfo(np.float32).max)


def _zoom(zoom, where: str) -> tuple[float, float] | None:
    """``[lo, hi]`` as two finite floats within float32's range, lo below hi by a width the
    plots can draw; None stays None."""
    if zoom is None:
        return None
    shown = one_line(repr(zoom))[:80]
    if not (isinstance(zoom, list) and len(zoom) == 2 and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in zoom)):
        raise TalkError(f"{where}: zoom must be [lo, hi], two numbers, got {shown}")
    try:
        lo, hi = float(zoom[0]), float(zoom[1])
    except OverflowError:  # an integer of hundreds of digits
        lo = hi = math.inf
    if not all(math.isfinite(v) and abs(v) <= ZOOM_LIMIT for v in (lo, hi)):
        raise TalkError(f"{where}: zoom must be finite numbers within ±{ZOOM_LIMIT:.3g}, got "
                        f"{shown}")
    if not hi - lo > 1e-6 * max(abs(lo), abs(hi), 1e-30):
        raise TalkError(f"{where}: zoom must be [lo, hi] with lo < hi (and wide enough to "
                        f"draw), got {shown}")
    return lo, hi


def talk_from_dict(d) -> Talk:
    """Validate a decoded talk document (see the module docstring)."""
    if not isinstance(d, dict) or d.get("format") != TALK_FORMAT:
        raise TalkError(f"not a talk file (its 'format' must be {TALK_FORMAT!r})")
    if d.get("version") != TALK_VERSION:
        raise TalkError(f"talk version {d.get('version')!r} is not supported (this quantscope "
                        f"reads version {TALK_VERSION})")
    unknown = set(d) - {"format", "version", "title", "scenes"}
    if unknown:
        raise TalkError(f"unknown key(s) {sorted(unknown)}")
    scenes = d.get("scenes")
    if not isinstance(scenes, list) or not scenes:
        raise TalkError("'scenes' must be a non-empty list")
    return Talk(str(d.get("title", "talk")), tuple(_scene(s, i + 1)
                                                   for i, s in enumerate(scenes)))


def load_talk(path: str | Path) -> Talk:
    """Read and validate a talk file, through the reader sessions use (a regular file of
    bounded size, JSON whose nesting, numbers and types are checked before anything is
    built)."""
    shown = one_line(str(path))
    try:
        doc = decode_json(_read_session_text(Path(path)))
    except SessionError as exc:
        raise TalkError(f"{shown}: {exc}".replace("session", "talk")) from None
    try:
        return talk_from_dict(doc)
    except RecursionError:
        raise TalkError(f"{shown}: nested too deeply") from None


def save_talk(talk: Talk, path: str | Path) -> None:
    Path(path).write_text(json.dumps(talk.to_dict(), indent=2), encoding="utf-8")


def builtin_talk() -> Talk:
    """The five follow-up questions of int8 quantization, one scene each, on the bundled
    MiniLM tensors."""
    gelu = Source("sample", "gelu_activations", axis=-1)
    out = Source("sample", "output_activations", axis=-1)
    return Talk("int8 quantization: five follow-up questions", (
        Scene("Adding a zero point", gelu, Settings(axis=-1), "panes", "1",
              caption="zero_point"),
        Scene("When symmetric is not enough", out, Settings(axis=-1), "panes", "2",
              caption="symmetric_limits"),
        Scene("Deriving scale and zero point", gelu, Settings(axis=-1), "Mapping", "1",
              caption="derive"),
        Scene("Clipping and saturation", gelu,
              Settings(method="percentile", percentile=99.99, axis=-1), "panes", "1",
              caption="clipping"),
        Scene("Skewed and outlier-heavy inputs", gelu, Settings(axis=-1), "panes", "3",
              caption="outliers"),
    ))


def scene_caption(scene: Scene, results: dict) -> str:
    """The caption of ``scene`` from the reports the window shows for it (pane -> report);
    empty until the reports it needs are there."""
    rule = scene.caption
    need = {"zero_point": (PaneKey.SYMMETRIC_TENSOR, PaneKey.ASYMMETRIC_TENSOR),
            "symmetric_limits": (PaneKey.SYMMETRIC_CHANNEL, PaneKey.ASYMMETRIC_CHANNEL),
            "clipping": (PaneKey.SYMMETRIC_TENSOR, PaneKey.ASYMMETRIC_TENSOR),
            "outliers": (PaneKey.SYMMETRIC_TENSOR, PaneKey.SYMMETRIC_CHANNEL)}.get(rule, ())
    if any(k not in results for k in need):
        return ""
    if rule == "zero_point":
        s, a = results["symmetric/tensor"], results["asymmetric/tensor"]
        return (f"symmetric uses {s.codes_used} of {s.summary()['levels']} codes, "
                f"{fmt_db(s.sqnr_db)}; "
                f"a zero point ({a.summary()['zero_point']}) lets asymmetric use "
                f"{a.codes_used}: {fmt_db(a.sqnr_db)}")
    if rule == "symmetric_limits":
        s, a = results["symmetric/channel"], results["asymmetric/channel"]
        return (f"per channel, symmetric {fmt_db(s.sqnr_db)} vs asymmetric "
                f"{fmt_db(a.sqnr_db)}: {a.sqnr_db - s.sqnr_db:+.1f} dB from shifting each "
                f"channel's window onto its values")
    if rule == "derive":
        sym, asym = map_values(DEFAULT_VALUES)
        return (f"x = [−1, 0, 0.5, 3]: symmetric s = 3/127 = {sym.scale:.4f}, z = 0; "
                f"asymmetric s = 4/255 = {asym.scale:.4f}, z = round(−128 − (−1)/s) = "
                f"{asym.zero_point}")
    if rule == "clipping":
        s = results["symmetric/tensor"]
        clipped = s.clipped_below + s.clipped_above
        return (f"clipping {clipped:,} values at p{scene.settings.percentile:g} saturates "
                f"them to the end codes: symmetric {fmt_db(s.sqnr_db)}, clipping MSE "
                f"{s.clipping_mse:.3g} vs rounding MSE {s.rounding_mse:.3g}")
    if rule == "outliers":
        t, c = results["symmetric/tensor"], results["symmetric/channel"]
        return (f"one outlier feature sets the per-tensor step: {t.codes_used} codes used, "
                f"{fmt_db(t.sqnr_db)}; per channel each feature gets its own: "
                f"{fmt_db(c.sqnr_db)}")
    return ""
