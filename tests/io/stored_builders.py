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
