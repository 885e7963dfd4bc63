"""Exact statistics at interactive speed: prepared reports against the direct pass and the naive
NumPy way, on 16M float32 elements, in one process.

Run: ``PYTHONPATH=src python bench/fast_stats.py``. Prints each figure, its target and
PASS/MISS. Ratios to a baseline (``np.sort``, ``np.copyto``) come from interleaved
pairs, median and range; other times are the best of several runs (the machine is shared).
The engine's sort, prefix sums and direct passes use every core.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import time  # noqa: E402

import numpy as np  # noqa: E402

from _timing import best_of, load, ratio, ratio_line  # noqa: E402
from quantscope.core import analyze, choose_qparams  # noqa: E402
from quantscope.core.stats.prepared import prepare  # noqa: E402

N_SIDE = 4096  # 4096 x 4096 = 16M elements




def naive_report(x: np.ndarray, scale, zero_point, qmin: int, qmax: int) -> tuple:
    """The straightforward NumPy way: full-size temporaries, one pass per quantity."""
    v = np.rint(x / scale) + zero_point
    below, above = v < qmin, v > qmax
    q = np.clip(v, qmin, qmax)
    xhat = ((q - zero_point) * scale).astype(np.float32)
    e2 = np.square(x.astype(np.float64) - xhat)
    clipped = below | above
    hist = np.bincount((q - qmin).astype(np.intp).ravel(), minlength=qmax - qmin + 1)
    return (e2[~clipped].sum(), e2[clipped].sum(), np.abs(x - xhat).max(), hist,
            int(below.sum()), int(above.sum()))


def line(name: str, seconds: float, target: float | None, extra: str = "") -> None:
    verdict = "" if target is None else ("PASS" if seconds <= target else "MISS")
    tgt = "" if target is None else f"target <= {target * 1e3:8.1f} ms"
    print(f"{name:<44} {seconds * 1e3:10.2f} ms  {tgt:<22} {verdict:<4} {extra}")


def main() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((N_SIDE, N_SIDE), dtype=np.float32)
    w *= rng.uniform(0.5, 2.0, size=(N_SIDE, 1)).astype(np.float32)  # channels differ
    x = w.reshape(-1)
    print(f"tensor: {x.size:,} float32 elements ({x.nbytes / 2**20:.0f} MiB); {load()}")

    t_copy = best_of(lambda: np.copy(x), 5)
    line("np.copy (reference)", t_copy, None)

    print(ratio_line("prepare / np.sort (16M)", ratio(lambda: prepare(x), lambda: np.sort(x),
                                                      5), 2.0, "np.sort"))
    t0 = time.perf_counter()
    prep = prepare(x)
    t_prep = time.perf_counter() - t0
    line("prepare (sort + prefix sums)", t_prep, 1.5)
    kept = prep.nbytes / x.size
    print(f"{'bytes kept per element by prepare':<44} {kept:10.2f}     goal <= 12"
          f"{'':<12} {'PASS' if kept <= 12 else 'MISS'}  (besides the tensor itself, 4 bytes)")

    p_t = choose_qparams(x, symmetric=False)
    p_t = p_t.with_(scale=p_t.scale * np.float32(0.8))  # some clipping, so every path runs
    t_fast = best_of(lambda: prep.analyze(p_t), 20)
    t_direct = best_of(lambda: analyze(x, p_t), 5)
    t_naive = best_of(lambda: naive_report(x, p_t.scale, p_t.zero_point, p_t.qmin, p_t.qmax),
                      2)
    line("per-tensor report (prepared)", t_fast, 1e-3,
         f"speed-up {t_naive / t_fast:7.0f}x naive, {t_direct / t_fast:6.0f}x direct")
    line("direct analyze, per tensor", t_direct, 6 * t_copy,
         f"= {t_direct / t_copy:.2f}x np.copy (target <= 6x); {t_naive / t_direct:.1f}x naive")
    buf = np.empty_like(x)
    print(ratio_line("direct analyze 16M / np.copyto", ratio(lambda: analyze(x, p_t),
                                                             lambda: np.copyto(buf, x), 7),
                     4.0, "copyto"))
    line("naive NumPy report, per tensor", t_naive, None, f"= {t_naive / t_copy:.1f}x np.copy")
    fast_rep, direct_rep = prep.analyze(p_t), analyze(x, p_t)
    same = np.array_equal(fast_rep.code_histogram, direct_rep.code_histogram) and all(
        getattr(fast_rep, k) == getattr(direct_rep, k)
        for k in ("clipped_below", "clipped_above", "codes_used", "max_abs_error"))
    rel = max(abs(getattr(fast_rep, k) / getattr(direct_rep, k) - 1)
              for k in ("mse", "rounding_mse", "clipping_mse", "signal_power"))
    print(f"{'prepared == direct (16M, per tensor)':<44} histogram/clips/max error identical: "
          f"{same}; metrics max relative difference {rel:.1e} (contract 1e-9)")

    p_c = choose_qparams(w, symmetric=True, granularity="channel", axis=0)
    t0 = time.perf_counter()
    prep2 = prepare(w)
    prep2.layout(0, None).build_sums()  # the per-channel layout, built once
    t_layout = time.perf_counter() - t0
    line("prepare + per-channel layout (one-time)", t_layout, None)
    t_fast_c = best_of(lambda: prep2.analyze(p_c), 5)
    t_direct_c = best_of(lambda: analyze(w, p_c), 3)
    s_c = p_c.scale[:, None]
    t_naive_c = best_of(lambda: naive_report(w, s_c, 0, p_c.qmin, p_c.qmax), 2)
    line("per-channel report 4096x4096 (prepared)", t_fast_c, 10e-3,
         f"speed-up {t_naive_c / t_fast_c:7.1f}x naive, {t_direct_c / t_fast_c:5.1f}x direct")
    line("direct analyze, per channel", t_direct_c, None, f"= {t_direct_c / t_copy:.2f}x np.copy")
    # How the kernel treats a row: 4096 rows of 4096 at 8 bits are split at their thresholds;
    # groups of 128 along the rows (131,072 rows of 128) are walked element by element.
    p_g = choose_qparams(w, symmetric=False, granularity="group", axis=1, group_size=128)
    prep2.layout(1, 128).build_sums()
    t_group = best_of(lambda: prep2.analyze(p_g), 3)
    t_group_direct = best_of(lambda: analyze(w, p_g), 2)
    line("per-group report, groups of 128 (prepared)", t_group, None,
         f"{t_group_direct / t_group:5.2f}x direct")
    w2 = w.reshape(256, -1)
    p_c2 = choose_qparams(w2, symmetric=True, granularity="channel", axis=0)
    prep3 = prepare(w2)
    prep3.analyze(p_c2)
    t_sorted_long = best_of(lambda: prep3.analyze(p_c2), 5)
    t_direct_long = best_of(lambda: analyze(w2, p_c2), 3)
    line("per-channel report, 256 rows of 65536", t_sorted_long, None,
         f"{t_direct_long / t_sorted_long:5.2f}x direct")

    t_sweep = best_of(lambda: prep.clip_sweep(symmetric=True, points=200), 3)
    sym = choose_qparams(x, symmetric=True)
    t_one_naive = best_of(lambda: naive_report(x, sym.scale, 0, sym.qmin, sym.qmax), 2)
    line("200-point clip sweep (prepared)", t_sweep, 100e-3,
         f"speed-up {200 * t_one_naive / t_sweep:7.0f}x naive (200 naive reports)")
    t_sweep_a = best_of(lambda: prep.clip_sweep(symmetric=False, points=200), 3)
    line("200-point asymmetric sweep (prepared)", t_sweep_a, 100e-3)

    t_pct = best_of(lambda: prep.percentile(99.99), 20)
    t_pct_abs = best_of(lambda: prep.percentile(99.99, absolute=True), 20)
    t_np_pct = best_of(lambda: np.percentile(x, 99.99), 2)
    line("percentile 99.99 (prepared)", t_pct, None, f"{t_np_pct / t_pct:7.0f}x np.percentile")
    line("percentile 99.99 of |x| (prepared)", t_pct_abs, None,
         f"{t_np_pct / t_pct_abs:7.0f}x np.percentile")
    print(load())


if __name__ == "__main__":
    main()
