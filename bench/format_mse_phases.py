"""Where ``method="mse"`` for a number format spends its time on a 4096x4096 weight: the search's
shares on the engine's threads and the pick's two phases, CPU and wall, and how busy each
thread was.

The weight is ``bench/format_mse.py``'s (``bench/mse_speed.py``'s normal weight, four input
columns ten times larger), prepared once. Per round, ``choose_qparams(w, format=F,
method="mse", granularity=G, prepared=prep)`` with the search's loop and the pick's phases
timed where they are called:

- search: each share of :func:`~quantscope.core.formats.grid_bound.grid_rows_optimum` (the
  branch and bound of a set of rows on one thread): its thread's CPU, its start and end;
- scan: :func:`~quantscope.core.stats.format_mse._float32_best` (the report's float32 scales
  near the search's, on the threads);
- report: :func:`~quantscope.core.stats.format_mse.exact_errors` (the engine's report of the
  candidates, on the threads).

Printed per format and granularity (best round by CPU): wall and process CPU of the whole call
and of each phase, and per thread of the search its CPU, the wall it spent in shares and when
its last share ended. CPU over wall near the thread count means every core was busy; the
idle wall is CPU / threads only at that balance.

Run: ``PYTHONPATH=src python bench/format_mse_phases.py [--formats fp8_e4m3 --granularity
channel --repeat 3]``.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import defaultdict

from mse_speed import weight  # the same weight as the integer search's bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--formats", default="fp8_e4m3")
    ap.add_argument("--granularity", default="channel", choices=["channel", "tensor"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from quantscope.core import choose_qparams
    from quantscope.core.formats import grid_bound
    from quantscope.core.kernels.parallel import THREADS
    from quantscope.core.stats import format_mse
    from quantscope.core.stats.prepared import prepare

    shares: list[tuple[int, float, float, float]] = []  # thread, start, end, its CPU
    phases: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # wall, CPU

    search = grid_bound.grid_rows_optimum

    def timed_search(*a):
        t, c = time.perf_counter(), time.thread_time()
        search(*a)
        shares.append((threading.get_ident(), t, time.perf_counter(), time.thread_time() - c))

    def timed(name, fn):
        def call(*a, **k):
            t, c = time.perf_counter(), time.process_time()
            out = fn(*a, **k)
            phases[name][0] += time.perf_counter() - t
            phases[name][1] += time.process_time() - c
            return out
        return call

    grid_bound.grid_rows_optimum = timed_search  # read by the search where it is called
    format_mse._float32_best = timed("scan", format_mse._float32_best)
    format_mse.exact_errors = timed("report", format_mse.exact_errors)

    w = weight(args.rows, args.cols)
    prep = prepare(w)
    gran = args.granularity
    rows = prep.layout(0 if gran == "channel" else None, None)
    rows.sumsq  # noqa: B018 -- built once, as the window's first report does
    rows.build_sums()
    print(f"{args.rows}x{args.cols}, {gran}, {THREADS} threads, best of {args.repeat} rounds "
          "by CPU (seconds)")
    for name in args.formats.split(","):
        choose_qparams(w[:4, :256].copy(), format=name, method="mse", granularity=gran,
                       axis=0)  # compile (or load) outside the timings
        best = None
        for _ in range(args.repeat):
            shares.clear()
            phases.clear()
            t, c = time.perf_counter(), time.process_time()
            choose_qparams(w, format=name, method="mse", granularity=gran, axis=0,
                           prepared=prep)
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            if best is None or cpu < best[1]:
                best = (wall, cpu, list(shares), {k: tuple(v) for k, v in phases.items()}, t)
        wall, cpu, got, ph, t0 = best
        print(f"{name}: wall {wall:.3f}  cpu {cpu:.3f}  (cpu / wall {cpu / wall:.2f})")
        if got:
            start = min(s[1] for s in got)
            span = max(s[2] for s in got) - start
            print(f"  search  wall {span:.3f}  cpu {sum(s[3] for s in got):.3f}  "
                  f"({len(got)} shares, began {start - t0:.3f} after the call)")
            by_thread: dict[int, list] = defaultdict(list)
            for s in got:
                by_thread[s[0]].append(s)
            for i, mine in enumerate(by_thread.values()):
                print(f"    thread {i}: cpu {sum(s[3] for s in mine):.3f}  in shares "
                      f"{sum(s[2] - s[1] for s in mine):.3f}  last ended "
                      f"{max(s[2] for s in mine) - start:.3f}")
        for key in ("scan", "report"):
            if key in ph:
                print(f"  {key:7s} wall {ph[key][0]:.3f}  cpu {ph[key][1]:.3f}")


if __name__ == "__main__":
    main()
