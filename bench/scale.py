"""Scale: prepare a tensor of N elements (default 10^8) and explore it, with peak memory.

Builds an LLM-like heavy-tailed float32 tensor (normal weights, one in 10^4 an outlier 30-100x
larger), in blocks (no float64 temporary), prepares it (parallel sort, block prefix sums) and
times what the window does on it: a per-tensor report, a 200-point clip sweep and percentiles.
Prints each figure, the bytes the preparation keeps per element, and the process's peak RSS per
element (the tensor itself included: 4 bytes of it are the tensor).

Run: ``python bench/scale.py [--elements 1e9] [--repeat 20]``. Goals: 10^9 elements
prepared in <= 60 s within <= 16 GB peak; a prepared per-tensor report <= 1 ms.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from quantscope.core import choose_qparams  # noqa: E402
from quantscope.core.stats.prepared import prepare, warm_up  # noqa: E402

BLOCK = 1 << 24


def heavy_tailed(n: int, seed: int = 0) -> np.ndarray:
    """Normal values with sparse large outliers, made block by block in float32."""
    rng = np.random.default_rng(seed)
    x = np.empty(n, np.float32)
    for lo in range(0, n, BLOCK):
        part = x[lo:lo + BLOCK]
        rng.standard_normal(part.size, dtype=np.float32, out=part)
        part *= np.float32(0.02)
        hits = rng.integers(0, part.size, max(1, part.size // 10_000))
        part[hits] *= rng.uniform(30, 100, hits.size).astype(np.float32)
    return x


def peak_rss() -> int:
    """The process's peak resident memory so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def timed(fn, repeat: int) -> tuple[float, float, float]:
    """Median, min and max wall time of ``repeat`` calls (seconds)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), max(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--elements", type=float, default=1e8)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    n = int(args.elements)
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    warm_up()
    t0 = time.perf_counter()
    x = heavy_tailed(n)
    t_build = time.perf_counter() - t0
    print(f"tensor: {n:,} float32 elements ({x.nbytes / 2**30:.2f} GiB), built in "
          f"{t_build:.1f} s; peak RSS so far {peak_rss() / 2**30:.2f} GiB")

    marks: list[tuple[float, float, str]] = []
    t0 = time.perf_counter()
    prep = prepare(x, progress=lambda f, stage: marks.append((time.perf_counter() - t0, f,
                                                                stage)))
    t_prep = time.perf_counter() - t0
    stages: dict[str, float] = {}
    last = 0.0
    for t, _, stage in marks:
        stages[stage] = stages.get(stage, 0.0) + t - last
        last = t
    split = ", ".join(f"{k} {v:.1f} s" for k, v in stages.items())
    print(f"prepare: {t_prep:.2f} s ({t_prep / n * 1e9:.1f} ns/element; {split}); "
          f"{len(marks)} progress calls; keeps {prep.nbytes / n:.2f} bytes/element besides "
          f"the tensor")

    p = choose_qparams(x, symmetric=False, prepared=prep)
    p = p.with_(scale=p.scale * np.float32(0.8))  # some clipping, so every path runs
    prep.analyze(p)
    med, lo, hi = timed(lambda: prep.analyze(p), args.repeat)
    print(f"per-tensor report (8 bits, prepared): median {med * 1e3:.3f} ms "
          f"[{lo * 1e3:.3f} - {hi * 1e3:.3f}] over {args.repeat} (goal <= 1 ms: "
          f"{'PASS' if med <= 1e-3 else 'MISS'})")
    med, lo, hi = timed(lambda: prep.clip_sweep(symmetric=True, points=200), 3)
    print(f"200-point clip sweep (prepared): median {med * 1e3:.1f} ms "
          f"[{lo * 1e3:.1f} - {hi * 1e3:.1f}]")
    med, lo, hi = timed(lambda: prep.percentile(99.99), args.repeat)
    med_a, lo_a, hi_a = timed(lambda: prep.percentile(99.99, absolute=True), args.repeat)
    print(f"percentile 99.99: median {med * 1e6:.1f} us [{lo * 1e6:.1f} - {hi * 1e6:.1f}]; "
          f"of |x|: {med_a * 1e6:.1f} us [{lo_a * 1e6:.1f} - {hi_a * 1e6:.1f}]")
    peak = peak_rss()
    print(f"peak RSS {peak / 2**30:.2f} GiB = {peak / n:.2f} bytes/element (the tensor is "
          f"4.00 of them); prepare {'PASS' if t_prep <= 60 else 'MISS'} <= 60 s at 10^9 "
          f"scale: {t_prep * 1e9 / n:.1f} s per 10^9 elements; peak "
          f"{peak * 1e9 / n / 2**30:.1f} GiB per 10^9 (goal <= 16 GB)")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
