"""A GGUF file as the quantized side of ``scan --reference``: its tensors decoded as gguf-py
dequantizes them, matched to the Hugging Face original by llama.cpp's names (query and key
rows un-permuted with the file's head counts), measured like any stored weight."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gguf_files import write_gguf

from oracles import need
from quantscope.cli import main
from quantscope.io import load_for_analysis
from quantscope.io.gguf_file import load_gguf_blocks
from quantscope.state.stored_compare import compare, open_quantized
from quantscope.state.stored_overview import overview

ORIGINAL = (Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources"
            / "samples" / "layer0_bf16.safetensors")
#: Q4_K where rows are whole super-blocks of 256 (1536 columns), Q4_0 / Q8_0 elsewhere, as
#: llama.cpp falls back for rows of 384.
KINDS = {"encoder.layer.0.output.dense.weight": "gguf_q4_k",
         "encoder.layer.0.intermediate.dense.weight": "gguf_q4_0",
         "encoder.layer.0.attention.self.query.weight": "gguf_q8_0"}


@pytest.fixture(scope="module")
def minilm_gguf(tmp_path_factory) -> Path:
    need("gguf")
    tensors = {name: (load_for_analysis(ORIGINAL, name)[0], kind)
               for name, kind in KINDS.items()}
    tensors["encoder.layer.0.output.dense.bias"] = (
        load_for_analysis(ORIGINAL, "encoder.layer.0.output.dense.bias")[0], "F32")
    return write_gguf(tmp_path_factory.mktemp("gguf") / "minilm-mixed.gguf", tensors)


def test_gguf_tensors_decode_as_gguf_py_does(minilm_gguf):
    gguf = need("gguf")
    stored = open_quantized(minilm_gguf)
    assert sorted(stored.names) == sorted(KINDS)
    compared = 0
    for name in KINDS:
        d = stored.decode(name)
        blocks, _, shape = load_gguf_blocks(minilm_gguf, name)
        kind = getattr(gguf.GGMLQuantizationType, d.format.element)
        expected = gguf.quants.dequantize(blocks.reshape(shape[0], -1), kind).reshape(shape)
        assert np.array_equal(d.values.view(np.uint32),
                              expected.astype(np.float32).view(np.uint32))
        compared += d.values.size
        lo, hi = d.window()
        assert np.all(lo <= d.values) and np.all(d.values <= hi)
    assert compared == 384 * 1536 * 2 + 384 * 384


def test_what_the_gguf_lost(minilm_gguf, capsys):
    assert main(["scan", str(minilm_gguf), "--reference", str(ORIGINAL), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {t["name"]: t for t in doc["tensors"]}
    assert doc["method"] == "gguf" and set(rows) == set(KINDS)
    q4k = rows["encoder.layer.0.output.dense.weight"]["stored"]
    assert q4k["format"] == "gguf Q4_K"
    assert q4k["bits_per_element"] == pytest.approx(4.5)
    q8 = rows["encoder.layer.0.attention.self.query.weight"]["stored"]
    assert q8["sqnr_db"] > q4k["sqnr_db"] + 15  # 8-bit blocks lose far less than 4-bit
    result = compare(minilm_gguf, ORIGINAL, with_alternatives=False)
    assert all(r.problem is None for r in result.rows)


def test_overview_counts_codes_of_the_block_type(minilm_gguf):
    d = open_quantized(minilm_gguf).decode("encoder.layer.0.output.dense.weight")
    o = overview(d)
    assert o.levels == 16 and sum(o.code_counts) == 384 * 1536


def test_llama_names_and_permuted_query_rows(tmp_path):
    """llama.cpp's ``blk.0.attn_q.weight`` holds ``model.layers.0.self_attn.q_proj.weight``
    with its rows permuted per head; matched and un-permuted, it equals the decoded original."""
    need("gguf")
    heads, half, cols = 4, 8, 256
    rng = np.random.default_rng(3)
    q = (rng.standard_normal((heads * 2 * half, cols)) * 0.02).astype(np.float32)
    permuted = q.reshape(heads, 2, half, cols).swapaxes(1, 2).reshape(q.shape)
    write_gguf(tmp_path / "m.gguf", {"blk.0.attn_q.weight": (permuted, "gguf_q8_0")},
               metadata={"llama.attention.head_count": heads})
    need("safetensors.torch")
    import torch
    from safetensors.torch import save_file

    save_file({"model.layers.0.self_attn.q_proj.weight": torch.from_numpy(q)},
              str(tmp_path / "orig.safetensors"))
    result = compare(tmp_path / "m.gguf", tmp_path / "orig.safetensors",
                     with_alternatives=False)
    (row,) = result.rows
    assert row.name == "model.layers.0.self_attn.q_proj.weight" and row.problem is None
    assert row.stored.sqnr_db > 35  # Q8_0 of the right rows; permuted rows would be noise
