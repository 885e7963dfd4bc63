"""Every 4-bit format (and GGUF's Q5_K, Q6_K and Q8_0) on one Llama-8B MLP weight
(14336 x 4096 float32, 58.7M elements).

Run: ``PYTHONPATH=src python bench/llm_formats.py [--rows 14336] [--cols 4096] [--pairs 3]``.
The weight is real-looking: normal, each output row with its own spread, and a few input
channels (columns) with outliers, as LLM weights have. For each format it prints

* ``first``: choosing the parameters and the first report on the prepared tensor (what the
  window does when a pane switches to the format), and its ratio to ``np.copyto`` of the whole
  tensor (a pass that only reads and writes it), from interleaved pairs (copy, then report);
* ``again``: the prepared re-report of the same parameters (what a repaint costs);
* ``peak``: the most memory the first report held beyond the tensor and its preparation, in
  bytes per element (``tracemalloc``, which sees NumPy's buffers; the compiled loops allocate
  only per-thread scratch of a few KiB);
* ``cpu ns/el``: the first report's processor time (every thread of the process) per element,
  the figure a loaded shared machine does not inflate: divided by the cores it projects the
  first report's time on an idle machine;
* the SQNR and the bits per element, so the figures belong to a known result.

The goals of the brief: a block format's first report <= 1 s, a re-report <= 50 ms, memory
<= 12 bytes per element beyond the tensor.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

from _timing import load  # noqa: E402
from quantscope.core import choose_qparams, prepare  # noqa: E402
from quantscope.core.formats.catalog import FORMATS, bits_per_element, format_kind  # noqa: E402
from quantscope.core.formats.int4_tools import TOOL_INT4  # noqa: E402

FIRST_GOAL_S = 1.0
AGAIN_GOAL_S = 0.05
PEAK_GOAL = 12.0
#: llama.cpp types beyond 4 bits the goals name too.
WIDER_GGUF = ("gguf_q5_k", "gguf_q6_k", "gguf_q8_0")


def llama_mlp_weight(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """Normal weights (std 0.02), rows scaled 0.5-2x, 8 input channels with 20-60x outliers
    in a tenth of their rows."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, cols), dtype=np.float32)
    w *= np.float32(0.02)
    w *= rng.uniform(0.5, 2.0, size=(rows, 1)).astype(np.float32)
    for c in rng.choice(cols, 8, replace=False):
        hit = rng.random(rows) < 0.1
        w[hit, c] *= rng.uniform(20, 60, size=int(hit.sum())).astype(np.float32)
    return w


def four_bit_specs() -> list[tuple[str, dict]]:
    """(format, options) of every 4-bit format, the element ones per tensor and per channel."""
    out: list[tuple[str, dict]] = []
    for name in FORMATS:
        kind = format_kind(name)
        if name == "int8":
            continue
        if kind == "element":
            from quantscope.core.formats.catalog import element_of

            if element_of(name).bits == 4:
                out += [(name, {"granularity": "tensor"}),
                        (name, {"granularity": "channel", "axis": 0})]
        elif kind == "int" and name in TOOL_INT4:  # the tool's rule fixes its symmetry
            out.append((name, {}))
        elif kind == "int":
            out += [(name, {"symmetric": True}), (name, {"symmetric": False})]
        elif kind == "torchao":  # torchao's int4 weight-only, groups of 32/64/128
            out.append((name, {}))
        elif kind == "gguf":  # llama.cpp's 4-bit types: Q4_0, Q4_1, Q4_K
            from quantscope.core.formats.gguf_types import GGUF_TYPES

            if GGUF_TYPES[name].bits == 4:
                out.append((name, {}))
        elif element_bits(name) == 4:
            out.append((name, {}))
    return out


def element_bits(name: str) -> int:
    from quantscope.core.formats.catalog import element_of

    return element_of(name).bits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=14336)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="these formats only")
    args = ap.parse_args()
    w = llama_mlp_weight(args.rows, args.cols)
    dst = np.empty_like(w)
    t0 = time.perf_counter()
    prep = prepare(w)
    print(f"weight {w.shape} float32, {w.size / 1e6:.1f}M elements; prepared in "
          f"{time.perf_counter() - t0:.2f} s ({prep.nbytes / w.size:.2f} bytes/element); "
          f"{load()}")
    print(f"{'format':26s} {'first':>9s} {'x copyto':>9s} {'again':>9s} {'peak B/el':>9s} "
          f"{'cpu ns/el':>9s} {'SQNR dB':>8s} {'bits/el':>8s}")
    for name, opts in four_bit_specs() + [(n, {}) for n in WIDER_GGUF]:
        if args.only and name not in args.only:
            continue
        label = name + "".join(f" {v if k != 'symmetric' else ('sym' if v else 'asym')}"
                               for k, v in opts.items() if k != "axis")

        def first(name=name, opts=opts):
            prep.__dict__.pop("_kept_reports", None)  # a report not seen before
            p = choose_qparams(w, format=name, prepared=prep, **opts)
            return p, prep.analyze(p)

        first()  # compiled loops loaded, pages touched
        tracemalloc.start()
        p, report = first()
        peak = tracemalloc.get_traced_memory()[1] / w.size
        tracemalloc.stop()
        firsts, copies, cpus = [], [], []
        for _ in range(args.pairs):
            t = time.perf_counter()
            np.copyto(dst, w)
            copies.append(time.perf_counter() - t)
            c = time.process_time()
            t = time.perf_counter()
            first()
            firsts.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        p, report = first()
        again = []
        for _ in range(5):
            t = time.perf_counter()
            prep.analyze(p)
            again.append(time.perf_counter() - t)
        tf, ta = statistics.median(firsts), statistics.median(again)
        rat = statistics.median(f / c for f, c in zip(firsts, copies, strict=True))
        flags = ("" if tf <= FIRST_GOAL_S else " first>1s") + (
            "" if ta <= AGAIN_GOAL_S else " again>50ms") + (
            "" if peak <= PEAK_GOAL else " peak>12B")
        cpu = min(cpus) / w.size * 1e9
        print(f"{label:26s} {tf * 1e3:7.0f}ms {rat:8.1f}x {ta * 1e3:7.1f}ms {peak:9.2f} "
              f"{cpu:9.1f} {report.sqnr_db:8.3f} {bits_per_element(p, w.size):8.4f}{flags}",
              flush=True)
    print(f"np.copyto of the weight: median {statistics.median(copies) * 1e3:.1f} ms; {load()}")


if __name__ == "__main__":
    main()
