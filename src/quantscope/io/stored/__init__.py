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
import threading
from dataclasses import dataclass, field
from pathlib import Path

from quantscope.io.checkpoint import Checkpoint, CheckpointTensor, list_checkpoint
from quantscope.io.checks import fail
from quantscope.io.stored import bnb, compressed, fp8, gptq
from quantscope.io.stored.config import QuantConfig, read_quant_config
from quantscope.io.stored.layout import StoredEntry, group_parts
from quantscope.io.stored.model import StoredFormat, StoredTensor
from quantscope.io.tensor_info import TensorFileError, TensorInfo, printable

__all__ = ["StoredCheckpoint", "StoredFormat", "StoredTensor", "load_stored", "open_stored",
           "read_quant_config", "source_checkpoint"]


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

    def listing(self) -> list[CheckpointTensor]:
        """Every tensor as a person thinks of the checkpoint: each stored weight once, under
        its own name, shape and decoded dtype (``TensorInfo.format`` ``"stored"``, its bytes
        those of all its parts), where its first part is listed; the plain tensors as they
        are. A weight whose parts cannot even be described is listed with its problem."""
        out: list[CheckpointTensor] = []
        by_position = {e.position: e for e in self.entries.values()}
        for i, t in enumerate(self.checkpoint.tensors):
            entry = by_position.get(i)
            if entry is not None:
                out.append(self._listed(entry, t))
            elif t.name not in self.used:
                out.append(t)
        return out

    def _listed(self, entry: StoredEntry, first: CheckpointTensor) -> CheckpointTensor:
        try:
            shape, dtype = describe(self.config, entry.parts)
        except TensorFileError as exc:
            return CheckpointTensor(entry.name, first.file, None, str(exc))
        info = TensorInfo(name=entry.name, shape=shape, dtype=dtype,
                          file_dtype=f"{self.config.method} quantized",
                          nbytes=sum(entry.parts.nbytes().values()), format="stored")
        # a stored weight is read through its checkpoint (its parts may sit in several
        # shards), so it is listed at the checkpoint's folder or index, not at one shard
        root = self.checkpoint.path
        return CheckpointTensor(entry.name, root if root.is_dir() or root.name.endswith(
            ".index.json") else first.file, info)

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


def describe(config: QuantConfig, parts) -> tuple[tuple[int, ...], str]:
    """A stored weight's shape and decoded dtype from its parts' headers (and the few bytes of
    ``weight_shape`` or bitsandbytes' state), without decoding it."""
    method = config.method
    if method == "compressed-tensors":
        if parts.has("weight_global_scale") and parts.has("weight_packed"):
            rows, half = parts.shape("weight_packed")[:2]
            return (rows, half * 2), "bfloat16"
        scale = parts.dtype("weight_scale") if parts.has("weight_scale") else "float32"
        if parts.has("weight_shape"):
            dims = parts.read("weight_shape", "iu")
            if dims.ndim != 1 or dims.size > 8 or (dims.size and dims.min() < 0):
                raise parts.error("weight_shape", "is not a list of dimensions")
            return tuple(int(d) for d in dims), scale
        return parts.shape("weight"), scale
    if method in ("fp8", "fbgemm_fp8"):
        role = "weight_scale_inv" if parts.has("weight_scale_inv") else "weight_scale"
        return parts.shape("weight"), parts.dtype(role)
    if method in ("gptq", "awq"):
        bits = config.settings.get("bits", config.settings.get("w_bit"))
        if not (isinstance(bits, int) and bits in (2, 4, 8)):
            raise fail(config.source, f"quantization_config bits is {str(bits)[:20]}; "
                                      "expected 2, 4 or 8")
        q = parts.shape("qweight")
        if len(q) != 2 or not parts.has("scales"):
            raise parts.error("qweight", "is not a packed (in, out) matrix beside its scales")
        shape = (q[1] * 32 // bits, q[0]) if method == "awq" else (q[1], q[0] * 32 // bits)
        return shape, parts.dtype("scales")
    if parts.has("SCB"):
        return parts.shape("weight"), "float32"
    from quantscope.io.stored.bnb import _state, state_role

    packed_state = state_role(parts)
    state = _state(parts, packed_state) if packed_state is not None else {}
    dims, dtype = state.get("shape"), state.get("dtype")
    if not (isinstance(dims, list) and all(isinstance(d, int) and d >= 0 for d in dims)
            and dtype in ("float32", "float16", "bfloat16")):
        raise parts.error(packed_state or "weight", "holds no valid bitsandbytes shape and "
                                                    "dtype")
    return tuple(dims), str(dtype)


#: Recently opened quantized checkpoints by folder and the state of its files: decoding the
#: weights of a model one by one must not list every shard's header again for each of them.
_OPENED: dict[tuple, StoredCheckpoint] = {}
_OPENED_LOCK = threading.Lock()
_OPENED_MAX = 4


def _signature(path: Path) -> tuple:
    folder = path if path.is_dir() else path.parent
    try:
        entries = sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size)
                         for e in os.scandir(folder) if e.is_file())
    except OSError:
        return (str(path), None)
    return (str(path.resolve()), tuple(entries))


def open_stored_cached(path: str | os.PathLike) -> StoredCheckpoint | None:
    """:func:`open_stored`, remembered while no file of its folder changes."""
    p = Path(path)
    key = _signature(p)
    with _OPENED_LOCK:
        hit = _OPENED.get(key)
    if hit is not None:
        return hit
    opened = open_stored(p)
    if opened is not None:
        with _OPENED_LOCK:
            while len(_OPENED) >= _OPENED_MAX:
                _OPENED.pop(next(iter(_OPENED)))
            _OPENED[key] = opened
    return opened


def source_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """What a folder or index opens as: for a quantized checkpoint, its stored weights under
    their own names beside the plain tensors (:meth:`StoredCheckpoint.listing`), else every
    tensor as listed (:func:`~quantscope.io.checkpoint.list_checkpoint`)."""
    stored = open_stored_cached(path)
    if stored is None:
        return list_checkpoint(path)
    raw = stored.checkpoint
    return Checkpoint(raw.path, raw.files, stored.listing(), raw.problems)


def load_stored(path: str | os.PathLike, name: str) -> StoredTensor:
    """The stored weight ``name`` of the quantized checkpoint at ``path`` (its folder, index,
    or one of its shards), decoded.

    Raises
    ------
    TensorFileError
        ``path`` declares no quantization, has no such weight, or its parts lie.
    """
    p = Path(path)
    root = p if p.is_dir() or p.name.endswith(".index.json") else p.parent
    stored = open_stored_cached(root)
    if stored is None:
        raise fail(root, "declares no quantization (no quantization_config in its "
                         "config.json): nothing stored to decode")
    return stored.decode(name)


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
