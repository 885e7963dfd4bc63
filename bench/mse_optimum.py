"""The MSE optimum against a brute-force search, on every bundled real tensor.

For each tensor (the four MiniLM .npy files and the 16 tensors of the bf16 checkpoint), per
tensor, asymmetric int8 and symmetric int8: the SQNR of ``choose_qparams(method="mse")``, the
SQNR of an exhaustive search (every zero point of the code range at each of ``--scales``
geometrically spaced scales from 10^-3 to 2 times the min/max scale, each an exact
evaluation), their difference, and the time of each (best of 3 for the method). The test
suite imports :func:`brute_force` from here.

Run: ``PYTHONPATH=src python bench/mse_optimum.py [--scales 600] [--symmetric]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from quantscope.core import analyze, choose_qparams
from quantscope.core.stats.mse_search import errors as _errors
from quantscope.core.stats.mse_search import unit_ranges
from quantscope.core.stats.prepared import prepare
from quantscope.core.stats.sorted_stats import SortedRows


def brute_force(rows: SortedRows, *, qmin: int, qmax: int, symmetric: bool,
                n_scales: int = 600, lowest: float = 1e-3, highest: float = 2.0,
                rounding: str = "half_even", arithmetic: str = "divide"
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the best (scale, zero point, total squared error) over every zero point in
    ``[qmin, qmax]`` (0 when symmetric) and ``n_scales`` geometric scales in
    ``[lowest, highest]`` times the row's min/max scale."""
    rule = (qmin, qmax, rounding, arithmetic)
    lo, hi = unit_ranges(rows, symmetric)
    s0 = (np.maximum(-lo, hi) / max(qmax, -qmin) if symmetric else (hi - lo) / (qmax - qmin))
    s0 = np.where(s0 > 0, s0, 1.0)
    zs = np.array([0]) if symmetric else np.arange(qmin, qmax + 1)
    n = rows.n_rows
    best = np.full(n, np.inf)
    best_s = np.zeros(n, np.float32)
    best_z = np.zeros(n, np.int32)
    units = np.arange(n)
    for f in np.exp(np.linspace(np.log(lowest), np.log(highest), n_scales)):
        scale = (s0 * f).astype(np.float32)
        err = _errors(rows, np.repeat(units, zs.size), np.repeat(scale, zs.size),
                      np.tile(zs, n), rule).reshape(n, zs.size)
        i = np.argmin(err, axis=1)
        e = err[units, i]
        better = e < best
        best = np.where(better, e, best)
        best_s = np.where(better, scale, best_s)
        best_z = np.where(better, zs[i], best_z)
    return best_s, best_z, best


def real_tensors() -> dict[str, np.ndarray]:
    """Every bundled real tensor, as float32."""
    from quantscope.io import list_tensors, load_tensor, samples

    out = {name: np.load(samples.sample_path(name)).astype(np.float32)
           for name in ("gelu_activations", "output_activations", "query_weight", "ffn_weight")}
    ckpt = samples.sample_path("bf16_checkpoint")
    for info in list_tensors(ckpt):
        out[info.name.replace("encoder.layer.0.", "bf16 ")] = load_tensor(
            ckpt, info.name).astype(np.float32)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scales", type=int, default=600)
    ap.add_argument("--symmetric", action="store_true")
    args = ap.parse_args()
    sym = args.symmetric
    qmin, qmax = (-127, 127) if sym else (-128, 127)
    print(f"{'tensor':48s} {'elements':>9s} {'brute dB':>9s} {'mse dB':>9s} {'diff':>7s} "
          f"{'brute s':>8s} {'mse ms':>7s}")
    worst = np.inf
    for name, x in real_tensors().items():
        prep = prepare(x)
        rows = prep.layout(None, None)
        t = time.perf_counter()
        _, _, err = brute_force(rows, qmin=qmin, qmax=qmax, symmetric=sym, n_scales=args.scales)
        t_brute = time.perf_counter() - t
        brute_db = 10 * np.log10(rows.sumsq[0] / err[0])
        times = []
        for _ in range(3):
            t = time.perf_counter()
            p = choose_qparams(x, symmetric=sym, method="mse", prepared=prep)
            times.append(time.perf_counter() - t)
        ours = analyze(x, p).sqnr_db
        worst = min(worst, ours - brute_db)
        print(f"{name:48s} {x.size:9d} {brute_db:9.4f} {ours:9.4f} {ours - brute_db:+7.4f} "
              f"{t_brute:8.1f} {1000 * min(times):7.1f}")
    print(f"worst (method - brute force): {worst:+.4f} dB")


if __name__ == "__main__":
    main()
