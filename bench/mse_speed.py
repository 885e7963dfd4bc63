"""How long ``method="mse"`` takes per channel on an LLM-sized weight, and what the search did.

A ``--rows`` x ``--cols`` weight (normal, a few outlier input columns, as real weights have),
prepared once (sorted per channel, as the window does before a report); then, interleaved
``--repeat`` times in the same run: the MSE search per output channel (asymmetric and
symmetric int8) and, as the yardstick, one exact per-channel report of the min/max parameters
on the same prepared tensor (what the window computes anyway). Printed: seconds, the ratio
to the report, the boxes the branch and bound opened per channel (median, 90th percentile,
largest) and whether every channel's minimum was proven.

Run: ``PYTHONPATH=src python bench/mse_speed.py [--rows 4096 --cols 4096 --repeat 2]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from quantscope.core import choose_qparams
from quantscope.core.stats.mse_search import mse_search
from quantscope.core.stats.prepared import prepare


def weight(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """Normal values (std 0.02) with four input columns ten times larger."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
    w[:, rng.choice(cols, 4, replace=False)] *= 10
    return w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    w = weight(args.rows, args.cols)
    t = time.perf_counter()
    prep = prepare(w)
    rows = prep.layout(0, None)
    rows.sumsq  # noqa: B018 -- built once, as a report would
    print(f"{args.rows}x{args.cols}: prepared per channel in {time.perf_counter() - t:.2f} s")
    small = prepare(w[:4]).layout(0, None)  # compile outside the timings
    for sym in (False, True):
        mse_search(small, qmin=-127 if sym else -128, qmax=127, symmetric=sym)
    times: dict[str, list[float]] = {"report": [], "asymmetric": [], "symmetric": []}
    found = {}
    for _ in range(args.repeat):
        t = time.perf_counter()
        prep.analyze(choose_qparams(w, granularity="channel", axis=0, symmetric=False))
        times["report"].append(time.perf_counter() - t)
        for name, sym in (("asymmetric", False), ("symmetric", True)):
            t = time.perf_counter()
            found[name] = mse_search(rows, qmin=-127 if sym else -128, qmax=127,
                                     symmetric=sym)
            times[name].append(time.perf_counter() - t)
    base = min(times["report"])
    print(f"{'':12s} {'best s':>8s} {'x report':>9s} {'boxes p50/p90/max':>18s} proven")
    print(f"{'report':12s} {base:8.3f} {1.0:9.1f}")
    for name in ("asymmetric", "symmetric"):
        f = found[name]
        p50, p90, top = np.percentile(f.boxes, [50, 90, 100])
        print(f"{name:12s} {min(times[name]):8.3f} {min(times[name]) / base:9.1f} "
              f"{p50:6.0f}/{p90:4.0f}/{top:5.0f}  {bool(f.proven.all())}")


if __name__ == "__main__":
    main()
