"""A one-row MSE search (a per-tensor pane's) from a niced job thread runs on the engine's
pool of the caller's share priority, not inline on the niced thread, with the same result."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from quantscope.core.kernels import compiled, parallel
from quantscope.core.stats import mse_search as search_module
from quantscope.core.stats.prepared import prepare

pytestmark = pytest.mark.skipif(not parallel.PER_THREAD_NICE,
                                reason="per-thread nice values are Linux's")


def test_a_niced_callers_one_row_search_runs_on_the_pool_of_its_share_priority(monkeypatch):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(4096) * 0.02).astype(np.float32)
    rows = prepare(x).layout(None, None)
    inline = search_module.mse_search(rows, qmin=-128, qmax=127, symmetric=False)
    parallel.start_pool()  # the pool of this thread's (the window's) priority
    ran_on: list[str] = []
    loop = compiled.rows_optimum

    def recorded(*args):
        ran_on.append(threading.current_thread().name)
        return loop(*args)

    monkeypatch.setattr(compiled, "rows_optimum", recorded)
    owner = parallel.thread_niceness()
    found: list = []

    def niced_job() -> None:  # as the scheduler's job threads run
        parallel.shares_at(owner)
        if parallel.set_thread_niceness(owner + 5) != owner + 5:
            return
        found.append(search_module.mse_search(rows, qmin=-128, qmax=127, symmetric=False))

    job = threading.Thread(target=niced_job, name="niced-job")
    job.start()
    job.join()
    if not found:
        pytest.skip("this thread's nice value cannot be raised here")
    assert len(ran_on) == 1 and ran_on[0].startswith(parallel.THREAD_NAME + "_")
    for field in ("scale", "zero_point", "error", "proven", "boxes"):
        np.testing.assert_array_equal(getattr(found[0], field), getattr(inline, field))
    # a caller whose shares run at its own priority searches on its own thread
    ran_on.clear()
    search_module.mse_search(rows, qmin=-128, qmax=127, symmetric=False)
    assert ran_on == [threading.current_thread().name]
