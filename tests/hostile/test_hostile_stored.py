"""Quantized checkpoints whose ``quantization_config`` or parts lie: about shapes, group size,
bits, packing, the group index or the packed bitsandbytes state. Each gives one
``TensorFileError`` naming the file and the lie, before any allocation the lie would size."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hostile_support import record

from quantscope.io import TensorFileError
from quantscope.io.stored import open_stored

_NAMES = {np.dtype("<i4"): "I32", np.dtype("<i8"): "I64", np.dtype("<f4"): "F32",
          np.dtype("<f2"): "F16", np.dtype(ml_dtypes.bfloat16): "BF16", np.dtype("u1"): "U8",
          np.dtype("i1"): "I8", np.dtype(ml_dtypes.float8_e4m3fn): "F8_E4M3"}


def _write(folder: Path, tensors: dict[str, np.ndarray], config: object) -> Path:
    header, chunks, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": _NAMES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text
                                               + b"".join(chunks))
    (folder / "config.json").write_text(config if isinstance(config, str)
                                        else json.dumps({"quantization_config": config}))
    return folder


def _refused(folder: Path, name: str, *words: str) -> str:
    with pytest.raises(TensorFileError) as info:
        ckpt = open_stored(folder)
        assert ckpt is not None
        ckpt.decode(name)
    message = str(info.value)
    record(True)
    assert "\n" not in message
    for word in words:
        assert word in message, message
    return message


def _ct(bits=4, group=32, symmetric=True, fmt="pack-quantized", strategy="group"):
    weights = {"num_bits": bits, "type": "int", "symmetric": symmetric, "strategy": strategy,
               "group_size": group}
    return {"quant_method": "compressed-tensors", "format": fmt,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}


def _packed(rows=8, cols=64, bits=4, group=32):
    return {"fc.weight_packed": np.zeros((rows, -(-cols * bits // 32)), "<i4"),
            "fc.weight_scale": np.ones((rows, cols // group), ml_dtypes.bfloat16),
            "fc.weight_shape": np.array([rows, cols], "<i8")}


def test_consistent_checkpoint_decodes(tmp_path):
    """The corpus' baseline: the same tensors under an honest config decode."""
    d = open_stored(_write(tmp_path, _packed(), _ct())).decode("fc.weight")
    assert d.values.shape == (8, 64) and (d.values == -8).all()  # packed 0 is code -8


def test_weight_shape_lies_about_columns(tmp_path):
    t = _packed()
    t["fc.weight_shape"] = np.array([8, 6400], "<i8")
    _refused(_write(tmp_path, t, _ct()), "fc.weight", "weight_packed", "[8, 800]")


def test_weight_shape_claims_a_huge_matrix(tmp_path):
    t = _packed()
    t["fc.weight_shape"] = np.array([1 << 31, 1 << 31], "<i8")
    _refused(_write(tmp_path, t, _ct()), "fc.weight", "weight_packed")


def test_weight_shape_negative(tmp_path):
    t = _packed()
    t["fc.weight_shape"] = np.array([-8, 64], "<i8")
    _refused(_write(tmp_path, t, _ct()), "fc.weight", "weight_shape", "positive")


def test_group_size_lies(tmp_path):
    _refused(_write(tmp_path, _packed(), _ct(group=16)), "fc.weight", "weight_scale",
             "[8, 4]")


def test_bits_lie(tmp_path):
    _refused(_write(tmp_path, _packed(), _ct(bits=8)), "fc.weight", "weight_packed",
             "[8, 16]")


def test_bits_out_of_range(tmp_path):
    _refused(_write(tmp_path, _packed(), _ct(bits=64)), "fc.weight", "num_bits", "1 to 8")


def test_packing_dtype_lies(tmp_path):
    t = _packed()
    t["fc.weight_packed"] = t["fc.weight_packed"].astype("<f4")
    _refused(_write(tmp_path, t, _ct()), "fc.weight", "weight_packed", "int32")


def test_asymmetric_config_without_zero_points(tmp_path):
    _refused(_write(tmp_path, _packed(), _ct(symmetric=False)), "fc.weight",
             "weight_zero_point")


def test_group_index_out_of_range(tmp_path):
    t = _packed()
    t["fc.weight_g_idx"] = np.full(64, 7, "<i4")
    _refused(_write(tmp_path, t, _ct()), "fc.weight", "weight_g_idx", "2 groups")


def test_unknown_strategy_and_format(tmp_path):
    _refused(_write(tmp_path, _packed(), _ct(strategy="sideways")), "fc.weight", "strategy")
    _refused(_write(tmp_path, _packed(), _ct(fmt="marlin-24")), "fc.weight", "format")


@pytest.mark.parametrize("config", ["{not json", "[1, 2]", json.dumps(
    {"quantization_config": {"quant_method": "exec('rm -rf /')"}}), json.dumps(
    {"quantization_config": "gptq"}), json.dumps({"quantization_config": {}})])
def test_config_itself_lies(tmp_path, config):
    _write(tmp_path, _packed(), config)
    with pytest.raises(TensorFileError) as info:
        open_stored(tmp_path)
    record(True)
    assert "config.json" in str(info.value) and "\n" not in str(info.value)


def test_config_too_large(tmp_path):
    _write(tmp_path, _packed(), json.dumps({"pad": "x" * 5_000_000}))
    with pytest.raises(TensorFileError, match="byte limit"):
        open_stored(tmp_path)


def _gptq(rows=64, cols=32, group=32, bits=4):
    per = 32 // bits
    return {"l.qweight": np.zeros((rows // per, cols), "<i4"),
            "l.qzeros": np.zeros((-(-rows // group), cols // per), "<i4"),
            "l.scales": np.ones((-(-rows // group), cols), "<f2")}


def test_gptq_three_bit_refused(tmp_path):
    _write(tmp_path, _gptq(), {"quant_method": "gptq", "bits": 3, "group_size": 32})
    _refused(tmp_path, "l.weight", "3-bit")


def test_gptq_group_size_lies(tmp_path):
    _write(tmp_path, _gptq(), {"quant_method": "gptq", "bits": 4, "group_size": 16})
    _refused(tmp_path, "l.weight", "scales", "groups")


def test_gptq_bits_lie(tmp_path):
    _write(tmp_path, _gptq(), {"quant_method": "gptq", "bits": 8, "group_size": 32})
    _refused(tmp_path, "l.weight", "8-bit codes in 'qweight'", "groups")


def test_gptq_group_index_lies(tmp_path):
    t = _gptq()
    t["l.g_idx"] = np.full(64, 99, "<i4")
    _write(tmp_path, t, {"quant_method": "gptq", "bits": 4, "group_size": 32})
    _refused(tmp_path, "l.weight", "g_idx", "99")


def test_awq_other_kernel_layout_refused(tmp_path):
    _write(tmp_path, _gptq(), {"quant_method": "awq", "bits": 4, "group_size": 32,
                               "version": "gemv"})
    _refused(tmp_path, "l.weight", "GEMM")


def _nf4(state: object, n=64, blocksize=32):
    raw = json.dumps(state).encode() if not isinstance(state, bytes) else state
    return {"l.weight": np.zeros((n // 2, 1), "u1"),
            "l.weight.absmax": np.ones(n // blocksize, "<f4"),
            "l.weight.quant_map": np.linspace(-1, 1, 16).astype("<f4"),
            "l.weight.quant_state.bitsandbytes__nf4": np.frombuffer(raw, "u1").copy()}


@pytest.mark.parametrize("state, word", [
    ({"quant_type": "nf4", "blocksize": 32, "dtype": "bfloat16", "shape": [8, 800]}, "bytes"),
    ({"quant_type": "nf4", "blocksize": 32, "dtype": "bfloat16",
      "shape": [1 << 40, 1 << 40]}, "bytes"),
    ({"quant_type": "nf4", "blocksize": 0, "dtype": "bfloat16", "shape": [8, 8]}, "blocksize"),
    ({"quant_type": "nf4", "blocksize": 16, "dtype": "bfloat16", "shape": [8, 8]}, "absmax"),
    ({"quant_type": "nf4", "blocksize": 32, "dtype": "object", "shape": [8, 8]}, "dtype"),
    ({"quant_type": "nf4", "blocksize": 32, "dtype": "bfloat16", "shape": "8x8"}, "shape"),
    (b"\xff\xfe not json", "JSON"),
])
def test_bitsandbytes_state_lies(tmp_path, state, word):
    _write(tmp_path, _nf4(state), {"quant_method": "bitsandbytes", "load_in_4bit": True})
    _refused(tmp_path, "l.weight", word)


def test_fp8_block_size_lies(tmp_path):
    t = {"l.weight": np.zeros((256, 256), ml_dtypes.float8_e4m3fn),
         "l.weight_scale_inv": np.ones((2, 2), "<f4")}
    _write(tmp_path, t, {"quant_method": "fp8", "weight_block_size": [64, 128]})
    _refused(tmp_path, "l.weight", "weight_scale_inv", "[4, 2]")
    _write(tmp_path, t, {"quant_method": "fp8", "weight_block_size": [0, 128]})
    _refused(tmp_path, "l.weight", "weight_block_size")
