"""Quantized Hugging Face checkpoints, decoded exactly from their own config and tensor names.

A checkpoint whose ``config.json`` declares a ``quantization_config`` stores each quantized
weight as several tensors; :func:`open_stored` groups them back into weights under the
original's names and :meth:`StoredCheckpoint.decode` returns each as a :class:`StoredTensor`:
the values the writing package's own dequantize gives, with the stored codes, scales and the
scheme. Decoded methods: compressed-tensors (pack-quantized int1-8, int-, float- and
naive-quantized, nvfp4-pack-quantized), FP8 (per-tensor, per-channel and 128 x 128 blocks),
GPTQ, AWQ (GEMM) and bitsandbytes (NF4 / FP4 with nested absmax, LLM.int8()).

>>> ckpt = open_stored("Qwen3-8B-AWQ")                       # doctest: +SKIP
>>> w = ckpt.decode("model.layers.0.mlp.up_proj.weight")     # doctest: +SKIP
>>> w.format.label, w.bits_per_element                       # doctest: +SKIP
('awq uint4 g128 asym', 4.25)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from quantscope.io.checkpoint import Checkpoint, CheckpointTensor, list_checkpoint
from quantscope.io.checks import fail
from quantscope.io.stored import bnb, compressed, fp8, gptq
from quantscope.io.stored.config import QuantConfig, read_quant_config
from quantscope.io.stored.layout import StoredEntry, group_parts
from quantscope.io.stored.model import StoredFormat, StoredTensor
from quantscope.io.tensor_info import printable

__all__ = ["StoredCheckpoint", "StoredFormat", "StoredTensor", "open_stored",
           "read_quant_config"]


@dataclass
class StoredCheckpoint:
    """A quantized checkpoint: its declared quantization, its stored weights by their own
    names, and the tensors that are stored plainly (biases, norms, ignored layers)."""

    path: Path
    config: QuantConfig
    checkpoint: Checkpoint
    entries: dict[str, StoredEntry]
    used: set[str] = field(default_factory=set)

    @property
    def names(self) -> list[str]:
        """The stored weights' names, in file order."""
        return list(self.entries)

    def plain(self) -> list[CheckpointTensor]:
        """The tensors that are no part of a stored weight."""
        return [t for t in self.checkpoint.tensors if t.name not in self.used]

    def decode(self, name: str) -> StoredTensor:
        """The weight ``name`` decoded (see the module docstring).

        Raises
        ------
        TensorFileError
            No such stored weight, or parts that disagree with the config (shapes, dtypes,
            packing, group index out of range).
        """
        entry = self.entries.get(name)
        if entry is None:
            raise fail(self.path, f"holds no quantized weight {printable(name)!r}")
        method = self.config.method
        if method == "compressed-tensors":
            return compressed.decode(name, entry.parts, self.config)
        if method in ("fp8", "fbgemm_fp8"):
            return fp8.decode(name, entry.parts, self.config)
        if method in ("gptq", "awq"):
            return gptq.decode(name, entry.parts, self.config)
        return bnb.decode(name, entry.parts)


def open_stored(path: str | os.PathLike) -> StoredCheckpoint | None:
    """The quantized checkpoint at ``path`` (a folder, an index or a safetensors file beside
    its ``config.json``), or None when no quantization is declared there.

    Raises
    ------
    TensorFileError
        An unreadable or lying config, or a checkpoint that cannot be listed.
    """
    config = read_quant_config(path)
    if config is None:
        return None
    checkpoint = list_checkpoint(path)
    entries, used = group_parts(checkpoint, config)
    return StoredCheckpoint(Path(path), config, checkpoint, {e.name: e for e in entries}, used)
