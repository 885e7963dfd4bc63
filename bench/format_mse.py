"""How long ``method="mse"`` takes for a number format (FP8, FP6, FP4) per tensor and per
channel on a 4096x4096 weight, and what it finds -- optionally against another build of
quantscope, interleaved in the same run.

A ``--rows`` x ``--cols`` weight (normal, four input columns ten times larger, as
``bench/mse_speed.py`` builds it) is prepared once per process (sorted per unit, as the window
does before a report); then, per format of ``--formats`` and per granularity, the parameters
the window asks for when a person picks MSE for a format pane,
``choose_qparams(w, format=F, method="mse", prepared=prep)``, and their report. Printed per
build: wall seconds, the process's CPU seconds (all threads; the machine is shared: CPU time
is what a quieter machine's cores would divide) and CPU nanoseconds per element, the SQNR of
the result, and, with two builds, how much better the new one's error is.

``--old-src DIR`` (a ``src`` folder of another checkout, e.g. ``git archive <commit> src | tar
-x -C /tmp/old``) measures that build too: each round runs one process per build,
alternating, ``--repeat`` rounds, best of each.

Run: ``PYTHONPATH=src python bench/format_mse.py [--rows 4096 --cols 4096 --formats
fp8_e4m3,fp4_e2m1 --repeat 2 --old-src /tmp/old/src]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mse_speed import weight  # the same weight as the integer search's bench


def measure(args: argparse.Namespace) -> dict:
    """One round in this process: per format and granularity, time, CPU time and the error."""
    from quantscope.core import choose_qparams
    from quantscope.core.stats.prepared import prepare

    w = weight(args.rows, args.cols)
    prep = prepare(w)
    small = w[:4, :256].copy()
    out: dict = {}
    for name in args.formats.split(","):
        for gran in ("tensor", "channel"):
            axis = 0 if gran == "channel" else None
            rows = prep.layout(axis, None)
            rows.sumsq  # noqa: B018 -- built once, as the window's first report does
            rows.build_sums()
            # compile (or load) outside the timings
            choose_qparams(small, format=name, method="mse", granularity=gran, axis=0)
            t, c = time.perf_counter(), time.process_time()
            p = choose_qparams(w, format=name, method="mse", granularity=gran, axis=0,
                               prepared=prep)
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            r = prep.analyze(p)
            out[f"{name}/{gran}"] = {"wall": wall, "cpu": cpu, "sqnr": float(r.sqnr_db),
                                     "sse": float(r.mse) * r.n}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--formats", default="fp8_e4m3,fp4_e2m1")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--old-src", type=Path, default=None)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(measure(args)))
        return
    new_src = Path(__file__).resolve().parents[1] / "src"
    builds = {"new": new_src} if args.old_src is None else {"old": args.old_src, "new": new_src}
    runs: dict[str, list[dict]] = {k: [] for k in builds}
    argv = [sys.executable, __file__, "--worker", "--rows", str(args.rows), "--cols",
            str(args.cols), "--formats", args.formats]
    for _ in range(args.repeat):
        for name, src in builds.items():
            env = dict(os.environ, PYTHONPATH=str(src))
            done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    n = args.rows * args.cols
    print(f"{args.rows}x{args.cols}, best of {args.repeat} interleaved rounds")
    print(f"{'build':6s} {'format/granularity':22s} {'wall s':>7s} {'cpu s':>7s} "
          f"{'cpu ns/el':>9s} {'SQNR dB':>9s}")
    for name, rs in runs.items():
        for key in rs[0]:
            wall = min(r[key]["wall"] for r in rs)
            cpu = min(r[key]["cpu"] for r in rs)
            print(f"{name:6s} {key:22s} {wall:7.2f} {cpu:7.2f} {cpu / n * 1e9:9.1f} "
                  f"{rs[-1][key]['sqnr']:9.4f}")
    if "old" in runs:
        for key in runs["new"][0]:
            a, b = runs["old"][-1][key]["sse"], runs["new"][-1][key]["sse"]
            cpu_new = min(r[key]["cpu"] for r in runs["new"])
            cpu_old = min(r[key]["cpu"] for r in runs["old"])
            print(f"{key}: new error {10 * np.log10(a / b):+.4f} dB against old "
                  f"(cpu new/old {cpu_new / cpu_old:.2f})")


if __name__ == "__main__":
    main()
