"""Trace one change of bits through the house: who calls whom, in order, and how often a call
crosses layers (gui / state / core / the rest of quantscope) on the GUI thread.

The window is built as ``quantscope`` builds it (views installed) on a 256x1024 outlier tensor;
the bits spin box goes from 8 to 4 (what a user does) and the GUI thread is profiled until
every pane shows the new numbers (``window.all_shown()``), then until the views are ready too.
Where the window has a live state (``window.live``), its own hand-offs are printed as well:
state → scheduler → engine (a job thread) → inbox → owner's thread → state → views.

Run from a checkout: ``QT_QPA_PLATFORM=offscreen python bench/trace_bits_change.py``. The same
script runs on an older checkout (``PYTHONPATH=<old>/src``) for the before/after figures.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from layer_trace import LayerTrace


def _until(app, predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the window did not settle")
        app.processEvents()
        time.sleep(0.001)


def main() -> None:
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    from quantscope.gui import create_window
    from quantscope.state import ExplorerState, Source

    win = create_window(ExplorerState())
    win.resize(1600, 1000)
    win.show()
    win.load(Source.generator("outliers", (256, 1024), 0))
    _until(app, lambda: win.all_shown() and win.views_ready())
    end = time.monotonic() + 1.0  # the views' follow-up work, then quiet
    _until(app, lambda: time.monotonic() > end)
    steps: list[tuple[str, str]] = []
    live = getattr(win, "live", None)
    if live is not None:
        live.trace_to(lambda step: steps.append((threading.current_thread().name, step)))
        live.results_ready.connect(lambda: steps.append(
            (threading.current_thread().name, "state.results_ready → "
             + ", ".join(_receivers(live.results_ready)))))
    with LayerTrace() as panes:
        win.controls.bits.setValue(4)
        _until(app, win.all_shown)
    with LayerTrace() as views:
        _until(app, win.views_ready)
    if live is not None:
        live.trace_to(None)
    print(f"source: {Path(sys.modules['quantscope'].__file__).parent}")
    print(f"one bits change (8 → 4), GUI thread, until every pane shows it: "
          f"{panes.count()} calls cross layers")
    for pair, n in sorted(panes.by_direction().items()):
        print(f"    {pair}: {n}")
    print(f"then until the views are ready: {views.count()} more")
    plumbing = panes.plumbing()
    print(f"of them, the window moving the computation along itself (request, submit, "
          f"ticket check, accept): {len(plumbing)}")
    for a, f, c, g in plumbing:
        print(f"    {a}:{f} → {c}:{g}")
    print("in order (caller → callee):")
    for line in panes.lines():
        print(f"    {line}")
    if steps:
        print("the live state's hand-offs (thread: step):")
        for thread, step in steps:
            print(f"    {thread}: {step}")
    win.shutdown()
    win.close()


def _receivers(signal) -> list[str]:
    """Who a psygnal signal calls, by name, in order."""
    return [slot.slot_repr() for slot in getattr(signal, "_slots", [])]


if __name__ == "__main__":
    main()
