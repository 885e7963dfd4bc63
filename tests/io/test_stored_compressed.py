"""compressed-tensors checkpoints made by the real package's compressors, decoded here and
compared element by element with the package's own ``decompress``."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest

from oracles import need
from quantscope.io.stored import open_stored
from stored_builders import as_f32, mismatches, write_checkpoint

torch = need("torch")


@functools.cache
def _ct() -> SimpleNamespace:
    """compressed-tensors' compressors and quantization arguments, imported by the first test
    rather than when the file is collected: the import took about 4.5 s of CPU beyond torch's
    in every test worker, and only the worker that runs this file uses it."""
    need("compressed_tensors")
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from compressed_tensors.quantization.utils import calculate_qparams

    return SimpleNamespace(BaseCompressor=BaseCompressor, QuantizationArgs=QuantizationArgs,
                           QuantizationScheme=QuantizationScheme,
                           calculate_qparams=calculate_qparams)


def _ranges(w, args):
    """Per-scheme min/max of ``w`` (float32) shaped as the scale the strategy stores."""
    x = w.float()
    if args.strategy == "tensor":
        return x.amin().reshape(1), x.amax().reshape(1)
    if args.strategy == "channel":
        return x.amin(1, keepdim=True), x.amax(1, keepdim=True)
    if args.strategy == "block":
        bh, bw = args.block_structure
        rows, cols = x.shape
        pr, pc = -(-rows // bh) * bh, -(-cols // bw) * bw
        padded = torch.nn.functional.pad(x, (0, pc - cols, 0, pr - rows))
        blocks = padded.reshape(pr // bh, bh, pc // bw, bw).transpose(1, 2)
        return blocks.amin((-1, -2)), blocks.amax((-1, -2))
    g = x.reshape(x.shape[0], -1, args.group_size)
    return g.amin(-1), g.amax(-1)


def _compress(w, args, fmt, scale_dtype=torch.bfloat16, global_scale=None):
    scheme = _ct().QuantizationScheme(targets=["Linear"], weights=args)
    mn, mx = _ranges(w, args)
    if global_scale is not None:
        scale, zp = _ct().calculate_qparams(mn, mx, args, global_scale=global_scale)
    else:
        scale, zp = _ct().calculate_qparams(mn, mx, args)
    state = {"weight": w, "weight_scale": scale.to(scale_dtype)}
    if not args.symmetric:
        state["weight_zero_point"] = zp
    if global_scale is not None:
        state["weight_global_scale"] = global_scale
    compressor = _ct().BaseCompressor.load_from_registry(fmt)
    stored = compressor.compress(state, scheme)
    expected = compressor.decompress(dict(stored), scheme)["weight"]
    return stored, expected


def _config(args, fmt):
    return {"quant_method": "compressed-tensors", "format": fmt,
            "config_groups": {"group_0": {"targets": ["Linear"],
                                          "weights": args.model_dump(mode="json")}},
            "ignore": ["lm_head"]}


def _check(tmp_path, w, args, fmt, **kw):
    stored, expected = _compress(w, args, fmt, **kw)
    tensors = {f"model.layers.0.mlp.up_proj.{k}": v for k, v in stored.items()}
    tensors["model.layers.0.mlp.up_proj.bias"] = torch.zeros(w.shape[0])
    write_checkpoint(tmp_path, tensors, _config(args, fmt))
    ckpt = open_stored(tmp_path)
    assert ckpt is not None and ckpt.names == ["model.layers.0.mlp.up_proj.weight"]
    assert [t.name for t in ckpt.plain()] == ["model.layers.0.mlp.up_proj.bias"]
    decoded = ckpt.decode("model.layers.0.mlp.up_proj.weight")
    assert decoded.decoded_dtype == str(expected.dtype).removeprefix("torch.")
    assert mismatches(decoded.values, as_f32(expected)) == 0
    assert decoded.values.size == w.numel()
    return decoded


@pytest.fixture
def weight():
    g = torch.Generator().manual_seed(7)
    w = torch.randn(96, 256, generator=g) * 0.02
    w[5, 17] = 0.4  # an outlier, so the groups' ranges differ
    return w.to(torch.bfloat16)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("symmetric", [True, False])
def test_pack_quantized_groups(tmp_path, weight, bits, symmetric):
    args = _ct().QuantizationArgs(num_bits=bits, type="int", symmetric=symmetric, strategy="group",
                            group_size=64)
    d = _check(tmp_path, weight, args, "pack-quantized")
    assert d.format.label == f"compressed-tensors int{bits} g64" + ("" if symmetric else " asym")
    assert d.codes.min() >= -(1 << (bits - 1)) and d.codes.max() < 1 << (bits - 1)
    assert d.scales.shape == (96, 4)
    # codes, scales and zero points the stored format carries rebuild the values
    zp = 0 if d.zero_points is None else np.repeat(d.zero_points, 64, axis=1)
    rebuilt = (d.codes.astype(np.float32) - zp) * np.repeat(d.scales, 64, axis=1)
    assert np.allclose(rebuilt, d.values, rtol=2 ** -7, atol=0)


@pytest.mark.parametrize("strategy", ["channel", "tensor"])
def test_pack_quantized_channel_and_tensor(tmp_path, weight, strategy):
    args = _ct().QuantizationArgs(num_bits=4, type="int", symmetric=strategy == "tensor",
                            strategy=strategy)
    d = _check(tmp_path, weight, args, "pack-quantized")
    assert d.format.granularity == strategy


def test_pack_quantized_bits_per_element(tmp_path, weight):
    args = _ct().QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group",
                            group_size=128)
    d = _check(tmp_path, weight, args, "pack-quantized")
    # 4 bits of code + a bf16 scale per 128 elements + the 2 int64 of weight_shape
    assert d.bits_per_element == pytest.approx(4 + 16 / 128 + 128 / weight.numel())


@pytest.mark.parametrize("strategy", ["tensor", "channel", "block"])
def test_float_quantized_fp8(tmp_path, strategy):
    w = (torch.randn(200, 300, generator=torch.Generator().manual_seed(3)) * 0.05)
    args = _ct().QuantizationArgs(num_bits=8, type="float", symmetric=True, strategy=strategy,
                            block_structure=[128, 128] if strategy == "block" else None)
    d = _check(tmp_path, w.to(torch.bfloat16), args, "float-quantized")
    assert d.format.element == "fp8_e4m3"
    if strategy == "block":  # 200 x 300 leaves partial blocks on both edges
        assert d.scales.shape == (2, 3) and d.format.block == (128, 128)


@pytest.mark.parametrize("symmetric", [True, False])
def test_int_quantized_int8(tmp_path, weight, symmetric):
    args = _ct().QuantizationArgs(num_bits=8, type="int", symmetric=symmetric, strategy="channel")
    d = _check(tmp_path, weight, args, "int-quantized", scale_dtype=torch.float32)
    assert d.format.element == "int8" and d.decoded_dtype == "float32"


def test_nvfp4(tmp_path, weight):
    args = _ct().QuantizationArgs(num_bits=4, type="float", symmetric=True, strategy="tensor_group",
                            group_size=16)
    amax = weight.float().abs().amax()
    global_scale = (448.0 * 6.0 / amax).reshape(1).to(torch.float32)
    d = _check(tmp_path, weight, args, "nvfp4-pack-quantized", scale_dtype=torch.float32,
               global_scale=global_scale)
    assert d.format.element == "fp4_e2m1" and d.format.group_size == 16
    assert d.bits_per_element == pytest.approx(4.5 + 32 / weight.numel())


def test_activation_order_group_index(tmp_path, weight):
    """``weight_g_idx``: column j uses group g_idx[j] (the package no longer reads it, so the
    reference is its dequantize applied to the columns gathered group by group)."""
    args = _ct().QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group",
                            group_size=64)
    perm = torch.randperm(256, generator=torch.Generator().manual_seed(1))
    g_idx = (torch.arange(256) // 64)[torch.argsort(perm)].to(torch.int32)
    sorted_w = weight[:, perm]  # columns in activation order: groups contiguous
    stored, expected_sorted = _compress(sorted_w, args, "pack-quantized")
    # store the columns back in the original order, the group index saying where each went
    from compressed_tensors.compressors.pack_quantized.helpers import (
        pack_to_int32,
        unpack_from_int32,
    )
    codes = unpack_from_int32(stored["weight_packed"], 4, torch.Size([96, 256]))
    inverse = torch.argsort(perm)
    stored["weight_packed"] = pack_to_int32(codes[:, inverse].contiguous(), 4)
    stored["weight_g_idx"] = g_idx
    write_checkpoint(tmp_path, {f"fc.{k}": v for k, v in stored.items()},
                     _config(args, "pack-quantized"))
    d = open_stored(tmp_path).decode("fc.weight")
    assert mismatches(d.values, as_f32(expected_sorted[:, inverse])) == 0
