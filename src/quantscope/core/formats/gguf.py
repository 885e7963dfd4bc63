"""llama.cpp's GGUF block types as engine formats: ``gguf_q8_0``, ``gguf_q4_0``, ``gguf_q4_1``,
``gguf_q5_0``, ``gguf_q5_1``, ``gguf_q2_k``, ``gguf_q3_k``, ``gguf_q4_k``, ``gguf_q5_k``,
``gguf_q6_k``.

Quantizing is llama.cpp's reference quantizer without an importance matrix
(``quantize_row_*_ref``, reproduced bit for bit by :mod:`~quantscope.core.formats.gguf_legacy`
and :mod:`~quantscope.core.formats.gguf_kquants`); its output is the bytes a GGUF file holds,
blocks along the last axis, each row ``n_blocks · type_size`` bytes. A GGUF type's scales are a
function of each block's values (the k-quants even search for them), so its parameters are
the bytes themselves: :class:`GgufParams` holds them, its ``dequantize`` is llama.cpp's
``dequantize_row_*``, and a report measures a tensor against the values they store -- the
tensor they were made from, or the original of a tensor read from a GGUF file.

Any size: the last axis must be a multiple of the block (32, or 256 for the k-quants), the
work is split in ranges of blocks over the engine's threads, and nothing but the bytes (and
the float32 copy of an input of another dtype) is allocated at the tensor's size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quantscope.core.formats.catalog import FormatParams
from quantscope.core.formats.gguf_types import BY_GGML_ID, GGUF_TYPES, GgufType
from quantscope.core.kernels import compiled
from quantscope.core.kernels.parallel import parallel, pieces
from quantscope.core.kernels.read_only import read_only
from quantscope.core.tensors.validate import EngineValueError, as_float32, check_nonfinite

__all__ = [
    "BY_GGML_ID",
    "GGUF_TYPES",
    "GgufParams",
    "block_ranges",
    "decode",
    "encode",
    "from_blocks",
    "gguf_params",
    "gguf_type",
]


def gguf_type(name: str) -> GgufType:
    """The type named ``name`` (``gguf_q4_k``...), else a clear error listing them."""
    if name not in GGUF_TYPES:
        raise EngineValueError(f"GGUF format must be one of {', '.join(GGUF_TYPES)}; "
                               f"got {name!r}")
    return GGUF_TYPES[name]


def check_shape(shape: tuple[int, ...], t: GgufType) -> None:
    """Refuse a shape whose last axis is not a whole number of blocks (or a 0-d tensor)."""
    if len(shape) == 0:
        raise EngineValueError(f"format {t.name!r} needs at least one axis for its blocks")
    if shape[-1] == 0 or shape[-1] % t.block:
        raise EngineValueError(
            f"format {t.name!r} quantizes blocks of {t.block} along the last axis, as llama.cpp "
            f"does; the last axis has {shape[-1]} elements, not a positive multiple of "
            f"{t.block}")


def block_ranges(n_blocks: int, block: int) -> list[tuple[int, int]]:
    """Ranges of blocks for the engine's threads (a few per thread for a large tensor)."""
    return pieces(n_blocks, n_blocks * block)


def encode(x, name: str) -> np.ndarray:
    """The bytes llama.cpp writes for ``x`` (float32, finite): uint8 of shape
    ``x.shape[:-1] + (n_blocks · type_size,)``."""
    t = gguf_type(name)
    xf = read_only(np.ascontiguousarray(as_float32(x)))  # one loop for either kind
    check_shape(xf.shape, t)
    check_nonfinite(xf, "raise")
    n_blocks = xf.size // t.block
    xb = xf.reshape(n_blocks, t.block)
    out = np.empty((n_blocks, t.type_size), np.uint8)

    def share(lo: int, hi: int) -> None:
        compiled.encode_blocks(t.ggml_type, xb[lo:hi], out[lo:hi])

    parallel(share, block_ranges(n_blocks, t.block))
    return out.reshape((*xf.shape[:-1], xf.shape[-1] // t.block * t.type_size))


def blocks_of(blocks: np.ndarray, t: GgufType, shape: tuple[int, ...]) -> np.ndarray:
    """``blocks`` as ``[n_blocks, type_size]`` bytes, refused unless they hold ``shape``."""
    check_shape(shape, t)
    b = np.ascontiguousarray(blocks, np.uint8)
    n_blocks = int(np.prod(shape, dtype=np.int64)) // t.block
    if b.size != n_blocks * t.type_size:
        raise EngineValueError(f"{t.name}: {b.size} bytes do not hold a tensor of shape "
                               f"{shape} ({n_blocks} blocks of {t.type_size} bytes)")
    return b.reshape(n_blocks, t.type_size)


def decode(blocks: np.ndarray, name: str, shape: tuple[int, ...], *,
           codes: bool = False) -> np.ndarray:
    """llama.cpp's ``dequantize_row_*`` of ``blocks`` as a float32 tensor of ``shape``; with
    ``codes`` the stored codes instead (uint8, see :mod:`~quantscope.core.formats.gguf_decode`)."""
    t = gguf_type(name)
    yb = blocks_of(blocks, t, tuple(shape))
    n_blocks = yb.shape[0]
    vals = np.empty((n_blocks, t.block), np.float32)
    out = np.empty((n_blocks, t.block), np.uint8) if codes else np.empty((1, 1), np.uint8)

    def share(lo: int, hi: int) -> None:
        compiled.decode_blocks(t.ggml_type, yb[lo:hi], vals[lo:hi],
                               out[lo:hi] if codes else out, codes)

    parallel(share, block_ranges(n_blocks, t.block))
    return (out if codes else vals).reshape(tuple(shape))


def _block_d(yb: np.ndarray, t: GgufType) -> np.ndarray:
    """Each block's fp16 scale ``d`` (the super-block scale of the k-quants) as float32."""
    at = {10: 80, 11: 108, 14: 208}.get(t.ggml_type, 0)
    return np.ascontiguousarray(yb[:, at:at + 2]).view(np.float16).reshape(-1).astype(
        np.float32)


@dataclass(frozen=True, eq=False)
class GgufParams(FormatParams):
    """A tensor quantized to a GGUF block type: the stored ``blocks`` (uint8, llama.cpp's
    layout, one row of bytes per row of the tensor) for a tensor of ``shape``.

    ``scale`` is each block's ``|d|`` (its fp16 super-block scale for the k-quants), in the
    per-block parameter shape, and ``block_scales`` the signed ``d`` (Q4_0 and Q5_0 store
    ``max / -8``, negative when the block's largest magnitude is positive). Codes run
    ``0..levels - 1`` (see :mod:`~quantscope.core.formats.gguf_decode`)."""

    blocks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    shape: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        t = gguf_type(self.format)
        object.__setattr__(self, "blocks", blocks_of(self.blocks, t, tuple(self.shape)).reshape(
            (*tuple(self.shape[:-1]), self.shape[-1] // t.block * t.type_size)))
        object.__setattr__(self, "scale", np.asarray(self.scale, np.float32))

    @property
    def gguf(self) -> GgufType:
        return GGUF_TYPES[self.format]

    @property
    def kind(self) -> str:
        return "gguf"

    @property
    def element(self):
        raise EngineValueError(f"format {self.format!r} has integer codes with block scales "
                               "and minimums, not an element type")

    @property
    def values(self) -> np.ndarray:
        """Code ``k``'s value in units of its (sub-)block scale: ``k - offset``."""
        return np.arange(self.levels, dtype=np.float64) - self.gguf.offset

    @property
    def levels(self) -> int:
        return self.gguf.levels

    @property
    def bits(self) -> int:
        return self.gguf.bits

    @property
    def rounding(self) -> str:
        return "llama.cpp"

    @property
    def arithmetic(self) -> str:
        return "llama.cpp"

    def quantize(self, x, *, nonfinite: str = "raise") -> np.ndarray:
        """The stored codes (uint8, the tensor's shape) of the blocks llama.cpp writes for
        ``x``: a GGUF type's scales follow from the data, so this runs the quantizer on ``x``
        (for the tensor these parameters came from, the codes they store)."""
        xf = as_float32(x)
        if tuple(xf.shape) != tuple(self.shape):
            raise EngineValueError(f"{self.format}: these blocks hold a tensor of shape "
                                   f"{self.shape}, not {xf.shape}")
        if nonfinite not in ("raise", "saturate"):
            check_nonfinite(xf, nonfinite)  # the usual message for an unknown rule
        # llama.cpp refuses rows with NaN or inf, so there is nothing to saturate to: both
        # rules refuse them (encode says where the first one is)
        return decode(encode(xf, self.format), self.format, self.shape, codes=True)

    def stored_codes(self) -> np.ndarray:
        """The codes the blocks store (uint8, the tensor's shape)."""
        return decode(self.blocks, self.format, self.shape, codes=True)

    def archive_members(self, codes: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """What an export archive holds for these blocks (``codes``, the caller's, are
        the stored ones and are read from the blocks): ``blocks`` (uint8, exactly the bytes
        a GGUF file stores for this tensor, one row of bytes per row), ``codes`` (uint8, the
        stored codes), ``scale`` (each block's ``|d|``) and ``block_scales`` (the signed
        fp16 ``d`` as float32)."""
        return {"blocks": np.ascontiguousarray(self.blocks), "codes": self.stored_codes(),
                "scale": np.asarray(self.scale, np.float32),
                "block_scales": np.asarray(self.block_scales, np.float32)}

    def scheme(self, n: int) -> dict:
        """The export metadata's ``scheme`` entry: the type and how to read the blocks."""
        t = self.gguf
        return {"format": self.format, "ggml_type": t.ggml_name, "ggml_type_id": t.ggml_type,
                "bits": t.bits, "block_size": t.block, "type_size": t.type_size,
                "granularity": "group", "axis": -1, "method": self.method,
                "bits_per_element": t.bits_per_element,
                "dequantize": f"blocks hold llama.cpp's block_{t.ggml_name.lower()} structs, "
                              f"{t.type_size} bytes per {t.block} elements along the last "
                              "axis; decode with ggml's dequantize_row or gguf-py's "
                              "gguf.quants.dequantize(blocks, GGMLQuantizationType."
                              f"{t.ggml_name})"}

    def dequantize(self, codes=None) -> np.ndarray:
        """llama.cpp's dequantized tensor (float32). ``codes`` other than the stored ones
        are refused: the values come from the stored bytes."""
        if codes is not None and not np.array_equal(np.asarray(codes), self.stored_codes()):
            raise EngineValueError(f"{self.format}: dequantize decodes the stored blocks; "
                                   "other codes have no bytes to decode")
        return decode(self.blocks, self.format, self.shape)


def gguf_params(x, name: str, *, method: str = "minmax") -> GgufParams:
    """The GGUF parameters of ``x``: the blocks llama.cpp's reference quantizer writes."""
    if method != "minmax":
        raise EngineValueError(f"format {name!r} takes its scales from llama.cpp's own rule "
                               f"(method 'minmax'), got method {method!r}")
    xf = as_float32(x)
    return from_blocks(encode(xf, name), name, tuple(xf.shape))


def from_blocks(blocks: np.ndarray, name: str, shape: tuple[int, ...]) -> GgufParams:
    """Parameters holding stored ``blocks`` (from a GGUF file, or :func:`encode`) of a
    tensor of ``shape``."""
    t = gguf_type(name)
    shape = tuple(int(s) for s in shape)
    yb = blocks_of(blocks, t, shape)
    d = _block_d(yb, t).reshape((*shape[:-1], shape[-1] // t.block))
    return GgufParams(name, np.abs(d), axis=-1, group_size=t.block, block_scales=d,
                      blocks=yb, shape=shape)


def block_code_values(params: GgufParams, index: int) -> np.ndarray:
    """The value of every code (float64, ascending) in the first sub-block of block
    ``index`` (C order over the tensor's blocks): the grid a histogram draws for it."""
    from quantscope.core.formats.gguf_decode import decode_block

    t = params.gguf
    yb = blocks_of(params.blocks, t, params.shape)
    c = np.zeros(t.block, np.int64)
    v, lo, hi = (np.zeros(t.block, np.float32) for _ in range(3))
    decode_block(t.ggml_type, yb[index], c, v, lo, hi)
    a, b = sorted((float(lo[0]), float(hi[0])))
    return np.linspace(a, b, t.levels)


def representable_span(params: GgufParams) -> tuple[float, float]:
    """The lowest and highest value the stored blocks can represent, over every block and
    sub-block (what lies beyond is clipped in every block)."""
    t = params.gguf
    yb = blocks_of(params.blocks, t, params.shape)
    lo, hi = compiled.value_span(t.ggml_type, yb)
    return float(lo), float(hi)
