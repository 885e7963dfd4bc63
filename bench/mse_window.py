"""How long a person waits after choosing MSE on a 4096x4096 weight: the window's four int8
panes (symmetric / asymmetric x per tensor / per channel) from the choice to every pane
showing its MSE numbers, and the same four panes through the state without a window --
optionally against another build of quantscope, interleaved in the same run.

The weight is ``bench/mse_speed.py``'s (normal, std 0.02, four input columns ten times
larger: a Llama-like projection), saved as ``.npy`` and loaded as a weight (channels on
axis 0). The window (offscreen, panes only) loads it, shows its min/max numbers, then each
round switches the range method to min/max and back to MSE and times the MSE choice until the
window's own "all shown" (:meth:`MainWindow.all_shown`, what ``--screenshot`` waits for) and
the paints it asked for are done. "The state alone" runs :func:`compute_reports` on a state of
its own with a scheduler's helper threads, as the window's compute job does.

Printed per build: wall and process CPU seconds per choice (best and median of the rounds;
the machine is shared: CPU time is what two idle cores would divide), the CPU of each group of
threads, and where the time goes in the last round -- each pane's search (its thread, when it
started and ended after the choice, its own CPU: the rest of its span it waited for a core or
for the engine's pool), its report, and any sorted rows prepared during the choice.

Run: ``QT_QPA_PLATFORM=offscreen PYTHONPATH=src python bench/mse_window.py [--rows 4096
--cols 4096 --repeat 3 --old-src /tmp/old/src]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np

from mse_speed import weight  # the integer search's bench weight (bench/ is on the path)


class Trace:
    """Spans of the engine calls a choice makes, by thread: (what, thread, start, end, thread
    CPU seconds), recorded by wrapping the module functions the panes call."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, float, float, float]] = []
        self.lock = threading.Lock()
        self.t0 = 0.0

    def wrap(self, module, name: str, label) -> None:
        fn = getattr(module, name)

        def wrapped(*args, **kwargs):
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                span = (label(*args, **kwargs), threading.current_thread().name, start,
                        time.perf_counter(), time.thread_time() - cpu)
                with self.lock:
                    self.spans.append(span)

        setattr(module, name, wrapped)

    def install(self) -> None:
        from quantscope.core.stats import mse_search, prepared, sweep
        from quantscope.state import compute

        def search(rows, **kw):
            unit = "tensor" if rows.n_rows == 1 else f"{rows.n_rows} rows"
            return f"search {'sym' if kw.get('symmetric') else 'asym'} {unit}"

        self.wrap(mse_search, "mse_search", search)
        if hasattr(sweep, "mse_search"):  # where the MSE range method calls it, if there
            self.wrap(sweep, "mse_search", search)
        self.wrap(compute, "pane_params", lambda x, pane, *a, **k: f"params {pane}")
        self.wrap(compute, "analyze_with",
                  lambda x, p, params: f"report {params.granularity} "
                                       f"{'sym' if params.symmetric else 'asym'}")
        self.wrap(prepared.SortedRows, "_build_sums", lambda self, *a: "prefix sums")

    def start(self) -> None:
        with self.lock:
            self.spans.clear()
        self.t0 = time.perf_counter()

    def rows(self) -> list[list]:
        with self.lock:
            return [[what, thread, a - self.t0, b - self.t0, cpu]
                    for what, thread, a, b, cpu in sorted(self.spans, key=lambda s: s[2])]


def _thread_cpu() -> dict[str, float]:
    from gui_latency import thread_cpu_ms

    return {k: v / 1e3 for k, v in thread_cpu_ms().items()}


def measure(args: argparse.Namespace) -> dict:
    """One process of one build: the window's rounds, then the state's."""
    from gui_latency import drain, wait_until
    from quantscope.state.warm_up import warm_up_engine

    warm_up_engine()
    from PySide6.QtWidgets import QApplication

    from quantscope.gui import create_window
    from quantscope.state import ExplorerState, Source, compute_reports
    from quantscope.state.scheduler import Scheduler

    trace = Trace()
    trace.install()
    app = QApplication.instance() or QApplication([])
    window = create_window(ExplorerState(cache_reports=False), install_views=False)
    window.resize(1600, 1000)
    window.show()
    drain(app)
    window.load(Source("file", str(args.path), role="weight"))
    wait_until(app, window.all_shown, 600)
    drain(app)
    st = window.state

    def choose(method: str) -> None:
        st.update_settings(method=method)
        wait_until(app, window.all_shown, 600)
        drain(app)

    choose("mse")  # the first choice loads the search's compiled loops: not timed
    out: dict = {"window": [], "state": []}
    for _ in range(args.repeat):
        choose("minmax")
        before = _thread_cpu()
        trace.start()
        wall, cpu = time.perf_counter(), time.process_time()
        choose("mse")
        out["window"].append({
            "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
            "threads": {k: v - before.get(k, 0.0) for k, v in _thread_cpu().items()},
            "spans": trace.rows(), "errors": sorted(st.errors)})
    tensor, prepared, ov, settings = st.tensor, st.prepared, st.overview, st.settings
    sqnr = {k: float(r.sqnr_db) for k, r in st.results.items()}
    window.shutdown()
    window.close()
    window.deleteLater()
    app.processEvents()
    alone = ExplorerState(cache_reports=False)
    alone.set_tensor(tensor, st.source, prepared=prepared, overview=ov, checked=True,
                     settings=settings)
    helpers = Scheduler()
    try:
        for _ in range(args.repeat):
            trace.start()
            wall, cpu = time.perf_counter(), time.process_time()
            done = compute_reports(alone.request(), None, helpers.beside)
            out["state"].append({"wall": time.perf_counter() - wall,
                                 "cpu": time.process_time() - cpu, "spans": trace.rows(),
                                 "errors": sorted(done.errors)})
    finally:
        helpers.shutdown()
    out["sqnr"] = sqnr
    return out


def _line(name: str, runs: list[dict]) -> str:
    wall = [r["wall"] for r in runs]
    cpu = [r["cpu"] for r in runs]
    return (f"{name:22s} wall best {min(wall):5.2f} s  median {np.median(wall):5.2f} s   "
            f"CPU best {min(cpu):5.2f} s  median {np.median(cpu):5.2f} s")


def report(name: str, res: list[dict]) -> None:
    window = [r for d in res for r in d["window"]]
    state = [r for d in res for r in d["state"]]
    print(f"\n[{name}] choose MSE -> all four panes shown, {len(window)} choices")
    print("  " + _line("window", window))
    print("  " + _line("state, no window", state))
    groups: dict[str, list[float]] = {}
    for r in window:
        for k, v in r["threads"].items():
            groups.setdefault(k, []).append(v)
    print("  window CPU by thread group (median s): " + ", ".join(
        f"{k} {np.median(v):.2f}" for k, v in sorted(groups.items(), key=lambda kv:
                                                      -np.median(kv[1]))
        if np.median(v) >= 0.005))
    for label, runs in (("window", window), ("state", state)):
        last = runs[-1]
        print(f"  where the time went, last {label} choice (s after the choice: start - end, "
              "own CPU; the rest of a span waited):")
        for what, thread, a, b, cpu in last["spans"]:
            if what.startswith("params"):
                continue  # the search spans inside say it
            print(f"    {what:26s} {thread:28s} {a:6.3f} - {b:6.3f}  CPU {cpu:5.3f}")
        if last["errors"]:
            print(f"    panes with an error instead of numbers: {last['errors']}")
    print("  SQNR dB per pane: " + ", ".join(f"{k} {v:.4f}" for k, v in res[-1]["sqnr"].items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3, help="timed choices per process")
    ap.add_argument("--rounds", type=int, default=1, help="processes per build, interleaved")
    ap.add_argument("--old-src", type=Path, default=None)
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        args.path = args.worker
        print(json.dumps(measure(args)))
        return
    new_src = Path(__file__).resolve().parents[1] / "src"
    builds = {"new": new_src} if args.old_src is None else {"old": args.old_src, "new": new_src}
    runs: dict[str, list[dict]] = {k: [] for k in builds}
    print(f"quantscope MSE choice, {args.rows}x{args.cols} weight, 8 bits, offscreen; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp_down_proj_weight.npy"
        np.save(path, weight(args.rows, args.cols))
        argv = [sys.executable, __file__, "--worker", str(path), "--repeat", str(args.repeat)]
        for _ in range(args.rounds):
            for name, src in builds.items():
                env = dict(os.environ, PYTHONPATH=str(src))
                done = subprocess.run(argv, env=env, capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{name} build failed:\n{done.stderr[-3000:]}")
                runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    for name, res in runs.items():
        report(name, res)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
