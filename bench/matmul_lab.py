"""Integer matmul lab speed and the real pair's SQNR, as ratios measured in this one process.

For the bundled MiniLM pair (layer-0 output activations [197, 384] × FFN weightᵀ [384, 1536])
and a larger synthetic pair ([512, 1024] × [1024, 4096]) it times

* ``int8_matmul`` on already-quantized codes (the integer kernel: exact int32 accumulation,
  zero-point terms, requantization, error report),
* ``quantized_matmul`` as the Matmul view calls it once per control change (quantize both
  sides, kernel, error statistics; float reference passed in, as the view caches it),

each as a ratio to a float64 ``A @ W`` of the same shapes -- the cost of one plain matmul is
the natural unit: the lab does one exact GEMM plus O(M·N) bookkeeping. Then it prints the real
pair's SQNR against the float matmul: plain, SmoothQuant α = 0.5, LLM.int8() threshold 6.

Run: ``python bench/matmul_lab.py`` (BLAS pinned to one thread below, so ratios compare like
with like on a shared machine).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


import numpy as np

from _timing import best_of
from quantscope.core.calibration.choose import choose_qparams
from quantscope.core.labs.matmul import int8_matmul
from quantscope.core.labs.outliers import (
    DEFAULT_ACTIVATION_SCHEME,
    DEFAULT_OUTPUT_SCHEME,
    DEFAULT_WEIGHT_SCHEME,
    quantized_matmul,
)
from quantscope.core.tensors.generators import generate
from quantscope.io import samples

REPEATS = 5




def real_pair() -> tuple[np.ndarray, np.ndarray]:
    a = np.load(samples.sample_path("output_activations"), allow_pickle=False)
    w = np.load(samples.sample_path("ffn_weight"), allow_pickle=False)
    return a, np.ascontiguousarray(w.T)


def synthetic_pair() -> tuple[np.ndarray, np.ndarray]:
    a = generate("outliers", (512, 1024), seed=1)
    w = np.ascontiguousarray(generate("weights", (4096, 1024), seed=2).T)
    return a, w


def time_pair(name: str, a: np.ndarray, w: np.ndarray) -> None:
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    ref = a64 @ w64
    pa = choose_qparams(a, **DEFAULT_ACTIVATION_SCHEME)
    pw = choose_qparams(w, **DEFAULT_WEIGHT_SCHEME)
    po = choose_qparams(ref, **DEFAULT_OUTPUT_SCHEME)
    qa, qw = pa.quantize(a), pw.quantize(w)
    t_float = best_of(lambda: a64 @ w64)
    t_kernel = best_of(lambda: int8_matmul(qa, qw, a_params=pa, b_params=pw, out_params=po,
                                           float_reference=ref))
    t_lab = best_of(lambda: quantized_matmul(a, w, float_reference=ref))
    t_lab_fixes = best_of(lambda: quantized_matmul(a, w, float_reference=ref, alpha=0.5,
                                                   threshold=6.0))
    (m, k), n = a.shape, w.shape[1]
    print(f"{name} [{m}, {k}] x [{k}, {n}], best of {REPEATS}: float64 A @ W "
          f"{1e3 * t_float:.1f} ms")
    rows = (("int8_matmul (codes in) / float64 A @ W", t_kernel),
            ("quantized_matmul / float64 A @ W", t_lab),
            ("quantized_matmul(alpha=0.5, threshold=6) / float64", t_lab_fixes))
    for label, t in rows:
        print(f"  {label:<52} = {t / t_float:5.2f}  ({1e3 * t:.0f} ms)")


def main() -> None:
    a, w = real_pair()
    time_pair("real MiniLM pair", a, w)
    time_pair("synthetic pair", *synthetic_pair())
    ref = a.astype(np.float64) @ w.astype(np.float64)
    print("real pair SQNR vs float A @ W (TFLite schemes, double rounding):")
    for label, kw in (("plain int8", {}), ("SmoothQuant alpha=0.5", {"alpha": 0.5}),
                      ("LLM.int8() threshold 6", {"threshold": 6.0})):
        r = quantized_matmul(a, w, float_reference=ref, **kw)
        extra = (f", {r.outlier_columns.size} column(s) in float16"
                 if r.outlier_columns.size else "")
        print(f"  {label:<24} {r.vs_float.sqnr_db:6.2f} dB (worst channel "
              f"{np.min(r.vs_float.sqnr_db_per_channel):.2f} dB{extra})")


if __name__ == "__main__":
    main()
