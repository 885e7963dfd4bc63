"""The suite's compile guard (tests/compile_guard.py) names a compile of the engine's loops and
fails the test that made it; a loop of the tests' own is only counted."""

from __future__ import annotations

import types

import numba
import pytest

import compile_guard


def _loop(module: str):
    """A new compiled loop that says it is defined in ``module`` (not cached: it compiles on
    its first call in every process)."""
    def add_one(x):
        return x + 1

    add_one.__module__, add_one.__qualname__ = module, "add_one"
    return numba.njit(cache=False)(add_one)


class _Item:
    """What :func:`compile_guard._checked` reads of a test item."""

    def __init__(self, marked: bool) -> None:
        self.nodeid = "tests/fake.py::test_fake"
        self._marked = marked

    def get_closest_marker(self, name: str):
        return types.SimpleNamespace(name=name) if self._marked else None


@pytest.fixture(autouse=True)
def _kept_out_of_the_summary():
    """The loops made here are no test's or engine's: the session's summary leaves them out."""
    start = len(compile_guard._recorder.done)
    yield
    del compile_guard._recorder.done[start:]


def _phase(item, run):
    """One phase of ``item`` through the guard: ``run()`` inside it."""
    phase = compile_guard._checked(item)
    next(phase)
    run()
    try:
        phase.send(None)
    except StopIteration:
        return


@pytest.mark.compiles("compiles loops of its own to see the guard name them")
def test_a_compile_of_the_engines_loop_fails_its_test_naming_loop_and_types(monkeypatch):
    monkeypatch.setattr(compile_guard, "_warm", True)
    monkeypatch.setattr(compile_guard, "_only_report", False)
    engine = _loop("quantscope.core.kernels.fake_for_the_guard")
    with pytest.raises(pytest.fail.Exception) as failed:
        _phase(_Item(marked=False), lambda: engine(3))
    message = str(failed.value)
    assert "quantscope.core.kernels.fake_for_the_guard.add_one(int64)" in message
    assert "compile-ahead did not make" in message
    recorded = compile_guard._recorder.done[-1]
    assert (recorded.loop, recorded.signature, recorded.product, recorded.test) == (
        "quantscope.core.kernels.fake_for_the_guard.add_one", "int64", True,
        "tests/fake.py::test_fake")
    assert 0 < recorded.seconds < 60
    _phase(_Item(marked=False), lambda: engine(4))  # that version again: no compile, no word
    with pytest.raises(pytest.fail.Exception, match=r"fake_for_the_guard\.add_one\(float64\)"):
        _phase(_Item(marked=False), lambda: engine(4.5))  # another version: named too


@pytest.mark.compiles("compiles loops of its own to see the guard let them pass")
def test_the_tests_own_loops_a_marked_test_and_a_cold_cache_pass(monkeypatch):
    monkeypatch.setattr(compile_guard, "_only_report", False)
    monkeypatch.setattr(compile_guard, "_warm", True)
    _phase(_Item(marked=False), lambda: _loop("test_some_oracle")(1))
    assert compile_guard._recorder.done[-1].product is False
    _phase(_Item(marked=True), lambda: _loop("quantscope.fake_marked")(1))
    monkeypatch.setattr(compile_guard, "_warm", False)
    _phase(_Item(marked=False), lambda: _loop("quantscope.fake_cold")(1))
    assert [c.loop.rsplit(".", 2)[-2] for c in compile_guard._recorder.done[-2:]] == [
        "fake_marked", "fake_cold"]
