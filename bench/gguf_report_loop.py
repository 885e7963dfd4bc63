"""The compiled GGUF loops alone, one thread: encoding, encoding with the report measured in
the same pass (what a prepared tensor's first report runs), and the report of stored blocks,
in processor ns per element (the figure a loaded machine inflates least), for every type.

Run: ``PYTHONPATH=src python bench/gguf_report_loop.py [--rows 1024] [--repeats 3]
[--only gguf_q4_k ...]``; before/after a change, run it once per tree (``PYTHONPATH`` the old
tree's ``src``, then the new one's) on the same machine, or alternate the two. Each figure is
the least of ``repeats`` runs over the same Llama-like weight as ``bench/llm_formats.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _timing import best_of
from llm_formats import llama_mlp_weight
from quantscope.core.formats.gguf_kernel import encode_blocks, encode_report_blocks, report_blocks
from quantscope.core.formats.gguf_types import GGUF_TYPES, MEASURE
from quantscope.core.kernels.read_only import read_only
from quantscope.core.kernels.unit_columns import unit_columns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    w = llama_mlp_weight(args.rows, args.cols)
    print(f"weight {w.shape} float32; CPU ns per element, least of {args.repeats}")
    print(f"{'type':12s} {'encode':>8s} {'enc+rep':>8s} {'report':>8s}")
    for name, t in GGUF_TYPES.items():
        if args.only and name not in args.only:
            continue
        figures = figures_of(w, t, args.repeats)
        print(f"{name:12s} " + " ".join(f"{v:8.1f}" for v in figures), flush=True)


def figures_of(w: np.ndarray, t, repeats: int) -> list[float]:
    """Encode, encode with the report, report: least CPU ns per element of each."""
    nb = w.size // t.block
    xb = read_only(w.reshape(nb, t.block))  # the loops in the types the engine hands them
    out = np.empty((nb, t.type_size), np.uint8)
    out_f = unit_columns(nb, 6)
    out_i = unit_columns(nb, 4, np.int64)
    hist = np.zeros(t.levels, np.int64)

    def enc():
        encode_blocks(t.ggml_type, xb, out)

    def enc_rep():
        encode_report_blocks(t.ggml_type, xb, out, MEASURE, t.levels, out_f, out_i, hist)

    def rep():
        report_blocks(t.ggml_type, xb, out, t.levels, out_f, out_i, hist)

    enc_rep()  # compiled loops loaded, pages touched
    rep()
    return [best_of(f, repeats, clock=time.process_time) / w.size * 1e9
            for f in (enc, enc_rep, rep)]


if __name__ == "__main__":
    main()
