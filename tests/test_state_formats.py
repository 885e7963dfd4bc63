"""The comparison layout in the state: a format per pane, the engine's numbers, Qt-free."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams, prepare
from quantscope.core.formats.catalog import bits_per_element
from quantscope.core.formats.gguf_types import GGUF_TYPES
from quantscope.state import (
    PANES,
    ComputeRequest,
    Settings,
    SettingsError,
    compute_reports,
    pane_title,
)
from quantscope.state.formats import CHOICES, DEFAULT_COMPARISON, format_points


def test_settings_take_four_known_formats_and_round_trip():
    s = Settings(formats=DEFAULT_COMPARISON).check()
    assert Settings.from_dict(s.to_dict()) == s
    for bad in (("mxfp4",) * 3, ("fp8_e4m3",) * 4, ("mxfp4/channel",) * 4):
        with pytest.raises(SettingsError):
            Settings(formats=bad).check()


def test_titles_name_the_formats():
    s = Settings(formats=DEFAULT_COMPARISON)
    assert [pane_title(p, s) for p in PANES] == [
        "int8 · per-channel", "FP8 E4M3 · per-tensor", "MXFP4 · blocks of 32 · E8M0 scales",
        "INT4 g128 · fp16 scales"]


@pytest.mark.parametrize("use_prepared", [False, True])
def test_comparison_panes_are_the_engine_reports(query_weight, use_prepared):
    x = query_weight
    formats = ("fp8_e5m2/channel", "nvfp4", "nf4", "int8/tensor")
    s = Settings(formats=formats, axis=0)
    prep = prepare(x) if use_prepared else None
    res = compute_reports(ComputeRequest(1, x, s, prep))
    assert not res.errors
    want = [choose_qparams(x, format="fp8_e5m2", granularity="channel", axis=0),
            choose_qparams(x, format="nvfp4"), choose_qparams(x, format="nf4"),
            choose_qparams(x)]
    for pane, p in zip(PANES, want, strict=True):
        r = analyze(x, p)
        got = res.reports[pane]
        assert got.sqnr_db == pytest.approx(r.sqnr_db, abs=1e-9)
        assert np.array_equal(got.code_histogram, r.code_histogram)


def test_methods_reach_the_element_formats(gelu_activations):
    x = gelu_activations
    s = Settings(formats=("fp8_e4m3/tensor", "fp4_e2m1/channel", "int4_g64", "mxfp4"),
                 method="percentile", percentile=99.9, axis=-1)
    res = compute_reports(ComputeRequest(1, x, s))
    p = choose_qparams(x, format="fp8_e4m3", method="percentile", percentile=99.9)
    assert res.reports["symmetric/tensor"].sqnr_db == analyze(x, p).sqnr_db
    manual = Settings(formats=s.formats, method="manual", manual_clip=(-1.0, 2.0), axis=-1)
    rm = compute_reports(ComputeRequest(1, x, manual)).reports["symmetric/tensor"]
    assert float(rm.params.scale) == np.float32(2.0 / 448)
    assert rm.clipped_above > 0


def test_format_points_cover_every_format(query_weight):
    x = query_weight
    pts = {p.spec: p for p in format_points(x, prepare(x), Settings(axis=0))}
    k_quants = {n for n, t in GGUF_TYPES.items() if t.block == 256}  # 384 is no row of theirs
    assert (set(CHOICES) - k_quants) | {f"int{b}/channel" for b in range(2, 8)} == set(pts)
    assert pts["gguf_q4_0"].bits_per_element == 4.5
    p = choose_qparams(x, format="mxfp4")
    assert pts["mxfp4"].sqnr_db == analyze(x, p).sqnr_db
    assert pts["mxfp4"].bits_per_element == bits_per_element(p, x.size) == 4.25
    assert pts["int4/channel"].sqnr_db < pts["int8/channel"].sqnr_db


def test_describe_keys_the_comparison_by_format_as_report_format_json():
    """``report --json`` of the comparison layout and ``report --format --json`` file the
    same format under the same key with the same numbers."""
    from quantscope.commands.format_report import summaries
    from quantscope.state import ExplorerState, Source
    from quantscope.state.formats import format_reports

    x = np.random.default_rng(5).normal(size=(32, 128)).astype(np.float32)
    st = ExplorerState()
    st.set_tensor(x, Source("array", "x", axis=0))
    specs = ("nvfp4", "int8/channel", "mxfp4", "int4_g32")
    st.update_settings(formats=specs)
    st.compute()
    doc = st.describe()
    assert "schemes" not in doc and doc["errors"] == {}
    reports, _ = format_reports(x, specs, st.settings)
    for spec, row in summaries(reports).items():
        got = dict(doc["formats"][spec])
        assert got.pop("pane") == PANES[specs.index(spec)]
        assert got == row, spec
