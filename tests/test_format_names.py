"""Every text that shows a number format's report names the format: the ``report --format``
table, a report's repr and its notebook table, and the ``scan --formats`` table (a table of
numbers that does not say which format they measure cannot be compared with anything)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import quantscope as qs
from quantscope.cli import main

FORMATS = ("nvfp4", "fp8_e4m3", "mxfp4", "int4_g128")


@pytest.fixture(scope="module")
def weight():
    return np.random.default_rng(5).standard_normal((32, 256)).astype(np.float32)


def _cli(*argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0, argv
    return out.getvalue()


@pytest.mark.parametrize("fmt", FORMATS)
def test_report_format_table_names_it(weight, tmp_path, fmt):
    path = tmp_path / "w.npy"
    np.save(path, weight)
    rows = _cli("report", str(path), "--format", fmt).splitlines()
    assert rows[1].split()[0] == "format"  # the column
    assert next(r.split()[0] for r in rows[2:] if r.strip()).startswith(fmt)


@pytest.mark.parametrize("fmt", ("nvfp4", "fp8_e4m3", "mxfp4"))
def test_report_repr_and_html_name_it(weight, fmt):
    r = qs.analyze(weight, qs.choose_qparams(weight, format=fmt))
    assert repr(r).startswith(f"<QuantReport {fmt} ")
    caption = r._repr_html_().split("<caption")[1].split("</caption>")[0]
    assert f"QuantReport: {fmt}, " in caption


def test_int_report_html_names_bits_and_symmetry(weight):
    r = qs.analyze(weight, qs.choose_qparams(weight, symmetric=False, bits=4))
    assert "QuantReport: asymmetric int4, per tensor" in r._repr_html_()
    assert repr(r).startswith("<QuantReport asymmetric int4 per-tensor")


def test_scan_formats_table_names_the_best_formats(weight, tmp_path):
    path = tmp_path / "m.npz"
    np.savez(path, **{"fc.weight": weight})
    lines = _cli("scan", str(path), "--formats").splitlines()
    head = lines[1]
    assert "best 8-bit" in head and "best 4-bit" in head
    row = lines[2].split()
    from quantscope.state.formats import CHOICES

    named = [c for c in row if c in CHOICES or c.split("/")[0] in CHOICES]
    assert len(named) == 2  # the best 8-bit and the best 4-bit, by name
