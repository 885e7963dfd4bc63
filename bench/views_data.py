"""How long the explanatory views' data takes: the trade-off sweep (two schemes, ~224 exact
reports each), the bit-width curves (4 schemes x 7 widths) and the pane captions, on the
prepared (sorted) path versus the direct pass, measured in one process.

Run: ``PYTHONPATH=src python bench/views_data.py [N]`` (default N = 4M elements).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from quantscope.core import analyze
from quantscope.core.labs.bitwidth import bitwidth_curve
from quantscope.core.labs.captions import pane_captions
from quantscope.core.stats.prepared import prepare
from quantscope.core.stats.sweep import clip_sweep_curve
from quantscope.state import PANES, ExplorerState, pane_params


def timed(fn, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4_000_000
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n // 1024, 1024)).astype(np.float32)
    x[0, 0] = 24.8
    lo, hi = float(x.min()), float(x.max())
    t_prep = timed(lambda: prepare(x))
    prepared = prepare(x)

    def sweep(analyze_params, points):
        return [clip_sweep_curve(analyze_params, x_min=lo, x_max=hi, symmetric=s, points=points)
                for s in (True, False)]

    fast = timed(lambda: sweep(prepared.analyze, 200), repeat=2)
    fast_points = sum(s.thresholds.size for s in sweep(prepared.analyze, 200))
    direct_pts = 12
    direct = timed(lambda: sweep(lambda p: analyze(x, p), direct_pts))
    direct_points = sum(s.thresholds.size for s in sweep(lambda p: analyze(x, p), direct_pts))
    per_fast, per_direct = fast / fast_points, direct / direct_points

    state = ExplorerState()
    state.set_tensor(x, prepared=prepared)
    settings = state.settings

    def curves(analyze_params):
        import dataclasses

        return [bitwidth_curve(lambda b, p=pane: pane_params(x, p, dataclasses.replace(
            settings, bits=b)), analyze_params) for pane in PANES]

    t_bits_fast = timed(lambda: curves(prepared.analyze))
    t_bits_direct = timed(lambda: curves(lambda p: analyze(x, p)))
    results = state.compute()
    t_caps = timed(lambda: pane_captions(results, lo, hi), repeat=5)

    print(f"tensor: {n:,} float32 elements, one outlier at 24.8; prepare {t_prep * 1e3:.0f} ms")
    print(f"trade-off sweep, {fast_points} exact points (2 schemes): prepared "
          f"{fast * 1e3:.0f} ms = {per_fast * 1e6:.0f} us/point; direct "
          f"{per_direct * 1e3:.1f} ms/point -> prepared is {per_direct / per_fast:.0f}x faster "
          f"per point (a direct 200-point sweep would take {per_direct * fast_points:.1f} s)")
    print(f"bit-width curves (4 schemes x 7 widths): prepared {t_bits_fast * 1e3:.0f} ms, "
          f"direct {t_bits_direct * 1e3:.0f} ms -> {t_bits_direct / t_bits_fast:.1f}x")
    print(f"captions for 4 panes: {t_caps * 1e6:.0f} us "
          f"({t_caps / (per_fast):.2f}x one prepared sweep point)")


if __name__ == "__main__":
    main()
