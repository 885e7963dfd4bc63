"""How live is the window? Offscreen, on 1M and 16M elements: the time from a control change to
all four panes showing the new numbers (p50/p95), and the longest time the GUI thread was
blocked (a 5 ms QTimer heartbeat: the longest gap between beats, minus the 5 ms period).

"Showing" means painted: a change ends when the window holds every report of the new settings
and has then processed everything pending (:func:`drain`: the repaints the reports asked
for), not merely when the window holds the reports -- the paint is part of what the user waits
for. (Under Qt's GLib event loop, the
default on Linux, a timer that has fired runs again only once the loop is idle, so the
heartbeat measures the longest stretch of back-to-back GUI work, not just the longest event.)

Targets: p95 <= 100 ms at 16M elements; GUI thread blocked <= 50 ms.

Where the time goes: the CPU each group of the process's threads used per change (Linux:
``/proc/self/task/*/schedstat``) -- the GUI thread, the engine's pool, the scheduler's job and
helper threads, Qt's own -- against the change's wall time; a change whose CPU about equals
its wall time is waiting for nothing but a core. The nice value each group runs at is printed
too (the work the panes wait for must not be niced: beside a busy process a nice-5 thread gets
a quarter of a shared core). "The engine alone" runs the same changes
through :func:`compute_reports` on a state of its own once the window is shut down (on the
window's state, each change would also start the window's own compute job beside it), from the
main thread with a scheduler's helpers as the window's reports thread has them.

Run: ``QT_QPA_PLATFORM=offscreen python bench/gui_latency.py [--sizes 1,16] [--repeat 3]
[--views] [--load]``; ``--load`` runs one competing busy process (a spinning interpreter: a core's
worth of other work) for the whole measurement (the targets hold on a loaded machine). Each
figure is printed with its ratio to the target (< 1.0 meets it).
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np

TARGET_P95_MS = 100.0
TARGET_BLOCK_MS = 50.0
HEARTBEAT_MS = 5

#: The control changes measured, cycled in this order: what a speaker does with the controls.
CHANGES = [
    ("bits", {"bits": 6}), ("bits", {"bits": 4}), ("bits", {"bits": 8}),
    ("rounding", {"rounding": "half_away"}), ("rounding", {"rounding": "half_even"}),
    ("code range", {"narrow_range": False}), ("code range", {"narrow_range": None}),
    ("manual clip", {"method": "manual", "manual_clip": (-3.0, 3.0)}),
    ("manual clip", {"manual_clip": (-2.0, 2.5)}),
    ("manual clip", {"manual_clip": (-4.0, 6.0)}),
    ("min/max", {"method": "minmax"}),
    ("percentile", {"method": "percentile", "percentile": 99.9}),
    ("percentile", {"percentile": 99.99}),
    ("runtime", {"method": "minmax", "runtime": "onnxruntime"}),
    ("runtime", {"runtime": None}),
]


class Heartbeat:
    """A 5 ms timer on the GUI thread; the longest gap between beats is the longest block."""

    def __init__(self) -> None:
        from PySide6.QtCore import QTimer

        self.timer = QTimer()
        self.timer.setInterval(HEARTBEAT_MS)
        self.timer.timeout.connect(self.beat)
        self.last = 0.0
        self.longest = 0.0

    def start(self) -> None:
        self.last = time.perf_counter()
        self.longest = 0.0
        self.timer.start()

    def beat(self) -> None:
        now = time.perf_counter()
        self.longest = max(self.longest, now - self.last)
        self.last = now

    def stop(self) -> float:
        """Stop; return the longest block in ms (the gap beyond the timer's own period)."""
        self.timer.stop()
        self.beat()
        return max(0.0, self.longest * 1e3 - HEARTBEAT_MS)


def _threads(field: str):
    """``(group, value)`` for each of this process's threads (Linux; none elsewhere): ``field``
    ``"cpu"`` is the CPU time used so far in ms, ``"nice"`` the nice value. Threads are grouped
    by name without their number: ``MainThread`` (the GUI), ``quantscope-engine`` (the engine's
    pool; ``-niceN`` for a niced caller's), ``quantscope-job`` / ``quantscope-job-helper`` (the
    scheduler's), anything else under its own name (Qt's threads)."""
    import re
    import threading

    task = "/proc/self/task"
    if not os.path.isdir(task):
        return
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tid in os.listdir(task):
        try:
            if field == "cpu":
                with open(f"{task}/{tid}/schedstat") as f:
                    value = int(f.read().split()[0]) / 1e6
            else:
                value = os.getpriority(os.PRIO_PROCESS, int(tid))
            name = names.get(int(tid))
            if name is None:
                with open(f"{task}/{tid}/comm") as f:
                    name = f.read().strip()
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        yield re.sub(r"[-_ ]?\d+$", "", name), value


def thread_cpu_ms() -> dict[str, float]:
    """CPU time used so far by each group of this process's threads, in ms (:func:`_threads`;
    empty where there is no ``/proc``)."""
    out: dict[str, float] = {}
    for group, ms in _threads("cpu"):
        out[group] = out.get(group, 0.0) + ms
    return out


def thread_nice() -> dict[str, list[int]]:
    """The nice values each group of this process's threads runs at (:func:`_threads`)."""
    out: dict[str, list[int]] = {}
    for group, nice in _threads("nice"):
        out.setdefault(group, [])
        if nice not in out[group]:
            out[group].append(nice)
    return out


def drain(app) -> None:
    """Process everything pending -- the paints the new reports asked for, and whatever they
    post in turn -- until the event loop has nothing left to do."""
    from PySide6.QtCore import QAbstractEventDispatcher, QEventLoop

    dispatcher = QAbstractEventDispatcher.instance()
    while dispatcher.processEvents(QEventLoop.ProcessEventsFlag.AllEvents):
        pass


def wait_until(app, predicate, timeout_s: float = 120.0) -> None:
    """Run the event loop until ``predicate()``, sleeping between events as ``app.exec()``
    does. (``processEvents(flags, maxtime)`` returns at once when no event is pending: a loop
    of it spins, and a spinning GUI thread takes a core from the engine, which a real window
    never does.) The heartbeat timer wakes the loop at least every 5 ms to check."""
    from PySide6.QtCore import QEventLoop

    deadline = time.perf_counter() + timeout_s
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("the panes did not update in time")
        app.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)


def measure(app, n_million: int, repeat: int, views: bool) -> dict:
    from quantscope.gui import create_window
    from quantscope.state import ExplorerState, Source

    # square [out, in] tensors (1024^2, 4096^2): the per-channel case the engine's targets use
    cols = 1 << (10 + (n_million.bit_length() - 1) // 2)
    rows = n_million * (1 << 20) // cols
    # no report cache: every change below must cost a real engine pass, even on the repeats
    window = create_window(ExplorerState(cache_reports=False), install_views=views)
    window.resize(1600, 1000)
    window.show()
    gc.freeze()  # as ``quantscope`` does after building its window
    drain(app)  # the window's first paint is the window's, not the load's
    source = Source.generator("outliers", (rows, cols), 0, count=16, magnitude=25.0)
    beat = Heartbeat()
    t0 = time.perf_counter()
    beat.start()
    window.load(source)
    wait_until(app, window.all_shown, 600)
    drain(app)
    load_block = beat.stop()
    load_s = time.perf_counter() - t0
    latencies: dict[str, list[float]] = {}
    blocks: list[float] = []  # the longest block of each change, the target's figure their max
    cpu: list[dict[str, float]] = []  # CPU ms per thread group, one dict per change
    for _ in range(repeat):
        for name, changes in CHANGES:
            before = thread_cpu_ms()
            beat.start()
            start = time.perf_counter()
            window.state.update_settings(**changes)
            wait_until(app, window.all_shown)
            drain(app)
            latencies.setdefault(name, []).append((time.perf_counter() - start) * 1e3)
            blocks.append(beat.stop())
            after = thread_cpu_ms()
            cpu.append({k: v - before.get(k, 0.0) for k, v in after.items()})
    nice = thread_nice()  # while the window's threads all live
    # the same changes through the engine alone (no window; the window's own jobs stopped
    # first, or each change would start one beside): what the panes wait for, with the parts
    # of each on a scheduler's helper threads as in the window (not threads made per call)
    from quantscope.state import compute_reports
    from quantscope.state.scheduler import Scheduler

    ws = window.state
    tensor, prepared, ov, settings = ws.tensor, ws.prepared, ws.overview, ws.settings
    window.shutdown()
    window.close()
    window.deleteLater()
    app.processEvents()
    st = ExplorerState(cache_reports=False)
    st.set_tensor(tensor, ws.source, prepared=prepared, overview=ov, checked=True,
                  settings=settings)
    engine: list[float] = []
    helpers = Scheduler()
    try:
        for _name, changes in CHANGES:
            st.update_settings(**changes)
            start = time.perf_counter()
            compute_reports(st.request(), None, helpers.beside)
            engine.append((time.perf_counter() - start) * 1e3)
    finally:
        helpers.shutdown()
    return {"n": rows * cols, "load_s": load_s, "load_block": load_block,
            "latencies": latencies, "blocks": blocks, "engine": engine, "cpu": cpu,
            "nice": nice}


def report(res: dict) -> None:
    all_ms = np.concatenate([np.asarray(v) for v in res["latencies"].values()])
    p50, p95 = np.percentile(all_ms, [50, 95])
    print(f"\n{res['n']:,} elements ({res['n'] / 2**20:.0f}M): load + prepare + first "
          f"numbers {res['load_s']:.2f} s (GUI thread blocked at most "
          f"{res['load_block']:.0f} ms meanwhile)")
    print(f"  control change -> all four panes updated, {all_ms.size} changes:")
    print(f"    p50 {p50:7.1f} ms   p95 {p95:7.1f} ms   = {p95 / TARGET_P95_MS:.2f} x the "
          f"{TARGET_P95_MS:.0f} ms target")
    e50, e95 = np.percentile(res["engine"], [50, 95])
    print(f"    the engine alone (four reports, same changes): p50 {e50:7.1f} ms   p95 "
          f"{e95:7.1f} ms = {e95 / p95:.2f} of the window's p95")
    for name, ms in res["latencies"].items():
        a = np.asarray(ms)
        print(f"      {name:12s} p50 {np.percentile(a, 50):7.1f} ms   max {a.max():7.1f} ms")
    if res["cpu"] and any(res["cpu"]):
        groups = sorted({k for c in res["cpu"] for k in c},
                        key=lambda k: -np.median([c.get(k, 0.0) for c in res["cpu"]]))
        med = {k: float(np.median([c.get(k, 0.0) for c in res["cpu"]])) for k in groups}
        total = float(np.median([sum(c.values()) for c in res["cpu"]]))
        print(f"    CPU per change (medians): {total:.1f} ms in all = {total / p50:.2f} of the "
              "p50 wall time; " + ", ".join(f"{k} {v:.1f}" for k, v in med.items() if v >= 0.1))
    if res["nice"]:
        print("    nice values by thread group: " + ", ".join(
            f"{k} {'/'.join(map(str, sorted(v)))}" for k, v in sorted(res["nice"].items())))
    blocks = np.asarray(res["blocks"])
    b50, b95 = np.percentile(blocks, [50, 95])
    print(f"  longest GUI-thread block during the changes: {blocks.max():.1f} ms = "
          f"{blocks.max() / TARGET_BLOCK_MS:.2f} x the {TARGET_BLOCK_MS:.0f} ms target "
          f"(per change: p50 {b50:.1f} ms, p95 {b95:.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,16", help="tensor sizes in M elements (1,16)")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the changes")
    parser.add_argument("--views", action="store_true",
                        help="also install the explanatory views (they recompute too)")
    parser.add_argument("--load", action="store_true",
                        help="with one competing busy process for the whole run")
    args = parser.parse_args()
    # as ``quantscope`` starts: the engine's compiled loops loaded before Qt and the window, so
    # the first load does not load them on a worker thread holding the GIL (the GUI thread
    # blocked for that long, longer still when that thread is niced beside a busy process)
    from quantscope.state.warm_up import warm_up_engine

    warm_up_engine()
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    busy = (subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.load
            else None)
    try:
        print("quantscope GUI latency (offscreen; targets: p95 <= 100 ms at 16M, "
              "GUI block <= 50 ms)" + (" with views" if args.views else ", panes only")
              + (", one competing busy process" if busy else "")
              + f"; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        for size in (int(s) for s in args.sizes.split(",")):
            report(measure(app, size, args.repeat, args.views))
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


if __name__ == "__main__":
    main()
