"""The GGUF block types quantscope reproduces, as data: names, ggml type ids, block layout.

Kept free of compiled code so that the format catalog can list them without loading Numba.
Bits per element are llama.cpp's own count, the block's bytes over its elements: Q8_0 8.5,
Q4_0 4.5, Q4_1 5, Q5_0 5.5, Q5_1 6, Q2_K 2.625, Q3_K 3.4375, Q4_K 4.5, Q5_K 5.5, Q6_K 6.5625.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GgufType:
    """One llama.cpp block type: ``ggml_type`` id, elements and bytes per block, code bits
    and the value of code 0 relative to the block's scale (``-offset``: Q4_0 codes 0..15 are
    values -8..7; 0 for the types with a stored minimum)."""

    name: str
    ggml_name: str
    ggml_type: int
    block: int
    type_size: int
    bits: int
    offset: int

    @property
    def levels(self) -> int:
        return 1 << self.bits

    @property
    def bits_per_element(self) -> float:
        return self.type_size * 8 / self.block

    @property
    def overhead_bits(self) -> int:
        """Bits per block beyond the codes: scales, minimums, their super-block scales."""
        return self.type_size * 8 - self.block * self.bits


GGUF_TYPES: dict[str, GgufType] = {t.name: t for t in (
    GgufType("gguf_q8_0", "Q8_0", 8, 32, 34, 8, 128),
    GgufType("gguf_q4_0", "Q4_0", 2, 32, 18, 4, 8),
    GgufType("gguf_q4_1", "Q4_1", 3, 32, 20, 4, 0),
    GgufType("gguf_q5_0", "Q5_0", 6, 32, 22, 5, 16),
    GgufType("gguf_q5_1", "Q5_1", 7, 32, 24, 5, 0),
    GgufType("gguf_q2_k", "Q2_K", 10, 256, 84, 2, 0),
    GgufType("gguf_q3_k", "Q3_K", 11, 256, 110, 3, 4),
    GgufType("gguf_q4_k", "Q4_K", 12, 256, 144, 4, 0),
    GgufType("gguf_q5_k", "Q5_K", 13, 256, 176, 5, 0),
    GgufType("gguf_q6_k", "Q6_K", 14, 256, 210, 6, 32),
)}
#: What the encoding loop (``gguf_kernel.encode_report_blocks``) does with each block it
#: encodes: nothing more, measure it for the report, or only sum its squared errors.
ENCODE, MEASURE, SCREEN = 0, 1, 2

#: ggml type id -> the type.
BY_GGML_ID: dict[int, GgufType] = {t.ggml_type: t for t in GGUF_TYPES.values()}

#: The catalog's rows (see :data:`quantscope.core.formats.catalog.FORMAT_TABLE`): kind
#: ``"gguf"``, no element type, the block, the bits per block beyond the codes.
CATALOG_ROWS: dict[str, tuple[str, str | None, int | None, int]] = {
    t.name: ("gguf", None, t.block, t.overhead_bits) for t in GGUF_TYPES.values()}
