"""How long ``method="mse"`` takes per channel (or group) on an LLM-sized weight, and what the
search did -- optionally against another build of quantscope, interleaved in the same run.

A ``--rows`` x ``--cols`` weight (normal, a few outlier input columns, as real weights have),
prepared once per process (sorted per unit, as the window does before a report); then the MSE
search per output channel (``--group 0``) or per group of ``--group`` along a row, asymmetric
and symmetric at ``--bits``, and, as the yardstick, one exact report of the min/max parameters
on the same prepared tensor. Printed per build: wall seconds and the process's CPU seconds (the
machine is shared: CPU time is what a quieter machine's two cores would divide), the ratio to
the report, the boxes the branch and bound opened per unit (median, 90th percentile, largest),
whether every unit's minimum was proven, and the largest relative difference of the two builds'
errors per unit, and on how many units their scales and zero points differ; the memory each
search adds at its peak, in bytes per element (the process's resident high-water mark, reset
before the search: NumPy's and the compiled loops' allocations alike; Linux only), and, with
``--old-src``, the new/old CPU ratio of each scheme.

``--old-src DIR`` (a ``src`` folder of another checkout, e.g. ``git archive <commit> src | tar
-x -C /tmp/old``) measures that build too: each round runs one process per build, alternating,
``--repeat`` rounds, best of each.

Run: ``PYTHONPATH=src python bench/mse_speed.py [--rows 4096 --cols 4096 --bits 8 --group 0
--repeat 2 --old-src /tmp/old/src]``.
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


def weight(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """Normal values (std 0.02) with four input columns ten times larger."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
    w[:, rng.choice(cols, 4, replace=False)] *= 10
    return w


def _rss_kib(field: str) -> int:
    """``VmRSS`` or ``VmHWM`` of this process, in KiB (0 where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _reset_peak() -> int:
    """Reset this process's resident high-water mark to what it holds now; that, in KiB."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _rss_kib("VmRSS")


def measure(args: argparse.Namespace) -> dict:
    """One round in this process: the timings, boxes and errors of this build."""
    from quantscope.core import choose_qparams
    from quantscope.core.schemes.qparams import code_range
    from quantscope.core.stats.mse_search import mse_search
    from quantscope.core.stats.prepared import prepare

    w = weight(args.rows, args.cols)
    group = args.group or None
    axis = 0 if group is None else 1
    prep = prepare(w)
    rows = prep.layout(axis, group)
    rows.sumsq  # noqa: B018 -- built once, as a report would
    small = prepare(w[:4]).layout(axis, group)  # compile (or load) outside the timings
    for sym in (False, True):
        qmin, qmax = code_range(args.bits, symmetric=sym)
        mse_search(small, qmin=qmin, qmax=qmax, symmetric=sym)
    gran = "channel" if group is None else "group"
    extra = {} if group is None else {"group_size": group}
    p = choose_qparams(w, granularity=gran, axis=axis, symmetric=False, bits=args.bits, **extra)
    t = time.perf_counter()
    prep.analyze(p)
    out: dict = {"report": time.perf_counter() - t}
    for name, sym in (("asymmetric", False), ("symmetric", True)):
        qmin, qmax = code_range(args.bits, symmetric=sym)
        held = _reset_peak()
        t, c = time.perf_counter(), time.process_time()
        f = mse_search(rows, qmin=qmin, qmax=qmax, symmetric=sym)
        out[name] = {"wall": time.perf_counter() - t, "cpu": time.process_time() - c,
                     "peak": (_rss_kib("VmHWM") - held) * 1024 / w.size,
                     "boxes": np.percentile(f.boxes, [50, 90, 100]).tolist(),
                     "proven": bool(f.proven.all()), "error": f.error.tolist(),
                     "scale": f.scale.tolist(), "zero_point": f.zero_point.tolist()}
    return out


def _differ(runs: dict[str, list[dict]], scheme: str, key: str) -> int:
    """On how many units the two builds' last rounds chose a different ``key``."""
    return int((np.array(runs["old"][-1][scheme][key])
                != np.array(runs["new"][-1][scheme][key])).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--bits", type=int, default=8)
    ap.add_argument("--group", type=int, default=0, help="group size (0: per channel)")
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
            str(args.cols), "--bits", str(args.bits), "--group", str(args.group)]
    for _ in range(args.repeat):
        for name, src in builds.items():
            env = dict(os.environ, PYTHONPATH=str(src))
            done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    unit = "channel" if not args.group else f"group of {args.group}"
    print(f"{args.rows}x{args.cols}, {args.bits} bits, per {unit}, best of {args.repeat} "
          f"interleaved rounds")
    print(f"{'build':6s} {'scheme':11s} {'wall s':>7s} {'cpu s':>7s} {'x report':>9s} "
          f"{'boxes p50/p90/max':>18s} proven {'peak B/elem':>11s}")
    for name, rs in runs.items():
        base = min(r["report"] for r in rs)
        for scheme in ("asymmetric", "symmetric"):
            wall = min(r[scheme]["wall"] for r in rs)
            cpu = min(r[scheme]["cpu"] for r in rs)
            p50, p90, top = rs[-1][scheme]["boxes"]
            peak = max(r[scheme]["peak"] for r in rs)
            print(f"{name:6s} {scheme:11s} {wall:7.2f} {cpu:7.2f} {wall / base:9.0f} "
                  f"{p50:6.0f}/{p90:4.0f}/{top:5.0f}  {rs[-1][scheme]['proven']!s:6s} "
                  f"{peak:11.2f}")
    if "old" in runs:
        for scheme in ("asymmetric", "symmetric"):
            pairs = [n[scheme]["cpu"] / o[scheme]["cpu"]
                     for o, n in zip(runs["old"], runs["new"], strict=True)]
            print(f"{scheme}: new/old CPU per interleaved round "
                  f"{' '.join(f'{r:.2f}' for r in pairs)}")
        for scheme in ("asymmetric", "symmetric"):
            a = np.array(runs["old"][-1][scheme]["error"])
            b = np.array(runs["new"][-1][scheme]["error"])
            rel = np.abs(b - a) / np.maximum(np.abs(a), 1e-300)
            print(f"{scheme}: new error vs old per unit: largest relative difference "
                  f"{rel.max():.2e}, new lower on {(b < a * (1 - 1e-9)).sum()}, higher on "
                  f"{(b > a * (1 + 1e-9)).sum()} of {a.size} units; other scale on "
                  f"{_differ(runs, scheme, 'scale')}, other zero point on "
                  f"{_differ(runs, scheme, 'zero_point')}")


if __name__ == "__main__":
    main()
