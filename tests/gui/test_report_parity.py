"""``quantscope report --json`` and the window's ``--metrics`` file give the same numbers, bit
for bit: for the same tensor and settings every scale, zero point, count, error sum and SQNR is
equal with ``==``, not within a tolerance (both come through the prepared engine path)."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from quantscope.cli import main
from quantscope.core.tensors.generators import generate
from quantscope.io.samples import sample_path
from quantscope.state import PANES
from quantscope.state.formats import CHOICES

#: The tensors the settings are tried on: two real ones (a weight, skewed activations with an
#: outlier feature) and a generated outlier-heavy weight of a shape whose groups do not divide.
TENSORS = ("query_weight", "gelu_activations", "outliers")


@pytest.fixture(scope="module")
def tensor_files(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("parity")
    out = {name: str(sample_path(name)) for name in TENSORS[:2]}
    path = root / "outliers_weight.npy"
    np.save(path, generate("outliers", (48, 200), seed=5))
    out["outliers"] = str(path)
    return out


def settings_options(draw) -> list[str]:
    """Command-line settings, as both the window and ``report`` take them."""
    opts = ["--bits", str(draw(st.integers(2, 8)))]
    axis = draw(st.sampled_from((None, None, 0, 1)))  # None: the tensor's role decides
    if axis is not None:
        opts += ["--axis", str(axis)]
    method = draw(st.sampled_from(("minmax", "percentile", "mse", "entropy", "manual")))
    if method == "manual":
        lo = draw(st.sampled_from((-3.0, -0.5, -0.05, 0.0)))
        hi = draw(st.sampled_from((0.02, 0.3, 2.0, 10.0)))
        opts += ["--clip", str(lo), str(hi)]
    else:
        opts += ["--method", method]
        if method == "percentile":
            opts += ["--percentile", str(draw(st.sampled_from((90.0, 99.0, 99.9, 99.99))))]
        runtime = draw(st.sampled_from((None, None, "pytorch", "onnxruntime", "tflite",
                                        "tensorrt")))
        if runtime is not None:
            opts += ["--runtime", runtime]
    opts += ["--rounding", draw(st.sampled_from(("half_even", "half_away")))]
    opts += ["--code-range", draw(st.sampled_from(("default", "narrow", "full")))]
    group = draw(st.sampled_from((None, None, 32, 128)))
    if group is not None:
        opts += ["--group-size", str(group)]
    return opts


@st.composite
def cases(draw) -> tuple[str, list[str]]:
    return draw(st.sampled_from(TENSORS)), settings_options(draw)


def window_metrics(path: str, options: list[str], out) -> dict:
    """The window's ``--metrics`` document (rendered offscreen, in this process)."""
    assert main([path, "--size", "1280x720", *options, "--metrics", str(out)]) == 0
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def report_json(path: str, options: list[str]) -> dict:
    """``quantscope report --json``'s document."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["report", path, *options, "--json"]) == 0
    return json.loads(buf.getvalue())


def assert_same_numbers(window: dict, report: dict) -> None:
    assert window["settings"] == report["settings"]
    assert window["applied"] == report["applied"]
    assert set(window["errors"]) == set(report["errors"])
    assert set(window["schemes"]) == set(report["schemes"])
    for pane, want in report["schemes"].items():
        got = window["schemes"][pane]
        assert got == want, {k: (got[k], want[k]) for k in want if got.get(k) != want[k]}
        assert window["panes"][pane]["values"] == want


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=cases())
@example(case=("query_weight", ["--bits", "6", "--method", "percentile", "--percentile",
                                "99.9"]))  # the case found in review
@example(case=("gelu_activations", []))  # the defaults, on the demo tensor
def test_report_json_equals_window_metrics(qapp, tmp_path_factory, tensor_files, case):
    name, options = case
    out = tmp_path_factory.mktemp("metrics") / "w.json"
    assert_same_numbers(window_metrics(tensor_files[name], options, out),
                        report_json(tensor_files[name], options))


@st.composite
def format_cases(draw) -> tuple[str, list[str], list[str]]:
    """A tensor, four comparison pane formats and a range method."""
    formats = draw(st.lists(st.sampled_from(CHOICES), min_size=4, max_size=4))
    method = draw(st.sampled_from((["--method", "minmax"], ["--method", "mse"],
                                   ["--method", "percentile", "--percentile", "99.9"],
                                   ["--clip", "-0.2", "0.3"])))
    return draw(st.sampled_from(TENSORS)), formats, method


@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=format_cases())
@example(case=("query_weight", ["fp8_e4m3/channel", "int4_g128", "fp4_e2m1/tensor", "nvfp4"],
               ["--method", "percentile", "--percentile", "99.9"]))
@example(case=("query_weight", ["mxfp4", "nvfp4", "nvfp4_modelopt", "nf4"],
               ["--method", "mse"]))  # each block's stored scale searched (NF4's not)
def test_report_formats_equal_the_windows_comparison_panes(qapp, tmp_path_factory,
                                                            tensor_files, case):
    """``report --format`` rows and the window's ``--compare`` panes, with ``==``."""
    name, formats, method = case
    out = tmp_path_factory.mktemp("metrics") / "w.json"
    window = window_metrics(tensor_files[name], ["--compare", ",".join(formats), *method], out)
    report = report_json(tensor_files[name],
                         [*method, *(a for f in formats for a in ("--format", f.split("/")[0]))])
    assert window["applied"] == report["applied"]
    for pane, spec in zip(PANES, formats, strict=True):
        if spec in report["errors"]:
            assert spec in window["errors"] and spec not in window["formats"]
            continue
        got, want = dict(window["formats"][spec]), report["formats"][spec]
        shown_in = got.pop("pane")  # compare mode keys each format, as report --format does
        assert shown_in == pane or formats.count(spec) > 1, (pane, spec)
        assert got == {k: want[k] for k in got}, (pane, spec)
