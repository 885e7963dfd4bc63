"""How long does the model view's chart hold the GUI thread while a scan streams in?

A synthetic checkpoint of LAYERS x 8 kinds of tensors (800 by default; the layer norms are
listed but not charted) arrives in batches as a scan delivers them. The chart is sized as it
is in the model view of a window of each ``--sizes`` (the real window is built once per size
to measure it), themed as the window themes it (antialiased). Each delivery times, on the GUI
thread:

* the update: ``set_rows`` with one more batch of rows, then the paint it causes (the chart's
  viewport must have received a paint event, checked), wall and the thread's CPU time;
* the full rebuild of the same rows (every plot item made again: what a theme change does);
* with ``--baseline REV``, the chart of commit REV (its ``gui/model_chart.py`` read with
  ``git show``, never copied into the tree) given the same delivery, interleaved with the
  current one, so their ratio is measured in the same run under the same load.

The GUI-thread budget is 50 ms. The load average is printed before and after each size.

Run: ``QT_QPA_PLATFORM=offscreen python bench/model_chart.py [--layers 100] [--batch 40]
[--sizes 1280x720,1920x1080] [--baseline 7d8b71c] [--presentation] [--dark]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

BUDGET_MS = 50.0
KINDS = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
         "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
         "mlp.down_proj.weight", "input_layernorm.weight")
ROOT = Path(__file__).resolve().parent.parent


def rows(layers: int):
    """The checkpoint's rows with figures, in file order (no tensor is read)."""
    import numpy as np

    from quantscope.core.stats.fused import TensorFigures
    from quantscope.io.tensor_info import TensorInfo
    from quantscope.state.model_scan import OK, ModelRow

    rng = np.random.default_rng(0)
    out = []
    for layer in range(layers):
        for kind in KINDS:
            name = f"model.layers.{layer}.{kind}"
            shape = (4096,) if "norm" in kind else (4096, 4096)
            info = TensorInfo(name, shape, "bfloat16", "BF16", 2 * int(np.prod(shape)),
                              "safetensors")
            tensor_db = float(rng.uniform(8, 30))
            figures = TensorFigures(n=info.size, n_nonfinite=0, per_tensor_db=tensor_db,
                                    per_channel_db=tensor_db + float(rng.uniform(5, 20)),
                                    clipped_fraction=0.0, max_abs=float(rng.uniform(1, 9)),
                                    outlier_channels=0, channels=4096)
            out.append(ModelRow(len(out), name, "model.safetensors", info, layer, kind,
                                status=OK, figures=figures))
    return out


def pending(done):
    """The same rows as listed, before the scan: no figures yet."""
    import dataclasses

    from quantscope.state.model_scan import PENDING

    return [dataclasses.replace(r, status=PENDING, figures=None) for r in done]


def baseline_class(rev: str):
    """``ModelChart`` as it is in commit ``rev`` (loaded from ``git show``)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/quantscope/gui/"
                             "model_chart.py"], check=True, capture_output=True,
                            text=True).stdout
    spec = importlib.util.spec_from_loader("quantscope.gui._bench_baseline_chart", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{rev}:model_chart.py", "exec"), module.__dict__)
    return module.ModelChart


def chart_size(app, width: int, height: int, listed, dark: bool,
               presentation: bool) -> tuple[int, int]:
    """The chart's size in the model view of a ``width`` x ``height`` window."""
    from quantscope.gui import create_window
    from quantscope.gui.theme import apply_theme

    win = create_window()
    try:
        win.resize(width, height)
        apply_theme(win, dark=dark, presentation=presentation, height=height)
        win.show()
        view = win._ensure_model_view()
        win.show_model_view()
        app.processEvents()
        view.path = Path("synthetic")
        view._on_listed(view.generation, (listed, []))
        app.processEvents()
        return view.chart.width(), view.chart.height()
    finally:
        win.shutdown()
        win.close()
        app.processEvents()


class PaintCounter:
    """Counts paint events of a widget's viewport (the timed paint must have happened)."""

    def __init__(self, viewport) -> None:
        from PySide6.QtCore import QEvent, QObject

        counter = self

        class Filter(QObject):
            def eventFilter(self, obj, event) -> bool:
                if event.type() == QEvent.Type.Paint:
                    counter.n += 1
                return False

        self.n = 0
        self.filter = Filter()
        viewport.installEventFilter(self.filter)


def settle(app, *counters: PaintCounter) -> None:
    """Process events until a round paints nothing more: a scene's repaint can take two
    rounds (its dirty items are gathered in one, the viewport painted in the next)."""
    app.processEvents()
    for _ in range(10):
        before = [c.n for c in counters]
        app.processEvents()
        if [c.n for c in counters] == before:
            return


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--batch", type=int, default=40, help="rows per scan delivery")
    parser.add_argument("--sizes", default="1280x720,1920x1080", help="window sizes")
    parser.add_argument("--baseline", metavar="REV", help="also time the chart of commit REV")
    parser.add_argument("--presentation", action="store_true")
    parser.add_argument("--dark", action="store_true")
    args = parser.parse_args()

    from PySide6.QtWidgets import QApplication

    from quantscope.gui import configure_pyqtgraph
    from quantscope.gui.model_chart import ModelChart
    from quantscope.gui.theme import apply_theme, current_theme

    configure_pyqtgraph()
    app = QApplication.instance() or QApplication([])
    every = rows(args.layers)
    listed = pending(every)
    classes = {"current": ModelChart}
    if args.baseline:
        classes[f"baseline {args.baseline}"] = baseline_class(args.baseline)
    print(f"{len(every)} tensors ({args.layers} layers x {len(KINDS)} kinds, "
          f"{sum(1 for k in KINDS if 'norm' not in k)} charted), deliveries of {args.batch} "
          f"rows; presentation {args.presentation}, dark {args.dark}")
    for size in args.sizes.split(","):
        w, h = (int(v) for v in size.split("x"))
        cw, ch = chart_size(app, w, h, listed, args.dark, args.presentation)
        charts, listing = {}, {}
        for label, cls in classes.items():
            chart = cls()
            chart.resize(cw, ch)
            chart.show()
            apply_theme(chart, dark=args.dark, presentation=args.presentation, height=h)
            settle(app)
            counter = PaintCounter(chart.widget.viewport())
            t0 = time.perf_counter()
            chart.set_rows(listed)  # the listing: series, colours and legend for every kind
            settle(app, counter)
            listing[label] = 1000 * (time.perf_counter() - t0)
            charts[label] = (chart, counter)
        settle(app, *(counter for _, counter in charts.values()))
        print(f"window {w}x{h}: chart {cw}x{ch} px; {load()}")
        times: dict[str, dict[str, list[float]]] = {
            label: {"set_rows": [], "paint": [], "total": [], "cpu": []} for label in charts}
        rebuild: list[float] = []
        shown = list(listed)
        for end in range(args.batch, len(every) + 1, args.batch):
            shown[end - args.batch:end] = every[end - args.batch:end]
            order = list(charts) if end // args.batch % 2 else list(charts)[::-1]
            for label in order:  # alternating which goes first
                chart, paints = charts[label]
                before = {other: counter.n for other, (_, counter) in charts.items()}
                cpu0, t0 = time.thread_time(), time.perf_counter()
                chart.set_rows(list(shown))
                t1 = time.perf_counter()
                # the paint is part of what the user waits for
                settle(app, *(counter for _, counter in charts.values()))
                t2, cpu1 = time.perf_counter(), time.thread_time()
                if paints.n == before[label]:
                    sys.exit(f"{label}: the update caused no paint; the timing would be a lie")
                if any(c.n != before[o] for o, (_, c) in charts.items() if o != label):
                    sys.exit(f"{label}: another chart painted in its time")
                part = times[label]
                part["set_rows"].append(1000 * (t1 - t0))
                part["paint"].append(1000 * (t2 - t1))
                part["total"].append(1000 * (t2 - t0))
                part["cpu"].append(1000 * (cpu1 - cpu0))
            chart = charts["current"][0]
            t0 = time.perf_counter()
            chart.apply_theme(current_theme())
            settle(app, *(counter for _, counter in charts.values()))
            rebuild.append(1000 * (time.perf_counter() - t0))
        n = len(rebuild)
        for label, part in times.items():
            total, cpu = part["total"], part["cpu"]
            print(f"  {label:18s} update median {statistics.median(total):6.1f} ms, max "
                  f"{max(total):6.1f} (max / {BUDGET_MS:.0f} ms budget "
                  f"{max(total) / BUDGET_MS:.2f}), first {total[0]:5.1f}; set_rows "
                  f"{statistics.median(part['set_rows']):5.1f}, paint "
                  f"{statistics.median(part['paint']):5.1f} (medians of {n})")
            print(f"  {'':18s} the listing (no figures yet) {listing[label]:5.1f} ms")
            print(f"  {'':18s} GUI thread CPU median {statistics.median(cpu):6.1f} ms, max "
                  f"{max(cpu):6.1f}, max after the first {max(cpu[1:]):6.1f}")
        print(f"  {'full rebuild':18s}        median {statistics.median(rebuild):6.1f} ms, max "
              f"{max(rebuild):6.1f}")
        cur = times["current"]["total"]
        for label in list(times)[1:]:
            ratios = [c / b for c, b in zip(cur, times[label]["total"], strict=True)]
            print(f"  current / {label}, interleaved: median {statistics.median(ratios):.3f} "
                  f"(range {min(ratios):.3f}..{max(ratios):.3f})")
        ratios = [c / r for c, r in zip(cur, rebuild, strict=True)]
        print(f"  update / full rebuild, interleaved: median {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}..{max(ratios):.3f}); {load()}")
        for chart, _ in charts.values():
            chart.close()
            chart.deleteLater()
        app.processEvents()


if __name__ == "__main__":
    main()
