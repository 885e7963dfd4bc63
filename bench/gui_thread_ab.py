"""The GUI thread's CPU per control change, this tree against another, interleaved.

Each run is a child process on one source tree (this checkout's ``src`` or ``--old-src``'s)
that runs :func:`gui_latency.measure` -- the window offscreen, a square tensor of ``--size``
M elements, the bench's control changes ``--repeat`` times -- and reports per change the CPU
of each group of its threads (``MainThread``: the GUI thread; ``quantscope-engine``: the
engine's pool; the scheduler's job and helper threads), the latency to all four panes
painted and the longest GUI-thread block. The trees' children alternate (old, new, old,
new, ...) ``--pairs`` times, so both see the same machine; with ``--load`` one competing
busy process (a spinning interpreter) runs for the whole comparison.

Printed per tree: the medians over all its changes of the GUI thread's CPU, the engine's,
and all threads' together; the latency's p50 and p95; the longest block; and the ratio new /
old of each. CPU figures come from ``/proc/self/task/*/schedstat`` (Linux only).

Run: ``QT_QPA_PLATFORM=offscreen python bench/gui_thread_ab.py --old-src /tmp/old/src
[--size 16] [--repeat 2] [--pairs 3] [--load]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
SRC = BENCH.parent / "src"

#: Run in the child: ``measure(app, size, repeat, False)``, one JSON line out.
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
from gui_latency import measure
from quantscope.state.warm_up import warm_up_engine

warm_up_engine()
from PySide6.QtWidgets import QApplication

app = QApplication.instance() or QApplication(["bench"])
res = measure(app, int(sys.argv[1]), int(sys.argv[2]), False)
print(json.dumps({"latencies": [v for vs in res["latencies"].values() for v in vs],
                  "blocks": res["blocks"], "cpu": res["cpu"]}))
"""


def run_child(src: Path, size: int, repeat: int) -> dict:
    """One child on ``src``; its JSON line."""
    env = dict(os.environ, PYTHONPATH=str(src), QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, "-c", CHILD, str(size), str(repeat), str(BENCH)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the child on {src} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(runs: list[dict]) -> dict[str, float]:
    """The medians and percentiles over every change of ``runs``."""
    cpu = [c for r in runs for c in r["cpu"]]
    lat = np.concatenate([r["latencies"] for r in runs])
    return {
        "GUI thread CPU ms": float(np.median([c.get("MainThread", 0.0) for c in cpu])),
        "engine CPU ms": float(np.median([c.get("quantscope-engine", 0.0) for c in cpu])),
        "all threads CPU ms": float(np.median([sum(c.values()) for c in cpu])),
        "p50 ms": float(np.percentile(lat, 50)),
        "p95 ms": float(np.percentile(lat, 95)),
        "longest block ms": float(max(b for r in runs for b in r["blocks"])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-src", type=Path, required=True, help="the tree to compare with")
    parser.add_argument("--size", type=int, default=16, help="M elements (square tensor)")
    parser.add_argument("--repeat", type=int, default=2, help="passes over the changes a run")
    parser.add_argument("--pairs", type=int, default=3, help="old/new runs, alternating")
    parser.add_argument("--load", action="store_true", help="one competing busy process")
    args = parser.parse_args()
    trees = {"old": args.old_src, "new": SRC}
    busy = (subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.load
            else None)
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    try:
        print(f"GUI thread per change at {args.size}M, {args.pairs} pairs of runs x "
              f"{args.repeat} passes" + (", one competing busy process" if busy else "")
              + f"; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        for _ in range(args.pairs):
            for name, src in trees.items():
                runs[name].append(run_child(src, args.size, args.repeat))
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    old, new = summary(runs["old"]), summary(runs["new"])
    n = sum(len(r["cpu"]) for r in runs["new"])
    print(f"{'(medians over ' + str(n) + ' changes a tree)':34s} {'old':>9s} {'new':>9s}  new/old")
    for key in old:
        print(f"  {key:32s} {old[key]:9.1f} {new[key]:9.1f}  {new[key] / old[key]:.2f}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
