"""GGUF files: written by gguf-py's GGUFWriter, read by quantscope, decoded bit for bit as
gguf-py's own reader and dequantizer decode them; opened through every entry point's loader."""

from __future__ import annotations

import numpy as np
import pytest
from gguf_files import write_gguf

from oracles import need
from quantscope.core.formats.gguf import from_blocks
from quantscope.io import detect_format, list_tensors, load_for_analysis
from quantscope.io.gguf_file import load_gguf, load_gguf_blocks, read_header, stored_format
from quantscope.io.samples import sample_path

KINDS = ["F32", "F16", "BF16", "gguf_q8_0", "gguf_q4_0", "gguf_q4_1", "gguf_q5_0", "gguf_q5_1",
         "gguf_q2_k", "gguf_q3_k", "gguf_q4_k", "gguf_q5_k", "gguf_q6_k"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    need("gguf")
    x = np.load(sample_path("gelu_activations")).astype(np.float32)[:64]  # 64 x 1536
    path = tmp_path_factory.mktemp("gguf") / "model.gguf"
    tensors = {f"blk.{i}.{k}": (x * (i + 1), k) for i, k in enumerate(KINDS)}
    write_gguf(path, tensors, metadata={"general.name": "minilm-gelu", "test.count": 7})
    return path, tensors


def test_every_type_decodes_as_gguf_py_reads_it(model):
    gguf = need("gguf")
    path, tensors = model
    reader = gguf.GGUFReader(str(path))
    theirs = {t.name: t for t in reader.tensors}
    assert detect_format(path) == "gguf"
    infos = {i.name: i for i in list_tensors(path)}
    assert set(infos) == set(tensors)
    compared = 0
    for name, (x, kind) in tensors.items():
        got, info = load_for_analysis(path, name)
        assert got.shape == x.shape == info.shape and got.dtype == np.float32
        t = theirs[name]
        want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(x.shape).astype(np.float32)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), name
        compared += got.size
        assert stored_format(info) == (kind if kind.startswith("gguf_") else None)
    assert compared == 13 * 64 * 1536


def test_stored_blocks_rebuild_the_engine_params(model):
    path, tensors = model
    blocks, fmt, shape = load_gguf_blocks(path, "blk.10.gguf_q4_k")
    x = tensors["blk.10.gguf_q4_k"][0]
    p = from_blocks(blocks, fmt, shape)
    import quantscope as qs

    r = qs.analyze(x, p)
    assert r.sqnr_db == qs.analyze(x, qs.choose_qparams(x, format="gguf_q4_k")).sqnr_db
    assert 20 < r.sqnr_db < 40


def test_metadata_and_dense_tensors_as_stored(model):
    path, _ = model
    head = read_header(path)
    assert head.metadata["general.name"] == "minilm-gelu"
    assert head.metadata["test.count"] == 7
    assert head.version == 3
    raw, info = load_gguf(path, "blk.2.BF16")
    assert info.dtype == "bfloat16" and info.file_dtype == "BF16" and raw.dtype.name == "bfloat16"


def test_cli_reads_gguf_everywhere(model, tmp_path, capsys):
    """``report --format``, ``scan`` and ``export --format`` on a .gguf file: the decoded
    tensor's numbers, the stored type named, llama.cpp's bytes in the archive."""
    import json

    import quantscope as qs
    from quantscope.cli import main

    gguf = need("gguf")
    path, _ = model
    name = "blk.11.gguf_q5_k"
    decoded = load_for_analysis(path, name)[0]
    assert main(["report", str(path), "--tensor", name, "--json", "--format", "gguf_q8_0",
                 "--format", "gguf_q4_k"]) == 0
    doc = json.loads(capsys.readouterr().out)["formats"]
    for fmt in ("gguf_q8_0", "gguf_q4_k"):
        want = qs.analyze(decoded, qs.choose_qparams(decoded, format=fmt))
        assert doc[fmt]["sqnr_db"] == want.sqnr_db
    assert doc["gguf_q8_0"]["bits_per_element"] == 8.5
    assert main(["scan", str(path), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["tensors"]}
    assert rows[name]["stored"] == "gguf_q5_k" and rows["blk.0.F32"]["stored"] is None
    out = tmp_path / "q4k.npz"
    assert main(["export", str(path), "--tensor", name, "--format", "gguf_q4_k",
                 "-o", str(out)]) == 0
    with np.load(out, allow_pickle=False) as z:
        blocks, meta = z["blocks"], json.loads(str(z["metadata"]))
    from quantscope.core.formats.gguf import encode

    assert np.array_equal(blocks, encode(decoded, "gguf_q4_k"))
    assert meta["scheme"]["ggml_type"] == "Q4_K" and meta["scheme"]["type_size"] == 144
    back = gguf.quants.dequantize(blocks.reshape(-1), gguf.GGMLQuantizationType.Q4_K)
    p = qs.choose_qparams(decoded, format="gguf_q4_k")
    assert np.array_equal(back.reshape(decoded.shape), p.dequantize())
