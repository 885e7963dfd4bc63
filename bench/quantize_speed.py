"""Direct-pass speed on 16M float32 elements, as ratios measured in this one process.

Each row is a ratio to its baseline from interleaved pairs (baseline, candidate) so both see the
same load; the median and the range of the pairs are printed, with its goal:

* quantize / ``np.copyto`` into a preallocated float32 buffer (goal <= 1.2) and against
  ``torch.quantize_per_tensor`` on the same tensor (goal <= 1.0: no slower than torch), by the
  default rule (a division) and by torch's own (``arithmetic="fma"``, the same codes), and
  with both on one thread;
* dequantize / the naive ``(q.astype(float32) - z) * s`` (goal <= 0.5), with a fresh output
  and into a reused ``out=`` buffer, beside what touching a fresh 64 MB output alone costs
  (the kernel zeroes each new page on first touch: a floor no pass over fresh memory avoids),
  and the reused buffer against the best NumPy does into a buffer of its own;
* direct ``analyze`` (per tensor) / ``np.copyto`` (goal <= 4);
* what the compiled passes buy: each of quantize, dequantize and analyze against the same call
  with them switched off (``quantize.COMPILED_MIN`` raised: the blocked NumPy passes).

The engine's compiled passes use every core; so does torch (its default intra-op threads).
Run: ``python bench/quantize_speed.py [--pairs 9]``.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# torch's OpenMP threads otherwise spin on both cores for a while after each call, and the
# engine's pass that follows in the pair shares the cores with them (measured: ours 7.0 ms
# after a torch call vs 4.4-4.8 ms after np.copyto, in one run)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


import sys

import numpy as np

from _timing import load, ratio, ratio_line
from quantscope import analyze, choose_qparams, dequantize, quantize
from quantscope.core.kernels import parallel as PARALLEL

QUANTIZE = sys.modules["quantscope.core.schemes.quantize"]

N = 16 * 1024 * 1024


def naive(x: np.ndarray, scale: np.float32, zp: int) -> np.ndarray:
    """The one-liner people write: full-size temporaries at every step."""
    return np.clip(np.rint(x / scale) + zp, -128, 127).astype(np.int8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=9)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N, dtype=np.float32)
    p = choose_qparams(x, symmetric=False)
    s, z = p.scale, int(p.zero_point)
    q = quantize(x, s, z)
    np.testing.assert_array_equal(q, naive(x, s, z))
    buf = np.empty_like(x)
    print(f"16M float32 elements; {load()}; {args.pairs} interleaved pairs each")
    copy = lambda: np.copyto(buf, x)  # noqa: E731
    print(ratio_line("quantize / np.copyto", ratio(lambda: quantize(x, s, z), copy, args.pairs),
                     1.2, "copyto"))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)  # every core, as the engine's passes
        tx = torch.from_numpy(x)
        tq = torch.quantize_per_tensor(tx, float(s), z, torch.qint8).int_repr().numpy()
        differ = int(np.count_nonzero(tq != quantize(x, s, z, arithmetic="fma")))
        print(ratio_line(f"quantize / torch.quantize_per_tensor ({torch.get_num_threads()} "
                         "threads)",
                         ratio(lambda: quantize(x, s, z),
                               lambda: torch.quantize_per_tensor(tx, float(s), z,
                                                                 torch.qint8), args.pairs),
                         1.0, "torch") + f"  (codes differing from arithmetic='fma': {differ})")
        print(ratio_line("  with torch's own rule (arithmetic='fma') / torch",
                         ratio(lambda: quantize(x, s, z, arithmetic="fma"),
                               lambda: torch.quantize_per_tensor(tx, float(s), z,
                                                                 torch.qint8), args.pairs),
                         None, "torch"))
        torch.set_num_threads(1)
        print(ratio_line("  both on one thread / torch",
                         ratio(one_thread(lambda: quantize(x, s, z)),
                               lambda: torch.quantize_per_tensor(tx, float(s), z,
                                                                 torch.qint8), args.pairs),
                         None, "torch"))
        torch.set_num_threads(os.cpu_count() or 1)
        print(ratio_line("torch.quantize_per_tensor / np.copyto",
                         ratio(lambda: torch.quantize_per_tensor(tx, float(s), z,
                                                                 torch.qint8), copy,
                               args.pairs), None, "copyto"))
    print(ratio_line("naive one-liner quantize / np.copyto",
                     ratio(lambda: naive(x, s, z), copy, max(3, args.pairs // 3)), None,
                     "copyto"))
    zf = np.float32(z)
    naive_dq = lambda: (q.astype(np.float32) - zf) * s  # noqa: E731
    print(ratio_line("dequantize / naive (q.astype(f32) - z) * s",
                     ratio(lambda: dequantize(q, s, z), naive_dq, args.pairs), 0.5, "naive"))
    print(ratio_line("  first touch of a fresh 64 MB output / naive",
                     ratio(lambda: np.empty(N, np.float32)[::1024].fill(0), naive_dq,
                           args.pairs), None, "naive"))
    out, out_np = np.empty(N, np.float32), np.empty(N, np.float32)
    print(ratio_line("dequantize(out=buffer) / naive",
                     ratio(lambda: dequantize(q, s, z, out=out), naive_dq, args.pairs), 0.5,
                     "naive"))

    def numpy_into() -> None:
        np.subtract(q, zf, out=out_np, dtype=np.float32)
        np.multiply(out_np, s, out=out_np)

    print(ratio_line("dequantize(out=buffer) / NumPy into a buffer",
                     ratio(lambda: dequantize(q, s, z, out=out), numpy_into, args.pairs), None,
                     "NumPy"))
    print(ratio_line("direct analyze (per tensor) / np.copyto",
                     ratio(lambda: analyze(x, p), copy, args.pairs), 4.0, "copyto"))
    for name, fn in (("quantize", lambda: quantize(x, s, z)),
                     ("dequantize", lambda: dequantize(q, s, z)),
                     ("analyze", lambda: analyze(x, p))):
        print(ratio_line(f"compiled {name} / NumPy passes", ratio(fn, numpy_passes(fn),
                                                                   args.pairs), None, "NumPy"))
    print(load())


def one_thread(fn):
    """``fn`` with the engine's passes on the calling thread alone (one share each)."""
    def run():
        saved = PARALLEL.THREADS
        PARALLEL.THREADS = 1
        try:
            return fn()
        finally:
            PARALLEL.THREADS = saved
    return run


def numpy_passes(fn):
    """``fn`` with the compiled passes switched off (the blocked NumPy passes run instead)."""
    def run():
        saved = QUANTIZE.COMPILED_MIN
        QUANTIZE.COMPILED_MIN = 1 << 62
        try:
            return fn()
        finally:
            QUANTIZE.COMPILED_MIN = saved
    return run


if __name__ == "__main__":
    main()
