"""The model scan here against the same scan on a Dask cluster of 1 and 2 local workers.

Writes a sharded bf16 checkpoint of ``--gib`` GiB (default 2) to a temporary folder, then
scans it with the local scan (:class:`ModelScan`, every core), ``--dask local:1`` and
``--dask local:2`` (:class:`ClusterScan`), interleaved ``--rounds`` times so a busy machine
slows each alike; prints each run's seconds and GB/s, the ratios to the local scan within each
round, checks every cluster scan's rows equal the local ones, and measures the overhead per
task (a scan of many tiny tensors: one task each). Last, the projection for a 700 GB
checkpoint on N workers from shared storage of a stated bandwidth, from the measured
per-worker rate and overhead.

    python bench/cluster_scan.py [--gib 2] [--rounds 2] [--storage-gbs 10]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np
from distributed import Client, LocalCluster

from quantscope.io.checkpoint import list_checkpoint
from quantscope.state import Settings
from quantscope.state.cluster_scan import ClusterScan
from quantscope.state.model_scan import ModelScan, model_rows


def write_checkpoint(folder: Path, gib: float, shards: int = 8) -> int:
    """Llama-like layers of 4096-wide bf16 weights over ``shards`` files (index included)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    per_tensor = 4096 * 4096
    count = max(1, round(gib * (1 << 30) / (2 * per_tensor)))
    block = (rng.standard_normal((4096, 4096), np.float32) * 0.02).astype(ml_dtypes.bfloat16)
    weight_map, total = {}, 0
    names = [f"model.layers.{i // 4}.{k}.weight" for i, k in
             zip(range(count), ["q_proj", "k_proj", "v_proj", "o_proj"] * count, strict=False)]
    for s, idx in enumerate(np.array_split(np.arange(count), shards), 1):
        file = f"model-{s:05d}-of-{shards:05d}.safetensors"
        tensors = {}
        for i in idx:
            t = np.roll(block, int(i) * 7, axis=1)
            t[int(i) % 4096] *= 50  # a loud channel
            tensors[names[i]] = t
        save_file(tensors, str(folder / file))
        weight_map.update({names[i]: file for i in idx})
        total += sum(t.nbytes for t in tensors.values())
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}))
    return total


def tiny_checkpoint(folder: Path, count: int) -> None:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(1)
    save_file({f"t.{i}.weight": rng.standard_normal((8, 8)).astype(np.float32)
               for i in range(count)}, str(folder / "tiny.safetensors"))


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tiny", type=int, default=400, help="tensors in the overhead scan")
    ap.add_argument("--storage-gbs", type=float, default=10.0,
                    help="shared storage bandwidth for the projection, GB/s")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="qs-cluster-bench-"))
    clusters: list = []
    try:
        total = write_checkpoint(root, args.gib)
        rows = model_rows(list_checkpoint(root))
        print(f"checkpoint: {len(rows)} bf16 tensors, {total / 1e9:.2f} GB in {root}")
        settings = Settings()
        clients = {}
        for n in (1, 2):
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address="127.0.0.1:0")
            clusters.append(cluster)
            clients[n] = Client(cluster, set_as_default=False)
            ClusterScan(rows[:1], settings, clients[n]).run()  # workers import and load kernels
        ModelScan(rows[:1], settings).run()
        times: dict[str, list[float]] = {"local": [], "local:1": [], "local:2": []}
        for r in range(args.rounds):
            t_local, reference = timed(lambda: ModelScan(rows, settings).run())
            times["local"].append(t_local)
            line = [f"round {r + 1}: local {t_local:.2f} s ({total / t_local / 1e9:.2f} GB/s)"]
            for n in (1, 2):
                scan = ClusterScan(rows, settings, clients[n])
                t, got = timed(scan.run)
                assert got == reference, "the cluster scan's rows differ from the local scan's"
                times[f"local:{n}"].append(t)
                line.append(f"local:{n} {t:.2f} s ({total / t / 1e9:.2f} GB/s, "
                            f"{t / t_local:.2f}x local, {scan.tasks} tasks)")
            print("; ".join(line))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"median: local {med['local']:.2f} s, local:1 {med['local:1']:.2f} s "
              f"({med['local:1'] / med['local']:.2f}x), local:2 {med['local:2']:.2f} s "
              f"({med['local:2'] / med['local']:.2f}x); rows equal the local scan's in every run")

        tiny = root / "tiny"
        tiny.mkdir()
        tiny_checkpoint(tiny, args.tiny)
        trows = model_rows(list_checkpoint(tiny))
        t_local, _ = timed(lambda: ModelScan(trows, settings).run())
        scan = ClusterScan(trows, settings, clients[2], task_bytes=1)
        t_tasks, _ = timed(scan.run)
        per_task = (t_tasks - t_local / 2) / scan.tasks
        print(f"overhead: {args.tiny} tiny tensors, one task each on local:2: {t_tasks:.2f} s "
              f"vs {t_local:.2f} s local: {1e3 * per_task:.1f} ms per task")

        rate = total / med["local:1"] / 1e9  # GB/s one single-threaded worker delivers
        size, tasks = 700.0, 700e9 / (64 << 20)
        print(f"projection, 700 GB from shared storage at {args.storage_gbs:g} GB/s, "
              f"{rate:.2f} GB/s per single-thread worker (measured), {tasks:,.0f} tasks of "
              f"64 MiB at {1e3 * per_task:.1f} ms scheduling each (spread over the workers):")
        for n in (1, 8, 32, 64, 128):
            bw = min(n * rate, args.storage_gbs)
            minutes = (size / bw + tasks * per_task / n) / 60
            bound = "storage" if n * rate >= args.storage_gbs else "workers"
            print(f"  {n:4d} workers: {minutes:6.1f} min ({bound}-bound)")
    finally:
        for c in clusters:
            c.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
