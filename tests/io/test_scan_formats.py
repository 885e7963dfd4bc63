"""``quantscope scan --formats``: each tensor's best 8-bit and 4-bit format, as report has it."""

from __future__ import annotations

import csv
import io
import json

import ml_dtypes
import numpy as np
import pytest
from io_file_builders import safetensors_bytes, write

from quantscope.cli import main
from quantscope.state.formats import candidates, element_bits

RNG = np.random.default_rng(2020)
EIGHT = ("int8", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "mxfp8_e4m3",
         "mxfp8_e5m2", "mxint8", "gguf_q8_0")
FOUR = ("int4_g32", "int4_g64", "int4_g128", "gptq_int4_g128", "gptq_int4_g128_asym",
        "awq_int4_g128", "torchao_int4_g32", "torchao_int4_g64", "torchao_int4_g128",
        "fp4_e2m1", "mxfp4", "nvfp4", "nvfp4_modelopt", "nf4", "gguf_q4_0", "gguf_q4_1",
        "gguf_q4_k")


@pytest.fixture
def checkpoint(tmp_path):
    """A weight with loud channels (int8 per tensor starves), a calm bf16 weight, heavy-tailed
    activations (FP8's territory), a 1-D norm (no channels) and a wider weight."""
    loud = RNG.standard_normal((64, 256)).astype(np.float32) * 0.02
    loud[:3] *= 100
    tensors = {
        "loud.weight": loud,
        "calm.weight": (RNG.standard_normal((32, 128)) * 0.05).astype(ml_dtypes.bfloat16),
        "ffn.activations": (RNG.standard_t(2, (40, 96)) * 0.5).astype(np.float32),
        "norm.weight": (1 + 0.1 * RNG.standard_normal(96)).astype(np.float16),
        # large enough for the error screen (quantscope.state.formats.SCREEN_MIN), within the
        # size whose reports take the direct pass in both commands
        "wide.weight": (RNG.standard_t(5, (256, 512)) * 0.03).astype(np.float32),
    }
    return write(tmp_path / "model.safetensors", safetensors_bytes(tensors))


def _json(capsys, *argv) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_candidates_are_the_formats_of_each_width():
    assert {c.partition("/")[0] for c in candidates(8)} == set(EIGHT)
    assert {c.partition("/")[0] for c in candidates(4)} == set(FOUR)
    assert not any(c.endswith("/channel") for c in candidates(8, per_channel=False))
    assert {element_bits(n) for n in ("fp6_e2m3", "mxfp6_e3m2")} == {6}


def test_scan_names_the_best_of_report_formats(capsys, checkpoint):
    scan = {t["name"]: t for t in _json(capsys, "scan", str(checkpoint), "--formats",
                                        "--json")["tensors"]}
    assert len(scan) == 5
    for name, row in scan.items():
        # the channel axis by the window's rule in both (weights 0, activations -1)
        shown = _json(capsys, "report", str(checkpoint), "--tensor", name, "--json",
                      *(a for f in EIGHT + FOUR for a in ("--format", f)))["formats"]
        if name == "norm.weight":  # 1-D: scan compares per tensor and per block only
            shown = {k: v for k, v in shown.items() if not k.endswith("/channel")}
        for key, names in (("best_8bit", EIGHT), ("best_4bit", FOUR)):
            pool = {k: v for k, v in shown.items() if k.partition("/")[0] in names}
            want = max(pool, key=lambda k: (pool[k]["sqnr_db"], -pool[k]["bits_per_element"]))
            best = row[key]
            assert best["format"] == want, (name, key, best, pool)
            assert best["sqnr_db"] == pool[want]["sqnr_db"]  # to the bit
            assert best["bits_per_element"] == pool[want]["bits_per_element"]
    # the cases the fixture was built for: scales per channel or per block rescue the loud
    # weight (int8 per channel, or Q8_0's blocks of 32 within each row, which win); a 4-bit
    # format with small blocks (NVFP4's 16, or groups of 32) beats INT4 g128's wide groups
    assert scan["loud.weight"]["best_8bit"]["format"] in ("int8/channel", "gguf_q8_0")
    assert scan["loud.weight"]["best_8bit"]["sqnr_db"] > _json(
        capsys, "report", str(checkpoint), "--tensor", "loud.weight", "--json", "--format",
        "int8")["formats"]["int8/tensor"]["sqnr_db"] + 10
    assert scan["loud.weight"]["best_4bit"]["format"] != "int4_g128"


def test_scan_formats_in_table_and_csv(capsys, checkpoint):
    assert main(["scan", str(checkpoint), "--formats"]) == 0
    table = capsys.readouterr().out
    assert "best 8-bit" in table and "best 4-bit" in table
    assert main(["scan", str(checkpoint), "--formats", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    doc = {t["name"]: t for t in _json(capsys, "scan", str(checkpoint), "--formats",
                                       "--json")["tensors"]}
    for r in rows:
        for key in ("best_8bit", "best_4bit"):
            assert r[key] == doc[r["name"]][key]["format"]
            assert float(r[key + "_sqnr_db"]) == doc[r["name"]][key]["sqnr_db"]
            assert float(r[key + "_bits"]) == doc[r["name"]][key]["bits_per_element"]
    assert main(["scan", str(checkpoint), "--csv"]) == 0  # without --formats: no such columns
    assert "best_8bit" not in capsys.readouterr().out.splitlines()[0]


def test_formats_leave_every_rows_int8_figures_as_the_plain_scan_has_them(tmp_path):
    """Above DIRECT_MAX the int8 figures come from the fused one-read pass with or without
    --formats (a file or in-memory tensors), and the formats join them."""
    import quantscope
    from quantscope.io.checkpoint import list_checkpoint
    from quantscope.state import Settings
    from quantscope.state.model_scan import ModelScan, model_rows
    from quantscope.state.pane_rules import DIRECT_MAX

    rng = np.random.default_rng(41)
    big = (rng.standard_t(4, (600, 512)) * 0.02).astype(np.float32)
    tensors = {"big.weight": big, "bf16.weight": (rng.standard_normal((520, 512)) * 0.1)
               .astype(ml_dtypes.bfloat16), "small.weight": big[:40, :64].copy(),
               "small.bias": big[0, :64].copy()}
    assert min(big.size, 520 * 512) > DIRECT_MAX
    path = write(tmp_path / "m.safetensors", safetensors_bytes(tensors))
    rows = model_rows(list_checkpoint(path))
    plain = ModelScan(rows, Settings()).run()
    with_formats = ModelScan(rows, Settings(), formats=True).run()
    assert [r.figures for r in with_formats] == [r.figures for r in plain]
    assert all(r.formats is not None for r in with_formats)
    memory = quantscope.scan(tensors, formats=True)
    for row in plain:
        assert memory[row.name].figures == row.figures, row.name
        assert memory[row.name].formats == with_formats[row.index].formats, row.name
