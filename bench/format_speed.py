"""Reports for every format beyond int8 on 16M float32 elements, one thread, one process.

Run: ``PYTHONPATH=src python bench/format_speed.py [--side 4096]``. For each format it prints

* ``prepared``: a report from the prepared tensor (per tensor for element formats: the sorted
  statistics, target <= 2 ms; block formats: the kept report of their data-determined scales);
* ``compiled``: one compiled pass (:func:`quantscope.core.format_stats.analyze_format`);
* ``numpy``: the same report the plain NumPy way (cast with ml_dtypes, full-size temporaries);

and the ratios numpy / compiled and compiled / prepared, each the median over interleaved
pairs (A then B, repeated), so both sides of a ratio saw the same machine load.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from quantscope.core import analyze, choose_qparams, prepare  # noqa: E402
from quantscope.core.format_stats import analyze_format  # noqa: E402
from quantscope.core.formats import FORMATS, format_kind  # noqa: E402
from quantscope.core.layout import expand_params  # noqa: E402

PAIRS = 5


def numpy_report(x: np.ndarray, p) -> tuple:
    """The straightforward way: scale, clamp, cast with ml_dtypes (or the table), dequantize,
    sum, count codes -- each a full-size temporary."""
    et = p.element
    s = expand_params(x.shape, p.scale, p.axis, p.group_size, "scale")
    if p.inv_scale is not None:
        v = x * expand_params(x.shape, p.inv_scale, p.axis, p.group_size, "scale")
    else:
        v = x / s
    clipped = np.abs(v) > et.max_finite  # (overflow by rounding aside: a cheap stand-in)
    v = np.clip(v, -et.max_finite, et.max_finite)
    if et.dtype is not None:
        e = v.astype(et.dtype).astype(np.float32)
    elif et.kind == 1:
        e = (np.rint(v * 64) / 64).astype(np.float32)
    else:
        e = et.values.astype(np.float32)[np.searchsorted(et.midpoints, v)]
    xhat = e * s
    e2 = np.square(x.astype(np.float64) - xhat)
    hist = np.unique(e, return_counts=True)[1]
    return e2[~clipped].sum(), e2[clipped].sum(), hist.size


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def pair_ratio(a, b) -> tuple[float, float, float]:
    """Median ``b / a`` over interleaved runs; also the best ``a`` and ``b`` (seconds)."""
    ta, tb = [], []
    for _ in range(PAIRS):
        ta.append(timed(a))
        tb.append(timed(b))
    return float(np.median(np.array(tb) / np.array(ta))), min(ta), min(tb)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=4096)
    side = ap.parse_args().side
    rng = np.random.default_rng(0)
    x = rng.standard_normal((side, side), dtype=np.float32)
    x *= rng.uniform(0.5, 2.0, size=(side, 1)).astype(np.float32)
    x[rng.integers(0, side, 64), rng.integers(0, side, 64)] *= 20  # a few outliers
    t0 = time.perf_counter()
    prep = prepare(x)
    print(f"tensor {x.shape}, {x.size:,} elements; prepare {time.perf_counter() - t0:.2f} s")
    for name in FORMATS[1:]:
        kind = format_kind(name)
        p = choose_qparams(x, format=name, prepared=prep)
        prep.analyze(p)  # compile / build once
        if kind == "int":
            t = min(timed(lambda p=p: prep.analyze(p)) for _ in range(3))
            d = min(timed(lambda p=p: analyze(x, p)) for _ in range(2))
            print(f"{name:13s} prepared {t * 1e3:8.2f} ms   direct {d * 1e3:8.1f} ms "
                  f"(integer engine, per group)")
            continue
        r_pc, t_prep, t_comp = pair_ratio(lambda p=p: prep.analyze(p),
                                          lambda p=p: analyze_format(x, p))
        r_nc, _, t_np = pair_ratio(lambda p=p: analyze_format(x, p),
                                   lambda p=p: numpy_report(x, p))
        verdict = "PASS" if t_prep <= 2e-3 else "MISS"
        print(f"{name:13s} prepared {t_prep * 1e3:8.2f} ms {verdict}  compiled "
              f"{t_comp * 1e3:7.1f} ms  numpy {t_np * 1e3:7.1f} ms  numpy/compiled "
              f"{r_nc:5.1f}x  compiled/prepared {r_pc:8.1f}x")
        if kind == "element":
            pc = choose_qparams(x, format=name, granularity="channel", axis=0, prepared=prep)
            prep.analyze(pc)
            r, t_c, t_d = pair_ratio(lambda pc=pc: prep.analyze(pc),
                                     lambda pc=pc: analyze_format(x, pc))
            print(f"{'  per channel':13s} prepared {t_c * 1e3:8.2f} ms       compiled "
                  f"{t_d * 1e3:7.1f} ms  compiled/prepared {r:5.1f}x")


if __name__ == "__main__":
    main()
