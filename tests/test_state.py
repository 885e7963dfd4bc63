"""The Qt-free explorer state: engine defaults, refusals that keep the previous state, stale
results dropped by generation, and every pane's numbers equal to the engine's."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams, params_from_range
from quantscope.core.tensors.generators import generate
from quantscope.state import (
    PANES,
    ExplorerState,
    Settings,
    SettingsError,
    Source,
    compute_reports,
    load_source,
    overview,
    pane_params,
    pane_title,
)
from quantscope.state.compute import DIRECT_MAX, needs_preparation
from quantscope.state.source import DEMO_AXIS, DEMO_SAMPLE


class Recorder:
    """Counts emissions of every state signal and keeps the error messages."""

    def __init__(self, state: ExplorerState) -> None:
        self.counts = {name: 0 for name in ("tensor_changed", "settings_changed",
                                            "results_changed", "prepared_changed")}
        self.errors: list[str] = []
        for name in self.counts:
            getattr(state, name).connect(lambda *_, n=name: self._bump(n))
        state.error.connect(self.errors.append)

    def _bump(self, name: str) -> None:
        self.counts[name] += 1


@pytest.fixture
def state() -> ExplorerState:
    st = ExplorerState()
    assert st.set_tensor(generate("outliers", (64, 256), seed=2), Source.generator(
        "outliers", (64, 256), 2))
    return st


def same_numbers(a, b) -> None:
    assert a.summary() == b.summary()
    np.testing.assert_array_equal(a.code_histogram, b.code_histogram)


def test_defaults_are_the_engines():
    s = Settings()
    assert (s.method, s.rounding, s.narrow_range, s.bits, s.group_size, s.runtime) == (
        "minmax", "half_even", None, 8, None, None)
    x = generate("normal", (16, 32))
    p = pane_params(x, "symmetric/tensor", s)
    ref = choose_qparams(x)
    assert (p.qmin, p.qmax, float(p.scale)) == (ref.qmin, ref.qmax, float(ref.scale))
    assert p.qmin == -127  # narrow-range symmetric by default


def test_first_numbers_equal_quantscope_report(gelu_activations, engine_reports):
    src = Source("sample", DEMO_SAMPLE, axis=DEMO_AXIS)
    x, dtype = load_source(src)
    assert dtype == "float32"
    np.testing.assert_array_equal(x, gelu_activations)
    st = ExplorerState()
    assert st.set_tensor(x, src)
    assert st.settings.axis == DEMO_AXIS
    results = st.compute()
    ref = engine_reports(x, DEMO_AXIS)
    assert set(results) == set(PANES) == set(ref)
    for pane in PANES:
        same_numbers(results[pane], ref[pane])


@pytest.mark.parametrize(("bad", "message"), [
    (np.full((3, 4), np.nan, np.float32), "NaN or infinite"),
    (np.array([np.inf, -np.inf]), "NaN or infinite"),
    (np.float32(1.5), "0-d"),
    (np.zeros((0, 5), np.float32), "empty"),
    (np.array(["a", "b"]), "not a real number"),
])
def test_bad_tensor_refused_previous_state_kept(state, bad, message):
    rec = Recorder(state)
    before, source, settings = state.tensor, state.source, state.settings
    assert state.set_tensor(bad) is False
    assert len(rec.errors) == 1 and message in rec.errors[0]
    assert state.tensor is before and state.source is source and state.settings is settings
    assert rec.counts["tensor_changed"] == 0


@pytest.mark.parametrize("changes", [
    {"bits": 9}, {"bits": 1}, {"method": "median"}, {"percentile": 0.0},
    {"percentile": 100.5}, {"rounding": "down"}, {"axis": 2}, {"group_size": 0},
    {"runtime": "tvm"}, {"manual_clip": (1.0, -1.0)}, {"manual_clip": (0.0, np.inf)},
    {"no_such_setting": 1},
])
def test_bad_settings_refused_with_message(state, changes):
    rec = Recorder(state)
    before = state.settings
    assert state.update_settings(**changes) is False
    assert state.settings is before and rec.errors and rec.counts["settings_changed"] == 0


def test_equal_settings_do_not_recompute(state):
    rec = Recorder(state)
    gen = state.generation
    assert state.update_settings(bits=8) is False
    assert state.generation == gen and rec.counts["settings_changed"] == 0
    assert state.update_settings(bits=6) is True
    assert state.generation == gen + 1 and rec.counts["settings_changed"] == 1


def test_stale_results_are_dropped(state):
    old = state.request()
    state.update_settings(bits=4)
    assert state.results == {}
    assert state.accept(compute_reports(old)) is False
    assert state.results == {}
    current = compute_reports(state.request())
    assert state.accept(current) is True
    assert all(r.params.bits == 4 for r in state.results.values())


@pytest.mark.parametrize("changes", [
    {"method": "percentile", "percentile": 99.0},
    {"method": "mse"},
    {"rounding": "half_away"},
    {"narrow_range": False},
    {"bits": 3},
    {"axis": 1},
    {"group_size": 32},
    {"runtime": "tflite"},
])
def test_every_pane_equals_the_direct_engine(state, changes):
    assert state.update_settings(**changes)
    results = state.compute()
    s = state.settings
    for pane in PANES:
        sym, gran = pane.split("/")
        granularity = "tensor" if gran == "tensor" else ("group" if s.group_size else "channel")
        options = {"percentile": s.percentile} if s.method == "percentile" else {}
        extra = {"runtime": s.runtime} if s.runtime else {"rounding": s.rounding}
        # groups as GPTQ/AWQ use them: along the input dimension (axis 1) of this [out, in]
        axis = 1 if s.group_size else s.axis
        params = choose_qparams(state.tensor, symmetric=sym == "symmetric",
                                granularity=granularity, axis=axis, group_size=s.group_size,
                                bits=s.bits, narrow_range=s.narrow_range, method=s.method,
                                **options, **extra)
        ref = analyze(state.tensor, params)
        got, want = results[pane].summary(), ref.summary()
        numbers = {k for k, v in want.items() if isinstance(v, float)}
        assert {k: got[k] for k in numbers} == pytest.approx(
            {k: want[k] for k in numbers}, rel=1e-9, abs=1e-15)
        assert {k: got[k] for k in want.keys() - numbers} == {
            k: want[k] for k in want.keys() - numbers}
        np.testing.assert_array_equal(results[pane].code_histogram, ref.code_histogram)


def test_manual_clip_applies_the_engine_rules(state):
    x = state.tensor
    assert state.update_settings(method="manual", manual_clip=(-1.5, 3.0))
    results = state.compute()
    sym = params_from_range(-3.0, 3.0, symmetric=True)
    assert float(results["symmetric/tensor"].params.scale) == float(sym.scale)
    asym = params_from_range(-1.5, 3.0, symmetric=False)
    assert int(results["asymmetric/tensor"].params.zero_point) == int(asym.zero_point)
    same_numbers(results["symmetric/tensor"], analyze(x, sym))
    # per channel: each channel's own range, capped by the window
    per = results["symmetric/channel"].params
    assert state.settings.axis == 0  # rows are the channels of this [64, 256] tensor
    amax = np.minimum(np.abs(x).max(axis=1).astype(np.float64), 3.0)
    np.testing.assert_array_equal(per.scale, (amax / 127).astype(np.float32))
    assert results["symmetric/tensor"].clipped_below + results[
        "symmetric/tensor"].clipped_above == int(np.sum(np.abs(x) > 3.0 + 3.0 / 254))


def test_engine_refusal_becomes_a_pane_error(state):
    assert state.update_settings(runtime="tensorrt")
    state.compute()
    assert "asymmetric/tensor" in state.errors and "symmetric" in state.errors[
        "asymmetric/tensor"]
    assert "symmetric/tensor" in state.results


def test_group_size_turns_channel_panes_into_groups(state):
    assert state.update_settings(group_size=16, axis=1)
    assert pane_title("symmetric/channel", state.settings) == "Symmetric · per-group (16)"
    assert pane_title("symmetric/tensor", state.settings) == "Symmetric · per-tensor"
    r = state.compute()["asymmetric/channel"]
    assert r.params.granularity == "group" and r.params.scale.shape == (64, 16)


def test_new_tensor_keeps_settings_but_fixes_an_impossible_axis(state):
    state.update_settings(axis=1, bits=5)
    assert state.set_tensor(np.arange(10, dtype=np.float32))
    assert state.settings.axis == 0 and state.settings.bits == 5


def test_sources_round_trip_through_json_and_rebuild_bit_for_bit():
    src = Source.generator("outliers", (32, 16), 5, count=3, magnitude=12.5)
    again = Source.from_dict(json.loads(json.dumps(src.to_dict())))
    assert again == src
    a, _ = load_source(src)
    b, _ = load_source(again)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, generate("outliers", (32, 16), 5, count=3, magnitude=12.5))
    assert src.label() == "outliers(count=3, magnitude=12.5, std=1) [32x16] seed 5"
    s = Settings(method="manual", manual_clip=(-1.0, 2.0), group_size=8)
    assert Settings.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    with pytest.raises(SettingsError, match="unknown"):
        Settings.from_dict({"bitz": 3})


def test_overview_counts_nonfinite_and_summarises_the_rest():
    x = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, -2.0]], np.float32)
    ov = overview(x)
    assert (ov.n_nan, ov.n_posinf, ov.n_neginf) == (1, 1, 1)
    assert (ov.min, ov.max) == (-2.0, 3.0)
    assert ov.mean == pytest.approx(2 / 3)
    assert ov.hist_counts.sum() == 3
    rows = dict(ov.rows())
    assert rows["shape"] == "2x3" and rows["NaN/+∞/−∞"] == "1 / 1 / 1"


def test_tensor_is_read_only_for_the_workers(state):
    with pytest.raises(ValueError):
        state.tensor[0, 0] = 1.0


def test_prepare_puts_every_pane_on_the_windows_engine_path(state):
    """``prepare()`` (what ``quantscope report`` calls) prepares the tensor as the window's
    loader does, once; the reports are then the prepared path's, bit for bit."""
    with pytest.raises(SettingsError):
        ExplorerState().prepare()
    rec = Recorder(state)
    assert state.update_settings(method="percentile", percentile=99.9, bits=6)
    prepared = state.prepare()
    assert state.prepared is prepared and state.prepare() is prepared  # once
    assert rec.counts["prepared_changed"] == 1
    for report in state.compute().values():  # small: the direct pass, prepared or not
        same_numbers(report, analyze(state.tensor, report.params))
    big = ExplorerState()
    assert big.set_tensor(generate("outliers", (96, DIRECT_MAX // 64), seed=3),
                          Source.generator("outliers", (96, DIRECT_MAX // 64), 3))
    assert big.update_settings(method="percentile", percentile=99.9, bits=6)
    prepared = big.prepare()
    for report in big.compute().values():  # above DIRECT_MAX: the prepared path
        same_numbers(report, prepared.analyze(report.params))


def test_a_report_prepares_only_what_takes_the_prepared_path(state):
    """A small tensor under min/max or a manual window gets the same numbers unprepared
    (``quantscope report`` then loads no compiled loop); everything else needs it."""
    x = state.tensor
    assert not needs_preparation(x, state.settings)
    assert not needs_preparation(x, dataclasses.replace(state.settings, method="manual",
                                                        manual_clip=(-1.0, 1.0)))
    assert needs_preparation(x, dataclasses.replace(state.settings, method="mse"))
    assert needs_preparation(np.zeros(DIRECT_MAX + 1, np.float32), state.settings)
    unprepared = state.compute()
    state.prepare()
    for key, report in state.compute().items():
        same_numbers(report, unprepared[key])


def test_parallel_channel_panes_give_the_same_reports(state, monkeypatch):
    import threading

    import quantscope.state.compute as state_module
    from quantscope.state import prepare_tensor

    assert state.set_tensor(state.tensor, state.source,
                            prepared=prepare_tensor(state.tensor, state.settings))
    serial = compute_reports(state.request())
    monkeypatch.setattr(state_module, "PARALLEL_MIN_SIZE", 1)
    monkeypatch.setattr(state_module, "PARALLEL_CORES", True)
    def threads():  # Python's records of foreign threads (Qt's, from GUI tests) come and go
        return {t for t in threading.enumerate() if not isinstance(t, threading._DummyThread)}

    before = threads()
    partials = []
    parallel = compute_reports(state.request(), partials.append)
    assert threads() == before  # the pool's threads are joined
    assert list(parallel.reports) == list(serial.reports) == list(PANES)
    for pane in PANES:
        same_numbers(parallel.reports[pane], serial.reports[pane])
    # the per-tensor panes were handed over early, the same reports, marked incomplete
    (early,) = partials
    assert not early.complete and parallel.complete
    assert sorted(early.reports) == ["asymmetric/tensor", "symmetric/tensor"]
    for pane, report in early.reports.items():
        same_numbers(report, serial.reports[pane])


def test_the_per_tensor_mse_searches_start_before_the_per_channel_ones(state, monkeypatch):
    import quantscope.state.compute as state_module
    from quantscope.state import prepare_tensor

    assert state.update_settings(method="mse")
    assert state.set_tensor(state.tensor, state.source,
                            prepared=prepare_tensor(state.tensor, state.settings))
    serial = compute_reports(state.request())
    monkeypatch.setattr(state_module, "PARALLEL_MIN_SIZE", 1)
    monkeypatch.setattr(state_module, "PARALLEL_CORES", True)
    started: list[list[str]] = []

    def beside(fns):  # the scheduler's helpers take what they are given first, first
        started.append([fn.args[0] for fn in fns])
        return state_module._threads_beside(fns)

    partials = []
    parallel = compute_reports(state.request(), partials.append, beside)
    assert started == [["symmetric/tensor", "asymmetric/tensor"],
                       ["symmetric/channel", "asymmetric/channel"]]
    for pane in PANES:
        same_numbers(parallel.reports[pane], serial.reports[pane])
    (early,) = partials
    assert sorted(early.reports) == ["asymmetric/tensor", "symmetric/tensor"]
    # a method that does not search keeps the per-tensor panes on the calling thread
    assert state.update_settings(method="minmax")
    started.clear()
    compute_reports(state.request(), None, beside)
    assert started == [["symmetric/channel", "asymmetric/channel"]]


def test_partial_results_add_to_the_current_ones(state):
    import dataclasses

    rec = Recorder(state)
    partial_count = []
    state.partial_results.connect(lambda: partial_count.append(1))
    full = compute_reports(state.request())
    early = dataclasses.replace(full, reports={"symmetric/tensor": full.reports[
        "symmetric/tensor"]}, complete=False)
    assert state.accept(early) is True
    assert list(state.results) == ["symmetric/tensor"]
    assert partial_count == [1] and rec.counts["results_changed"] == 0
    assert state.accept(full) is True
    assert list(state.results) == list(PANES) and rec.counts["results_changed"] == 1
    state.update_settings(bits=5)  # a partial result of older settings is dropped
    assert state.accept(early) is False and state.results == {} and partial_count == [1]


def test_reports_are_reused_only_for_identical_parameters(state):
    first = state.compute()
    state.update_settings(narrow_range=False)  # symmetric panes change, asymmetric ones do not
    second = state.compute()
    assert second["asymmetric/tensor"] is first["asymmetric/tensor"]
    assert second["symmetric/tensor"] is not first["symmetric/tensor"]
    assert second["symmetric/tensor"].params.qmin == -128
    state.update_settings(narrow_range=None)  # back: the cached reports return
    third = state.compute()
    assert all(third[p] is first[p] for p in PANES)
    state.update_settings(rounding="half_away")  # a field that changes every pane's params
    fourth = state.compute()
    assert all(fourth[p] is not first[p] for p in PANES)
    assert all(fourth[p].params.rounding == "half_away" for p in PANES)
    assert state.set_tensor(state.tensor * 2)  # a new tensor forgets everything
    assert all(state.compute()[p] is not fourth[p] for p in PANES)


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"),
                    reason="per-thread nice values are Linux's")
def test_engine_threads_yield_to_the_window():
    import os
    import threading

    from quantscope.state.compute import BACKGROUND_NICENESS, lower_thread_priority

    seen = {}

    def job():
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        lower_thread_priority()
        seen["change"] = os.getpriority(os.PRIO_PROCESS, tid) - before
        seen["main"] = os.getpriority(os.PRIO_PROCESS, threading.main_thread().native_id)

    main_before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    t = threading.Thread(target=job)
    t.start()
    t.join()
    assert seen["change"] == min(BACKGROUND_NICENESS, 19 - main_before)
    assert seen["main"] == main_before  # only the calling thread is lowered
