"""How fast ``quantscope scan`` reads a Llama-like bf16 checkpoint, against a plain read.

Builds (once; reused while its marker file is there) a Hugging Face style sharded checkpoint
of about 2.1B bf16 parameters, 4.2 GB: 32 blocks of a 4096x4096 attention weight and a
4096x11008 MLP weight, plus a 32000x4096 embedding, in 2 GB shards with their
``model.safetensors.index.json``. Then, in one run and in interleaved pairs:

* a plain read of the same bytes (every shard read into an 8 MB buffer: the floor), and
* the scan in-process (:class:`quantscope.state.model_scan.ModelScan`, every tensor's figures),

and prints each as GB/s of checkpoint with the ratio scan/read per pair, an extrapolation to
an 8B-parameter bf16 checkpoint (16 GB), and the peak RSS of ``python -m quantscope scan`` in
a fresh process against the bound "largest tensor as float32 + 1 GB".

    python bench/scan_speed.py [--dir /tmp/quantscope-bench-llama] [--pairs 3] [--delete]

``--delete`` removes the checkpoint afterwards (it is 4.2 GB).

``--formats`` measures ``scan --formats`` against the plain scan instead, in one run and in
interleaved pairs, on checkpoints written to ``--dir``: 1,000 and 100,000 tiny float32 tensors
(8x64, as many small norms and biases are), four 2048x2048 float32 weights, and one
4096x4096 and one 14336x4096 (Llama-like attention and MLP weights); it prints each as
milliseconds per tensor and nanoseconds per byte, in wall and in processor time, and the
ratio; and, in the same interleaved runs, ``--formats`` with the error screen switched off
("unscreened": every format's exact report compared, as before it), checking that both name
the same points.

    python bench/scan_speed.py --formats [--dir /tmp/quantscope-bench-formats] [--pairs 2]
                               [--sets large] [--sets 1,000] [--sets 4096x4096]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

HIDDEN, MLP, LAYERS, VOCAB = 4096, 11008, 32, 32000
SHARD_BYTES = 2_000_000_000
MARKER = "complete.json"


def llama_like_shapes() -> dict[str, tuple[int, int]]:
    shapes = {"model.embed_tokens.weight": (VOCAB, HIDDEN)}
    for i in range(LAYERS):
        shapes[f"model.layers.{i}.self_attn.q_proj.weight"] = (HIDDEN, HIDDEN)
        shapes[f"model.layers.{i}.mlp.up_proj.weight"] = (MLP, HIDDEN)
    return shapes


def _tensor(rng: np.random.Generator, base: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """bf16 weights of ``shape``: a shared Gaussian base (generating 2B normals would take a
    minute) with each tensor's own channel scales and a few loud channels, so every tensor's
    figures differ as real layers' do."""
    x = base[: shape[0] * shape[1]].reshape(shape).copy()
    x *= rng.lognormal(0.0, 0.3, size=(shape[0], 1)).astype(np.float32)
    x[rng.integers(0, shape[0], 4)] *= rng.uniform(5, 40)
    return x.astype(ml_dtypes.bfloat16)


def build(folder: Path) -> None:
    """Write the sharded checkpoint and its index into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(17)
    shapes = llama_like_shapes()
    base = (rng.standard_normal(max(a * b for a, b in shapes.values()), np.float32) * 0.02)
    shards: list[list[str]] = [[]]
    size = 0
    for name, (a, b) in shapes.items():
        if size and size + a * b * 2 > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += a * b * 2
    weight_map = {}
    for k, names in enumerate(shards, 1):
        file = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
        header, offset = {}, 0
        for name in names:
            nbytes = shapes[name][0] * shapes[name][1] * 2
            header[name] = {"dtype": "BF16", "shape": list(shapes[name]),
                            "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
            weight_map[name] = file
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(folder / file, "wb") as fh:
            fh.write(struct.pack("<Q", len(text)) + text)
            for name in names:
                fh.write(_tensor(rng, base, shapes[name]).tobytes())
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": sum(a * b * 2 for a, b in shapes.values())},
         "weight_map": weight_map}))
    (folder / MARKER).write_text("{}")


def plain_read(files: list[Path]) -> int:
    """Read every byte of ``files`` into one 8 MB buffer; returns the bytes read."""
    buf = bytearray(8 << 20)
    total = 0
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                total += n
    return total


def scan_once(folder: Path):
    from quantscope.io.checkpoint import list_checkpoint
    from quantscope.state import Settings
    from quantscope.state.model_scan import ModelScan, model_rows

    rows = ModelScan(model_rows(list_checkpoint(folder)), Settings()).run()
    assert all(r.status == "ok" for r in rows), [r.reason for r in rows if r.status != "ok"]
    return rows


def peak_rss_of_cli(folder: Path) -> tuple[float, int]:
    """Wall time and peak RSS (bytes) of ``python -m quantscope scan --json`` as a user runs
    it, in a fresh process (interpreter start, imports and compiled-code loading included)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "quantscope", "scan", str(folder), "--json"],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak <= before:
        print("(peak RSS of the child not measurable: an earlier child used more)")
    return seconds, peak * 1024


def _cpu() -> float:
    """CPU seconds used by this process so far (all threads, user + system)."""
    t = os.times()
    return t.user + t.system


def _formats_sets(folder: Path, only: list[str] | None = None) -> dict[str, Path]:
    """The checkpoints of ``--formats`` (written once, reused; only those whose label holds
    a word of ``only``, if given)."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    sets = {"1,000 tiny (8x64)": (1000, (8, 64)), "100,000 tiny (8x64)": (100_000, (8, 64)),
            "4 large (2048x2048)": (4, (2048, 2048)), "1 attention (4096x4096)": (1, (4096, 4096)),
            "1 MLP (14336x4096)": (1, (14336, 4096))}
    out = {}
    for label, (count, shape) in sets.items():
        if only and not any(word in label for word in only):
            continue
        path = folder / f"{count}x{shape[0]}x{shape[1]}.safetensors"
        if not path.exists():
            rng = np.random.default_rng([3, count])  # each set the same, whichever are asked
            base = rng.standard_normal(shape).astype(np.float32)
            save_file({f"layers.{i}.w": base * np.float32(rng.lognormal())
                       for i in range(count)}, str(path))
        out[label] = path
    return out


def formats_main(folder: Path, pairs: int, only: list[str] | None = None) -> None:
    """``scan --formats`` against the plain scan, interleaved (see the module docstring)."""
    from quantscope.io.checkpoint import list_checkpoint
    from quantscope.state import Settings
    from quantscope.state import formats as formats_module
    from quantscope.state.model_scan import ModelScan, model_rows

    sets = _formats_sets(folder, only)
    print(f"cores: {os.cpu_count()}, load average at the start: "
          f"{', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    rows_of = {label: model_rows(list_checkpoint(path)) for label, path in sets.items()}
    for rows in rows_of.values():  # compiled loops loaded, page cache filled
        ModelScan(rows[:3], Settings(), formats=True).run()
        ModelScan(rows[:3], Settings()).run()
    screen_min = formats_module.SCREEN_MIN
    # "unscreened": every format's exact report compared, as before the error screen
    variants = (("plain", False, screen_min), ("--formats", True, screen_min),
                ("unscreened", True, 1 << 62))
    for label, rows in rows_of.items():
        nbytes = sum(r.nbytes for r in rows)
        times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        cpus: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        best: dict[str, list] = {}
        for _ in range(pairs):
            for name, flag, at in variants:
                formats_module.SCREEN_MIN = at
                try:
                    t, c = time.perf_counter(), _cpu()
                    done = ModelScan(rows, Settings(), formats=flag).run()
                    times[name].append(time.perf_counter() - t)
                    cpus[name].append(_cpu() - c)
                finally:
                    formats_module.SCREEN_MIN = screen_min
                assert all(r.status == "ok" for r in done)
                if flag:
                    best[name] = [r.formats for r in done]
        assert best["--formats"] == best["unscreened"]  # the same points, to the bit
        n = len(rows)
        for clock, runs in (("wall", times), ("CPU", cpus)):
            p = statistics.median(runs["plain"])
            print(f"{label} [{clock}]: plain {p:7.2f} s ({p / n * 1e3:6.3f} ms/tensor, "
                  f"{p / nbytes * 1e9:5.2f} ns/byte)")
            for name in ("--formats", "unscreened"):
                f = statistics.median(runs[name])
                print(f"  {name:>10} {f:7.2f} s ({f / n * 1e3:6.3f} ms/tensor, "
                      f"{f / nbytes * 1e9:7.2f} ns/byte)   ratio {f / p:5.2f}x   pairs: "
                      + ", ".join(f"{b / a:.2f}x" for a, b in zip(runs["plain"], runs[name],
                                                                 strict=True)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp/quantscope-bench-llama", type=Path)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--delete", action="store_true", help="remove the checkpoint afterwards")
    ap.add_argument("--formats", action="store_true",
                    help="scan --formats against the plain scan on tiny and large tensors")
    ap.add_argument("--sets", action="append", metavar="WORD",
                    help="with --formats: only the sets whose label holds WORD (repeatable: "
                         "'large', '1,000', '100,000', '4096x4096', '14336x4096')")
    args = ap.parse_args()
    if args.formats:
        formats_main(args.dir if args.dir != Path(ap.get_default("dir"))
                     else Path("/tmp/quantscope-bench-formats"), args.pairs, args.sets)
        return
    folder: Path = args.dir
    if not (folder / MARKER).exists():
        start = time.perf_counter()
        build(folder)
        print(f"built {folder} in {time.perf_counter() - start:.0f} s")
    files = sorted(folder.glob("*.safetensors"))
    nbytes = sum(f.stat().st_size for f in files)
    shapes = llama_like_shapes()
    params = sum(a * b for a, b in shapes.values())
    print(f"checkpoint: {len(shapes)} bf16 tensors in {len(files)} shards, {params:,} "
          f"parameters, {nbytes / 1e9:.2f} GB")
    try:
        scan_once(folder)  # warm-up: compiled code loaded, page cache filled like the read's
        plain_read(files)
        reads, scans, cpus = [], [], []
        for _ in range(args.pairs):
            t = time.perf_counter()
            plain_read(files)
            reads.append(time.perf_counter() - t)
            t, c = time.perf_counter(), _cpu()
            rows = scan_once(folder)
            scans.append(time.perf_counter() - t)
            cpus.append(_cpu() - c)
        cli_s, peak = peak_rss_of_cli(folder)
    finally:
        if args.delete:
            shutil.rmtree(folder)
            print(f"deleted {folder}")
    t_read, t_scan = statistics.median(reads), statistics.median(scans)
    rate = nbytes / t_scan / 1e9
    print(f"cores: {os.cpu_count()}, load average at the end: "
          f"{', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    for i, (r, s, c) in enumerate(zip(reads, scans, cpus, strict=True), 1):
        print(f"pair {i}: plain read {r:6.2f} s ({nbytes / r / 1e9:5.2f} GB/s)   scan "
              f"{s:6.2f} s ({nbytes / s / 1e9:5.2f} GB/s, {c:5.1f} CPU-s)   scan/read "
              f"{s / r:4.2f}x")
    print(f"median: plain read {nbytes / t_read / 1e9:.2f} GB/s, scan {rate:.2f} GB/s of "
          f"checkpoint ({params / t_scan / 1e6:.0f} M parameters/s), {t_scan / t_read:.2f}x "
          f"the plain read; goal >= 1.0 GB/s: {'met' if rate >= 1.0 else 'MISSED'}")
    cpu = statistics.median(cpus)
    cores = os.cpu_count() or 1
    print(f"CPU time: {cpu:.1f} s for {nbytes / 1e9:.2f} GB ({nbytes / cpu / 1e9:.2f} GB per "
          f"CPU-second); with all {cores} cores free that is {cores * nbytes / cpu / 1e9:.2f} "
          "GB/s (a projection: the wall-clock figures above are what was measured)")
    t8 = 16e9 / (rate * 1e9)
    print(f"8B-parameter bf16 checkpoint (16 GB), extrapolated: {t8:.1f} s; goal <= 30 s: "
          f"{'met' if t8 <= 30 else 'MISSED'}")
    largest = max(a * b for a, b in shapes.values()) * 4
    bound = largest + (1 << 30)
    print(f"python -m quantscope scan: {cli_s:.1f} s, peak RSS {peak / 2**20:.0f} MiB; bound "
          f"(largest tensor as float32 {largest / 2**20:.0f} MiB + 1 GiB) {bound / 2**20:.0f} "
          f"MiB: {'met' if peak <= bound else 'MISSED'}")
    worst = min(rows, key=lambda r: r.figures.per_tensor_db)
    print(f"worst per-tensor SQNR: {worst.name} {worst.figures.per_tensor_db:.2f} dB "
          f"(per-channel {worst.figures.per_channel_db:.2f} dB)")


if __name__ == "__main__":
    main()
