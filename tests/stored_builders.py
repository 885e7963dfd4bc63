"""Quantized checkpoints written as their packages write them: safetensors shards (by the
``safetensors`` package) beside a ``config.json`` holding the ``quantization_config``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from oracles import need


def write_checkpoint(folder: Path, tensors: dict, quantization_config: dict | None,
                     *, file: str = "model.safetensors") -> Path:
    """``tensors`` (torch) saved to ``folder/file`` with the config beside it."""
    save_file = need("safetensors.torch").save_file
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / file))
    config = {"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}
    if quantization_config is not None:
        config["quantization_config"] = quantization_config
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def as_f32(tensor) -> np.ndarray:
    """A torch tensor of any float dtype as float32 NumPy values (exact widening)."""
    torch = need("torch")
    return tensor.detach().to(torch.float32).numpy()


def mismatches(decoded: np.ndarray, expected: np.ndarray) -> int:
    """Elements whose float32 bits differ (NaN compared by bits too)."""
    assert decoded.shape == expected.shape, (decoded.shape, expected.shape)
    a = np.ascontiguousarray(decoded, np.float32).view(np.uint32)
    b = np.ascontiguousarray(expected, np.float32).view(np.uint32)
    return int(np.count_nonzero(a != b))


def compress_checkpoint(original: Path, folder: Path, *, bits: int = 4, group_size: int = 128,
                        symmetric: bool = False, fmt: str = "pack-quantized") -> Path:
    """Quantize every 2-D ``*.weight`` of a safetensors checkpoint as llm-compressor's
    round-to-nearest W{bits}A16 does (min/max per group, compressed-tensors' own
    ``calculate_qparams``), pack it with compressed-tensors' own compressor, and save the
    result with its ``quantization_config``; other tensors are stored as they are."""
    load_file = need("safetensors.torch").load_file
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from compressed_tensors.quantization.utils import calculate_qparams

    args = QuantizationArgs(num_bits=bits, type="int", symmetric=symmetric, strategy="group",
                            group_size=group_size)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    compressor = BaseCompressor.load_from_registry(fmt)
    out = {}
    for name, tensor in load_file(str(original)).items():
        if tensor.ndim != 2 or not name.endswith(".weight") or "LayerNorm" in name:
            out[name] = tensor
            continue
        groups = tensor.float().reshape(tensor.shape[0], -1, group_size)
        scale, zero = calculate_qparams(groups.amin(-1), groups.amax(-1), args)
        state = {"weight": tensor, "weight_scale": scale.to(tensor.dtype)}
        if not symmetric:
            state["weight_zero_point"] = zero
        prefix = name.removesuffix("weight")
        out.update({prefix + k: v for k, v in compressor.compress(state, scheme).items()})
    config = {"quant_method": "compressed-tensors", "format": fmt,
              "quantization_status": "compressed",
              "config_groups": {"group_0": {"targets": ["Linear"],
                                            "weights": args.model_dump(mode="json")}},
              "ignore": []}
    return write_checkpoint(folder, out, config)
