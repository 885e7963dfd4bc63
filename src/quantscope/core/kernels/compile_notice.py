"""One line to a person when Numba compiles the engine's loops instead of loading them.

The compiled loops are cached by Numba beside their modules, per machine and per version of
their source. The first command on a new machine or after an upgrade compiles them: 10-20 s on
two idle cores (the window's warm-up about 15 s, a report that prepares about 10 s), 50-90 s on
the same cores shared with other work, in which the command would otherwise print nothing at
all, and look hung. A command that talks to a person calls :func:`announce_compiles` just
before its first compiled loop (``qs.view`` and ``qs.figure`` too); the library itself stays
silent. Numba reports a compile (not a load from its cache) as a ``numba:compile`` event, so the
line appears only when a compile really starts, once per process.

The line goes to stderr whatever stderr is -- a terminal, a pipe, a log, a notebook cell -- since
a wait with no word looks hung wherever it happens (stdout, what scripts read, stays clean);
``quantscope -q`` (:func:`set_verbosity` 0) silences it. Progress follows: on a terminal one
line counting the loops compiled, updated in place; elsewhere a line every
:data:`PROGRESS_EVERY_S` seconds while compiles go on.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

#: What the line says; ``{where}`` is the folder Numba caches the loops in.
#: No fixed duration: 15-20 s on two idle cores became 50-90 s on the same two cores shared
#: with other work, and a notice promising 20 s that takes a minute reads as a hang.
MESSAGE = ("quantscope: compiling the engine's loops for this machine, once per install (about "
           "a minute; progress follows); later runs load them from {where}")

#: Seconds between progress lines where stderr is no terminal (a pipe, a log, a notebook).
PROGRESS_EVERY_S = 10.0

_lock = threading.Lock()
_installed = False
_verbosity = 1


def set_verbosity(level: int) -> None:
    """0: no notice at all (``quantscope -q``); 1 (default) and 2: the notice on any stream."""
    global _verbosity
    _verbosity = int(level)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def say(line: str) -> None:
    """Write ``line`` to stderr as the notice is written (nothing under :func:`set_verbosity`
    0): for a wait on loops another process compiles, which no compile event announces."""
    if _verbosity <= 0:
        return
    try:
        _to_stderr(line)
    except (OSError, ValueError):  # a closed stderr: the line is only a courtesy
        pass


def announce_compiles(write: Callable[[str], object] | None = None) -> None:
    """Have ``write(line)`` called once, when the first compile of this process starts. By
    default the line goes to stderr, followed by progress (see the module docstring), unless
    :func:`set_verbosity` set 0.

    Imports Numba: call it only where a compiled loop runs next. Later calls do nothing."""
    global _installed
    if write is None and _verbosity <= 0:
        return
    say: Callable[[str], object] = write or _to_stderr
    progress = write is None
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
            "every run compiles them, about a minute)")

    class FirstCompile(event.Listener):
        """Writes the line at the first compile's start (it stays registered: unregistering
        inside Numba's broadcast loop would skip the next listener)."""

        written = False
        compiled = 0
        started = last = 0.0

        def on_start(self, ev: event.Event) -> None:
            if not self.written:
                self.written = True
                self.started = self.last = time.monotonic()
                say(line)

        def on_end(self, ev: event.Event) -> None:
            if not progress:
                return
            self.compiled += 1
            now = time.monotonic()
            text = (f"quantscope: {self.compiled} loops compiled in "
                    f"{now - self.started:.0f} s")
            try:
                if sys.stderr.isatty():
                    sys.stderr.write(f"\r{text} ")
                    sys.stderr.flush()
                elif now - self.last >= PROGRESS_EVERY_S:
                    self.last = now
                    _to_stderr(text)
            except (OSError, ValueError):  # a closed stderr: progress is only a courtesy
                pass

    event.register("numba:compile", FirstCompile())
