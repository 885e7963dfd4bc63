"""A quantized checkpoint on its own, without the original: how its stored codes and scales
are spent. Qt-free.

Two questions a release raises before anyone compares it with anything: does each weight use
the codes it pays for (a 4-bit scheme whose groups land on 9 of 16 levels wastes most of its
precision), and how are its scales spread (a few enormous block scales mark the outliers that
set them; zero scales mark dead groups)? :func:`overview` answers both from a decoded weight
(:class:`quantscope.io.stored.StoredTensor`): occupancy of every code level, and the block
scales' quantiles and their histogram by powers of two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from quantscope.core.formats.gguf_types import GGUF_TYPES
from quantscope.io.stored import StoredTensor

#: Quantiles of the block scales that a row shows.
QUANTILES = (0.0, 0.01, 0.5, 0.99, 1.0)


@dataclass(frozen=True)
class StoredOverview:
    """One stored weight's code occupancy and scale distribution."""

    name: str
    shape: tuple[int, ...]
    format: str
    bits_per_element: float
    levels: int
    codes_used: int
    code_counts: tuple[int, ...]
    scales: int
    scale_quantiles: tuple[float, ...]
    zero_scales: int
    #: (exponent e, count) of the finite positive scales with 2^e <= |s| < 2^(e+1).
    scale_octaves: tuple[tuple[int, int], ...]

    @property
    def occupancy(self) -> float:
        """Share of the code levels at least one element uses."""
        return self.codes_used / self.levels if self.levels else math.nan

    def as_dict(self) -> dict:
        return {
            "name": self.name, "shape": list(self.shape), "format": self.format,
            "bits_per_element": self.bits_per_element, "levels": self.levels,
            "codes_used": self.codes_used, "occupancy": self.occupancy,
            "code_counts": list(self.code_counts), "scales": self.scales,
            "scale_quantiles": dict(zip((f"q{int(100 * q)}" for q in QUANTILES),
                                        self.scale_quantiles, strict=True)),
            "zero_scales": self.zero_scales,
            "scale_octaves": [{"exponent": e, "count": c} for e, c in self.scale_octaves],
        }


def code_levels(decoded: StoredTensor) -> tuple[np.ndarray, int]:
    """The codes as indexes from 0, and how many levels the element type has."""
    element = decoded.format.element
    codes = decoded.codes
    if decoded.format.method == "gguf":  # codes 0..levels-1 of llama.cpp's block type

        bits = next(t.bits for t in GGUF_TYPES.values() if t.ggml_name == element)
        return codes.astype(np.int64).reshape(-1), 1 << bits
    if element.startswith(("int", "uint")):
        bits = int(element.removeprefix("u").removeprefix("int"))
        offset = 0 if element.startswith("uint") else 1 << (bits - 1)
        return codes.astype(np.int64).reshape(-1) + offset, 1 << bits
    bits = 8 if element.startswith("fp8") else 4
    return codes.astype(np.int64).reshape(-1), 1 << bits


def overview(decoded: StoredTensor) -> StoredOverview:
    """Code occupancy and scale distribution of one decoded weight."""
    index, levels = code_levels(decoded)
    counts = np.bincount(np.clip(index, 0, levels - 1), minlength=levels)
    scales = np.abs(decoded.scales.astype(np.float64).reshape(-1))
    finite = scales[np.isfinite(scales)]
    quantiles = tuple(float(q) for q in np.quantile(finite, QUANTILES)) if finite.size else (
        (math.nan,) * len(QUANTILES))
    positive = finite[finite > 0]
    exponents, octave_counts = np.unique(np.floor(np.log2(positive)).astype(np.int64),
                                         return_counts=True)
    return StoredOverview(
        name=decoded.name, shape=tuple(decoded.values.shape), format=decoded.format.label,
        bits_per_element=decoded.bits_per_element, levels=levels,
        codes_used=int(np.count_nonzero(counts)), code_counts=tuple(int(c) for c in counts),
        scales=int(scales.size), scale_quantiles=quantiles,
        zero_scales=int(np.count_nonzero(finite == 0)),
        scale_octaves=tuple((int(e), int(c)) for e, c in zip(exponents, octave_counts,
                                                              strict=True)))
