"""What does the compile-ahead compile, and what does each piece cost? On a cold Numba cache
(a new temporary ``NUMBA_CACHE_DIR`` unless one is given), run the compile-ahead's steps
(:func:`quantscope.state.compile_steps.all_steps`) one after the other in this process and
print each step's processor and wall seconds, then each compiled function's: how many
specialisations it compiled (its argument types, each a loop of its own) and the seconds
spent compiling it, inclusive of the functions it called that compiled inside it and
exclusive of them (Numba's ``numba:compile`` events; a function inlined with
``inline='always'`` compiles inside each caller and shows as part of the callers' time).

CI runs the same steps in two processes that share them (``.ci/run``): ``--processes 2``
does so here, on one empty cache, the second process started ``--stagger`` seconds after the
first (CI starts it once the test tools are installed), and prints each process's steps in
the order it took them, its processor and wall seconds (the interpreter's start and imports
included), how long it waited at the end for the other, and every function that both
processes compiled (neither found it in the cache when it needed it: compiled twice).

Run: ``python bench/compile_cost.py [--top 40] [--signatures] [--cache DIR] [--groups gguf]
[--processes 2 [--stagger 28]]``; compare two trees on the same load by running each in turn
(or ``--src PATH`` to import another checkout's ``src``).
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
from collections import defaultdict


class Compiles:
    """Numba's ``numba:compile`` events of this process: per function its specialisations,
    its processor seconds inclusive and exclusive of the functions compiled inside it, and
    each specialisation's exclusive seconds (``by_signature``)."""

    def __init__(self) -> None:
        self.inclusive: dict[str, float] = defaultdict(float)
        self.exclusive: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)
        self.signatures: dict[str, list[str]] = defaultdict(list)
        self.by_signature: dict[str, float] = defaultdict(float)
        self._local = threading.local()

    def register(self) -> None:
        from numba.core import event

        local, outer = self._local, self

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
                outer.inclusive[name] += took
                outer.exclusive[name] += took - inner
                if local.stack:
                    local.stack[-1][2] += took
                if ev.data.get("args") is not None:
                    outer.count[name] += 1
                    sig = ", ".join(str(a) for a in ev.data["args"])
                    outer.signatures[name].append(sig)
                    outer.by_signature[f"{name}({sig})"] += took - inner

        event.register("numba:compile", Listener())

    def print_top(self, top: int, signatures: bool) -> None:
        print(f"\n{sum(self.count.values())} specialisations of {len(self.count)} functions "
              f"compiled, {sum(self.exclusive.values()):.1f} s CPU inside Numba's compile "
              "events")
        print(f"\n{'function':<52} {'sigs':>4} {'excl s':>7} {'incl s':>7}")
        for name in sorted(self.exclusive, key=lambda n: -self.exclusive[n])[:top]:
            print(f"{name:<52} {self.count[name]:4d} {self.exclusive[name]:7.1f} "
                  f"{self.inclusive[name]:7.1f}")
            if signatures:
                for sig in self.signatures[name]:
                    print(f"    ({sig})")


def _register_passes(local: threading.local) -> tuple[dict[str, float], list[float]]:
    """Each Numba compiler pass's own seconds (a pass that compiles another function, an
    inlined callee or a call's dispatcher, holds the other's passes inside its own) and the
    seconds holding the LLVM lock."""
    from numba.core import event

    passes: dict[str, float] = defaultdict(float)
    in_llvm = [0.0]

    class PassListener(event.Listener):
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

    event.register("numba:run_pass", PassListener())
    event.register("numba:llvm_lock", LlvmListener())
    return passes, in_llvm


def one_process(args: argparse.Namespace) -> None:
    """Every step in this process, each step's and each function's seconds."""
    compiles = Compiles()
    compiles.register()
    if args.passes:
        passes, in_llvm = _register_passes(threading.local())

    import quantscope

    try:
        from quantscope.state.compile_steps import all_steps, step_groups
    except ImportError:  # a tree from before the groups
        from quantscope.state.compile_ahead import all_steps
        step_groups = None

    print(f"quantscope from {os.path.dirname(quantscope.__file__)}; cache "
          f"{os.environ['NUMBA_CACHE_DIR']}; load {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores", flush=True)
    steps = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if args.groups:
        if step_groups is None:
            raise SystemExit("--groups: this tree has no step groups")
        chosen = [s for group, named in step_groups() if group in args.groups for s in named]
    else:
        chosen = all_steps()
    for name, step in chosen:
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
    compiles.print_top(args.top, args.signatures)
    if args.passes:
        print(f"\n{'compiler pass (exclusive)':<52} {'CPU s':>7}")
        for name in sorted(passes, key=lambda n: -passes[n])[:args.top]:
            print(f"{name:<52} {passes[name]:7.1f}")
        print(f"{'holding the LLVM lock (inside the passes above)':<52} {in_llvm[0]:7.1f}")


def worker(claims: str, out: str) -> None:
    """One of ``--processes``: the steps it claims, as ``.ci/run`` runs them, recorded in
    ``out`` (JSON): each step's name, start and end (``time.monotonic``, one clock for every
    process) and processor seconds, and each specialisation it compiled."""
    compiles = Compiles()
    compiles.register()
    from quantscope.state import compile_ahead

    try:
        from quantscope.state.compile_steps import step_groups
        groups = step_groups()
    except ImportError:  # a tree from before the groups: each step claimed on its own
        groups = [(name, [(name, step)]) for name, step in compile_ahead.all_steps()]
    claim = compile_ahead.claim_in(claims)
    steps = []
    for group, named in groups:  # as compile_ahead.compile_all
        if claim(group):
            for name, step in named:
                c, w = time.process_time(), time.monotonic()
                step()
                steps.append((name if name == group else f"{group}: {name}", w,
                              time.monotonic(),
                              time.process_time() - c))
    with open(out, "w") as f:
        json.dump({"steps": steps, "compiled": compiles.by_signature,
                   "end": time.monotonic()}, f)


def processes(args: argparse.Namespace) -> None:
    """``--processes N``: the steps shared by N processes on one empty cache, as in CI."""
    folder = tempfile.mkdtemp(prefix="qs-claims-")
    claims = os.path.join(folder, "claims")
    os.mkdir(claims)
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = os.path.abspath(args.src)
    print(f"cache {os.environ['NUMBA_CACHE_DIR']}; load {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores; {args.processes} processes, each after the one before "
          f"by {args.stagger:g} s", flush=True)
    start = time.monotonic()
    running = []
    for k in range(args.processes):
        if k:
            time.sleep(args.stagger)
        log = os.path.join(folder, f"{k}.json")
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                                 claims, log, "--cache", os.environ["NUMBA_CACHE_DIR"]],
                                env=env)
        running.append((proc, log, time.monotonic()))
    ended = []
    for proc, log, began in running:
        _, status, usage = os.wait4(proc.pid, 0)
        if status:
            raise SystemExit(f"a compile process failed ({status})")
        with open(log) as f:
            ended.append((json.load(f), began, usage.ru_utime + usage.ru_stime))
    last = max(rec["end"] for rec, _, _ in ended)
    total_cpu = sum(cpu for _, _, cpu in ended)
    print(f"\nall steps compiled {last - start:.1f} s after the first process started; "
          f"{total_cpu:.1f} s CPU in all")
    for k, (rec, began, cpu) in enumerate(ended):
        print(f"\nprocess {k}: started at {began - start:.1f} s, {cpu:.1f} s CPU, done at "
              f"{rec['end'] - start:.1f} s, then waited {last - rec['end']:.1f} s")
        for name, w0, w1, c in rec["steps"]:
            print(f"  {w0 - start:6.1f} .. {w1 - start:6.1f} s {c:6.1f} s CPU  {name}")
    seen: dict[str, list[float]] = defaultdict(list)
    for rec, _, _ in ended:
        for sig, cpu in rec["compiled"].items():
            seen[sig].append(cpu)
    twice = {sig: cpus for sig, cpus in seen.items() if len(cpus) > 1}
    extra = sum(sum(c) - max(c) for c in twice.values())
    print(f"\n{len(twice)} specialisations compiled in more than one process, {extra:.1f} s "
          "CPU beyond one compile each (exclusive seconds):")
    for sig in sorted(twice, key=lambda s: -sum(twice[s]))[:args.top]:
        print(f"  {' + '.join(f'{c:.1f}' for c in twice[sig]):>16} s  {sig[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=40, help="functions listed (by exclusive s)")
    parser.add_argument("--signatures", action="store_true",
                        help="list each function's compiled signatures")
    parser.add_argument("--cache", help="NUMBA_CACHE_DIR (default: a new temporary folder)")
    parser.add_argument("--src", help="import quantscope from this src folder")
    parser.add_argument("--only", nargs="*", help="run only the steps with these names")
    parser.add_argument("--groups", nargs="*",
                        help="run only the steps of these groups (compile_steps.step_groups), "
                        "in one process, as the process that claims them first compiles them")
    parser.add_argument("--passes", action="store_true",
                        help="list the processor seconds of each of Numba's compiler passes "
                        "(exclusive of the passes inside it) and of the work inside LLVM")
    parser.add_argument("--processes", type=int, default=1,
                        help="share the steps between this many processes, as CI does")
    parser.add_argument("--stagger", type=float, default=0.0,
                        help="seconds between the processes' starts")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ["NUMBA_CACHE_DIR"] = args.cache or tempfile.mkdtemp(prefix="qs-cold-")
    if args.src:
        sys.path.insert(0, os.path.abspath(args.src))
    if args.worker:
        worker(*args.worker)
    elif args.processes > 1:
        processes(args)
    else:
        one_process(args)


if __name__ == "__main__":
    main()
