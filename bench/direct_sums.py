"""The direct pass's row sums (:func:`quantscope.core.stats.analyze`): the cost of summing
each row's squares in one fixed order against main's (or any other checkout's) direct pass,
on tensors the direct pass serves (at most ``pane_rules.DIRECT_MAX`` elements).

Run: ``PYTHONPATH=src python bench/direct_sums.py OTHER/src/quantscope/core/stats/analyze.py``.
The other ``analyze.py`` is loaded beside this checkout's (everything else is this
checkout's), and the two are timed in interleaved pairs: median ratio (new / other) of wall
time and of process CPU time, with the range, per case.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time

import numpy as np

from quantscope.core import choose_qparams
from quantscope.core.stats import analyze as new

PAIRS = 15
REPEAT = 5  # calls per timed sample


def _other(path: str):
    spec = importlib.util.spec_from_file_location("analyze_other", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _sample(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    for _ in range(REPEAT):
        fn()
    return (time.perf_counter() - w) / REPEAT, (time.process_time() - c) / REPEAT


def main() -> None:
    old = _other(sys.argv[1])
    rng = np.random.default_rng(0)
    w = (rng.standard_t(5, size=(512, 512)) * 0.02).astype(np.float32)
    flat = w.reshape(-1)[:200_000].copy()
    cases = {
        "per-channel 512x512": (w, choose_qparams(w, granularity="channel", axis=0)),
        "per-tensor 200,000": (flat, choose_qparams(flat)),
        "per-channel 512x512, tails clipped": (
            w, choose_qparams(w * np.float32(0.8), granularity="channel", axis=0)),
        "per-group 128, 512x512": (w, choose_qparams(w, granularity="group", axis=1,
                                                     group_size=128)),
    }
    for name, (x, p) in cases.items():
        a, b = new.analyze(x, p), old.analyze(x, p)
        assert (a.n, a.clipped_below, a.clipped_above) == (b.n, b.clipped_below,
                                                          b.clipped_above)
        wall, cpu, t_new, t_old = [], [], [], []
        for _ in range(PAIRS):
            ow, oc = _sample(lambda x=x, p=p: old.analyze(x, p))
            nw, nc = _sample(lambda x=x, p=p: new.analyze(x, p))
            wall.append(nw / ow)
            cpu.append(nc / oc if oc > 0 else float("nan"))
            t_new.append(nw)
            t_old.append(ow)
        print(f"{name:<34} new {statistics.median(t_new) * 1e3:7.2f} ms  other "
              f"{statistics.median(t_old) * 1e3:7.2f} ms  wall ratio "
              f"{statistics.median(wall):.3f} [{min(wall):.3f}, {max(wall):.3f}]  CPU ratio "
              f"{statistics.median(cpu):.3f} [{min(cpu):.3f}, {max(cpu):.3f}]  "
              f"SQNR {a.sqnr_db!r} vs {b.sqnr_db!r}")


if __name__ == "__main__":
    main()
