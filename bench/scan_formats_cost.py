"""Where ``scan --formats`` spends its time on one large weight, format by format.

For a Llama-like float32 weight (Gaussian rows of log-normal scales), every candidate format of
``scan --formats`` (:func:`quantscope.state.formats.candidates`) is timed in processor
nanoseconds per element for the three things the scan may do with it: choose its parameters
on the whole tensor, sum its squared errors on the whole tensor (the error screen,
:class:`~quantscope.core.stats.format_sweep.ErrorScreen`; for llama.cpp's types, encoding and
screen in one pass, :func:`~quantscope.core.stats.gguf_stats.encode_screened`, as the search
screens them) and compute its exact report (what the winner gets). Then, in interleaved
pairs, the scan's whole format search (:func:`~quantscope.state.formats.best_formats`)
against the plain scan's figures of the same tensor read from a file
(:class:`~quantscope.state.model_scan.ModelScan` without formats), with the ratio per pair:
the figure ``scan --formats`` pays per byte beyond the plain scan.
In the same pairs, the least an exact search could cost with these candidates: the two
winners' exact reports alone (each winner's parameters and report, a llama.cpp type's
blocks measured as they are encoded, as the search makes them; plus ``Σx²``), as if every
other format were known to lose without a pass over the tensor.
Each figure is the least of ``--repeat`` runs (CPU clock of the process, all threads), so a
report read from the prepared tensor (int8, INT4 groups, GPTQ, AWQ: sorted rows, made once on
the first such report, as ``quantscope report`` makes them) shows its cost after that
preparation; the format search's figure includes it where the search makes it.

    python bench/scan_formats_cost.py [--shape 4096x4096] [--repeat 3] [--pairs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import best_of, load
from quantscope.core.formats.catalog import format_kind
from quantscope.core.stats.format_sweep import ErrorScreen, screenable, signal_sum
from quantscope.core.stats.gguf_stats import encode_measured, encode_screened
from quantscope.io.checkpoint import list_checkpoint
from quantscope.state import Settings
from quantscope.state.formats import (
    best_formats,
    candidates,
    format_pane_params,
    format_point,
    point_specs,
    report_point,
)
from quantscope.state.model_scan import ModelScan, model_rows
from quantscope.state.prepared_on_demand import PreparedOnDemand


def weight(shape: tuple[int, int]) -> np.ndarray:
    rng = np.random.default_rng([3, 1])
    x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    x *= rng.lognormal(0, 0.3, size=(shape[0], 1)).astype(np.float32)
    return x


def winners_alone(x: np.ndarray, settings, winners) -> None:
    """The exact points of ``winners`` (format specs) as the search computes a winner's:
    ``Σx²``, then each one's parameters and exact report, nothing else."""
    signal_sum(x)
    reports = PreparedOnDemand(x, settings)
    for spec in winners:
        if format_kind(spec.name) == "gguf":
            measured = encode_measured(x, spec.name)
            report_point(spec, measured.params, measured.report(), x.size)
        else:
            format_point(x, reports, spec, format_pane_params(x, spec, settings))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="4096x4096")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    shape = tuple(int(v) for v in args.shape.split("x"))
    assert len(shape) == 2
    x = weight(shape)
    n = x.size
    settings = Settings(axis=0)
    print(f"{load()}; weight {shape[0]}x{shape[1]} float32, processor ns per element")
    clock = time.process_time

    def cost(fn) -> float:
        return best_of(fn, args.repeat, clock)

    best_formats(x, settings, per_channel=True)  # compiled loops loaded, pages touched
    reports = PreparedOnDemand(x, settings)
    totals = [0.0, 0.0, 0.0]
    for bits in (8, 4):
        for spec in point_specs(x, candidates(bits, True)):
            params = format_pane_params(x, spec, settings)
            gguf = format_kind(spec.name) == "gguf"
            costs = [cost(lambda s=spec: format_pane_params(x, s, settings)),
                     cost(lambda s=spec: encode_screened(x, s.name).error) if gguf
                     else cost(lambda p=params: ErrorScreen(x, p).slice_sum(0, 1))
                     if screenable(params) else float("nan"),
                     cost(lambda s=spec, p=params: format_point(x, reports, s, p))]
            for i, c in enumerate(costs):
                totals[i] += 0.0 if np.isnan(c) else c
            print(f"  {spec:22s} parameters {costs[0] / n * 1e9:6.2f}   error screen "
                  f"{costs[1] / n * 1e9:6.2f}{'*' if gguf else ' '}  exact report "
                  f"{costs[2] / n * 1e9:6.2f}")
    print(f"  {'every format':22s} parameters {totals[0] / n * 1e9:6.2f}   error screen "
          f"{totals[1] / n * 1e9:6.2f}   exact report {totals[2] / n * 1e9:6.2f}")
    print("  * llama.cpp's types: the screen as the search runs it, the encoding included "
          "(each block's squared errors summed as it is encoded: encode_screened)")
    with tempfile.TemporaryDirectory() as folder:
        from safetensors.numpy import save_file

        path = Path(folder) / "weight.safetensors"
        save_file({"model.layers.0.mlp.up_proj.weight": x}, str(path))
        rows = model_rows(list_checkpoint(path))
        ModelScan(rows, Settings()).run()
        best = best_formats(x, settings, per_channel=True)
        winners = (best.best8.spec, best.best4.spec)
        winners_alone(x, settings, winners)
        plain, search, floor, ratios, floor_ratios = [], [], [], [], []
        for _ in range(args.pairs):
            c = clock()
            ModelScan(rows, Settings()).run()
            plain.append(clock() - c)
            c = clock()
            best_formats(x, settings, per_channel=True)
            search.append(clock() - c)
            c = clock()
            winners_alone(x, settings, winners)
            floor.append(clock() - c)
            ratios.append(search[-1] / plain[-1])
            floor_ratios.append(floor[-1] / plain[-1])
    p, s, f = (statistics.median(v) for v in (plain, search, floor))
    print(f"plain scan {p / n * 1e9:.2f} ns/el; the format search {s / n * 1e9:.2f} ns/el: "
          f"{statistics.median(ratios):.1f}x the plain scan (pairs: "
          + ", ".join(f"{r:.1f}x" for r in ratios) + ")")
    print(f"the winners' exact reports alone ({winners[0]}, {winners[1]}) {f / n * 1e9:.2f} "
          f"ns/el: {statistics.median(floor_ratios):.1f}x the plain scan (pairs: "
          + ", ".join(f"{r:.1f}x" for r in floor_ratios) + ")")


if __name__ == "__main__":
    main()
