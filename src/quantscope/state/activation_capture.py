"""Every value a layer sees, kept exactly in bounded memory: one store per observed tensor.

A :class:`CaptureStore` receives a layer's input (or output) batch by batch as
``[tokens, channels]`` float32 rows (bf16, fp16 and fp8 widen to float32 exactly). Up to
``cap_bytes`` the rows stay in memory; past it everything goes to a temporary file, appended
batch by batch, and :meth:`CaptureStore.values` maps that file read-only. The file is unlinked
as soon as it is mapped: the mapping keeps the data while the array lives, and nothing is left
on disk when it goes (or when the process dies).
"""

from __future__ import annotations

import os
import tempfile
from typing import BinaryIO

import numpy as np

from quantscope.errors import QuantscopeError

#: Bytes of one layer's captured values held in memory before spilling to a file.
DEFAULT_CAP_BYTES = 256 * 2**20


class CaptureStore:
    """One observed tensor's rows (see the module docstring)."""

    def __init__(self, name: str, cap_bytes: int = DEFAULT_CAP_BYTES) -> None:
        self.name = name
        self.cap_bytes = int(cap_bytes)
        self.chunks: list[np.ndarray] = []
        self.channels: int | None = None
        self.rows = 0
        self.dtype: str | None = None
        self.batch_shapes: list[tuple[int, ...]] = []
        self._file: BinaryIO | None = None
        self._path: str | None = None
        self._mapped: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        return self.rows * (self.channels or 0) * 4

    @property
    def spilled(self) -> bool:
        return self._path is not None

    def add(self, x: np.ndarray, channels_axis: int, dtype: str) -> None:
        """Append one batch (any shape, its channels on ``channels_axis``); copied at once,
        so the framework may reuse its buffer."""
        shape = tuple(int(d) for d in x.shape)
        if x.ndim == 0:
            raise QuantscopeError(f"{self.name}: a scalar has no channels to observe")
        moved = np.moveaxis(x, channels_axis, -1)
        rows = np.array(moved.reshape(-1, moved.shape[-1]), np.float32, copy=True, order="C")
        if self.channels is None:
            self.channels, self.dtype = rows.shape[1], dtype
        elif rows.shape[1] != self.channels:
            raise QuantscopeError(f"{self.name}: a batch with {rows.shape[1]} channels after "
                                  f"batches with {self.channels}")
        self.batch_shapes.append(shape)
        self.rows += rows.shape[0]
        if self._file is None and self.nbytes > self.cap_bytes:
            fd, self._path = tempfile.mkstemp(prefix="quantscope-observe-", suffix=".f32")
            self._file = os.fdopen(fd, "wb")
            for c in self.chunks:
                c.tofile(self._file)
            self.chunks = []
        if self._file is not None:
            rows.tofile(self._file)
        else:
            self.chunks.append(rows)

    def values(self) -> np.ndarray:
        """Every row so far, ``[tokens, channels]`` float32 (a read-only map once spilled)."""
        channels = self.channels or 0
        if self._mapped is not None:
            return self._mapped
        if self._file is None:
            if not self.chunks:
                return np.empty((0, channels), np.float32)
            return np.concatenate(self.chunks) if len(self.chunks) > 1 else self.chunks[0]
        self._file.flush()
        path = self._path
        assert path is not None
        self._mapped = np.memmap(path, np.float32, mode="r", shape=(self.rows, channels))
        self.close()
        return self._mapped

    def close(self) -> None:
        """Close and unlink the spill file (a map already made keeps its data)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._path is not None:
            try:
                os.unlink(self._path)
            except OSError:
                pass
