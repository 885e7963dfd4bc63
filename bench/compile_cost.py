"""What does the compile-ahead compile, and what does each piece cost? On a cold Numba cache
(a new temporary ``NUMBA_CACHE_DIR`` unless one is given), run the compile-ahead's steps
(:func:`quantscope.state.compile_ahead.all_steps`) one after the other in this process and
print each step's processor and wall seconds, then each compiled function's: how many
specialisations it compiled (its argument types, each a loop of its own) and the seconds
spent compiling it, inclusive of the functions it called that compiled inside it and
exclusive of them (Numba's ``numba:compile`` events; a function inlined with
``inline='always'`` compiles inside each caller and shows as part of the callers' time).

CI runs the same steps in two processes that share them (``.ci/run``): their processor
seconds add up to about this process's total.

Run: ``python bench/compile_cost.py [--top 40] [--signatures] [--cache DIR]``; compare two
trees on the same load by running each in turn (or ``--src PATH`` to import another
checkout's ``src``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=40, help="functions listed (by exclusive s)")
    parser.add_argument("--signatures", action="store_true",
                        help="list each function's compiled signatures")
    parser.add_argument("--cache", help="NUMBA_CACHE_DIR (default: a new temporary folder)")
    parser.add_argument("--src", help="import quantscope from this src folder")
    parser.add_argument("--only", nargs="*", help="run only the steps with these names")
    parser.add_argument("--passes", action="store_true",
                        help="list the processor seconds of each of Numba's compiler passes "
                        "(exclusive of the passes inside it) and of the work inside LLVM")
    args = parser.parse_args()
    os.environ["NUMBA_CACHE_DIR"] = args.cache or tempfile.mkdtemp(prefix="qs-cold-")
    if args.src:
        sys.path.insert(0, os.path.abspath(args.src))

    from numba.core import event

    inclusive: dict[str, float] = defaultdict(float)
    exclusive: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    signatures: dict[str, list[str]] = defaultdict(list)
    local = threading.local()

    def name_of(ev: event.Event) -> str:
        fn = ev.data["dispatcher"].py_func
        return f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__qualname__}"

    class Listener(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            stack = local.__dict__.setdefault("stack", [])
            stack.append([name_of(ev), time.process_time(), 0.0])

        def on_end(self, ev: event.Event) -> None:
            name, start, inner = local.stack.pop()
            took = time.process_time() - start
            inclusive[name] += took
            exclusive[name] += took - inner
            if local.stack:
                local.stack[-1][2] += took
            if ev.data.get("args") is not None:
                count[name] += 1
                signatures[name].append(", ".join(str(a) for a in ev.data["args"]))

    event.register("numba:compile", Listener())
    passes: dict[str, float] = defaultdict(float)
    in_llvm = [0.0]

    class PassListener(event.Listener):
        """Each pass's own seconds: a pass that compiles another function (an inlined callee,
        a call's dispatcher) holds the other's passes inside its own."""

        def on_start(self, ev: event.Event) -> None:
            stack = local.__dict__.setdefault("passes", [])
            stack.append([ev.data["name"].split(" [")[0], time.process_time(), 0.0])

        def on_end(self, ev: event.Event) -> None:
            name, start, inner = local.passes.pop()
            took = time.process_time() - start
            passes[name] += took - inner
            if local.passes:
                local.passes[-1][2] += took

    class LlvmListener(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            local.llvm = time.process_time()

        def on_end(self, ev: event.Event) -> None:
            in_llvm[0] += time.process_time() - local.llvm

    if args.passes:
        event.register("numba:run_pass", PassListener())
        event.register("numba:llvm_lock", LlvmListener())

    import quantscope
    from quantscope.state import compile_ahead

    print(f"quantscope from {os.path.dirname(quantscope.__file__)}; cache "
          f"{os.environ['NUMBA_CACHE_DIR']}; load {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores", flush=True)
    steps = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for name, step in compile_ahead.all_steps():
        if args.only and name not in args.only:
            continue
        c, w = time.process_time(), time.perf_counter()
        step()
        steps.append((name, time.process_time() - c, time.perf_counter() - w))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(f"\n{'step':<40} {'CPU s':>7} {'wall s':>7}")
    for name, c, w in sorted(steps, key=lambda s: -s[1]):
        print(f"{name:<40} {c:7.1f} {w:7.1f}")
    print(f"{'all ' + str(len(steps)) + ' steps':<40} {cpu:7.1f} {wall:7.1f}")
    compiled = sum(count.values())
    print(f"\n{compiled} specialisations of {len(count)} functions compiled, "
          f"{sum(exclusive.values()):.1f} s CPU inside Numba's compile events")
    if args.passes:
        print(f"\n{'compiler pass (exclusive)':<52} {'CPU s':>7}")
        for name in sorted(passes, key=lambda n: -passes[n])[:args.top]:
            print(f"{name:<52} {passes[name]:7.1f}")
        print(f"{'holding the LLVM lock (inside the passes above)':<52} {in_llvm[0]:7.1f}")
    print(f"\n{'function':<52} {'sigs':>4} {'excl s':>7} {'incl s':>7}")
    for name in sorted(exclusive, key=lambda n: -exclusive[n])[:args.top]:
        print(f"{name:<52} {count[name]:4d} {exclusive[name]:7.1f} {inclusive[name]:7.1f}")
        if args.signatures:
            for sig in signatures[name]:
                print(f"    ({sig})")


if __name__ == "__main__":
    main()
