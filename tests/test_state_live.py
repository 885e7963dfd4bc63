"""The live state computes itself, with no Qt and no window: a change goes state → scheduler →
engine → state, the newest request wins, stale outcomes are dropped by the state's own stamp,
failures and progress come back as events, and loads run off the owner's thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from quantscope.errors import QuantscopeError
from quantscope.state import PANES, ExplorerState, Source
from quantscope.state.live import LiveExplorer
from quantscope.state.load_job import PickFirst


@pytest.fixture
def live():
    lv = LiveExplorer()
    yield lv
    assert lv.shutdown()
    assert not lv.scheduler.is_running()


def _tensor(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((32, 256)).astype(np.float32)


def test_a_tensor_set_directly_is_prepared_and_computed(live):
    heard = []
    live.stale.connect(lambda: heard.append("stale"))
    live.results_ready.connect(lambda: heard.append("results"))
    assert live.set_tensor(_tensor(), Source("array", "x", axis=0))
    assert live.preparing() and live.computing()
    assert live.wait(timeout=60)
    st = live.state
    assert st.prepared is not None and st.overview is not None
    assert set(st.results) == set(PANES) and heard[-1] == "results"
    assert "stale" in heard
    # the reports are the engine's for the settings shown
    ref = ExplorerState()
    ref.set_tensor(_tensor(), Source("array", "x", axis=0))
    ref.prepare()
    ref.compute()
    for key in PANES:
        assert st.results[key].sqnr_db == ref.results[key].sqnr_db


def test_clipped_values_arrive_with_the_results_gathered_off_the_owners_thread(live,
                                                                              monkeypatch):
    """Each per-channel report's own clipped values are gathered in the compute job (on its
    thread), so drawing them on the owner's thread only bins: the owner never gathers, and
    the binned counts equal a gather made afresh and the reports' clipped counts."""
    import quantscope.state.explorer as explorer_module
    from quantscope.state.clipped_histogram import binned, report_clipped

    x = _tensor(3)
    x[5, :4] = 40.0  # outliers in one channel: a manual window clips them, and more
    live.set_tensor(x, Source("array", "x", axis=0))
    assert live.wait(timeout=60)
    owner = threading.get_ident()
    gathered_on: list[int] = []
    real = explorer_module.report_clipped
    monkeypatch.setattr(explorer_module, "report_clipped", lambda *a: (
        gathered_on.append(threading.get_ident()), real(*a))[1])
    live.update_settings(method="manual", manual_clip=(-1.5, 2.0))
    assert live.wait(timeout=60)
    st = live.state
    edges = np.linspace(float(x.min()) - 1, float(x.max()) + 1, 101)  # every value inside
    for key in ("symmetric/channel", "asymmetric/channel"):
        report = st.results[key]
        counts = st.clipped_histogram(report, edges)
        assert counts is not None
        want = binned(report_clipped(report, st.prepared), edges)
        assert np.array_equal(counts, want)
        units = report.per_channel
        assert counts.sum() == int(units.clipped_below.sum() + units.clipped_above.sum()) > 0
    assert owner not in gathered_on  # nothing gathered on this (the owner's) thread
    assert st.clipped_histogram(st.results["symmetric/tensor"], edges) is None


def test_the_newest_settings_win_and_older_results_never_land(live):
    live.set_tensor(_tensor())
    assert live.wait(timeout=60)
    generations = []
    live.results_ready.connect(lambda: generations.append(live.state.generation))
    for bits in (7, 6, 5, 4, 3):
        live.update_settings(bits=bits)
    assert live.wait(timeout=60)
    st = live.state
    assert st.settings.bits == 3
    assert generations and set(generations) == {st.generation}  # no older result landed
    assert all(r.params.qmax - r.params.qmin <= 7 for r in st.results.values())


def test_a_failed_load_leaves_the_tensor_and_says_why(live):
    live.set_tensor(_tensor())
    assert live.wait(timeout=60)
    before = live.state.tensor
    failed, loaded = [], []
    live.failed.connect(lambda kind, message: failed.append((kind, message)))
    live.loaded.connect(lambda ticket, outcome: loaded.append(outcome))

    def bad():
        raise QuantscopeError("file.npy: is truncated")

    live.load(Source("array", "bad"), bad)
    assert live.wait(lambda: bool(failed), timeout=30)
    assert failed == [("load", "file.npy: is truncated")] and loaded == []
    assert live.state.tensor is before


def test_a_load_runs_off_the_owners_thread_and_reports_progress(live):
    threads, progress, loaded = [], [], []
    live.progress.connect(lambda kind, fraction, text: progress.append((kind, text)))
    live.loaded.connect(lambda ticket, outcome: loaded.append((ticket, outcome)))
    x = _tensor(3).astype(np.float16)

    def read():
        threads.append(threading.get_ident())
        return x, "float16"

    ticket = live.load(Source("array", "half"), read)
    assert live.wait(lambda: live.idle() and live.has_results(), timeout=60)
    assert threads and threads[0] != threading.get_ident()
    assert loaded == [(ticket, True)]
    assert live.state.stored_dtype == "float16"
    assert any("preparing exact statistics" in t for k, t in progress if k == "load")


def test_a_newer_load_supersedes_an_older_one(live):
    gate, started, loaded = threading.Event(), threading.Event(), []
    live.loaded.connect(lambda ticket, outcome: loaded.append(ticket))

    def slow():
        started.set()
        gate.wait(10)
        return _tensor(1), "float32"

    live.load(Source("array", "old"), slow)
    assert started.wait(10)
    newer = live.load(Source("array", "new"), lambda: (_tensor(2), "float32"))
    gate.set()
    assert live.wait(lambda: live.idle() and live.has_results(), timeout=60)
    assert loaded == [newer] and live.state.source.name == "new"


def test_a_sample_of_several_tensors_asks_which(live, tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "two.safetensors"
    save_file({"a": _tensor(1), "b": _tensor(2)}, str(path))
    from quantscope.state.load_job import source_reader

    outcomes = []
    live.loaded.connect(lambda ticket, outcome: outcomes.append(outcome))
    source = Source("file", str(path))
    live.load(source, source_reader(source), reports=True)
    assert live.wait(lambda: bool(outcomes), timeout=30)
    assert isinstance(outcomes[0], PickFirst) and len(outcomes[0].infos) == 2
    assert live.state.tensor is None


def test_cancelling_a_preparation_still_computes_the_reports(live):
    live.set_tensor(_tensor())
    live.cancel_loading()
    assert live.wait(lambda: live.idle() and live.has_results(), timeout=60)
    assert set(live.state.results) == set(PANES)


def test_a_views_work_comes_back_as_an_outcome_of_its_key(live):
    outcomes = []
    live.outcome.connect(outcomes.append)
    live.submit("view:a", lambda ctx: 42)
    live.submit("view:b", lambda ctx: 1 / 0)
    assert live.wait(lambda: len(outcomes) == 2, timeout=10)
    by_key = {e.key: e for e in outcomes}
    assert by_key["view:a"].what == "done" and by_key["view:a"].value == 42
    assert by_key["view:b"].what == "failed" and "division" in by_key["view:b"].value
    with pytest.raises(ValueError, match="own kind"):
        live.submit("load", lambda ctx: None)
