"""Reports for every format beyond int8 on 16M float32 elements (the engine's threads).

Run: ``PYTHONPATH=src python bench/format_speed.py [--side 4096] [--only NAME ...]``. For
each format it prints, against the goal of a prepared report <= 2 ms:

* element formats, per tensor and per channel: ``prepared`` (the sorted statistics of the
  prepared tensor) and ``compiled`` (one compiled pass,
  :func:`quantscope.core.stats.format_stats.analyze_format`);
* block formats (MX, NVFP4, NF4): ``first`` (the first report for these scales: one compiled
  pass over the tensor) and ``repeat`` (the kept report);
* INT4 groups: ``prepared`` (the integer engine's per-group sorted rows) and ``direct``;
* ``numpy``: the same report the plain NumPy way (cast with ml_dtypes, full-size temporaries);

Every ratio is the median over interleaved pairs (A then B, repeated), so both sides saw the
same machine load; the times printed are the medians of the same runs.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from _timing import load, ratio  # noqa: E402
from quantscope.core import analyze, choose_qparams, prepare  # noqa: E402
from quantscope.core.formats.catalog import FORMATS, format_kind  # noqa: E402
from quantscope.core.stats.format_stats import analyze_format  # noqa: E402
from quantscope.core.tensors.layout import expand_params  # noqa: E402

PAIRS = 5
#: The target for a prepared report at 16M elements.
GOAL_S = 2e-3


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


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f} ms"


def _verdict(seconds: float) -> str:
    return "PASS" if seconds <= GOAL_S else "MISS"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=4096)
    ap.add_argument("--only", nargs="*", help="these formats only")
    args = ap.parse_args()
    side = args.side
    rng = np.random.default_rng(0)
    x = rng.standard_normal((side, side), dtype=np.float32)
    x *= rng.uniform(0.5, 2.0, size=(side, 1)).astype(np.float32)
    x[rng.integers(0, side, 64), rng.integers(0, side, 64)] *= 20  # a few outliers
    t0 = time.perf_counter()
    prep = prepare(x)
    print(f"tensor {x.shape}, {x.size:,} elements; prepare {time.perf_counter() - t0:.2f} s; "
          f"{load()}; goal: a prepared report <= {GOAL_S * 1e3:g} ms")
    print("ratios: median of interleaved pairs [lowest - highest], with both medians")
    for name in args.only or FORMATS[1:]:
        kind = format_kind(name)
        if kind == "int":  # INT4 groups: the integer engine's per-group sorted rows
            p = choose_qparams(x, format=name, prepared=prep)
            prep.analyze(p)  # the group layout, sorted once
            r = ratio(lambda p=p: analyze(x, p), lambda p=p: prep.analyze(p), pairs=PAIRS)
            print(f"{name:13s} prepared {_ms(r[4])} {_verdict(r[4])}  direct {_ms(r[3])}  "
                  f"direct/prepared {r[0]:6.1f}x [{r[1]:.1f} - {r[2]:.1f}]")
            continue
        p = choose_qparams(x, format=name, prepared=prep)
        if kind != "element":  # block formats: the first report is one compiled pass
            cache = prep.__dict__.setdefault("_kept_reports", {})

            def first(p=p, cache=cache):
                cache.clear()
                return prep.analyze(p)

            first()
            r = ratio(first, lambda p=p: prep.analyze(p), pairs=PAIRS)
            rn = ratio(lambda p=p: numpy_report(x, p), lambda p=p: analyze_format(x, p),
                       pairs=3)
            print(f"{name:13s} first    {_ms(r[3])} {_verdict(r[3])}  repeat {_ms(r[4])}  "
                  f"first/repeat {r[0]:8.1f}x  numpy {_ms(rn[3])}  numpy/compiled "
                  f"{rn[0]:4.1f}x [{rn[1]:.1f} - {rn[2]:.1f}]")
            continue
        for gran in ("tensor", "channel"):
            pg = p if gran == "tensor" else choose_qparams(
                x, format=name, granularity="channel", axis=0, prepared=prep)
            prep.analyze(pg)  # the layout, sorted once
            r = ratio(lambda pg=pg: analyze_format(x, pg), lambda pg=pg: prep.analyze(pg),
                      pairs=PAIRS)
            line = (f"{name + '/' + gran:22s} prepared {_ms(r[4])} {_verdict(r[4])}  "
                    f"compiled {_ms(r[3])}  compiled/prepared {r[0]:7.1f}x "
                    f"[{r[1]:.1f} - {r[2]:.1f}]")
            if gran == "tensor":
                rn = ratio(lambda pg=pg: numpy_report(x, pg), lambda pg=pg: analyze_format(x, pg),
                           pairs=3)
                line += f"  numpy/compiled {rn[0]:4.1f}x"
            print(line)


if __name__ == "__main__":
    main()
