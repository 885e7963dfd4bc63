"""SQNR and bits per element of llama.cpp's GGUF types beside the other 4- and 8-bit formats,
on a bundled real weight, real activations and a Llama-8B-sized MLP weight (int8 per channel,
FP8, MXFP4, NVFP4 both ways, NF4, INT4 g128 by the engine's, GPTQ's, AWQ's and torchao's
rules), with the time each GGUF quantization (llama.cpp's reference quantizer) takes.

Run: ``PYTHONPATH=src python bench/gguf_table.py [--rows 14336] [--cols 4096]``. The bundled
tensors are the ones whose rows hold whole 256-element super-blocks: MiniLM's
``output.dense.weight`` (bf16 checkpoint, 384 x 1536) and the FFN GELU activations
(197 x 1536); the synthetic weight is :func:`llm_formats.llama_mlp_weight`.
"""

import argparse
import time

import numpy as np

from llm_formats import llama_mlp_weight
from quantscope.core import analyze, choose_qparams
from quantscope.core.formats.catalog import bits_per_element
from quantscope.io import load_for_analysis
from quantscope.io.samples import sample_path

OTHERS = (("int8 per-channel", "int8", {"granularity": "channel", "axis": 0}),
          ("FP8 E4M3 per-channel", "fp8_e4m3", {"granularity": "channel", "axis": 0}),
          ("MXFP4", "mxfp4", {}), ("NVFP4 (torchao)", "nvfp4", {}),
          ("NVFP4 (ModelOpt)", "nvfp4_modelopt", {}), ("NF4", "nf4", {}),
          ("INT4 g128 (narrow symmetric)", "int4_g128", {}),
          ("GPTQ INT4 g128", "gptq_int4_g128", {}), ("AWQ INT4 g128", "awq_int4_g128", {}),
          ("torchao INT4 g128", "torchao_int4_g128", {}))
GGUF = ("gguf_q8_0", "gguf_q6_k", "gguf_q5_k", "gguf_q5_1", "gguf_q5_0", "gguf_q4_k",
        "gguf_q4_1", "gguf_q4_0", "gguf_q3_k", "gguf_q2_k")


def tensors(rows: int, cols: int):
    x, _ = load_for_analysis(sample_path("bf16_checkpoint"), "encoder.layer.0.output.dense.weight")
    yield "MiniLM output.dense.weight (bf16) 384x1536", x
    yield "MiniLM FFN GELU activations 197x1536", np.load(sample_path("gelu_activations"))
    yield f"Llama-like MLP weight {rows}x{cols}", llama_mlp_weight(rows, cols)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=14336)
    ap.add_argument("--cols", type=int, default=4096)
    args = ap.parse_args()
    for label, x in tensors(args.rows, args.cols):
        print(f"\n{label}\n| format | bits/elem | SQNR dB | quantize + report s |")
        print("|---|---:|---:|---:|")
        for title, name, opts in OTHERS:
            p = choose_qparams(x, format=name, **opts)
            r = analyze(x, p)
            print(f"| {title} | {bits_per_element(p, x.size):.4f} | {r.sqnr_db:.2f} | |")
        for name in GGUF:
            t = time.perf_counter()
            p = choose_qparams(x, format=name)
            r = analyze(x, p)
            took = time.perf_counter() - t
            print(f"| {name} | {bits_per_element(p, x.size):.4f} | {r.sqnr_db:.2f} | "
                  f"{took:.2f} |", flush=True)


if __name__ == "__main__":
    main()
