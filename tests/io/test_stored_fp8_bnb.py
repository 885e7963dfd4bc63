"""FP8 checkpoints (transformers' fine-grained FP8, FBGEMM) and bitsandbytes ones, built with
torch and bitsandbytes and compared with their own dequantize element by element."""

from __future__ import annotations

import numpy as np
import pytest

from oracles import need
from quantscope.io.stored import open_stored
from stored_builders import as_f32, mismatches, write_checkpoint

torch = need("torch")


def _fp8_blocks(w, block):
    """DeepSeek-V3's weight quantization: amax / 448 per block, codes in E4M3."""
    rows, cols = w.shape
    bh, bw = block
    grid = torch.empty(-(-rows // bh), -(-cols // bw))
    codes = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            tile = w[i * bh:(i + 1) * bh, j * bw:(j + 1) * bw].float()
            s = tile.abs().amax().clamp(min=1e-12) / 448.0
            grid[i, j] = s
            codes[i * bh:(i + 1) * bh, j * bw:(j + 1) * bw] = (tile / s).to(torch.float8_e4m3fn)
    return codes, grid


@pytest.mark.parametrize("shape", [(256, 384), (200, 300)])  # whole and partial edge blocks
def test_fp8_block_scale_inv(tmp_path, shape):
    from transformers.integrations.finegrained_fp8 import _dequantize_fp8_weight

    w = torch.randn(*shape, generator=torch.Generator().manual_seed(5)) * 0.02
    codes, grid = _fp8_blocks(w, (128, 128))
    write_checkpoint(tmp_path, {"model.layers.0.mlp.gate_proj.weight": codes,
                                "model.layers.0.mlp.gate_proj.weight_scale_inv": grid,
                                "model.norm.weight": torch.ones(8)},
                     {"quant_method": "fp8", "activation_scheme": "dynamic",
                      "weight_block_size": [128, 128]})
    ckpt = open_stored(tmp_path)
    assert ckpt.names == ["model.layers.0.mlp.gate_proj.weight"]
    d = ckpt.decode("model.layers.0.mlp.gate_proj.weight")
    expected = _dequantize_fp8_weight(codes, grid, [128, 128], torch.float32)
    assert mismatches(d.values, as_f32(expected)) == 0
    assert d.format.label == "fp8 fp8_e4m3 block 128x128"
    assert d.scales.shape == (2, 3)


def test_fbgemm_fp8_per_channel(tmp_path):
    w = torch.randn(64, 96, generator=torch.Generator().manual_seed(6)) * 0.1
    scale = (w.abs().amax(1, keepdim=True) / 448.0).float()
    codes = (w / scale).to(torch.float8_e4m3fn)
    write_checkpoint(tmp_path, {"l.weight": codes, "l.weight_scale": scale},
                     {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0})
    d = open_stored(tmp_path).decode("l.weight")
    assert mismatches(d.values, as_f32(codes.float() * scale)) == 0
    assert d.format.granularity == "channel"


@pytest.fixture(scope="module")
def bnb():
    return need("bitsandbytes")


@pytest.mark.parametrize("quant_type", ["nf4", "fp4"])
@pytest.mark.parametrize("nested", [False, True])
def test_bitsandbytes_4bit(tmp_path, bnb, quant_type, nested):
    """Quantized by bitsandbytes itself (its CPU build quantizes NF4 and FP4 here) and stored
    as transformers stores ``Params4bit``: the packed state beside the codes."""
    import bitsandbytes.functional as F

    w = (torch.randn(96, 200, generator=torch.Generator().manual_seed(9)) * 0.02).to(
        torch.bfloat16)
    q, state = F.quantize_4bit(w, blocksize=64, quant_type=quant_type,
                               compress_statistics=nested)
    expected = F.dequantize_4bit(q, state)
    tensors = {"model.layers.0.mlp.up_proj.weight": q}
    tensors.update({f"model.layers.0.mlp.up_proj.weight.{k}": v
                    for k, v in state.as_dict(packed=True).items()})
    write_checkpoint(tmp_path, tensors,
                     {"quant_method": "bitsandbytes", "load_in_4bit": True,
                      "bnb_4bit_quant_type": quant_type,
                      "bnb_4bit_use_double_quant": nested})
    d = open_stored(tmp_path).decode("model.layers.0.mlp.up_proj.weight")
    assert d.values.shape == (96, 200) and d.decoded_dtype == "bfloat16"
    assert mismatches(d.values, as_f32(expected)) == 0
    assert d.format.element == quant_type and d.format.group_size == 64
    assert 0 <= d.codes.min() and d.codes.max() <= 15


def test_bitsandbytes_int8(tmp_path, bnb):
    import bitsandbytes.functional as F

    w = (torch.randn(64, 128, generator=torch.Generator().manual_seed(4)) * 0.05).half()
    codes, scb, _ = F.int8_vectorwise_quant(w)
    write_checkpoint(tmp_path, {"l.weight": codes, "l.SCB": scb,
                                "l.weight_format": torch.tensor([0], dtype=torch.uint8)},
                     {"quant_method": "bitsandbytes", "load_in_8bit": True})
    ckpt = open_stored(tmp_path)
    assert ckpt.names == ["l.weight"] and ckpt.plain() == []
    d = ckpt.decode("l.weight")
    assert mismatches(d.values, as_f32(F.int8_vectorwise_dequant(codes, scb))) == 0
    assert d.format.label == "bitsandbytes int8 per channel"
    assert np.array_equal(d.codes, codes.numpy())
