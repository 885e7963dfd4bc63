"""What the plain scan pays for printing ``report``'s numbers on small tensors.

``report`` and the window take the direct pass on a tensor of at most
:data:`~quantscope.state.pane_rules.DIRECT_MAX` elements; the plain scan takes that same pass
there (``direct_max=DIRECT_MAX``, the default) rather than its fused one-read pass
(``direct_max=0``, the route before), so the two print the same bits. This measures both routes
in one run, in interleaved pairs, on checkpoints of small tensors written to ``--dir``:
1,000 tiny float32 tensors (8x64, as many norms and biases are), 200 fp16 tensors of 64x512,
and 16 float32 tensors of 512x512 (the largest size class that changed route). It prints wall
and CPU milliseconds per tensor of each route and their ratio, per pair and the median.

    python bench/scan_small.py [--dir /tmp/quantscope-bench-small] [--pairs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import load
from quantscope.io.checkpoint import list_checkpoint
from quantscope.state.model_scan import ModelScan, model_rows
from quantscope.state.pane_rules import DIRECT_MAX
from quantscope.state.settings import Settings

SETS = {"1,000 tiny f32 (8x64)": (1000, (8, 64), np.float32),
        "200 fp16 (64x512)": (200, (64, 512), np.float16),
        "16 f32 (512x512)": (16, (512, 512), np.float32)}


def write_set(path: Path, count: int, shape: tuple[int, int], dtype) -> Path:
    from safetensors.numpy import save_file

    if not path.exists():
        rng = np.random.default_rng(1)
        tensors = {f"model.layers.{i}.mlp.weight": (rng.standard_normal(shape) * 0.02)
                   .astype(dtype) for i in range(count)}
        save_file(tensors, str(path))
    return path


def scan_once(path: Path, direct_max: int) -> tuple[float, float, list]:
    rows = model_rows(list_checkpoint(path))
    wall, cpu = time.perf_counter(), time.process_time()
    done = ModelScan(rows, Settings(), direct_max=direct_max).run()
    return time.perf_counter() - wall, time.process_time() - cpu, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/tmp/quantscope-bench-small")
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    print(load())
    for name, (count, shape, dtype) in SETS.items():
        assert shape[0] * shape[1] <= DIRECT_MAX
        path = write_set(folder / f"{count}x{shape[0]}x{shape[1]}.safetensors", count, shape,
                         dtype)
        scan_once(path, 0)
        scan_once(path, DIRECT_MAX)  # warm both routes (compiled loops, page cache)
        ratios, cpu_ratios, walls, cpus = [], [], {0: [], 1: []}, {0: [], 1: []}
        for _ in range(args.pairs):
            fw, fc, fused = scan_once(path, 0)
            dw, dc, direct = scan_once(path, DIRECT_MAX)
            assert [r.status for r in fused] == [r.status for r in direct]
            ratios.append(dw / fw)
            cpu_ratios.append(dc / fc)
            walls[0].append(fw)
            walls[1].append(dw)
            cpus[0].append(fc)
            cpus[1].append(dc)
        per = 1e3 / count
        print(f"{name:<24} fused (before) {statistics.median(walls[0]) * per:7.3f} ms wall "
              f"{statistics.median(cpus[0]) * per:7.3f} ms CPU per tensor | direct (now) "
              f"{statistics.median(walls[1]) * per:7.3f} ms wall "
              f"{statistics.median(cpus[1]) * per:7.3f} ms CPU | now/before wall "
              f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}], CPU "
              f"{statistics.median(cpu_ratios):.2f}x [{min(cpu_ratios):.2f}-"
              f"{max(cpu_ratios):.2f}]")


if __name__ == "__main__":
    main()
