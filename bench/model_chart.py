"""How long does the model view's chart hold the GUI thread while a scan streams in?

A synthetic checkpoint of LAYERS x 8 kinds of matrices (800 tensors by default) arrives in
batches as a scan delivers them. Each step times, on the GUI thread and until the paint has
been processed, (a) the chart's update with one more batch of rows (``set_rows``: series
kept, ``setData``) and (b) a full rebuild of the same rows (every series dropped and made
again, what a theme change does, and what every update cost before the series were kept).
The two are measured as interleaved pairs in one run; the ratio is printed with the
GUI-thread budget (50 ms).

Run: ``QT_QPA_PLATFORM=offscreen python bench/model_chart.py [--layers 100] [--batch 40]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

BUDGET_MS = 50.0
KINDS = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
         "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
         "mlp.down_proj.weight", "input_layernorm.weight")


def rows(layers: int):
    """The checkpoint's rows with figures, in file order (no tensor is read)."""
    import numpy as np

    from quantscope.core.fused import TensorFigures
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--batch", type=int, default=40, help="rows per scan delivery")
    args = parser.parse_args()

    from PySide6.QtWidgets import QApplication

    from quantscope.gui.model_chart import ModelChart
    from quantscope.gui.theme import current_theme

    app = QApplication.instance() or QApplication([])
    chart = ModelChart()
    chart.resize(800, 500)
    chart.show()
    app.processEvents()
    every = rows(args.layers)

    def timed(fn) -> float:
        start = time.perf_counter()
        fn()
        app.processEvents()  # the paint is part of what the user waits for
        return 1000 * (time.perf_counter() - start)

    update, rebuild = [], []
    for end in range(args.batch, len(every) + 1, args.batch):
        shown = every[:end]
        update.append(timed(lambda rows=shown: chart.set_rows(rows)))
        rebuild.append(timed(lambda: chart.apply_theme(current_theme())))
    ratios = [u / r for u, r in zip(update, rebuild, strict=True)]
    print(f"{len(every)} tensors ({args.layers} layers x {len(KINDS)} kinds), "
          f"{len(update)} deliveries of {args.batch} rows")
    for label, ms in (("update (series kept)", update), ("full rebuild", rebuild)):
        print(f"  {label:22s} median {statistics.median(ms):7.1f} ms, max {max(ms):7.1f} ms "
              f"(max / {BUDGET_MS:.0f} ms budget = {max(ms) / BUDGET_MS:.2f})")
    print(f"  update / rebuild, interleaved pairs: median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}..{max(ratios):.3f})")


if __name__ == "__main__":
    main()
