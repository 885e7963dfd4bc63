"""SQNR of the formats a user weighs against each other, on every bundled real tensor.

Run: ``PYTHONPATH=src python bench/format_table.py``. Weights per output channel (axis 0),
activations per feature (axis -1); block formats run along the last axis (the input dimension
of a weight). Prints a Markdown table: int8 and FP8 E4M3 per tensor and per channel, MXFP8
E4M3, MXFP4, NVFP4, INT4 g128 (symmetric, fp16 scales), and their bits per element.
"""

from pathlib import Path

import numpy as np

from quantscope.core import analyze, choose_qparams
from quantscope.core.formats.catalog import bits_per_element
from quantscope.io import load_for_analysis

SAMPLES = Path(__file__).resolve().parents[1] / "src" / "quantscope" / "resources" / "samples"
COLUMNS = (("int8 per-tensor", "int8", "tensor"), ("int8 per-channel", "int8", "channel"),
           ("FP8 E4M3 per-tensor", "fp8_e4m3", "tensor"),
           ("FP8 E4M3 per-channel", "fp8_e4m3", "channel"), ("MXFP8 E4M3", "mxfp8_e4m3", None),
           ("MXFP4", "mxfp4", None), ("NVFP4", "nvfp4", None), ("INT4 g128", "int4_g128", None))


def tensors():
    for path in sorted(SAMPLES.glob("*.npy")):
        yield path.stem, np.load(path), -1 if "activations" in path.stem else 0
    bf16 = SAMPLES / "layer0_bf16.safetensors"
    for name in ("attention.self.key.weight", "attention.self.value.weight",
                 "attention.output.dense.weight", "output.dense.weight"):
        x, _ = load_for_analysis(bf16, f"encoder.layer.0.{name}")
        yield f"bf16 {name}", x, 0


def main() -> None:
    print("| tensor | shape | " + " | ".join(c[0] for c in COLUMNS) + " |")
    print("|---|---|" + "---:|" * len(COLUMNS))
    bpe = {}
    for label, x, axis in tensors():
        cells = []
        for title, fmt, gran in COLUMNS:
            p = choose_qparams(x, format=fmt, granularity=gran or "tensor", axis=axis)
            cells.append(f"{analyze(x, p).sqnr_db:.2f}")
            bpe.setdefault(title, []).append(bits_per_element(p, x.size))
        print(f"| {label} | {'x'.join(map(str, x.shape))} | " + " | ".join(cells) + " |")
    print("| bits per element | | " + " | ".join(
        f"{min(v):.3f}" + (f"-{max(v):.3f}" if max(v) - min(v) > 5e-4 else "")
        for v in bpe.values()) + " |")


if __name__ == "__main__":
    main()
