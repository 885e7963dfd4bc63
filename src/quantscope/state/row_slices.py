"""A block format's parameters and screened error a slice of rows at a time.

Why: the error screen (:class:`~quantscope.core.stats.format_sweep.ErrorScreen`) rules most
formats out after a slice or two of a tensor's rows, yet each format's parameters were chosen
on the whole tensor first -- llama.cpp's encoder, torchao's, the block amaxes -- and llama.cpp's
and torchao's blocks decoded whole. On a 2048x2048 weight that was about 60% of
``scan --formats``' processor time, most of it for formats the screen then dropped.

How: a format whose blocks or groups run along the last axis of a 2-D tensor, each chosen from
its own block alone (MX, NF4, INT4 groups, GPTQ, AWQ, torchao's INT4, llama.cpp's types, under
min/max ranges), has on rows ``a:b`` exactly the parameters the whole tensor has there. So a
slice's parameters are chosen on the slice when the screen first asks for its error, and a
format that may win gets the whole tensor's parameters stacked from its slices' (chosen for the
slices not yet seen), field for field those of the whole tensor
(``tests/core/test_row_slices.py``). NVFP4 (an FP32 tensor scale over every block) and the
per-tensor and per-channel formats are not sliced.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from quantscope.core import QuantParams
from quantscope.core.formats.catalog import FormatParams, format_kind
from quantscope.core.formats.gguf import GgufParams, from_blocks
from quantscope.core.formats.torchao_int4 import TorchaoInt4Params
from quantscope.core.stats.format_sweep import ErrorScreen, screenable
from quantscope.core.stats.gguf_stats import (
    MeasuredBlocks,
    ScreenedBlocks,
    encode_measured,
    encode_screened,
    joined_rows,
    measure_blocks,
)
from quantscope.errors import QuantscopeError
from quantscope.state.choices import FormatChoice

#: Format kinds whose blocks or groups are chosen each from its own values along the last axis.
ROW_LOCAL_KINDS = frozenset({"mx", "nf4", "int", "torchao", "gguf"})


def row_local(spec: FormatChoice, x: np.ndarray, settings, slices: int) -> bool:
    """Whether ``spec``'s parameters on ``x`` may be chosen ``slices`` slices of rows at a
    time (see the module docstring): a block format of :data:`ROW_LOCAL_KINDS` under min/max
    ranges on a 2-D tensor of at least ``slices`` rows."""
    return (spec.blocked and format_kind(spec.name) in ROW_LOCAL_KINDS
            and settings.method == "minmax" and x.ndim == 2 and x.shape[0] >= slices)


class RowSliceScreen:
    """The screen of one format whose parameters are chosen a slice of rows at a time
    (:func:`row_local`); ``choose(rows)`` gives the parameters of a block of rows."""

    def __init__(self, x: np.ndarray, slices: int, choose) -> None:
        self.x, self.slices, self.choose = x, slices, choose
        self._params: dict[int, Any] = {}

    def _rows(self, k: int) -> slice:
        n = self.x.shape[0]
        return slice(k * n // self.slices, (k + 1) * n // self.slices)

    def slice_params(self, k: int) -> Any:
        """The ``k``-th slice's parameters (what ``choose`` gives), chosen on first need."""
        if k not in self._params:
            try:
                self._params[k] = self.choose(self.x[self._rows(k)])
            except QuantscopeError:
                self.refuse()
                raise
        return self._params[k]

    def refuse(self) -> None:
        """Raise the whole tensor's refusal, as without slices."""
        self.choose(self.x)

    def point_params(self):
        """The whole tensor's parameters and, where the slices measured them, its exact
        report (else None)."""
        return self.params(), None

    def likely_best(self) -> None:
        """The search's word that this format is its likeliest best (its exact report will
        be asked): nothing to prepare here."""

    def slice_sum(self, k: int, slices: int) -> float:
        """``Σ d²`` over the ``k``-th slice of rows (``slices`` must be this screen's)."""
        assert slices == self.slices  # the slices the parameters were chosen on
        params = self.slice_params(k)
        if not screenable(params):  # not a format of ROW_LOCAL_KINDS (never)
            raise QuantscopeError(f"{params!r} cannot be screened a slice at a time")
        return ErrorScreen(self.x[self._rows(k)], params).slice_sum(0, 1)

    def params(self) -> QuantParams | FormatParams:
        """The whole tensor's parameters, stacked from every slice's."""
        return stack_rows([self.slice_params(k) for k in range(self.slices)],
                          tuple(self.x.shape))


def stack_rows(parts: list, shape: tuple[int, ...]):
    """One parameter set for a 2-D tensor of ``shape`` from those of its consecutive blocks of
    rows (per block or group along the last axis: their arrays stacked along the rows)."""
    first = parts[0]

    def rows(name: str) -> np.ndarray:
        return np.concatenate([np.asarray(getattr(p, name)) for p in parts])

    if isinstance(first, GgufParams):
        return from_blocks(rows("blocks"), first.format, shape)
    if isinstance(first, TorchaoInt4Params):
        return dataclasses.replace(first, scale=rows("scale"), zero=rows("zero"), shape=shape)
    if isinstance(first, QuantParams):
        return first.with_(scale=rows("scale"), zero_point=rows("zero_point"))
    arrays = {f: rows(f) for f in ("scale", "inv_scale", "block_scales")
              if getattr(first, f) is not None}
    return dataclasses.replace(first, **arrays)


class GgufSliceScreen(RowSliceScreen):
    """:class:`RowSliceScreen` of a llama.cpp type whose exact report is joined from its
    slices' instead of a pass over the whole tensor. Each slice's blocks are encoded
    (llama.cpp's rule, as the pane's mapping) and screened by their decoded values in the
    same pass (:func:`~quantscope.core.stats.gguf_stats.encode_screened`); once the
    search names this format its likeliest best (:meth:`likely_best`), the slices still to
    come are encoded and measured in one pass
    (:func:`~quantscope.core.stats.gguf_stats.encode_measured`: the screen's error is then the
    report's own terms), and the report of a format that may win joins every slice's columns,
    measuring those encoded before from their stored blocks
    (:func:`~quantscope.core.stats.gguf_stats.joined_rows`), equal to
    :func:`~quantscope.core.stats.gguf_stats.analyze_gguf` bit for bit. (Measuring every
    slice as it is encoded costs the formats the screen rules out more than it saves.)
    ``refuse()`` raises the whole tensor's refusal of the pane's mapping."""

    def __init__(self, x: np.ndarray, slices: int, name: str, refuse) -> None:
        super().__init__(x, slices, self._encode)
        self.name, self._refuse, self._measure = name, refuse, False

    def _encode(self, rows: np.ndarray) -> ScreenedBlocks | MeasuredBlocks:
        return encode_measured(rows, self.name) if self._measure else encode_screened(
            rows, self.name)

    def likely_best(self) -> None:
        self._measure = True

    def refuse(self) -> None:
        self._refuse()

    def slice_measured(self, k: int) -> MeasuredBlocks:
        """The ``k``-th slice's blocks, measured (encoded on first need)."""
        chosen = self.slice_params(k)
        if isinstance(chosen, MeasuredBlocks):
            return chosen
        self._params[k] = measure_blocks(self.x[self._rows(k)], chosen.params)
        return self._params[k]

    def slice_sum(self, k: int, slices: int) -> float:
        assert slices == self.slices  # the slices the blocks were encoded on
        chosen = self.slice_params(k)
        if isinstance(chosen, MeasuredBlocks):
            return chosen.error_sum()
        return chosen.error

    def measured(self) -> MeasuredBlocks:
        """The whole tensor's blocks and columns, joined from every slice's."""
        return joined_rows([self.slice_measured(k) for k in range(self.slices)],
                           tuple(self.x.shape))

    def params(self) -> GgufParams:
        return self.measured().params

    def point_params(self):
        measured = self.measured()
        return measured.params, measured.report()
