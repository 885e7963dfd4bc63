"""One number per tensor, format and setting, whichever entry point prints it.

``quantscope scan --formats`` (and ``quantscope.scan(..., formats=True)``) names each tensor's
best 8-bit and 4-bit format with its SQNR; ``quantscope export`` prints and stores a report;
``quantscope report --format`` prints every format's figures on the tensor prepared as the window
prepares it (the window's panes take the very same path:
``test_cli_formats.test_report_formats_are_the_comparison_panes``). Above
``pane_rules.DIRECT_MAX`` elements a per-tensor or per-channel report comes from sorted prefix
sums, whose last digits differ from a direct pass's; so each size class is checked: below the
error screen's ``SCREEN_MIN``, screened with direct reports, and prepared (above
``DIRECT_MAX``). The tensors are shaped so that the winners include formats of each path
(rows of 300 hold no whole GGUF block, so int8, FP8, MX and INT4 groups compete there).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import quantscope
from quantscope.cli import main
from quantscope.state.formats import SCREEN_MIN, best_key, candidates, element_bits
from quantscope.state.pane_rules import DIRECT_MAX


def _tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(37)
    heavy = (rng.standard_t(5, size=(1024, 512)) * 0.02).astype(np.float32)
    ranges = rng.uniform(0.01, 1.0, size=(1000, 1)).astype(np.float32)
    uniform = (rng.uniform(-1, 1, size=(1000, 300)) * ranges).astype(np.float32)
    normal = rng.normal(0, 0.05, size=(900, 300)).astype(np.float32)
    return {"small.weight": heavy[:150, :256], "mid.weight": heavy[:256],
            "heavy.weight": heavy, "uniform.weight": uniform, "normal.weight": normal}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> tuple[str, dict[str, np.ndarray]]:
    tensors = _tensors()
    sizes = sorted(x.size for x in tensors.values())
    assert sizes[0] < SCREEN_MIN < sizes[1] <= DIRECT_MAX < sizes[2]
    path = tmp_path_factory.mktemp("one_number") / "model.npz"
    np.savez(path, **tensors)
    return str(path), tensors


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_scan_formats_prints_the_numbers_report_prints(model, capsys):
    """Each scanned winner's SQNR is ``report --format``'s to the bit, and it is the best of
    ``report``'s own figures among its candidates (the screen decided on the printed
    numbers)."""
    path, tensors = model
    scan = _json(capsys, ["scan", path, "--formats", "--json", "--no-progress"])
    rows = {row["name"]: row for row in scan["tensors"]}
    assert set(rows) == set(tensors)
    table = quantscope.scan(path, formats=True)  # the Python entry: the same points
    for name, row in rows.items():
        best = table[name].formats
        assert best is not None
        assert (row["best_8bit"]["format"], row["best_8bit"]["sqnr_db"]) == (
            best.best8.spec, best.best8.sqnr_db)
        assert (row["best_4bit"]["format"], row["best_4bit"]["sqnr_db"]) == (
            best.best4.spec, best.best4.sqnr_db)
    compared = 0
    winners = set()
    for name in tensors:
        report = _json(capsys, ["report", path, "--tensor", name, "--json", "--format", "all"])
        figures = report["formats"]
        for bits, key in ((8, "best_8bit"), (4, "best_4bit")):
            spec, printed = rows[name][key]["format"], rows[name][key]["sqnr_db"]
            assert printed == figures[spec]["sqnr_db"], (name, spec)
            points = [(figures[c]["sqnr_db"], -figures[c]["bits_per_element"], c)
                      for c in candidates(bits) if c in figures]
            assert all(element_bits(c.split("/")[0]) == bits for *_, c in points)
            best = max(points, key=lambda p: best_key(_Point(p[0], -p[1])))
            assert best[2] == spec, (name, bits, best, spec)
            compared += len(points)
            winners.add(spec)
    # the sorted path's formats are among the winners (else the test would prove little)
    assert winners & {"int8/channel", "int8/tensor", "int4_g32", "int4_g64", "int4_g128"}
    assert compared > 100


@pytest.mark.parametrize(("options", "key"), [
    ((), ("schemes", "symmetric/tensor")),
    (("--granularity", "channel", "--axis", "0"), ("schemes", "symmetric/channel")),
    (("--format", "fp8_e4m3"), ("formats", "fp8_e4m3/tensor")),
])
def test_export_records_the_number_report_prints(model, capsys, tmp_path, options, key):
    """The SQNR an export prints and stores in its archive is ``report``'s for the same
    scheme, on a tensor above ``DIRECT_MAX`` (prepared by ``report``) and one below."""
    path, _ = model
    for name in ("mid.weight", "uniform.weight"):
        out = tmp_path / f"{name}.npz"
        assert main(["export", path, "--tensor", name, "-o", str(out), *options]) == 0
        printed = capsys.readouterr().out
        with np.load(out, allow_pickle=False) as archive:
            stored = json.loads(str(archive["metadata"]))["report"]["sqnr_db"]
        extra = ["--format", "fp8_e4m3"] if key[0] == "formats" else []
        report = _json(capsys, ["report", path, "--tensor", name, "--json", *extra])
        shown = report[key[0]][key[1]]["sqnr_db"]
        assert stored == shown, (name, options)
        assert f"SQNR {shown:.2f} dB" in printed


class _Point:
    """What :func:`best_key` reads of a point."""

    def __init__(self, sqnr_db: float, bits_per_element: float) -> None:
        self.sqnr_db, self.bits_per_element = sqnr_db, bits_per_element


def _scan_report_differences(capsys, path: str, names: set[str]) -> list[tuple]:
    """The plain scan's per-tensor and per-channel SQNRs of ``names`` that are not ``report``'s
    symmetric int8 panes' (both granularities) to the bit."""
    scan = _json(capsys, ["scan", path, "--json", "--no-progress"])
    rows = [row for row in scan["tensors"] if row["name"] in names]
    assert {row["name"] for row in rows} == names
    differ = []
    for row in rows:
        report = _json(capsys, ["report", path, "--tensor", row["name"], "--json"])
        for key, pane in (("per_tensor_sqnr_db", "symmetric/tensor"),
                          ("per_channel_sqnr_db", "symmetric/channel")):
            if row[key] != report["schemes"][pane]["sqnr_db"]:
                differ.append((row["name"], pane, row[key], report["schemes"][pane]["sqnr_db"]))
    return differ


def test_plain_scan_prints_report_int8_numbers_on_direct_tensors(model, capsys):
    """Up to ``DIRECT_MAX`` elements ``report`` takes the direct pass, and so does the plain
    scan (not its fused pass, whose sums are added in another order): the same SQNRs to the
    bit, per tensor and per channel, from the CLI and from ``quantscope.scan``."""
    path, tensors = model
    direct = {name for name, x in tensors.items() if x.size <= DIRECT_MAX}
    assert direct == {"small.weight", "mid.weight"}
    assert not _scan_report_differences(capsys, path, direct)
    table = quantscope.scan(path)
    for name in direct:
        report = _json(capsys, ["report", path, "--tensor", name, "--json"])["schemes"]
        figures = table[name].figures
        assert figures is not None
        assert figures.per_tensor_db == report["symmetric/tensor"]["sqnr_db"]
        assert figures.per_channel_db == report["symmetric/channel"]["sqnr_db"]


@pytest.mark.xfail(strict=True, reason=(
    "above DIRECT_MAX the plain scan's fused one-read pass sums the int8 errors in its own "
    "order (per row chunk) and a prepared tensor's report from sorted prefix sums: equal "
    "to 1e-9 (here ~1e-14) relative, not to the bit; one number needs one correctly rounded "
    "sum in every path"))
def test_plain_scan_prints_report_int8_numbers_on_prepared_tensors(model, capsys):
    """The plain scan's per-tensor and per-channel SQNRs are ``report``'s symmetric int8
    panes' on the tensors ``report`` prepares: known to differ in the last digits today."""
    path, tensors = model
    prepared = {name for name, x in tensors.items() if x.size > DIRECT_MAX}
    assert len(prepared) == 3
    differ = _scan_report_differences(capsys, path, prepared)
    assert not differ, differ


def test_plain_scan_prints_report_int8_numbers_on_small_tensors_of_one_shape(tmp_path, capsys):
    """Small tensors of one shape are evaluated together by the plain scan (one analysis of
    them stacked), a NaN-holding one alone: each row is still ``report``'s to the bit."""
    rng = np.random.default_rng(11)
    tensors = {f"layers.{i}.weight": (rng.standard_t(4, size=(64, 96)) * 0.03)
               .astype(np.float32) for i in range(5)}
    tensors["layers.1.weight"][3, 7] = 40.0  # one outlier: a range of its own
    tensors["layers.2.weight"][0, 0] = np.nan
    tensors.update({f"layers.{i}.bias": rng.normal(0, 0.1, 300).astype(np.float32)
                    for i in range(3)})
    path = tmp_path / "same_shapes.npz"
    np.savez(path, **tensors)
    weights = {name for name in tensors if name.endswith("weight")}
    assert not _scan_report_differences(capsys, str(path), weights)
    scan = _json(capsys, ["scan", str(path), "--json", "--no-progress"])
    for row in scan["tensors"]:
        if row["name"].endswith("bias"):
            report = _json(capsys, ["report", str(path), "--tensor", row["name"], "--json"])
            assert row["per_tensor_sqnr_db"] == report["schemes"]["symmetric/tensor"]["sqnr_db"]
