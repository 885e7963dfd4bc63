"""``quantscope scan QUANTIZED --reference ORIGINAL``: an int4 compressed-tensors checkpoint
made from the bundled bf16 MiniLM layer by the real compressed-tensors package, measured
against that original; and the overview of a quantized checkpoint without one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from oracles import need
from quantscope.cli import main
from quantscope.core.stats.report import sqnr_db
from quantscope.io import load_for_analysis
from quantscope.io.stored import open_stored
from quantscope.state.stored_compare import compare, match_names, stored_figures
from quantscope.state.stored_overview import overview
from stored_builders import compress_checkpoint, write_checkpoint

ORIGINAL = (Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources"
            / "samples" / "layer0_bf16.safetensors")
QUERY = "encoder.layer.0.attention.self.query.weight"


@pytest.fixture(scope="module")
def quantized(tmp_path_factory) -> Path:
    need("compressed_tensors")
    return compress_checkpoint(ORIGINAL, tmp_path_factory.mktemp("w4a16") / "minilm-w4a16")


def test_figures_equal_a_direct_computation(quantized):
    """SQNR and the rounding / clipping split, recomputed here from the decoded values, the
    original and the stored codes, scales and zero points themselves."""
    ckpt = open_stored(quantized)
    d = ckpt.decode(QUERY)
    x, _ = load_for_analysis(ORIGINAL, QUERY)
    f = stored_figures(x, d)
    err = (x.astype(np.float64) - d.values) ** 2
    assert f.sqnr_db == pytest.approx(sqnr_db(float((x.astype(np.float64) ** 2).sum()),
                                              float(err.sum())), rel=1e-12)
    # clipped: beyond what code -8 or 7 decodes to (in bf16, as every value is) with the
    # element's own scale and zero point
    scale = np.repeat(d.scales, 128, axis=1)
    zero = np.repeat(d.zero_points, 128, axis=1)
    lo, hi = (((c - zero) * scale).astype(np.float32).astype(ml_dtypes.bfloat16)
              .astype(np.float32) for c in (-8, 7))
    clipped = (x < lo) | (x > hi)
    assert f.clipping_mse == pytest.approx(err[clipped].sum() / x.size, rel=1e-9)
    assert f.rounding_mse == pytest.approx(err[~clipped].sum() / x.size, rel=1e-9)
    assert 0 < clipped.mean() < 0.02 and f.clipped_fraction == pytest.approx(clipped.mean())
    # every clipped element is decoded to its window's edge, every other one inside it
    assert np.array_equal(d.values[clipped], np.where(x < lo, lo, hi)[clipped])


def test_compare_table_rows_and_alternatives(quantized):
    result = compare(quantized, ORIGINAL)
    rows = result.ranked()
    assert len(rows) == 6 and all(r.problem is None for r in rows)
    assert [r.stored.sqnr_db for r in rows] == sorted(r.stored.sqnr_db for r in rows)
    for r in rows:
        assert r.stored.format == "compressed-tensors int4 g128 asym"
        # 4-bit codes, a bf16 scale and a 4-bit zero point per 128, plus weight_shape
        n = math.prod(r.shape)
        assert r.stored.bits_per_element == pytest.approx(4 + 20 / 128 + 128 / n)
        assert 15 < r.stored.sqnr_db < 25
        assert all(a.bits_per_element <= r.stored.bits_per_element + 1e-3
                   for a in r.alternatives)
        assert [a.sqnr_db for a in r.alternatives] == sorted(
            (a.sqnr_db for a in r.alternatives), reverse=True)
        # at 4.157 bits: INT4 g128 (4.125) and FP4 with one float32 scale (and the k-quants
        # below 4 bits); MXFP4 (4.25), INT4 g64, NF4 and NVFP4 (4.5) cost more
        specs = {a.spec for a in r.alternatives}
        assert {"int4_g128", "fp4_e2m1/tensor", "fp4_e2m1/channel"} <= specs
        assert not specs & {"mxfp4", "int4_g64", "nf4", "nvfp4", "int8/channel"}
    assert result.unmatched_reference == []


def test_scan_reference_json(quantized, capsys):
    assert main(["scan", str(quantized), "--reference", str(ORIGINAL), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["method"] == "compressed-tensors" and len(doc["tensors"]) == 6
    row = next(t for t in doc["tensors"] if t["name"] == QUERY)
    assert set(row["stored"]) >= {"format", "bits_per_element", "sqnr_db", "rounding_mse",
                                  "clipping_mse"}
    assert row["best_alternative"] == row["alternatives"][0]
    assert row["reference"] == QUERY and row["shape"] == [384, 384]


def test_scan_reference_table(quantized, capsys):
    assert main(["scan", str(quantized), "--reference", str(ORIGINAL), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "compressed-tensors int4 g128 asym" in out and "best alternative" in out
    assert len([line for line in out.splitlines() if "int4 g128 asym" in line]) == 2


def test_scan_without_reference_shows_codes_and_scales(quantized, capsys):
    assert main(["scan", str(quantized), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = next(t for t in doc["tensors"] if t["name"] == QUERY)
    assert row["levels"] == 16 and row["codes_used"] == 16
    assert sum(row["code_counts"]) == 384 * 384 and row["scales"] == 384 * 3
    d = open_stored(quantized).decode(QUERY)
    o = overview(d)
    assert o.code_counts == tuple(np.bincount(d.codes.reshape(-1) + 8, minlength=16))
    assert row["scale_quantiles"]["q50"] == pytest.approx(float(np.median(d.scales)))
    assert sum(c["count"] for c in row["scale_octaves"]) == 384 * 3


def test_unquantized_path_refused_as_quantized(capsys):
    assert main(["scan", str(ORIGINAL), "--reference", str(ORIGINAL)]) == 2
    assert "declares no quantization" in capsys.readouterr().err


def test_missing_original_and_shape_mismatch(tmp_path, quantized):
    torch = need("torch")
    write_checkpoint(tmp_path / "ref", {QUERY: torch.zeros(384, 383),
                                        "unrelated.weight": torch.zeros(4, 4)}, None)
    result = compare(quantized, tmp_path / "ref" / "model.safetensors",
                     with_alternatives=False)
    problems = {r.name: r.problem for r in result.rows}
    assert "shapes differ" in problems[QUERY]
    assert sum(p == "no tensor of this name in the original" for p in problems.values()) == 5
    assert result.unmatched_reference == ["unrelated.weight"]


def test_match_names_conventions():
    assert match_names(["model.layers.0.q.weight", "lm_head.weight", "layers.1.k.weight"],
                       ["layers.0.q.weight", "lm_head.weight", "model.layers.1.k.weight"]) == {
        "model.layers.0.q.weight": "layers.0.q.weight", "lm_head.weight": "lm_head.weight",
        "layers.1.k.weight": "model.layers.1.k.weight"}


def test_quantized_folder_opens_decoded_in_the_source_path(quantized, capsys):
    """list_tensors, load_for_analysis, ``report`` and the model scan see each stored weight
    once, under its own name, decoded; the plain tensors as they are."""
    from quantscope.io import list_tensors, load_tensor
    from quantscope.io.stored import source_checkpoint
    from quantscope.state.model_scan import scan_checkpoint

    infos = {i.name: i for i in list_tensors(quantized)}
    assert infos[QUERY].format == "stored" and infos[QUERY].shape == (384, 384)
    assert not any(n.endswith(("weight_packed", "weight_scale", "weight_zero_point",
                               "weight_shape")) for n in infos)
    assert infos["encoder.layer.0.attention.self.query.bias"].format == "safetensors"
    decoded = open_stored(quantized).decode(QUERY).values
    x, info = load_for_analysis(quantized, QUERY)
    assert info.format == "stored" and np.array_equal(x, decoded)
    assert np.array_equal(load_tensor(quantized, QUERY), decoded)
    assert main(["report", str(quantized), "--tensor", QUERY, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    from quantscope.core import analyze, choose_qparams
    expected = analyze(decoded, choose_qparams(decoded, symmetric=True, granularity="tensor"))
    assert doc["schemes"]["symmetric/tensor"]["sqnr_db"] == pytest.approx(expected.sqnr_db)
    rows = {r.name: r for r in scan_checkpoint(source_checkpoint(quantized))}
    assert rows[QUERY].status == "ok"
    assert rows[QUERY].figures.per_tensor_db == pytest.approx(expected.sqnr_db, abs=1e-9)
    import quantscope as qs

    table = {r.name: r for r in qs.scan(quantized).rows}
    assert len(table) == 16 and table[QUERY].info.format == "stored"
    assert table[QUERY].figures.per_tensor_db == pytest.approx(expected.sqnr_db, abs=1e-9)
