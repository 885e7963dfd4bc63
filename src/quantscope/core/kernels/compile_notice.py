"""One line to a person when Numba compiles the engine's loops instead of loading them.

The compiled loops are cached by Numba beside their modules, per machine and per version of
their source. The first command on a new machine or after an upgrade compiles them: 10-20 s on
two cores (the window's warm-up about 15 s, a report that prepares about 10 s) in which the
command would otherwise print nothing at all, and look hung. A command that talks to a person
calls :func:`announce_compiles` just before its first compiled loop; the library itself stays
silent. Numba reports a compile (not a load from its cache) as a ``numba:compile`` event, so the
line appears only when a compile really starts, once per process.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

#: What the line says; ``{where}`` is the folder Numba caches the loops in.
MESSAGE = ("quantscope: compiling the engine's loops for this machine (the first run after an "
           "install takes 10-20 s; later runs load them from {where})")

_lock = threading.Lock()
_installed = False


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def announce_compiles(write: Callable[[str], object] | None = None) -> None:
    """Have ``write(line)`` called once, when the first compile of this process starts. By
    default the line goes to stderr when stderr is a terminal (as a progress bar does: a log or
    a pipe that a script reads gets no chatter).

    Imports Numba: call it only where a compiled loop runs next. Later calls do nothing."""
    global _installed
    if write is None and not sys.stderr.isatty():
        return
    say: Callable[[str], object] = write or _to_stderr
    with _lock:
        if _installed:
            return
        _installed = True
    from numba.core import event

    from quantscope.core.kernels import direct_kernel

    kernel: Any = direct_kernel.dequantize_range  # a Numba dispatcher (its stubs lack _cache)
    where = kernel._cache.cache_path  # None: no writable folder, compiled in memory
    line = (MESSAGE.format(where=where) if where else
            "quantscope: compiling the engine's loops in memory (no writable cache folder: "
            "every run compiles them, 10-20 s)")

    class FirstCompile(event.Listener):
        """Writes the line at the first compile's start (it stays registered: unregistering
        inside Numba's broadcast loop would skip the next listener)."""

        written = False

        def on_start(self, ev: event.Event) -> None:
            if not self.written:
                self.written = True
                say(line)

        def on_end(self, ev: event.Event) -> None:
            pass

    event.register("numba:compile", FirstCompile())
