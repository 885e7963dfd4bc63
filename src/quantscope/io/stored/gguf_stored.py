"""A GGUF file as a stored quantization: its quantized tensors decoded as llama.cpp decodes
them (:mod:`quantscope.io.gguf_file`), with their codes, block scales and each element's
window, under the names the Hugging Face original uses.

llama.cpp's converter renames every tensor (``model.layers.3.self_attn.q_proj.weight``
becomes ``blk.3.attn_q.weight``) and, for the llama family, permutes the rows of the query
and key projections (``LlamaModel.permute``: within each head, the two halves of the rotary
dimensions interleaved). :data:`HF_NAMES` maps the names back, and :func:`unpermute` undoes
the permutation with the file's own head counts, so each decoded tensor lines up element by
element with its original.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from quantscope.io.checks import fail
from quantscope.io.stored.model import StoredFormat, StoredTensor
from quantscope.io.tensor_info import TensorInfo, printable

#: llama.cpp's per-layer tensor names -> the Hugging Face (llama-style) ones.
HF_NAMES = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight",
           "output_norm.weight": "model.norm.weight"}
_BLOCK = re.compile(r"^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$")
#: Architectures whose converter permutes the query and key rows.
PERMUTED = ("llama",)


def hf_name(name: str) -> str:
    """The Hugging Face name of a llama.cpp tensor name (the name itself when unknown)."""
    if name in _GLOBAL:
        return _GLOBAL[name]
    m = _BLOCK.match(name)
    if m is None or m.group(2) not in HF_NAMES:
        return name
    return f"model.layers.{m.group(1)}.{HF_NAMES[m.group(2)]}.{m.group(3)}"


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo ``LlamaModel.permute(w, n_head)``: rows ``(heads, 2, half, cols)`` were stored as
    ``(heads, half, 2, cols)``."""
    rows = w.shape[0]
    if heads < 1 or rows % (2 * heads):
        raise ValueError(f"{rows} rows do not split into {heads} heads of two halves")
    return (w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2)
            .reshape(w.shape))


@dataclass(frozen=True)
class _Config:
    method: str = "gguf"
    source: Path = Path()


@dataclass
class GgufStored:
    """A GGUF file's quantized tensors as stored weights (the interface of
    :class:`quantscope.io.stored.StoredCheckpoint` that the comparison uses)."""

    path: Path
    infos: dict[str, TensorInfo]
    metadata: dict
    by_hf: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> _Config:
        return _Config("gguf", self.path)

    @property
    def names(self) -> list[str]:
        return list(self.by_hf)

    def plain(self) -> list:
        return [i for n, i in self.infos.items() if hf_name(n) not in self.by_hf]

    def decode(self, name: str) -> StoredTensor:
        from quantscope.core.formats.gguf import decode, from_blocks
        from quantscope.core.formats.gguf_types import GGUF_TYPES
        from quantscope.io.gguf_file import load_gguf_blocks

        stored_name = self.by_hf.get(name)
        if stored_name is None:
            raise fail(self.path, f"holds no quantized tensor {printable(name)!r}")
        blocks, fmt, shape = load_gguf_blocks(self.path, stored_name)
        t = GGUF_TYPES[fmt]
        values = decode(blocks, fmt, shape)
        codes = decode(blocks, fmt, shape, codes=True)
        params = from_blocks(blocks, fmt, shape)
        heads = self._heads(stored_name)

        def window() -> tuple[np.ndarray, np.ndarray]:
            lo, hi = _windows(params.blocks, t, shape)
            return (unpermute(lo, heads), unpermute(hi, heads)) if heads else (lo, hi)

        if heads:
            values, codes = unpermute(values, heads), unpermute(codes, heads)
        info = self.infos[stored_name]
        fmt_ = StoredFormat("gguf", t.ggml_name, "block", group_size=t.block,
                            symmetric=t.offset != 0, scale_dtype="float16",
                            notes=(f"llama.cpp {t.ggml_name}",))
        return StoredTensor(name, values, fmt_, codes, np.asarray(params.block_scales),
                            None, {stored_name: info.nbytes}, "float32", window)

    def _heads(self, stored_name: str) -> int:
        """The head count whose permutation a query / key tensor carries, else 0."""
        arch = self.metadata.get("general.architecture")
        m = _BLOCK.match(stored_name)
        if arch not in PERMUTED or m is None or m.group(2) not in ("attn_q", "attn_k"):
            return 0
        key = "head_count" if m.group(2) == "attn_q" else "head_count_kv"
        heads = self.metadata.get(f"{arch}.attention.{key}",
                                  self.metadata.get(f"{arch}.attention.head_count"))
        return int(heads) if isinstance(heads, int) and heads > 0 else 0


def _windows(blocks: np.ndarray, t, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Each element's lowest and highest decodable value: its (sub-)block's code 0 and top
    code, as llama.cpp's dequantize computes them."""
    from quantscope.core.formats.gguf import blocks_of
    from quantscope.core.formats.gguf_decode import decode_block

    yb = blocks_of(blocks, t, tuple(shape))
    lo = np.empty((yb.shape[0], t.block), np.float32)
    hi = np.empty_like(lo)
    codes = np.empty(t.block, np.int64)
    vals = np.empty(t.block, np.float32)
    for i in range(yb.shape[0]):
        decode_block(t.ggml_type, yb[i], codes, vals, lo[i], hi[i])
    return np.minimum(lo, hi).reshape(shape), np.maximum(lo, hi).reshape(shape)


def open_gguf_stored(path: str | os.PathLike) -> GgufStored | None:
    """The GGUF file at ``path`` as stored weights (its quantized tensors), or None when it
    is not a GGUF file."""
    from quantscope.io.checks import read_head

    p = Path(path)
    if not p.is_file() or not read_head(p, 4).startswith(b"GGUF"):
        return None
    from quantscope.io.gguf_file import read_header, stored_format

    head = read_header(p)
    infos = {n: info for n, (info, _, _) in head.tensors.items()}
    by_hf = {hf_name(n): n for n, info in infos.items() if stored_format(info) is not None}
    return GgufStored(p, infos, head.metadata, by_hf)
