"""How long a change of a ``quantscope.widget`` control takes at 16M elements, from the new
value to new images (the compute on the prepared tensor plus drawing and PNG encoding).

    PYTHONPATH=src python bench/notebook_widget.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import quantscope as qs

CHANGES = [("bits", 4), ("bits", 6), ("method", "percentile"), ("percentile", 99.9),
           ("percentile", 99.5), ("clip", (-2.0, 3.0)), ("clip", (-3.0, 2.5)),
           ("preset", "onnxruntime"), ("preset", None), ("bits", 8), ("method", "minmax")]


def main() -> None:
    x = np.random.default_rng(0).standard_normal((4096, 4096), dtype=np.float32)
    start = time.perf_counter()
    w = qs.widget(x)
    print(f"16M elements (4096 x 4096): widget built and prepared in "
          f"{time.perf_counter() - start:.1f} s")
    w.controls["bits"].value = 7  # a first change: every kernel of the path loaded
    times = []
    for key, value in CHANGES:
        w.controls[key].value = value
        times.append(1000 * w.last_redraw_s)
        print(f"  {key} = {value!r}: {times[-1]:.0f} ms")
    print(f"redraw: median {statistics.median(times):.0f} ms, max {max(times):.0f} ms over "
          f"{len(times)} changes")


if __name__ == "__main__":
    main()
