"""The engine's other compiled loops, compiled ahead in a process of their own on a first run.

The launcher's warm-up (:func:`quantscope.state.warm_up.warm_up_engine`) loads the loops the
panes use. Number formats, the model scan's one-read figures and the direct passes of the
engine API have loops of their own that Numba compiles on their first call: on a machine's
first run that is 15-20 s inside the window, with the GUI thread short of the interpreter
for a few hundred milliseconds at a time, the first time a person opens the formats. When the
warm-up itself had to compile (the cache is cold: a new machine or a new version),
:func:`start_if_cold` starts ``python -m quantscope.state.compile_ahead`` at the lowest
priority, which calls each of those loops once on small tensors, so Numba writes them to its
cache while the person looks at the panes; the window then loads them from there (about 50 ms)
when it first needs them.

Nothing depends on the process finishing: a loop it has not written yet is compiled by the
window as it would be without it, and Numba writes its cache files atomically, so two
processes compiling the same loop leave one whole file.

On a cold cache the window need not wait for the panes' loops either
(:func:`start_with_stand_ins`): their NumPy twins (:mod:`quantscope.core.stats.loop_twins`,
the same numbers bit for bit) serve the first reports while this process compiles the panes'
loops first (``--panes``: the warm-up's and the trade-off curve's MSE search), says so on its
stdout, and compiles the rest; at its word the window loads the compiled loops from the cache,
off its GUI thread, and the twins step aside. A loop without a twin that the window asks for
before then waits for that word rather than compiling in the window's process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from quantscope.core.kernels import compiled
from quantscope.state.compile_steps import panes_mse, rest_steps, step_groups
from quantscope.state.warm_up import run_warm_up, skip_warm_up, warm_up_engine


def cache_was_cold() -> bool:
    """Whether this process compiled the panes' main loop rather than loading it (call after
    the warm-up): then the other loops are not in the cache either."""
    stats = getattr(compiled.evaluate_rows, "stats", None)  # a Numba dispatcher's own counters
    if getattr(getattr(compiled.evaluate_rows, "_cache", None), "cache_path", None) is None:
        return False  # compiled in memory: compiling ahead in another process saves nothing
    return bool(stats is not None and sum(stats.cache_misses.values()))


#: The compile-ahead process this process started (kept: it runs on after the call).
_started: subprocess.Popen | None = None


def start_if_cold() -> subprocess.Popen | None:
    """Start the compile-ahead process when :func:`cache_was_cold`, once per process; return
    it (None when the cache was warm, or the process could not start: then nothing is
    compiled ahead)."""
    global _started
    if _started is not None or not cache_was_cold():
        return None
    try:
        _started = subprocess.Popen(
            [sys.executable, "-m", "quantscope.state.compile_ahead"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)  # a Ctrl-C in the terminal stops the window, not this
    except OSError:
        return None
    return _started


def panes_cached() -> bool:
    """Whether Numba's cache holds the panes' main loop for this version of its source (or
    there is no cache at all: then nothing can be compiled ahead, the window compiles)."""
    from quantscope.core.kernels import sorted_kernel  # its module defines compiled loops

    cache = getattr(sorted_kernel.evaluate_rows, "_cache", None)
    if cache is None or getattr(cache, "cache_path", None) is None:
        return True
    try:
        return bool(cache._cache_file._load_index())  # {} when absent or for other source
    except Exception:  # an unreadable index: the warm-up repairs it
        return True


#: Set when the loops are the compiled ones again after :func:`start_with_stand_ins`.
compiled_ready = threading.Event()
#: How long a loop without a twin waits for the compile-ahead process before compiling itself.
WAIT_FOR_AHEAD_S = 600.0


def start_with_stand_ins(wait: bool = True) -> bool:
    """On a cold cache: serve the panes' loops by their NumPy twins, start the compile-ahead
    process on the panes' loops and then the rest, and take the compiled loops as soon as it
    says the panes' are written (a thread waits for its word). A loop without a twin waits for
    that word (:func:`wait_for_compiled`), or with ``wait`` False compiles here. False, with
    nothing changed, when the process could not start."""
    global _started
    if _started is not None:
        return False
    from quantscope.core.stats import loop_twins  # only a first run's launcher needs them

    try:
        _started = subprocess.Popen(
            [sys.executable, "-m", "quantscope.state.compile_ahead", "--panes"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True)
    except OSError:
        return False
    skip_warm_up()
    loop_twins.install(until=wait_for_compiled if wait else None)
    threading.Thread(target=_take_compiled, args=(_started, loop_twins.remove), daemon=True,
                     name="quantscope-take-compiled").start()
    return True


def stand_in_if_cold() -> bool:
    """:func:`start_with_stand_ins` when Numba's cache lacks the panes' loops: what a front end
    without the window's launcher calls before its first report (``qs.figure``, ``qs.widget``,
    ``qs.view``), so that a first run's first figure is drawn by the twins at once instead of
    after a minute of compiling. Whether the twins serve now."""
    if compiled.standing_in():
        return True
    if panes_cached():
        return False
    return start_with_stand_ins()


def stand_in_for_engine() -> bool:
    """For the engine API's first compiled loop in a Jupyter kernel or at a prompt (the hook
    ``import quantscope`` gives :func:`quantscope.core.kernels.compiled.on_first_loop`): on
    a cold cache the twins serve what they can at once (``qs.analyze``'s pass, the prepared
    reports; the same numbers, bit for bit) while the compile-ahead process runs, and the
    compiled loops take over at its word. A loop without a twin compiles here, announced:
    no window waits on this interpreter, and the other process's whole list would take
    longer than the one loop. Whether the twins serve now."""
    if compiled.standing_in():
        return True
    if panes_cached():
        return False
    return start_with_stand_ins(wait=False)


def stand_in_for_command() -> bool:
    """For a command that ends once its output is written (``quantscope report``): on a cold
    cache the twins serve its reports (the same numbers, bit for bit) and the compile-ahead
    process is started to outlive it, so that the next command loads the loops instead of
    compiling them; a loop without a twin compiles here, announced (a command that waited for
    another process would wait longer than compiling the one loop it needs). Whether the
    twins serve now. Call it where a compiled loop runs next: it imports Numba."""
    global _started
    if compiled.standing_in():
        return True
    if panes_cached():
        return False
    from quantscope.core.stats import loop_twins  # only a first run's commands need them

    if _started is None:
        try:  # nobody reads its word: it writes to /dev/null, and ends on its own
            _started = subprocess.Popen(
                [sys.executable, "-m", "quantscope.state.compile_ahead", "--panes"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            pass
    loop_twins.install()
    return True


#: Seconds between the lines :func:`wait_for_compiled` writes while it waits.
WAIT_PROGRESS_S = 10.0


def wait_for_compiled(timeout: float | None = None) -> bool:
    """Wait until the compile-ahead process has written the panes' loops (at most ``timeout``
    seconds, default :data:`WAIT_FOR_AHEAD_S`): what a loop without a twin does while the
    twins serve. A wait that is not over at once says so on stderr, as a compile would (the
    same channel, silenced by ``quantscope -q``), and how long it has lasted every
    :data:`WAIT_PROGRESS_S` seconds. Whether the loops are in."""
    if compiled_ready.is_set():
        return True
    from quantscope.core.kernels.compile_notice import say  # only a wait that lasts says so

    limit = WAIT_FOR_AHEAD_S if timeout is None else timeout
    say("quantscope: waiting for the engine's loops, compiled in another process on this "
        "first run (about a minute; progress follows)")
    start = time.monotonic()
    while True:
        left = limit - (time.monotonic() - start)
        if compiled_ready.wait(max(0.0, min(WAIT_PROGRESS_S, left))):
            return True
        waited = time.monotonic() - start
        if waited >= limit:
            return False
        say(f"quantscope: still waiting for the compiled loops, {waited:.0f} s")


#: What the compile-ahead process writes to its stdout once the panes' loops are in the cache.
PANES_WRITTEN = "panes"


def _take_compiled(proc: subprocess.Popen, remove_twins) -> None:
    """Once the compile-ahead process has written the panes' loops (or ended): the compiled
    loops again, loaded here by the warm-up, off the GUI thread. Should the process have
    failed, the loops compile here. The rest of its output is read to its end."""
    out = proc.stdout
    try:
        if out is not None:
            out.readline()  # its word, or nothing at its end
    except (OSError, ValueError):
        pass
    remove_twins()
    compiled_ready.set()
    try:
        run_warm_up()
    except Exception:  # the window's own reports load or compile what they need anyway
        pass
    try:
        if out is not None:
            out.read()
    except (OSError, ValueError):
        pass


def compile_panes() -> None:
    """The loops the window's panes and first views use: the warm-up's, and the MSE search of
    the trade-off curve's optimum on a prepared tensor."""
    warm_up_engine()
    panes_mse()


def compile_rest(claim: Callable[[str], bool] | None = None) -> None:
    """Call, once each on small tensors, every compiled loop beyond the warm-up's, with the
    argument types the window, the scan and the engine API hand them
    (:func:`~quantscope.state.compile_steps.rest_steps`).

    ``claim(name)``, when given, is asked before each step and the step runs only when it
    says yes: processes that share a claim (see :func:`claim_in`) split the steps between
    them, each step made by one of them, the first free one taking the next; each loads from
    Numba's cache what the others wrote before it needs it."""
    for name, step in rest_steps():
        if claim is None or claim(name):
            step()


def compile_all(claim: Callable[[str], bool] | None = None) -> None:
    """:func:`compile_panes` and :func:`compile_rest` as groups of steps that share their
    loops (:func:`~quantscope.state.compile_steps.step_groups`, costliest first), for CI and
    the test suite's warm-up, where two processes share them by ``claim``: each group is
    claimed by its name and run whole by the process that claims it, so no loop is compiled
    by both processes at once."""
    for name, steps in step_groups():
        if claim is None or claim(name):
            for _, step in steps:
                step()


def claim_in(folder: str | os.PathLike[str]) -> Callable[[str], bool]:
    """A claim that processes share through ``folder``: a step (or group of steps) is taken
    by the one that creates its file there first (an exclusive create, atomic between
    processes; its name is the file's, its slashes as dashes)."""
    def claim(name: str) -> bool:
        path = os.path.join(folder, name.replace("/", "-"))
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True
    return claim


def main() -> None:
    """``python -m quantscope.state.compile_ahead [--panes]``: :func:`compile_rest` at the
    lowest priority (the window's threads keep the cores they need), after the panes' loops
    (the warm-up's) with ``--panes``."""
    compiled.on_first_loop(None)  # this process compiles the loops: no twins stand in here
    try:
        os.nice(19)
    except OSError:
        pass
    if "--panes" in sys.argv[1:]:  # a window waits for these first (start_with_stand_ins)
        compile_panes()
        say_panes_written()
    compile_rest()


def say_panes_written() -> None:
    """Tell the process that started this one that the panes' loops are written. It may have
    ended meanwhile (a notebook's kernel shut down after its first cells, a window closed):
    then nobody reads this process's stdout, which goes to /dev/null from now on, and the rest
    is compiled all the same, for the next run (a broken pipe had ended this process here,
    and the next run compiled the loops of the engine API itself)."""
    try:
        print(PANES_WRITTEN, flush=True)
    except (BrokenPipeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the line still buffered goes there at exit
        os.close(devnull)


if __name__ == "__main__":
    main()
