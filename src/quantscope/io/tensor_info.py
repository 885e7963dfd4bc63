"""What a loader reports about a stored tensor, and the one error every loader raises.

Kept apart from the format modules so the window, the command line and the tests can name
these types without importing a parser.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from quantscope.errors import QuantscopeError
from quantscope.io.dtypes import dtype_from_name, is_floating_dtype


class TensorFileError(QuantscopeError, ValueError):
    """A tensor file that cannot be read safely: missing, truncated, lying, hostile or unsupported.

    The message always names the file and the problem in one line, because the command line
    prints it as is and the window shows it in a message box. It also derives from
    ``ValueError`` so library callers that already catch bad values keep working.
    """


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a file, described from its header without reading the data.

    Attributes
    ----------
    name : str
        The name to pass to ``load_tensor``: the safetensors key, the ``.npz`` member without
        its ``.npy`` suffix, or the file's stem for a ``.npy`` file.
    shape : tuple of int
        The shape as the header declares it (already checked against the bytes present).
    dtype : str
        The NumPy name of the stored dtype (``"bfloat16"``, ``"float8_e4m3fn"``,
        ``"float32"``...), uniform across formats so tables can sort and compare.
    file_dtype : str
        The dtype exactly as the file writes it (``"BF16"``, ``"<f4"``...), shown to people who
        know their format.
    nbytes : int
        Bytes the tensor's data occupies in the file (uncompressed).
    format : str
        ``"npy"``, ``"npz"`` or ``"safetensors"``.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    file_dtype: str
    nbytes: int
    format: str

    @property
    def size(self) -> int:
        """Number of elements (1 for a 0-d tensor)."""
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def numpy_dtype(self) -> np.dtype:
        """The dtype as a NumPy object (ml_dtypes types for bf16 and fp8)."""
        return dtype_from_name(self.dtype)

    @property
    def is_floating(self) -> bool:
        """True for every floating dtype, the ml_dtypes ones (bf16, fp8) included."""
        return is_floating_dtype(self.numpy_dtype)

    @property
    def stored(self) -> str | None:
        """The engine format the file stores this tensor in when it is already quantized
        (``"gguf_q4_k"`` for a GGUF Q4_K tensor, read decoded to float32), else None."""
        if self.format != "gguf":
            return None
        from quantscope.core.formats.gguf_types import GGUF_TYPES

        for name, t in GGUF_TYPES.items():
            if t.ggml_name == self.file_dtype:
                return name
        return None

    def describe(self) -> str:
        """``name  (384, 384)  bfloat16  288.0 KiB``: one line for listings and error hints."""
        shape = "x".join(str(d) for d in self.shape) or "scalar"
        return f"{printable(self.name)}  [{shape}]  {self.dtype}  {format_bytes(self.nbytes)}"


def printable(name: str) -> str:
    """``name`` as is when printable, else its escaped ``repr``.

    Tensor names come from the file; a hostile one could hold newlines or terminal escape
    sequences that would break a one-line error or rewrite the user's screen.
    """
    return name if name.isprintable() else repr(name)


#: Integers longer than this print as their digit count (Python refuses ``str`` of an int over
#: 4300 digits, and a hostile header can hold such numbers; no real size comes near).
_MAX_DIGITS_SHOWN = 40


def count(value: object) -> str:
    """An int, or a shape of ints, as text that is safe and short for any size.

    Hostile headers hold integers with thousands of digits: formatting one in an error message
    would itself raise (``int`` to ``str`` is capped at 4300 digits) or flood the terminal.
    """
    if isinstance(value, tuple | list):
        inner = ", ".join(count(v) for v in value[:8]) + (", ..." if len(value) > 8 else "")
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > _MAX_DIGITS_SHOWN * 3:  # cheap: no str() of the whole number
            digits = int(value.bit_length() * 0.30103) + 1
            return f"{'-' if value < 0 else ''}<a {digits}-digit number>"
        return str(value)
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        return f"<{type(value).__name__} too large to print>"
    return text if len(text) <= 60 else text[:57] + "..."


def format_bytes(n: int) -> str:
    """Human-readable byte count (binary units), e.g. ``"3.4 MiB"``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
