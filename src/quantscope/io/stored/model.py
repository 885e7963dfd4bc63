"""What a stored quantization is: its scheme as the checkpoint declares it, and a decoded tensor.

A quantized checkpoint stores a weight as several tensors (packed codes, scales, zero points,
a group index...). :class:`StoredFormat` names the scheme in the words of the package that
wrote it, so a table can say "compressed-tensors int4 g128 asym" beside the numbers, and
:class:`StoredTensor` carries the decoded values together with the codes and scales they came
from, so the window can show the stored scheme and not only its result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class StoredFormat:
    """A stored quantization scheme, as its checkpoint declares it.

    Attributes
    ----------
    method : str
        The package whose layout the tensors follow: ``"compressed-tensors"``, ``"fp8"``,
        ``"gptq"``, ``"awq"`` or ``"bitsandbytes"``.
    element : str
        The element type: ``"int4"``, ``"int8"``, ``"uint4"``, ``"fp8_e4m3"``,
        ``"fp4_e2m1"``, ``"nf4"``...
    granularity : str
        ``"tensor"``, ``"channel"``, ``"group"`` or ``"block"``: what one scale covers.
    group_size : int or None
        Elements per group along the input dimension (``"group"`` and bitsandbytes' blocks).
    block : tuple of int or None
        Rows x columns one scale covers (``"block"``: 128 x 128 in DeepSeek-V3).
    symmetric : bool
        False when a zero point is stored.
    scale_dtype : str
        The dtype the scales are stored in (NumPy name).
    """

    method: str
    element: str
    granularity: str
    group_size: int | None = None
    block: tuple[int, int] | None = None
    symmetric: bool = True
    scale_dtype: str = "float32"
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``compressed-tensors int4 g128 asym``: one phrase for tables and pane titles."""
        if self.method == "gguf":  # llama.cpp's type name says the whole block layout
            return f"gguf {self.element}"
        parts = [self.method, self.element]
        if self.granularity == "group" and self.group_size:
            parts.append(f"g{self.group_size}")
        elif self.granularity == "block" and self.block:
            parts.append(f"block {self.block[0]}x{self.block[1]}")
        else:
            parts.append(f"per {self.granularity}")
        if not self.symmetric:
            parts.append("asym")
        return " ".join(parts)


@dataclass(frozen=True)
class StoredTensor:
    """A weight decoded from its stored parts, exactly as the writing package decodes it.

    Attributes
    ----------
    name : str
        The weight's own name (``...q_proj.weight``), which the unquantized original uses.
    values : numpy.ndarray
        The decoded weight as float32, in the original's shape (out x in for a linear layer),
        each value equal to what the package's own dequantize returns (rounded to
        ``decoded_dtype`` first where it returns bf16 or fp16).
    format : StoredFormat
        The scheme.
    codes : numpy.ndarray
        The stored codes, unpacked, one per element in the weight's layout: signed integers
        for integer formats (zero point not subtracted), the element's bit pattern for float
        and lookup formats (fp8 bits, fp4 and nf4 indices).
    scales : numpy.ndarray
        The scales as stored (float32), in the package's own layout.
    zero_points : numpy.ndarray or None
        The zero points, unpacked, when stored.
    parts : dict of str to int
        The stored tensors decoded, with the bytes each occupies.
    decoded_dtype : str
        The dtype the package's dequantize returns.
    window : callable or None
        ``window() -> (lo, hi)``: per element (broadcastable to ``values``), the smallest and
        largest value the element's own scale and zero point can decode to. An original value
        outside it was clipped by the stored scheme, one inside it only rounded.
    """

    name: str
    values: np.ndarray
    format: StoredFormat
    codes: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray | None
    parts: dict[str, int] = field(default_factory=dict)
    decoded_dtype: str = "float32"
    window: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None

    @property
    def stored_bytes(self) -> int:
        """Bytes the weight occupies in the checkpoint: codes, scales, zero points, indexes."""
        return sum(self.parts.values())

    @property
    def bits_per_element(self) -> float:
        """Stored bits per weight element, every part included (scales, zero points...)."""
        return 8.0 * self.stored_bytes / max(self.values.size, 1)
