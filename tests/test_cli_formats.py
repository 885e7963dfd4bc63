"""``quantscope report --format`` and ``export --format``: the engine's numbers for formats
beyond int8, as a table, as JSON, and as an archive that loads without pickle."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from quantscope import analyze, choose_qparams, prepare
from quantscope.cli import main
from quantscope.state.compute import analyze_with


def test_report_formats_json_equals_engine(tmp_path, capsys, query_weight):
    path = tmp_path / "w.npy"
    np.save(path, query_weight)
    assert main(["report", str(path), "--json", "--format", "fp8_e4m3", "--format", "mxfp4",
                 "--format", "int4_g128", "--format", "int8"]) == 0
    doc = json.loads(capsys.readouterr().out)["formats"]
    assert list(doc) == ["fp8_e4m3/tensor", "fp8_e4m3/channel", "mxfp4", "int4_g128",
                         "int8/tensor", "int8/channel"]
    # the window's path (analyze_with) to the last bit, the other path to 1e-9
    prepared = prepare(query_weight)
    r = analyze(query_weight, choose_qparams(query_weight, format="mxfp4"))
    assert doc["mxfp4"]["sqnr_db"] == analyze_with(query_weight, prepared, r.params).sqnr_db
    assert doc["mxfp4"]["sqnr_db"] == pytest.approx(prepared.analyze(r.params).sqnr_db,
                                                    rel=1e-9)
    assert doc["mxfp4"]["sqnr_db"] == pytest.approx(r.sqnr_db, rel=1e-9)
    assert doc["mxfp4"]["bits_per_element"] == 4.25
    assert doc["int4_g128"]["bits_per_element"] == 4.125
    rc = analyze(query_weight, choose_qparams(query_weight, format="fp8_e4m3",
                                              granularity="channel", axis=0))
    got = doc["fp8_e4m3/channel"]["rounding_mse"]
    assert got == analyze_with(query_weight, prepared, rc.params).rounding_mse
    assert got == pytest.approx(prepared.analyze(rc.params).rounding_mse, rel=1e-9)
    assert got == pytest.approx(rc.rounding_mse, rel=1e-9)

def test_report_formats_table_and_all(capsys):
    assert main(["report", "--sample", "query_weight", "--format", "all"]) == 0
    out = capsys.readouterr().out
    for name in ("nvfp4", "nf4", "mxint8", "fp6_e3m2/channel", "fp8_e5m2fnuz/tensor"):
        assert name in out


def test_report_unknown_format_is_a_clear_error(capsys):
    assert main(["report", "--format", "fp7"]) == 2
    assert "mxfp4" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "mxfp4", "nvfp4", "nf4", "mxint8"])
def test_export_format_loads_without_pickle_and_dequantizes(tmp_path, fmt, query_weight):
    src, out = tmp_path / "w.npy", tmp_path / "out.npz"
    np.save(src, query_weight)
    assert main(["export", str(src), "--format", fmt, "-o", str(out)]) == 0
    z = np.load(out, allow_pickle=False)
    meta = json.loads(str(z["metadata"]))
    scheme = meta["scheme"]
    assert scheme["format"] == fmt
    codes = z["codes"]
    if scheme["element_dtype"]:
        values = codes.view(getattr(ml_dtypes, scheme["element_dtype"])).astype(np.float32)
    elif fmt == "mxint8":
        values = codes.astype(np.float32) / np.float32(64)
    else:
        values = z["values"][codes]
    scale = z["scale"]
    if scheme["block_size"]:
        scale = np.repeat(scale, scheme["block_size"], axis=-1)[:, : query_weight.shape[1]]
    xhat = values * scale
    p = choose_qparams(query_weight, format=fmt)
    assert np.array_equal(xhat, p.dequantize(p.quantize(query_weight)))
    assert meta["report"]["sqnr_db"] == analyze(query_weight, p).sqnr_db


def test_report_formats_are_the_comparison_panes(tmp_path, capsys, query_weight):
    """report --format and the window's comparison panes share one mapping: the same
    settings (here the MSE method and a percentile) give the same numbers."""
    from quantscope.state import ExplorerState, Settings

    path = tmp_path / "w.npy"
    np.save(path, query_weight)
    panes = ("fp8_e4m3/channel", "int4_g128", "fp4_e2m1/tensor", "nvfp4")
    for method, extra in (("mse", []), ("percentile", ["--percentile", "99.9"])):
        assert main(["report", str(path), "--json", "--method", method, *extra,
                     *(a for p in panes for a in ("--format", p.split("/")[0]))]) == 0
        doc = json.loads(capsys.readouterr().out)["formats"]
        settings = Settings(method=method, formats=panes,
                            **({"percentile": 99.9} if extra else {}))
        state = ExplorerState()
        assert state.set_tensor(query_weight, settings=settings)
        state.prepare()  # as the window's loader prepares it: its panes' engine path
        for pane, report in state.compute().items():
            spec = panes[["symmetric/tensor", "symmetric/channel", "asymmetric/tensor",
                          "asymmetric/channel"].index(pane)]
            assert doc[spec]["sqnr_db"] == report.sqnr_db, (method, spec)


def test_report_formats_on_a_1d_tensor_say_why_no_channels(tmp_path, capsys):
    path = tmp_path / "bias.npy"
    np.save(path, np.linspace(-1, 1, 96, dtype=np.float32))
    assert main(["report", str(path), "--json", "--format", "fp8_e4m3", "--format",
                 "mxfp4"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["formats"]) == ["fp8_e4m3/tensor", "mxfp4"]
    assert "1-D" in doc["errors"]["fp8_e4m3/channel"]


def test_torchao_int4_in_report_export_and_the_panes(tmp_path, capsys, query_weight):
    """torchao's int4: ``report --format`` equals the engine and the window's pane (title,
    grid, numbers), and ``export --format`` writes codes, bf16 scales and float zeros that
    dequantize by the written rule to the engine's values."""
    from quantscope.state import ExplorerState, Settings
    from quantscope.state.display import format_grid
    from quantscope.state.formats import format_title

    name = "torchao_int4_g128"
    src, out = tmp_path / "w.npy", tmp_path / "out.npz"
    np.save(src, query_weight)
    assert main(["report", str(src), "--json", "--format", name]) == 0
    doc = json.loads(capsys.readouterr().out)["formats"][name]
    p = choose_qparams(query_weight, format=name)
    assert doc["sqnr_db"] == pytest.approx(analyze(query_weight, p).sqnr_db, rel=1e-12)
    assert doc["bits_per_element"] == 4.25
    panes = (name, "int4_g128", "gptq_int4_g128", "torchao_int4_g32")
    state = ExplorerState()
    assert state.set_tensor(query_weight, settings=Settings(formats=panes))
    state.prepare()
    reports = state.compute()
    assert reports["symmetric/tensor"].sqnr_db == doc["sqnr_db"]
    assert format_title(name) == "torchao INT4 g128 · bf16 scales + float zeros"
    grid = format_grid(reports["symmetric/tensor"].params)
    assert grid.boundaries.size == 16 and np.all(np.diff(grid.boundaries) > 0)
    assert main(["export", str(src), "--format", name, "-o", str(out)]) == 0
    z = np.load(out, allow_pickle=False)
    scheme = json.loads(str(z["metadata"]))["scheme"]
    assert scheme["zero_point_domain"] == "float" and scheme["block_size"] == 128
    bf16 = ml_dtypes.bfloat16
    s = np.repeat(z["scale"], 128, axis=-1).astype(bf16)
    zero = np.repeat(z["zero"], 128, axis=-1).astype(bf16)
    assert np.array_equal(z["scale"].astype(bf16).astype(np.float32), z["scale"])  # bf16
    # the written rule, one bfloat16 rounding per operation
    xhat = ((z["codes"].astype(np.float32) - 8).astype(bf16) * s).astype(bf16) + zero
    assert np.array_equal(xhat.astype(np.float32), p.dequantize(p.quantize(query_weight)))
