"""The trade-off sweep in a first run's window: the twins compute its curves at once, the MSE
optimum follows when the compiled loops are in, and nothing is called the best before then."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from quantscope.core.stats import loop_twins
from quantscope.core.stats.prepared import prepare
from quantscope.errors import Cancelled
from quantscope.state import compile_ahead
from quantscope.state.settings import Settings
from quantscope.state.tradeoff import SCHEMES, SweepRequest


class _Context:
    """A job's context as the scheduler gives it: partial results kept, stale when told."""

    def __init__(self) -> None:
        self.partials: list = []
        self.partial_in = threading.Event()
        self.superseded = False

    def stale(self) -> bool:
        return self.superseded

    def check(self) -> None:
        if self.superseded:
            raise Cancelled

    def progress(self, fraction: float, text: str = "") -> None:
        self.check()

    def partial(self, result) -> None:
        self.partials.append(result)
        self.partial_in.set()


def _tensor() -> np.ndarray:
    x = np.random.default_rng(5).standard_normal((24, 512)).astype(np.float32)
    x[3, 7] = 19.0
    return x


def _never_wait():
    raise AssertionError("a loop without a twin was asked for while the twins served")


def _same(a, b) -> None:
    """Two sweeps equal to the bit: every curve array, the best index, the optimum and its
    report's numbers."""
    for field in ("thresholds", "lower", "upper", "scale", "zero_point", "rounding_mse",
                  "clipping_mse", "mse", "sqnr_db", "clipped_fraction"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.best == b.best
    assert (a.optimum is None) == (b.optimum is None)
    if a.optimum is not None:
        assert float(a.optimum.scale) == float(b.optimum.scale)
        assert int(a.optimum.zero_point) == int(b.optimum.zero_point)
        assert a.best_mse == b.best_mse and a.best_threshold == b.best_threshold


@pytest.fixture
def first_run(monkeypatch):
    """The twins in place as on a first run's window (a loop without one would wait for the
    compile-ahead process, whose word is ``compiled_ready``)."""
    ready = threading.Event()
    monkeypatch.setattr(compile_ahead, "compiled_ready", ready)
    loop_twins.install(until=_never_wait)
    try:
        yield ready
    finally:
        loop_twins.remove()


def test_a_still_figure_gets_the_curves_at_once_and_no_best(first_run):
    x = _tensor()
    request = SweepRequest(x, prepare(x), Settings(bits=6), wait_for_optimum=False)
    key, pending = request.run(_Context())
    loop_twins.remove()
    _, compiled = SweepRequest(x, prepare(x), Settings(bits=6)).run(_Context())
    assert key == request.key and pending.optimum_pending and not compiled.optimum_pending
    for name, _ in SCHEMES:
        assert pending.by_scheme[name].optimum is None  # not the curve's point called best
        assert compiled.by_scheme[name].optimum is not None
        # the curves are the compiled loops' to the bit
        _same(pending.by_scheme[name], dataclasses.replace(
            compiled.by_scheme[name], optimum=None, optimum_report=None))


def test_a_live_view_gets_the_curves_first_then_the_optimum(first_run):
    ready = first_run
    x = _tensor()
    ctx = _Context()
    out: list = []
    job = threading.Thread(target=lambda: out.append(
        SweepRequest(x, prepare(x), Settings(bits=6)).run(ctx)))
    job.start()
    assert ctx.partial_in.wait(120)
    (key, curves), = ctx.partials
    assert curves.optimum_pending and not out  # waiting for the compiled search
    assert all(s.optimum is None for s in curves.by_scheme.values())
    loop_twins.remove()  # what the compile-ahead's word does, then
    ready.set()
    job.join(120)
    (key2, final), = out
    assert key2 == key and not final.optimum_pending
    _, compiled = SweepRequest(x, prepare(x), Settings(bits=6)).run(_Context())
    for name, _ in SCHEMES:
        _same(final.by_scheme[name], compiled.by_scheme[name])


def test_a_superseded_sweep_stops_waiting_for_the_optimum(first_run):
    x = _tensor()
    ctx = _Context()
    raised: list = []

    def run() -> None:
        try:
            SweepRequest(x, prepare(x), Settings(bits=6)).run(ctx)
        except Cancelled:
            raised.append(True)

    job = threading.Thread(target=run)
    job.start()
    assert ctx.partial_in.wait(120)
    ctx.superseded = True
    job.join(10)
    assert not job.is_alive() and raised == [True]
