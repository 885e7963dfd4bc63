"""One mapping from (tensor, settings) to the panes' numbers: the window's state and
``quantscope report`` share it, the channel axis follows each tensor's role, groups run along
the input dimension as GPTQ/AWQ cut them, and what cannot be honoured is said."""

from __future__ import annotations

import json

import numpy as np
import pytest

from quantscope.cli import main
from quantscope.core import analyze, choose_qparams
from quantscope.core.tensors.generators import generate
from quantscope.state import (
    PANES,
    ExplorerState,
    Settings,
    Source,
    load_source,
    pane_params,
    pane_title,
    params_key,
)
from quantscope.state.source import DEMO_SAMPLE


def load(state: ExplorerState, source: Source) -> None:
    x, _ = load_source(source)
    assert state.set_tensor(x, source)


def sqnr(state: ExplorerState) -> dict[str, float]:
    return {p: round(r.sqnr_db, 2) for p, r in state.compute().items()}


WEIGHTS = Source.generator("weights", (512, 1024), 0)


# -- defect 1: settings carried over from the previous tensor --------------------------------
def test_the_axis_follows_each_tensor_not_the_previous_one():
    st = ExplorerState()
    demo = Source("sample", DEMO_SAMPLE)
    load(st, demo)
    assert st.settings.axis == -1 and sqnr(st)["symmetric/channel"] == 39.69
    load(st, WEIGHTS)
    assert st.settings.axis == 0 and st.axis_choice.rule == 'name "weights" says weight'
    load(st, demo)  # was 26.37 dB on the weights' axis 0
    assert st.settings.axis == -1 and sqnr(st)["symmetric/channel"] == 39.69
    assert st.axis_choice.rule == 'name "gelu_activations" says activation'


def test_a_picked_weight_gets_the_reports_axis(capsys):
    st = ExplorerState()
    load(st, Source("sample", DEMO_SAMPLE))  # axis -1 before
    load(st, Source("sample", "query_weight"))
    assert st.settings.axis == 0 and sqnr(st)["symmetric/channel"] == 42.28
    assert main(["report", "--sample", "query_weight", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["axis"] == 0 and round(doc["schemes"]["symmetric/channel"]["sqnr_db"], 2) == 42.28


def test_a_conv_weight_is_split_by_output_channel():
    st = ExplorerState()
    load(st, Source("sample", DEMO_SAMPLE))
    x = generate("normal", (64, 3, 7, 7), seed=1)
    assert st.set_tensor(x, Source("file", "/models/stem.npy"))
    assert st.settings.axis == 0 and "conv weight" in st.axis_choice.rule
    assert pane_title("symmetric/channel", st.settings, x.shape) == (
        "Symmetric · per-channel · axis 0 · 64 channels")
    assert st.compute()["symmetric/channel"].params.scale.shape == (64,)


def test_a_manual_window_does_not_survive_a_new_tensor():
    st = ExplorerState()
    load(st, Source("sample", DEMO_SAMPLE))
    assert st.update_settings(method="manual", manual_clip=(-0.0613, 8.94), bits=6)
    st.set_tensor(generate("normal", (256, 1024), seed=0), Source("file", "n01.npy"))
    assert st.settings.manual_clip is None and st.settings.method == "manual"
    assert st.settings.bits == 6  # tensor-independent settings stay
    r = st.compute()["asymmetric/tensor"]
    assert r.clipped_below + r.clipped_above == 0  # was 46% clipped, 3.50 dB
    assert r.sqnr_db == analyze(st.tensor, choose_qparams(st.tensor, symmetric=False,
                                                          bits=6)).sqnr_db


def test_a_1d_tensor_has_no_per_channel_scheme():
    st = ExplorerState()
    x = np.linspace(-1, 3, 4096, dtype=np.float32)
    assert st.set_tensor(x, Source("file", "bias.npy"))
    st.compute()
    assert set(st.results) == {"symmetric/tensor", "asymmetric/tensor"}
    assert "1-D tensor (4,096 values) has no channels" in st.errors["symmetric/channel"]
    assert st.axis_choice.rule == "1-D: no channel axis"
    # groups still work on it: blocks of 512 of the only axis
    assert st.update_settings(group_size=512)
    r = st.compute()["symmetric/channel"]
    assert r.params.scale.shape == (8,)


def test_the_role_the_user_picks_sets_the_axis_and_says_so():
    st = ExplorerState()
    x = generate("normal", (64, 32), seed=0)
    assert st.set_tensor(x, Source("file", "x.npy"))
    assert st.settings.axis == 0 and st.axis_choice.rule == "2-D: taken as a weight [out, in]"
    assert st.set_role("activation")
    assert st.settings.axis == -1 and st.axis_choice.rule == "you picked activation"
    assert st.update_settings(axis=0)
    assert st.axis_choice.rule == "axis 0 set by you"
    assert st.set_tensor(x, Source("file", "y.npy"))  # a new tensor: its own rule again
    assert st.source.role is None and st.axis_choice.rule.startswith("2-D")


# -- defect 2: groups along the input dimension ----------------------------------------------
def test_groups_run_along_the_input_dimension_as_gptq_cuts_them():
    st = ExplorerState()
    load(st, WEIGHTS)
    per_channel = sqnr(st)["symmetric/channel"]
    assert per_channel == 42.13
    assert st.update_settings(group_size=128)
    r = st.compute()["symmetric/channel"]
    assert round(r.sqnr_db, 2) == 43.81  # 38.93 dB with groups along the channel axis
    assert r.params.axis == 1 and r.params.scale.shape == (512, 8)
    ref = choose_qparams(st.tensor, granularity="group", axis=1, group_size=128)
    assert params_key(r.params) == params_key(ref)
    assert pane_title("symmetric/channel", st.settings, st.tensor.shape) == (
        "Symmetric · per-group of 128 · axis 1 · 4,096 groups")


def test_a_ragged_last_group_is_computed_and_shown():
    st = ExplorerState()
    x = generate("weights", (16, 300), seed=0)
    assert st.set_tensor(x, Source("file", "w_weight.npy"))
    assert st.update_settings(group_size=128)
    r = st.compute()["asymmetric/channel"]
    assert r.params.scale.shape == (16, 3)
    assert pane_title("asymmetric/channel", st.settings, x.shape).endswith(
        "48 groups (last 44)")
    assert st.applied()["last_group"] == 44
    assert r.per_channel.n.tolist() == [128, 128, 44] * 16


def test_groups_on_a_conv_weight_are_refused_clearly():
    st = ExplorerState()
    assert st.set_tensor(generate("normal", (8, 4, 3, 3), seed=0), Source("file", "c.npy"))
    assert st.update_settings(group_size=4)
    st.compute()
    assert "reshape it to [out, in·k…]" in st.errors["symmetric/channel"]
    assert "symmetric/tensor" in st.results


# -- defect 3: a preset that cannot apply is said, not dropped silently ------------------------
def test_a_preset_under_a_manual_window_is_reported_not_silently_dropped(capsys):
    assert main(["report", "--sample", "query_weight", "--runtime", "tflite",
                 "--clip", "-0.1", "0.1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["applied"]["preset"] is None and doc["applied"]["method"] == "manual"
    assert "tflite preset has no manual clip window" in doc["applied"]["notes"][0]
    assert doc["settings"]["runtime"] == "tflite"


# -- one mapping ---------------------------------------------------------------------------
@pytest.mark.parametrize("changes", [
    {}, {"bits": 4}, {"narrow_range": False}, {"rounding": "half_away"}, {"group_size": 64},
    {"axis": 1}, {"axis": 1, "group_size": 48, "bits": 3, "narrow_range": True},
])
def test_the_min_max_memo_gives_the_engines_parameters_bit_for_bit(changes):
    x = generate("outliers", (40, 200), seed=3)
    x[3, 7] = np.nan
    x[5, 9] = np.inf
    s = Settings(**changes)
    ranges: dict = {}
    for pane in PANES:
        for _ in range(2):  # the second call answers from the memo
            got = pane_params(x, pane, s, ranges)
            sym = pane.startswith("symmetric")
            if pane.endswith("tensor"):
                ref = choose_qparams(x, symmetric=sym, bits=s.bits,
                                     narrow_range=s.narrow_range, rounding=s.rounding)
            else:
                gran = "group" if s.group_size else "channel"
                axis = 1 if s.group_size and s.axis == 0 else s.axis
                ref = choose_qparams(x, symmetric=sym, granularity=gran, axis=axis,
                                     group_size=s.group_size, bits=s.bits,
                                     narrow_range=s.narrow_range, rounding=s.rounding)
            assert params_key(got) == params_key(ref), pane
    assert ranges  # the memo was used


OPTIONS = [
    ["--method", "percentile", "--percentile", "99.9"],
    ["--method", "mse", "--bits", "6"],
    ["--clip", "-0.05", "0.08"],
    ["--rounding", "half_away", "--code-range", "full"],
    ["--axis", "1", "--group-size", "96"],
    ["--runtime", "onnxruntime"],
    ["--runtime", "tensorrt", "--method", "entropy"],
]


def _settings_for(args: list[str]) -> tuple[Settings, int | None]:
    it = iter(args)
    s, axis = {}, None
    for a in it:
        if a == "--clip":
            s["manual_clip"], s["method"] = (float(next(it)), float(next(it))), "manual"
        elif a == "--axis":
            axis = int(next(it))
        elif a == "--code-range":
            s["narrow_range"] = {"narrow": True, "full": False, "default": None}[next(it)]
        else:
            key = a[2:].replace("-", "_")
            v = next(it)
            s[key] = (int(v) if key in ("bits", "group_size") else
                      float(v) if key == "percentile" else v)
    return Settings(**s), axis


@pytest.mark.parametrize("args", OPTIONS)
def test_report_accepts_every_setting_and_prints_the_mapping(tmp_path, capsys, query_weight,
                                                             args):
    path = tmp_path / "layer0_query_weight.npy"
    np.save(path, query_weight)
    assert main(["report", str(path), "--json", *args]) == 0
    doc = json.loads(capsys.readouterr().out)
    settings, axis = _settings_for(args)
    axis = 0 if axis is None else axis
    settings = Settings(**{**settings.to_dict(), "axis": axis,
                           "manual_clip": settings.manual_clip})
    assert doc["settings"] == settings.to_dict() and doc["axis"] == axis
    for pane in PANES:
        try:
            want = analyze(query_weight, pane_params(query_weight, pane, settings)).summary()
        except Exception as exc:  # the engine refuses it: the report says why
            assert str(exc) == doc["errors"][pane]
            continue
        got = doc["schemes"][pane]
        for k, v in want.items():
            assert got[k] == (pytest.approx(v, rel=1e-12) if isinstance(v, float)
                              and np.isfinite(v) else v), (pane, k)


def test_report_reads_a_window_session(tmp_path, capsys, query_weight):
    path = tmp_path / "q.npy"
    np.save(path, query_weight)
    settings = Settings(method="percentile", percentile=99.5, bits=5, axis=1, group_size=64)
    session = {"format": "quantscope-session", "version": 1,
               "source": {"kind": "file", "name": str(path)}, "settings": settings.to_dict()}
    (tmp_path / "s.json").write_text(json.dumps(session))
    assert main(["report", "--session", str(tmp_path / "s.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["settings"] == settings.to_dict()
    assert doc["applied"]["axis_rule"].startswith("axis 1 given")
    want = analyze(query_weight, pane_params(query_weight, "asymmetric/channel", settings))
    assert doc["schemes"]["asymmetric/channel"]["sqnr_db"] == pytest.approx(want.sqnr_db,
                                                                           rel=1e-12)
