"""Every 4-bit format and every GGUF type (Q2_K to Q8_0) on one Llama-8B MLP weight
(14336 x 4096 float32, 58.7M elements).

Run: ``PYTHONPATH=src python bench/llm_formats.py [--rows 14336] [--cols 4096] [--pairs 3]
[--method mse]``; with ``--method`` only the formats that take that range method are measured
(``mse``: the element formats' float32 scale, the INT4 groups' range, each MX, NVFP4 and NF4
block's stored scale).
The weight is real-looking: normal, each output row with its own spread, and a few input
channels (columns) with outliers, as LLM weights have. For each format it prints

* ``first``: choosing the parameters and the first report on the prepared tensor (what the
  window does when a pane switches to the format), the median of interleaved pairs (copy, then
  report), and its ratio to ``np.copyto`` of the whole tensor (a pass that only reads and
  writes it): the median report over the least disturbed copy of the same pairs. The copy's
  target is written once before anything is timed (the first format's first copy used to
  fault in 235 MB of fresh pages, ~450 ms, and a 807 ms report read 1.8x), and a copy is one
  thread whose wall time on a loaded machine is mostly waiting for a core;
* ``again``: the prepared re-report of the same parameters (what a repaint costs);
* ``peak``: the most memory the first report held beyond the tensor and its preparation, in
  bytes per element (``tracemalloc``, which sees NumPy's buffers; the compiled loops allocate
  only per-thread scratch of a few KiB);
* ``cpu ns/el``: the first report's processor time (every thread of the process) per element,
  the figure a loaded shared machine does not inflate: divided by the cores it projects the
  first report's time on an idle machine;
* the SQNR and the bits per element, so the figures belong to a known result.

Before/after a change, interleaved format by format: ``bench/llm_formats_ab.py``.

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


def four_bit_specs(method: str = "minmax") -> list[tuple[str, dict]]:
    """(format, options) of every 4-bit format, the element ones per tensor and per channel,
    then every GGUF type (llama.cpp's 2- to 8-bit ones too: a GGUF file mixes them); for a
    ``method`` other than min/max, those that take it, with it."""
    if method != "minmax":
        return [(name, {**opts, "method": method}) for name, opts in four_bit_specs()
                if takes_method(name, method)]
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
        elif kind == "gguf":
            continue
        elif element_bits(name) == 4:
            out.append((name, {}))
    from quantscope.core.formats.gguf_types import GGUF_TYPES

    return out + [(name, {}) for name in GGUF_TYPES]


def takes_method(name: str, method: str) -> bool:
    """Whether format ``name`` takes range method ``method`` (the element formats and the
    INT4 groups every one, MX, NVFP4 and NF4 blocks ``mse``; a tool's rule none)."""
    from quantscope.core.calibration.format_choose import BLOCK_MSE_KINDS

    kind = format_kind(name)
    return (kind == "element" or (kind == "int" and name not in TOOL_INT4)
            or (kind in BLOCK_MSE_KINDS and method == "mse"))


def label_of(name: str, opts: dict) -> str:
    return name + "".join(f" {v if k != 'symmetric' else ('sym' if v else 'asym')}"
                          for k, v in opts.items() if k != "axis")


def element_bits(name: str) -> int:
    from quantscope.core.formats.catalog import element_of

    return element_of(name).bits


def measure(w: np.ndarray, dst: np.ndarray, prep, name: str, opts: dict, pairs: int) -> dict:
    """One format's figures (see the module's docstring): ``first``/``again``/``copy`` in
    seconds (medians; ``copy`` the least disturbed of the pairs' copies), ``ratio``
    first / copy, ``peak`` bytes per element, ``cpu`` the first report's least processor time
    in ns per element, ``sqnr`` and ``bits``."""

    def first():
        prep.__dict__.pop("_kept_reports", None)  # a report not seen before
        p = choose_qparams(w, format=name, prepared=prep, **opts)
        return p, prep.analyze(p)

    first()  # compiled loops loaded, pages touched
    np.copyto(dst, w)
    tracemalloc.start()
    p, report = first()
    peak = tracemalloc.get_traced_memory()[1] / w.size
    tracemalloc.stop()
    firsts, copies, cpus = [], [], []
    for _ in range(pairs):
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
    tf = statistics.median(firsts)
    # the copy is one thread's pass over memory: on a loaded machine its wall time is mostly
    # waiting for a core, so the least disturbed copy is the reference
    tc = min(copies)
    return {"first": tf, "copy": tc, "ratio": tf / tc, "again": statistics.median(again),
            "peak": peak, "cpu": min(cpus) / w.size * 1e9, "sqnr": float(report.sqnr_db),
            "bits": float(bits_per_element(p, w.size))}


def flags_of(m: dict) -> str:
    return (("" if m["first"] <= FIRST_GOAL_S else " first>1s")
            + ("" if m["again"] <= AGAIN_GOAL_S else " again>50ms")
            + ("" if m["peak"] <= PEAK_GOAL else " peak>12B"))


HEADER = (f"{'format':26s} {'first':>9s} {'x copyto':>9s} {'again':>9s} {'peak B/el':>9s} "
          f"{'cpu ns/el':>9s} {'SQNR dB':>8s} {'bits/el':>8s}")


def row(label: str, m: dict) -> str:
    return (f"{label:26s} {m['first'] * 1e3:7.0f}ms {m['ratio']:8.1f}x {m['again'] * 1e3:7.1f}ms "
            f"{m['peak']:9.2f} {m['cpu']:9.1f} {m['sqnr']:8.3f} {m['bits']:8.4f}{flags_of(m)}")


def setup(rows: int, cols: int):
    """The weight, a copy target already touched, and the prepared weight."""
    w = llama_mlp_weight(rows, cols)
    dst = np.empty_like(w)
    np.copyto(dst, w)  # its pages faulted in before any copy is timed
    t0 = time.perf_counter()
    prep = prepare(w)
    return w, dst, prep, time.perf_counter() - t0


def worker(args) -> None:
    """Serve measurements: read a spec index per line, answer one JSON line (for the
    interleaved before/after driver, ``bench/llm_formats_ab.py``)."""
    import json
    import sys

    w, dst, prep, _ = setup(args.rows, args.cols)
    specs = four_bit_specs(args.method)
    print(json.dumps({"ready": True, "specs": [label_of(*s) for s in specs]}), flush=True)
    for line in sys.stdin:
        name, opts = specs[int(line)]
        print(json.dumps(measure(w, dst, prep, name, opts, args.pairs)), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=14336)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="these formats only")
    ap.add_argument("--method", default="minmax",
                    help="the range method where a format takes one (e.g. mse)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    w, dst, prep, prep_s = setup(args.rows, args.cols)
    print(f"weight {w.shape} float32, {w.size / 1e6:.1f}M elements; prepared in "
          f"{prep_s:.2f} s ({prep.nbytes / w.size:.2f} bytes/element); {load()}")
    print(HEADER)
    copies = []
    for name, opts in four_bit_specs(args.method):
        if args.only and name not in args.only:
            continue
        m = measure(w, dst, prep, name, opts, args.pairs)
        copies.append(m["copy"])
        print(row(label_of(name, opts), m), flush=True)
    if copies:
        print(f"np.copyto of the weight: least {min(copies) * 1e3:.1f} ms, median of the "
              f"formats' least {statistics.median(copies) * 1e3:.1f} ms; {load()}")


if __name__ == "__main__":
    main()
