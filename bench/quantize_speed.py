"""Quantize speed on 16M float32 elements, as ratios measured in this one process.

Prints the engine's blocked quantize against ``np.copy`` of the same tensor (target <= 2.0) and
against the naive one-line NumPy version, plus the direct ``analyze`` against ``np.copy``.
Run: ``python bench/quantize_speed.py`` (one thread: BLAS threads are pinned to 1 below).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


import numpy as np

from _timing import best_of
from quantscope import analyze, choose_qparams, quantize

N = 16 * 1024 * 1024
REPEATS = 7




def naive(x: np.ndarray, scale: np.float32, zp: int) -> np.ndarray:
    """The one-liner people write: full-size temporaries at every step."""
    return np.clip(np.rint(x / scale) + zp, -128, 127).astype(np.int8)


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N, dtype=np.float32)
    p = choose_qparams(x, symmetric=False)
    s, z = p.scale, int(p.zero_point)
    np.testing.assert_array_equal(quantize(x, s, z), naive(x, s, z))
    t_copy = best_of(lambda: np.copy(x))
    t_q = best_of(lambda: quantize(x, s, z))
    t_naive = best_of(lambda: naive(x, s, z))
    t_analyze = best_of(lambda: analyze(x, p), 3)
    print(f"16M float32 elements, best of {REPEATS} (ms): np.copy {1e3 * t_copy:.1f}, "
          f"quantize {1e3 * t_q:.1f}, naive {1e3 * t_naive:.1f}, analyze {1e3 * t_analyze:.1f}")
    print(f"quantize / np.copy  = {t_q / t_copy:.2f}  (target <= 2.0: "
          f"{'PASS' if t_q / t_copy <= 2.0 else 'MISS'})")
    print(f"naive / quantize    = {t_naive / t_q:.2f}  (speed-up over the one-liner)")
    print(f"analyze / np.copy   = {t_analyze / t_copy:.2f}  (target <= 6.0: "
          f"{'PASS' if t_analyze / t_copy <= 6.0 else 'MISS'})")


if __name__ == "__main__":
    main()
