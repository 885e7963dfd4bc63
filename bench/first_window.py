"""How long does the first window take? ``python -m quantscope`` on the demo tensor, from the
process start to the four panes painted with their numbers, on a fresh install (a copy of the
package with no ``__pycache__`` and an empty Numba cache) and warm (the same copy again).

The window runs as a person starts it: the real command (``quantscope.cli.main()``, no
arguments) on the display given (Xvfb's ``DISPLAY``, or ``--offscreen``). A one-shot Qt
timer, armed when the window is built, waits for :meth:`MainWindow.all_shown`, lets Qt
paint what the reports changed, prints the time since the process started, stops any
waits for any compile-ahead process this start began (so the warm start finds what it
compiled, and the next measurement has the cores to itself; the time it ended is printed) and
quits. Processor seconds of the window's process up to the first window are printed too.

``--notebook`` times the same in a notebook run by nbclient: a kernel started on the fresh
copy, one cell drawing the demo tensor's four panes with ``qs.figure`` (the kernel's start
not counted: Jupyter has it running before a person types), and shows the lines the cell
wrote to stderr (the compile notice a person sees under the cell while waiting).

Target: first window <= 5 s on a fresh install.

Run: ``xvfb-run -a python bench/first_window.py [--repeat 2] [--offscreen] [--notebook]``;
``python bench/first_window.py --report T.npy --format fp8_e4m3 --repeat 1 --fresh-only`` (or
``--screenshot``) times one command's first run alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

TARGET_S = 5.0
SRC = Path(__file__).resolve().parents[1] / "src" / "quantscope"

#: Run in the child: the real command, with a timer that reports the first painted panes.
DRIVER = r"""
import sys, time
T0 = float(sys.argv[1])
import quantscope.gui as gui
_create = gui.create_window

def create_window(*a, **k):
    window = _create(*a, **k)
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    def poll():
        if window.all_shown():
            QApplication.processEvents()
            window.repaint()
            took = time.time() - T0
            cpu = time.process_time()
            ahead = __import__("quantscope.state.compile_ahead", fromlist=["x"])._started
            from quantscope.core.kernels import compiled
            print(f"FIRST_WINDOW {took:.2f} ahead={'yes' if ahead else 'no'} cpu={cpu:.2f} "
                  f"twins={'yes' if compiled.standing_in() else 'no'}", flush=True)
            if ahead is not None:  # the next start finds what it compiled
                ahead.wait()
                time.sleep(2)  # the window's own thread takes the compiled loops at its word
                import resource
                child = resource.getrusage(resource.RUSAGE_CHILDREN)
                print(f"AHEAD_DONE {time.time() - T0:.2f} "
                      f"cpu={child.ru_utime + child.ru_stime:.2f} "
                      f"twins={'yes' if compiled.standing_in() else 'no'}", flush=True)
            window.close()
        else:
            QTimer.singleShot(10, poll)

    QTimer.singleShot(0, poll)
    return window

gui.create_window = create_window
sys.argv = ["quantscope"]
from quantscope.cli import main
raise SystemExit(main())
"""


def fresh_copy(root: Path) -> Path:
    """The package copied under ``root`` without any ``__pycache__``: a fresh install."""
    target = root / "src"
    shutil.copytree(SRC, target / "quantscope", ignore=shutil.ignore_patterns("__pycache__"))
    return target


@contextlib.contextmanager
def fresh_install() -> Iterator[tuple[Path, Path]]:
    """``(src, cache)``: a fresh copy of the package and an empty Numba cache in a temporary
    folder, with an empty ``home`` beside them (no remembered session or window place)."""
    with tempfile.TemporaryDirectory(prefix="qs-fresh-") as tmp:
        root = Path(tmp)
        src = fresh_copy(root)
        (root / "home").mkdir()
        cache = root / "numba-cache"
        cache.mkdir()
        yield src, cache


def one_start(src: Path, cache: Path, offscreen: bool) -> tuple[float, str, str]:
    env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": str(cache)}
    env.pop("QT_QPA_PLATFORM", None)
    if offscreen:
        env["QT_QPA_PLATFORM"] = "offscreen"
    env["HOME"] = str(cache.parent / "home")  # no remembered session or window place
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-c", DRIVER, repr(t0)], capture_output=True,
                          text=True, env=env, timeout=1800)  # its compile-ahead too
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("FIRST_WINDOW ")), "")
    if not line:
        raise SystemExit(f"no first window (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    took = float(line.split()[1])
    done = next((ln for ln in proc.stdout.splitlines() if ln.startswith("AHEAD_DONE ")), "")
    extra = f"{line.split()[3]} s of this process, {line.split()[4]}"
    if done:
        extra += (f"; compile-ahead ended at {done.split()[1]} s "
                  f"({done.split()[2]} s of its process; then {done.split()[3]})")
    return took, f"{line.split()[2]}; {extra}", proc.stderr.strip()


NOTEBOOK_CELL = """\
import time
t0 = time.time()
import numpy as np, quantscope as qs
from quantscope.io.samples import sample_path
x = np.load(sample_path("gelu_activations"))
FIRST_CALL
print(f"FIGURE {time.time() - t0:.2f} cpu={time.process_time():.2f}")
from quantscope.core.kernels import compiled
from quantscope.state import compile_ahead
ahead = compile_ahead._started
print(f"AHEAD {ahead.pid if ahead else 0} twins={'yes' if compiled.standing_in() else 'no'}")
"""


def _wait_for(pid: int) -> float:
    """Wait until process ``pid`` (the compile-ahead a cell started, which outlives its kernel)
    has ended; the seconds waited."""
    start = time.time()
    while pid and Path(f"/proc/{pid}").exists():
        status = Path(f"/proc/{pid}/stat").read_text().split()
        if status[2] == "Z":  # ended, its kernel's parent not yet told
            break
        time.sleep(0.5)
    return time.time() - start


#: What the timed cell calls first (``--notebook-call``): the demo tensor's four panes as a
#: figure, or its per-tensor int8 report.
FIRST_CALLS = {"figure": 'qs.figure(x).save("panes.png")',
               "analyze": "print(qs.analyze(x, qs.choose_qparams(x)))"}


def notebook_start(src: Path, cache: Path,
                   call: str = "figure") -> tuple[float, str, list[str]]:
    """Seconds the figure cell took on a running kernel, what else it said (processor time,
    whether twins drew it, when the compile-ahead process it started ended), and its stderr
    lines."""
    import nbformat
    from nbclient import NotebookClient

    cell = NOTEBOOK_CELL.replace("FIRST_CALL", FIRST_CALLS[call])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell)])
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "NUMBA_CACHE_DIR", "HOME")}
    os.environ.update(PYTHONPATH=str(src), NUMBA_CACHE_DIR=str(cache),
                      HOME=str(cache.parent / "home"))  # the kernel inherits these
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(cache.parent)}}).execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    streams = [o for o in nb.cells[0].outputs if o.output_type == "stream"]
    out = "".join(o.text for o in streams if o.name == "stdout")
    err = "".join(o.text for o in streams if o.name == "stderr").splitlines()
    line = next(ln for ln in out.splitlines() if ln.startswith("FIGURE "))
    ahead = next(ln for ln in out.splitlines() if ln.startswith("AHEAD ")).split()
    about = f"{line.split()[2]} s of the kernel, {ahead[2]}"
    if int(ahead[1]):  # the next start finds what it compiled
        about += f"; compile-ahead ran {_wait_for(int(ahead[1])):.0f} s more"
    return float(line.split()[1]), about, err


#: Run in the child for ``--report`` and ``--screenshot``: the command as typed, then when the
#: compile-ahead process it started (if any) ended, so that the warm run finds what it compiled.
REPORT_DRIVER = r"""
import sys, time
T0 = float(sys.argv[1])
sys.argv = ["quantscope", *sys.argv[2:]]
from quantscope.cli import main
code = main(sys.argv[1:])
print(f"REPORT {time.time() - T0:.2f} cpu={time.process_time():.2f}", file=sys.stderr, flush=True)
from quantscope.state import compile_ahead
from quantscope.core.kernels import compiled
ahead = compile_ahead._started
print(f"AHEAD {ahead.pid if ahead else 0} twins={'yes' if compiled.standing_in() else 'no'}",
      file=sys.stderr, flush=True)
raise SystemExit(code)
"""


def report_start(src: Path, cache: Path, extra: list[str],
                 wait: bool = True) -> tuple[float, str, list[str]]:
    """Seconds ``quantscope EXTRA...`` took from its process's start, what else it said, and its
    stderr lines (the notice) with stdout's line count. Without ``wait`` the compile-ahead
    process the command started is stopped rather than waited for (``--fresh-only``)."""
    env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": str(cache),
           "HOME": str(cache.parent / "home")}
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-c", REPORT_DRIVER, repr(t0), *extra],
                          capture_output=True, text=True, env=env, timeout=900)
    lines = proc.stderr.splitlines()
    line = next((ln for ln in lines if ln.startswith("REPORT ")), "")
    if proc.returncode or not line:
        raise SystemExit(f"report failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    ahead = next(ln for ln in lines if ln.startswith("AHEAD ")).split()
    about = f"{line.split()[2]} s, {ahead[2]}"
    if int(ahead[1]) and not wait:
        with contextlib.suppress(ProcessLookupError):  # its own session: it and its children
            os.killpg(int(ahead[1]), signal.SIGTERM)
        about += "; compile-ahead stopped"
    elif int(ahead[1]):
        about += f"; compile-ahead ran {_wait_for(int(ahead[1])):.0f} s more"
    said = [ln for ln in lines if not ln.startswith(("REPORT ", "AHEAD "))]
    said.append(f"(stdout: {len(proc.stdout.splitlines())} lines)")
    return float(line.split()[1]), about, said


def commands(command: list[str], repeat: int, fresh_only: bool = False) -> None:
    """Time ``quantscope COMMAND`` on ``repeat`` fresh installs, each then warm (unless
    ``fresh_only``)."""
    print(f"quantscope {' '.join(command)}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}")
    for i in range(repeat):
        with fresh_install() as (src, cache):
            fresh, about, said = report_start(src, cache, command, wait=not fresh_only)
            if fresh_only:
                print(f"run {i + 1}: fresh install {fresh:.2f} s ({about})")
                if i == 0:
                    print("  stderr of the fresh run:\n    " + "\n    ".join(said[-6:]))
                continue
            warm, warm_about, _ = report_start(src, cache, command)
            print(f"run {i + 1}: fresh install {fresh:.2f} s ({about}), warm {warm:.2f} s "
                  f"({warm_about})")
            if i == 0:
                print("  stderr of the fresh run:\n    " + "\n    ".join(said[-6:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="fresh installs measured")
    parser.add_argument("--offscreen", action="store_true", help="Qt's offscreen platform")
    parser.add_argument("--notebook", action="store_true",
                        help="time qs.figure in a notebook (nbclient) instead of the window")
    parser.add_argument("--notebook-call", choices=sorted(FIRST_CALLS), default="figure",
                        help="with --notebook: the cell's first call (default figure)")
    parser.add_argument("--report", nargs=argparse.REMAINDER, metavar="ARG",
                        help="time `quantscope report [ARG ...]` (from its process's start) "
                             "instead of the window; the last option: the rest is the "
                             "command's")
    parser.add_argument("--screenshot", action="store_true",
                        help="time `quantscope --screenshot OUT.png` (the demo window rendered "
                             "offscreen, from its process's start) instead of the window")
    parser.add_argument("--fresh-only", action="store_true",
                        help="with --report or --screenshot: time the fresh run only, and stop "
                             "the compile-ahead process it started instead of waiting for it")
    args = parser.parse_args()
    if args.report is not None or args.screenshot:
        with tempfile.TemporaryDirectory(prefix="qs-shot-") as out:
            command = (["report", *args.report] if args.report is not None else
                       ["--screenshot", str(Path(out) / "window.png")])
            commands(command, args.repeat, args.fresh_only)
        return
    if args.notebook:
        print(f"qs.{args.notebook_call} of the demo tensor in a notebook cell, "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        for i in range(args.repeat):
            with fresh_install() as (src, cache):
                fresh, about, err = notebook_start(src, cache, args.notebook_call)
                warm, warm_about, _ = notebook_start(src, cache, args.notebook_call)
                verdict = "PASS" if fresh <= TARGET_S else "MISS"
                print(f"run {i + 1}: fresh install {fresh:.2f} s ({verdict}; {about}), "
                      f"warm {warm:.2f} s ({warm_about})")
                if i == 0:
                    print("  stderr under the fresh cell:\n    " + "\n    ".join(err[-4:]))
        return
    if not args.offscreen and not os.environ.get("DISPLAY"):
        raise SystemExit("no DISPLAY: run under xvfb-run -a, or pass --offscreen")
    print(f"python -m quantscope, demo tensor, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}; target first window <= {TARGET_S:g} s")
    for i in range(args.repeat):
        with fresh_install() as (src, cache):
            fresh, ahead, notice = one_start(src, cache, args.offscreen)
            warm, warm_cpu, _ = one_start(src, cache, args.offscreen)
            verdict = "PASS" if fresh <= TARGET_S else "MISS"
            print(f"run {i + 1}: fresh install {fresh:.2f} s (ratio to target "
                  f"{fresh / TARGET_S:.2f}, {verdict}; compile-ahead started: {ahead}), "
                  f"warm {warm:.2f} s ({warm_cpu})")
            if i == 0:
                print("  stderr of the fresh start:\n    " + "\n    ".join(
                    notice.splitlines()[-4:]))


if __name__ == "__main__":
    main()
