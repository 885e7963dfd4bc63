"""Count the calls that cross quantscope's layers on one thread: a test helper and what
``bench/trace_bits_change.py`` prints.

A call *crosses* when the function called lives in another layer (``gui``, ``state``, ``core``,
the rest of ``quantscope``) than the nearest quantscope function below it on the stack:
a window handler calling the state, a state signal reaching a window handler through psygnal
(the library frames in between are not quantscope's and do not count), the state calling the
engine. Only the thread that starts the trace is profiled (the GUI thread).
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field

_PREFIXES = (("quantscope.gui", "gui"), ("quantscope.state", "state"),
             ("quantscope.core", "core"), ("quantscope", "quantscope"))


def layer_of(module: str | None) -> str | None:
    """The layer of a module name (None: not quantscope's)."""
    if not module:
        return None
    for prefix, name in _PREFIXES:
        if module == prefix or module.startswith(prefix + "."):
            return name
    return None


@dataclass
class LayerTrace:
    """The crossings seen while it runs: ``crossings`` in order as
    ``(caller layer, caller function, callee layer, callee function)``."""

    crossings: list[tuple[str, str, str, str]] = field(default_factory=list)

    def __enter__(self) -> LayerTrace:
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)

    def _profile(self, frame, event, arg) -> None:
        if event != "call":
            return
        callee = layer_of(frame.f_globals.get("__name__"))
        if callee is None:
            return
        below = frame.f_back
        while below is not None:
            caller = layer_of(below.f_globals.get("__name__"))
            if caller is not None:
                if caller != callee:
                    self.crossings.append((caller, _name(below), callee, _name(frame)))
                return
            below = below.f_back

    def count(self) -> int:
        return len(self.crossings)

    def by_direction(self) -> Counter:
        """Crossings counted by ``"caller → callee"`` layer pair."""
        return Counter(f"{a} → {c}" for a, _, c, _ in self.crossings)

    def plumbing(self) -> list[tuple[str, str, str, str]]:
        """The crossings by which the window itself moved a computation along: the window,
        its loader or the jobs adapter calling the state's ``request`` / ``accept`` or the
        scheduler (``submit``, ``is_current``, ``latest``). None in the house where the
        state computes."""
        window = ("gui.window.", "gui.loading.", "gui.jobs.Jobs.")
        moves = ("state.explorer.ExplorerState.request", "state.explorer.ExplorerState.accept",
                 "state.scheduler.Scheduler.")
        return [c for c in self.crossings if c[1].startswith(window) and c[3].startswith(moves)]

    def lines(self) -> list[str]:
        """One line per run of identical crossings, in order (``×n`` when repeated)."""
        out: list[str] = []
        last, n = None, 0
        for item in [*self.crossings, None]:
            if item == last:
                n += 1
                continue
            if last is not None:
                a, f, c, g = last
                out.append(f"{a}:{f} → {c}:{g}" + (f"  ×{n}" if n > 1 else ""))
            last, n = item, 1
        return out


def _name(frame) -> str:
    code = frame.f_code
    module = frame.f_globals.get("__name__", "").removeprefix("quantscope.")
    return f"{module}.{getattr(code, 'co_qualname', code.co_name)}"
