"""How long ``quantscope scan`` takes on a ~90 MB float32 checkpoint (~22M parameters).

Builds a BERT-like checkpoint (6 layers, hidden 512, FFN 2048, 7000-token embedding) in a
temporary directory, then times, in one run:

* reading the same bytes with plain Python/NumPy (the floor: no analysis at all),
* quantscope's loaders alone (header validation + memory map + float32 conversion),
* ``quantscope scan`` in-process (two exact int8 analyses per tensor), and
* ``python -m quantscope scan`` as a user runs it (interpreter start and imports included),

and prints each as seconds and as a ratio to the plain read. The issue's target is <= 10 s.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from _timing import best_of

HIDDEN, FFN, LAYERS, VOCAB, POSITIONS = 512, 2048, 6, 7000, 512


def bert_like_shapes() -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (VOCAB, HIDDEN),
        "embeddings.position_embeddings.weight": (POSITIONS, HIDDEN),
        "embeddings.LayerNorm.weight": (HIDDEN,),
        "embeddings.LayerNorm.bias": (HIDDEN,),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for proj in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense"):
            shapes[p + proj + ".weight"] = (HIDDEN, HIDDEN)
            shapes[p + proj + ".bias"] = (HIDDEN,)
        shapes[p + "attention.output.LayerNorm.weight"] = (HIDDEN,)
        shapes[p + "attention.output.LayerNorm.bias"] = (HIDDEN,)
        shapes[p + "intermediate.dense.weight"] = (FFN, HIDDEN)
        shapes[p + "intermediate.dense.bias"] = (FFN,)
        shapes[p + "output.dense.weight"] = (HIDDEN, FFN)
        shapes[p + "output.dense.bias"] = (HIDDEN,)
        shapes[p + "output.LayerNorm.weight"] = (HIDDEN,)
        shapes[p + "output.LayerNorm.bias"] = (HIDDEN,)
    return shapes


def write_checkpoint(path: Path) -> int:
    """Write float32 tensors with heavy-tailed values (some channels louder), return params."""
    rng = np.random.default_rng(2024)
    shapes = bert_like_shapes()
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in shapes.items():
        nbytes = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)) + text)
        for shape in shapes.values():
            x = rng.standard_t(5, size=shape).astype(np.float32) * 0.03
            if len(shape) == 2:  # a few loud output channels, as real layers have
                x[rng.integers(0, shape[0], 3)] *= 20
            fh.write(x.tobytes())
    return sum(int(np.prod(s)) for s in shapes.values())




def main() -> None:
    from quantscope.cli import main as cli_main
    from quantscope.io import list_tensors, load_for_analysis

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bert_like.safetensors"
        params = write_checkpoint(path)
        size = path.stat().st_size

        def plain_read() -> None:
            with open(path, "rb") as fh:
                data = fh.read()
            np.frombuffer(data[size - params * 4:], np.float32).sum()

        def loaders_only() -> None:
            for info in list_tensors(path):
                load_for_analysis(path, info.name)[0].sum()

        def scan_in_process() -> None:
            with contextlib.redirect_stdout(io.StringIO()):
                assert cli_main(["scan", str(path), "--no-progress"]) == 0

        def scan_subprocess() -> None:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [str(Path(__file__).resolve().parents[1] / "src"),
                 os.environ.get("PYTHONPATH", "")]))
            subprocess.run([sys.executable, "-m", "quantscope", "scan", str(path), "--json"],
                           check=True, stdout=subprocess.DEVNULL, env=env)

        plain_read()  # warm the page cache so every variant reads from memory
        t_read = best_of(plain_read)
        t_load = best_of(loaders_only)
        t_scan = best_of(scan_in_process)
        t_cli = statistics.median(best_of(scan_subprocess, 1) for _ in range(3))

    print(f"checkpoint: {len(bert_like_shapes())} float32 tensors, {params:,} parameters, "
          f"{size / 1e6:.1f} MB")
    print(f"plain read + np.frombuffer      {t_read:7.3f} s   1.0x")
    print(f"quantscope loaders (float32)    {t_load:7.3f} s  {t_load / t_read:5.1f}x plain read")
    print(f"quantscope scan (in-process)    {t_scan:7.3f} s  {t_scan / t_read:5.1f}x plain read")
    print(f"python -m quantscope scan       {t_cli:7.3f} s  {t_cli / t_read:5.1f}x plain read")
    print(f"scan throughput: {params / t_scan / 1e6:.1f} M parameters/s; target <= 10 s: "
          f"{'met' if t_cli <= 10 else 'MISSED'} ({t_cli / 10:.0%} of the budget)")


if __name__ == "__main__":
    main()
