"""The engine's part of a control change, old against new in one run: each change of
``gui_latency.CHANGES`` through :func:`quantscope.state.compute_reports` on a prepared
4096x4096 tensor (the window's "outliers" tensor, no report cache, the per-channel panes on a
scheduler's helpers as in the window), per build: wall time, the process's CPU time, and a
digest of every number of the four reports.

Each build runs in a process of its own (``--old-src DIR``: a ``src`` folder of another
checkout, e.g. ``git archive main src | tar -x -C /tmp/old``); the driver alternates them
change by change, so both see the same machine load, and prints per build the p50 / p95 wall
time, the median CPU per change, CPU / wall (2.0: both cores busy the whole change), per
change kind the medians, and whether the reports of the two builds are equal to the bit.

Run: ``PYTHONPATH=src python bench/engine_changes.py [--old-src DIR] [--repeat 3] [--load]``
(``--load``: one competing busy process for the whole run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _digest(result) -> str:
    """A hash of every number the four reports hold (summaries, code histograms and the
    per-channel columns), in pane order."""
    h = hashlib.sha256()
    for pane, rep in result.reports.items():
        h.update(str(pane).encode())
        h.update(json.dumps(rep.summary(), sort_keys=True, default=repr).encode())
        h.update(np.ascontiguousarray(rep.code_histogram).tobytes())
        per = rep.per_channel
        if per is not None:
            for name in ("n", "mse", "rounding_mse", "clipping_mse", "sqnr_db", "max_abs_error",
                         "clipped_below", "clipped_above", "codes_used", "x_min", "x_max"):
                h.update(np.ascontiguousarray(getattr(per, name)).tobytes())
    for pane, err in sorted(result.errors.items()):
        h.update(f"{pane}:{err}".encode())
    return h.hexdigest()[:16]


def worker(size: int) -> None:
    """Prepare the tensor, then per line on stdin (a change's index) run that change and
    answer one JSON line: wall ms, CPU ms, the reports' digest."""
    from gui_latency import CHANGES
    from quantscope.state import ExplorerState, Source, compute_reports
    from quantscope.state.scheduler import Scheduler
    from quantscope.state.source import load_source, overview, prepare_tensor, working_tensor
    from quantscope.state.warm_up import warm_up_engine

    warm_up_engine()
    cols = 1 << (10 + (size.bit_length() - 1) // 2)
    rows = size * (1 << 20) // cols
    src = Source.generator("outliers", (rows, cols), 0, count=16, magnitude=25.0)
    st = ExplorerState(cache_reports=False)
    x, dtype = load_source(src)
    x = working_tensor(x)
    prep = prepare_tensor(x, st.settings, None)
    st.set_tensor(x, src, prepared=prep, overview=overview(x, dtype, prep), checked=True)
    helpers = Scheduler()
    compute_reports(st.request(), None, helpers.beside)  # the per-channel layout, once
    print(json.dumps({"ready": f"{rows}x{cols}"}), flush=True)
    for line in sys.stdin:
        k = int(line)
        st.update_settings(**CHANGES[k][1])
        request = st.request()
        c0, w0 = time.process_time(), time.perf_counter()
        result = compute_reports(request, None, helpers.beside)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        print(json.dumps({"wall": wall * 1e3, "cpu": cpu * 1e3, "digest": _digest(result)}),
              flush=True)
    helpers.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-src", type=Path, default=None)
    ap.add_argument("--size", type=int, default=16, help="M elements (square tensor)")
    ap.add_argument("--repeat", type=int, default=3, help="passes over the changes")
    ap.add_argument("--load", action="store_true", help="one competing busy process")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    if args.worker:
        worker(args.size)
        return
    from gui_latency import CHANGES

    new_src = HERE.parent / "src"
    builds = {"new": new_src} if args.old_src is None else {"old": args.old_src, "new": new_src}
    procs = {}
    for name, src in builds.items():
        env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{HERE}"}
        procs[name] = subprocess.Popen(
            [sys.executable, __file__, "--worker", "--size", str(args.size)], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for p in procs.values():
        assert p.stdout is not None
        shape = json.loads(p.stdout.readline())["ready"]
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.load else None
    runs: dict[str, list[dict]] = {name: [] for name in builds}
    try:
        load_at_start = os.getloadavg()[0]
        step = 0
        for _ in range(args.repeat):
            for k, (kind, _changes) in enumerate(CHANGES):
                order = list(procs) if step % 2 == 0 else list(procs)[::-1]
                step += 1
                for name in order:
                    p = procs[name]
                    assert p.stdin is not None and p.stdout is not None
                    p.stdin.write(f"{k}\n")
                    p.stdin.flush()
                    runs[name].append({"kind": kind, "k": k, **json.loads(p.stdout.readline())})
    finally:
        for p in procs.values():
            if p.stdin is not None:
                p.stdin.close()
            p.wait()
        if busy is not None:
            busy.kill()
            busy.wait()
    print(f"{shape} ({args.size}M elements), {len(CHANGES)} changes x {args.repeat}, builds "
          f"alternating change by change{', one competing busy process' if busy else ''}; "
          f"load average {load_at_start:.2f} at the start on {os.cpu_count()} cores")
    for name, r in runs.items():
        wall = np.array([x["wall"] for x in r])
        cpu = np.array([x["cpu"] for x in r])
        print(f"  {name}: wall p50 {np.percentile(wall, 50):6.1f} ms  p95 "
              f"{np.percentile(wall, 95):6.1f} ms  max {wall.max():6.1f} | CPU per change "
              f"p50 {np.median(cpu):6.1f} ms  mean {cpu.mean():6.1f} | CPU / wall "
              f"{np.median(cpu / wall):4.2f}")
    kinds = list(dict.fromkeys(kind for kind, _ in CHANGES))
    print("  per kind, medians (wall / CPU ms): " + "  ".join(builds))
    for kind in kinds:
        cells = []
        for name in builds:
            sel = [x for x in runs[name] if x["kind"] == kind]
            cells.append(f"{np.median([x['wall'] for x in sel]):6.1f} / "
                         f"{np.median([x['cpu'] for x in sel]):6.1f}")
        print(f"    {kind:12s} " + "   ".join(cells))
    if len(builds) == 2:
        old, new = runs["old"], runs["new"]
        ratios = [n["cpu"] / o["cpu"] for o, n in zip(old, new, strict=True)]
        wr = [n["wall"] / o["wall"] for o, n in zip(old, new, strict=True)]
        same = sum(o["digest"] == n["digest"] for o, n in zip(old, new, strict=True))
        print(f"  new / old per change, median [min - max]: CPU {np.median(ratios):.2f} "
              f"[{min(ratios):.2f} - {max(ratios):.2f}], wall {np.median(wr):.2f} "
              f"[{min(wr):.2f} - {max(wr):.2f}]")
        print(f"  reports equal to the bit in {same} of {len(old)} changes")


if __name__ == "__main__":
    main()
