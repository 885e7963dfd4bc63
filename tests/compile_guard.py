"""No test compiles a version of the engine's loops that the compile-ahead did not make.

CI compiles the loops ahead (:mod:`quantscope.state.compile_ahead`) and runs the suite on that
cache. A test that hands a loop argument types the app never passes (a writable row where the
report passes read-only ones, a C-ordered output where it passes F-ordered, float64 where
float32) compiles a version of its own inside its timeout: seconds to a minute of CI, spent on
a loop the app never runs. Nothing else in the suite notices it; this plugin does.

Numba broadcasts ``"numba:compile"`` around each compile (a version loaded from the cache is no
compile). A listener records every compile with the thread's outermost compiling loop; after
each phase of a test (setup, call, teardown) a compile whose outermost loop is the engine's
(defined under ``quantscope``) fails the test, naming the loop, its argument types and the
seconds, when the cache was warm as the session started (the suite's warm-up ran, or
``QUANTSCOPE_TEST_NO_WARM_UP=1`` on a cache that holds the panes' loop, as in CI). On a cold
cache every compile is expected and they are only counted. Loops of the tests' own (oracles
in tests/) are counted, never failed: they compile once per cache, and the terminal summary
says how many and how long, summed over the xdist workers.

A test that must compile one of the engine's loops in its own process says why with
``@pytest.mark.compiles("why")``. ``QUANTSCOPE_TEST_COMPILES=report`` lists the engine's
compiles instead of failing their tests (with ``-v``, each with its test): how to find them all
in one run; unset (or ``=fail``) they fail.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import pytest

#: The controller's finding, handed to each xdist worker (``workerinput``).
WARM_KEY = "quantscope_cache_warm"
#: What a worker hands back: its compiles, as (test, loop, signature, seconds, product).
OUT_KEY = "quantscope_compiles"


@dataclass
class Compile:
    """One outermost compile: the loop (module.qualname), its argument types, the seconds it
    took with the loops it compiled on the way, and whether the loop is the engine's."""

    loop: str
    signature: str
    seconds: float
    product: bool
    inner: list[str] = field(default_factory=list)
    test: str = ""

    def row(self) -> tuple[str, str, str, float, bool]:
        return (self.test, self.loop, self.signature, self.seconds, self.product)

    def line(self) -> str:
        inner = f" (with {', '.join(sorted(set(self.inner)))})" if self.inner else ""
        return f"{self.loop}({self.signature}) {self.seconds:.2f} s{inner}"


def _loop_name(dispatcher) -> tuple[str, bool]:
    func = getattr(dispatcher, "py_func", None)
    module = getattr(func, "__module__", "") or ""
    name = f"{module}.{getattr(func, '__qualname__', repr(dispatcher))}"
    return name, module == "quantscope" or module.startswith("quantscope.")


class _Recorder:
    """The ``numba:compile`` listener (a :class:`numba.core.event.Listener`, made when Numba
    is first imported here): per thread, the outermost compile and the ones inside it."""

    def __init__(self) -> None:
        self.done: list[Compile] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    def on_start(self, event) -> None:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        loop, product = _loop_name(event.data["dispatcher"])
        if stack:
            stack[0].inner.append(loop)
        else:
            signature = ", ".join(str(a) for a in event.data["args"])
            stack.append(Compile(loop, signature, time.perf_counter(), product))
            return
        stack.append(None)

    def on_end(self, event) -> None:
        stack = self._local.stack
        top = stack.pop()
        if top is not None:
            top.seconds = time.perf_counter() - top.seconds
            with self._lock:
                self.done.append(top)


_recorder: _Recorder | None = None
_warm = False
_only_report = os.environ.get("QUANTSCOPE_TEST_COMPILES") == "report"


def _panes_cached() -> bool:
    """Whether Numba's cache holds the panes' main loop (the compile-ahead's first step)."""
    from quantscope.state.compile_ahead import panes_cached

    return panes_cached()


def configure(config, warmed_up: bool) -> None:
    """Called from the suite's ``pytest_configure``: decide (in the controller, or the one
    process) whether the cache is warm, and listen in each process that runs tests."""
    global _recorder, _warm
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        _warm = bool(workerinput.get(WARM_KEY))
    else:
        _warm = warmed_up or _panes_cached()
        config.stash[_warm_stash] = _warm
        if getattr(config.option, "numprocesses", None):
            return  # the workers run the tests, each listens for itself
    from numba.core import event

    class Listener(_Recorder, event.Listener):
        pass

    _recorder = Listener()
    event.register("numba:compile", _recorder)
    config.pluginmanager.register(_Plugin(), "quantscope-compile-guard")


_warm_stash = pytest.StashKey[bool]()


def configure_node(node) -> None:
    """Hand the controller's finding to an xdist worker."""
    node.workerinput[WARM_KEY] = node.config.stash.get(_warm_stash, False)


_from_workers: list[tuple[str, str, str, float, bool]] = []


def node_down(node) -> None:
    """Keep a finished worker's compiles for the summary."""
    _from_workers.extend(tuple(c) for c in getattr(node, "workeroutput", {}).get(OUT_KEY, []))


def summary(terminalreporter) -> None:
    """One line per kind of compile this session made: the tests' own loops, and the
    engine's (on a cold cache, or allowed by the ``compiles`` mark); with ``-v``, a line per
    compile naming its test."""
    rows = list(_from_workers)
    if _recorder is not None:
        rows += [c.row() for c in _recorder.done]
    for product, what in ((False, "the tests' own loops"), (True, "the engine's loops")):
        mine = sorted(r for r in rows if r[4] == product)
        if not mine:
            continue
        loops = sorted({r[1].rsplit(".", 1)[-1] for r in mine})
        terminalreporter.write_line(
            f"compiled in the tests: {len(mine)} version{'s' * (len(mine) != 1)} of {what}, "
            f"{sum(r[3] for r in mine):.1f} s ({', '.join(loops)})")
        if terminalreporter.config.option.verbose > 0:
            for test, loop, signature, seconds, _ in mine:
                terminalreporter.write_line(f"  {seconds:6.2f} s  {loop}({signature})  {test}")


class _Plugin:
    """The hooks of a process that runs tests and listens."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        return (yield from _checked(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        return (yield from _checked(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item):
        return (yield from _checked(item))

    def pytest_sessionfinish(self, session):
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None and _recorder is not None:
            workeroutput[OUT_KEY] = [c.row() for c in _recorder.done]
            _recorder.done.clear()  # handed to the controller, which sums them


def _checked(item):
    """A phase of ``item``, then its compiles named after it; the engine's fail it."""
    assert _recorder is not None
    start = len(_recorder.done)
    try:
        result = yield
    finally:
        made = _recorder.done[start:]
        for c in made:
            c.test = item.nodeid
    own = [c for c in made if c.product]
    if own and _warm and item.get_closest_marker("compiles") is None and not _only_report:
        pytest.fail(
            "this test compiled loops of the engine that the compile-ahead did not make (hand "
            "them the argument types the app passes, or mark the test "
            "@pytest.mark.compiles('why')):\n  " + "\n  ".join(c.line() for c in own),
            pytrace=False)
    return result
