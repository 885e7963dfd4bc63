"""What does a window cost to build and to restyle? Milliseconds of wall and CPU per step.

Each run is a child process on one source tree (this checkout's ``src``, or ``--old-src``'s),
offscreen, which builds one window unmeasured (imports, compiled loops, Qt's first polish),
then ``--windows`` windows of each kind -- ``MainWindow(ExplorerState(), install_views=False)`` and
``create_window()`` with its views -- and times on each:

- ``build``: the constructor;
- ``show``: ``show()`` and the events it posts, processed (the first polish and layout);
- ``restyle``: one more ``_apply_theme()`` with nothing changed (what a presenting window's
  resize pays);
- ``dark`` / ``light``: View > Dark theme on, then off;
- ``present`` / ``present off``: View > Presentation mode on, then off (the window's size
  kept: the restyle and the stage alone, what the talk and projector tests toggle);
- ``f11`` / ``f11 off``: F11 into a talk, and out again.

With ``--old-src`` the two trees' children alternate (old, new, old, new, ...) ``--pairs``
times, so both see the same load, and each row prints the median of each tree and their
ratio (new / old). CPU is the child's process time (all its threads) over the step.

Run: ``python bench/window_build.py --old-src /tmp/old/src --pairs 3 --windows 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _timing import load

SRC = Path(__file__).resolve().parents[1] / "src"

#: Run in the child: ``argv[1]`` windows of each kind, every step timed; one JSON line out.
CHILD = r"""
import json, sys, time
from PySide6.QtWidgets import QApplication

app = QApplication.instance() or QApplication(["bench"])
from quantscope.gui import create_window
from quantscope.state import ExplorerState
from quantscope.gui.window import MainWindow

def timed(out, name, fn):
    w0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    out.setdefault(name, []).append(((time.perf_counter() - w0) * 1e3,
                                     (time.process_time() - c0) * 1e3))
    return result

def one(out, make):
    window = timed(out, "build", make)
    def show():
        window.resize(1280, 720)
        window.show()
        for _ in range(3):
            app.processEvents()
    timed(out, "show", show)
    def step(fn):
        def run():
            fn()
            for _ in range(3):  # and what it left for the next turns (a resize's restyle)
                app.processEvents()
        return run
    timed(out, "restyle", step(window._apply_theme))
    timed(out, "dark", step(lambda: window.set_dark(True)))
    timed(out, "light", step(lambda: window.set_dark(False)))
    timed(out, "present", step(lambda: window.presentation_action.setChecked(True)))
    timed(out, "present off", step(lambda: window.presentation_action.setChecked(False)))
    timed(out, "f11", step(window.toggle_full_screen))
    timed(out, "f11 off", step(window.toggle_full_screen))
    window.close()
    app.processEvents()
    window.deleteLater()
    app.processEvents()

create_window(install_views=False).close()  # imports, compiled loops, configuration
one({}, lambda: create_window())  # the first window of a process: not measured
results = {}
for kind, make in (("bare", lambda: MainWindow(ExplorerState(), install_views=False)),
                   ("views", lambda: create_window())):
    out = {}
    for _ in range(int(sys.argv[1])):
        one(out, make)
    results[kind] = out
print("RESULT " + json.dumps(results), flush=True)
"""


def run_child(src: Path, windows: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, "-c", CHILD, str(windows)], env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"child on {src} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def merge(into: dict, part: dict) -> None:
    for kind, steps in part.items():
        for step, samples in steps.items():
            into.setdefault(kind, {}).setdefault(step, []).extend(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old-src", type=Path, help="a source tree to compare with")
    parser.add_argument("--pairs", type=int, default=2, help="child processes per tree")
    parser.add_argument("--windows", type=int, default=3, help="windows of each kind a child")
    args = parser.parse_args()
    trees = {"new": SRC} if args.old_src is None else {"old": args.old_src, "new": SRC}
    samples: dict[str, dict] = {name: {} for name in trees}
    print(f"before: {load()}")
    for _ in range(args.pairs):
        for name, src in trees.items():
            merge(samples[name], run_child(src, args.windows))
    print(f"after: {load()}")
    print(f"{args.pairs} processes per tree x {args.windows} windows of each kind; medians, ms")
    head = f"{'window':<6} {'step':<11}"
    for name in trees:
        head += f" {name + ' wall':>10} {name + ' cpu':>10}"
    if "old" in trees:
        head += f" {'wall ratio':>10} {'cpu ratio':>10}"
    print(head)
    for kind, steps in samples["new"].items():
        for step in steps:
            row = f"{kind:<6} {step:<11}"
            med = {}
            for name in trees:
                got = samples[name][kind][step]
                med[name] = (statistics.median(w for w, _ in got),
                             statistics.median(c for _, c in got))
                row += f" {med[name][0]:10.1f} {med[name][1]:10.1f}"
            if "old" in trees:
                row += (f" {med['new'][0] / med['old'][0]:10.2f}"
                        f" {med['new'][1] / med['old'][1]:10.2f}")
            print(row)


if __name__ == "__main__":
    main()
