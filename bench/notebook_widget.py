"""How long a change of a ``quantscope.widget`` control takes at 16M elements: how long the
kernel is blocked (the control's callback: the setting checked and the redraw queued), and
how long until new images are on the page (the reports computed on the prepared tensor, the
panes drawn with their axes and encoded as PNGs, on the live state's job thread).

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
#: A drag: this many values set back to back without waiting (the latest wins).
DRAG = 20


def main() -> None:
    x = np.random.default_rng(0).standard_normal((4096, 4096), dtype=np.float32)
    start = time.perf_counter()
    w = qs.widget(x)
    print(f"16M elements (4096 x 4096): widget built and prepared in "
          f"{time.perf_counter() - start:.1f} s")
    w.controls["bits"].value = 7  # a first change: every kernel of the path loaded
    w.wait()
    blocked, redraw = [], []
    for key, value in CHANGES:
        t0 = time.perf_counter()
        w.controls[key].value = value
        blocked.append(1000 * (time.perf_counter() - t0))
        w.wait()
        redraw.append(1000 * w.last_redraw_s)
        print(f"  {key} = {value!r}: kernel blocked {blocked[-1]:.1f} ms, "
              f"new images after {redraw[-1]:.0f} ms")
    print(f"redraw: median {statistics.median(redraw):.0f} ms, max {max(redraw):.0f} ms over "
          f"{len(redraw)} changes; kernel blocked: median {statistics.median(blocked):.1f} ms, "
          f"max {max(blocked):.1f} ms")
    before = w.redraws
    t0 = time.perf_counter()
    for i in range(DRAG):
        w.controls["percentile"].value = 99.0 + i * 0.04
    queued = time.perf_counter() - t0
    w.wait()
    print(f"a drag of {DRAG} values: set in {1000 * queued:.0f} ms, {w.redraws - before} "
          f"redraws, last image {1000 * (time.perf_counter() - t0):.0f} ms after the first "
          f"value; percentile shown {w.numbers()['settings']['percentile']}")
    sizes = {p: len(v) for p, v in w.pngs.items()}
    print(f"images: {sizes} bytes, {sum(sizes.values())} in all")


if __name__ == "__main__":
    main()
