"""Before/after, interleaved in one run: the window's changes at 16M elements with the GUI
thread's two savings on ("after") and off ("before"), alternating change by change, so both
see the same machine load.

The savings: the clip and window bands filled without antialiasing
(:class:`quantscope.gui.pane.FlatRegion`), and each per-channel report's clipped values
gathered in the compute job (:func:`quantscope.state.live.with_clipped`) instead of on the GUI
thread when the pane is drawn. "Before" puts pyqtgraph's own band painting and a compute job
without the gather back.

Per mode: the change's latency to all four panes painted (p50/p95), the longest GUI-thread
block (:class:`gui_latency.Heartbeat`), and the GUI thread's own CPU and run-queue wait per
change (Linux ``schedstat``: the time it was ready to run but had no core; what the rest of
the machine costs it).

Run: ``QT_QPA_PLATFORM=offscreen python bench/gui_latency_ab.py [--size 16] [--repeat 2]
[--load]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import threading
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np

from gui_latency import CHANGES, Heartbeat, drain, wait_until


def _schedstat() -> tuple[float, float]:
    """(CPU ms, run-queue wait ms) of the calling thread so far (zeros without /proc)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            cpu, wait = f.read().split()[:2]
        return int(cpu) / 1e6, int(wait) / 1e6
    except OSError:
        return 0.0, 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=16, help="M elements (square tensor)")
    parser.add_argument("--repeat", type=int, default=2, help="passes over the changes")
    parser.add_argument("--load", action="store_true", help="one competing busy process")
    args = parser.parse_args()
    from quantscope.state.warm_up import warm_up_engine

    warm_up_engine()
    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication

    import quantscope.state.live as live_module
    from quantscope.gui import create_window
    from quantscope.gui.pane import FlatRegion
    from quantscope.state import ExplorerState, Source

    flat_paint, gather = FlatRegion.paint, live_module.with_clipped

    def mode(after: bool) -> None:
        FlatRegion.paint = flat_paint if after else pg.LinearRegionItem.paint
        live_module.with_clipped = gather if after else (lambda result, prepared: result)

    app = QApplication.instance() or QApplication([])
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.load else None
    try:
        cols = 1 << (10 + (args.size.bit_length() - 1) // 2)
        rows = args.size * (1 << 20) // cols
        window = create_window(ExplorerState(cache_reports=False), install_views=False)
        window.resize(1600, 1000)
        window.show()
        gc.freeze()
        drain(app)
        window.load(Source.generator("outliers", (rows, cols), 0, count=16, magnitude=25.0))
        wait_until(app, window.all_shown, 600)
        drain(app)
        results: dict[str, dict[str, list[float]]] = {
            m: {"ms": [], "block": [], "cpu": [], "runq": []} for m in ("before", "after")}
        beat = Heartbeat()
        step = 0
        for _ in range(args.repeat):
            for _name, changes in CHANGES:
                name = ("before", "after")[step % 2]
                step += 1
                mode(name == "after")
                cpu0, q0 = _schedstat()
                beat.start()
                t0 = time.perf_counter()
                window.state.update_settings(**changes)
                wait_until(app, window.all_shown)
                drain(app)
                r = results[name]
                r["ms"].append((time.perf_counter() - t0) * 1e3)
                r["block"].append(beat.stop())
                cpu1, q1 = _schedstat()
                r["cpu"].append(cpu1 - cpu0)
                r["runq"].append(q1 - q0)
        window.shutdown()
        window.close()
        print(f"{rows}x{cols} ({args.size}M), {step} changes alternating"
              f"{', one competing busy process' if busy else ''}; load average "
              f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        for name, r in results.items():
            ms, block = np.asarray(r["ms"]), np.asarray(r["block"])
            print(f"  {name:6s}: change p50 {np.percentile(ms, 50):6.1f} ms  p95 "
                  f"{np.percentile(ms, 95):6.1f} ms | GUI block p50 "
                  f"{np.percentile(block, 50):5.1f} ms  max {block.max():5.1f} ms | GUI "
                  f"thread per change: CPU {np.median(r['cpu']):5.1f} ms, waiting for a core "
                  f"{np.median(r['runq']):5.1f} ms (medians)")
    finally:
        mode(True)
        if busy is not None:
            busy.kill()
            busy.wait()


if __name__ == "__main__":
    main()
