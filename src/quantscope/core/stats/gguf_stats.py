"""Exact reports of GGUF blocks (:mod:`quantscope.core.formats.gguf`) against a tensor.

The same :class:`~quantscope.core.stats.report.QuantReport` as every format, one unit per
block (32 elements, or a 256-element super-block):

* ``x̂`` is llama.cpp's dequantized value of each stored code (float32), the error ``x - x̂``
  summed in float64;
* an element is *clipped* when it lies more than half a step below the lowest or above the
  highest value its (sub-)block can represent -- Q4_0's ``d = max / -8`` leaves the far side
  of a block one step short, and a k-quant's fitted scale and minimum may leave the extremes
  outside; every other element's error is rounding error;
* codes are the stored integers ``0..levels - 1`` (Q8_0's int8 shifted by 128), so
  ``codes_used`` says how many of a type's codes the tensor occupies.

One compiled pass over the tensor and the bytes, split in ranges of blocks over the engine's
threads; non-finite elements are refused (llama.cpp refuses such rows too). Choosing the blocks
for a prepared tensor (:func:`kept_gguf_params`) measures each block as it is encoded, in the
encoding's own pass, and keeps the report for those blocks: the report that follows costs a
comparison of the bytes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from quantscope.core.formats.gguf import (
    GgufParams,
    block_ranges,
    blocks_of,
    check_shape,
    from_blocks,
    gguf_type,
)
from quantscope.core.formats.gguf_types import MEASURE, SCREEN
from quantscope.core.kernels import compiled
from quantscope.core.kernels.parallel import parallel
from quantscope.core.kernels.read_only import read_only
from quantscope.core.kernels.unit_columns import unit_columns
from quantscope.core.stats.kept import kept_report
from quantscope.core.stats.report import QuantReport, UnitTotals, build_report
from quantscope.core.tensors.validate import EngineValueError, as_float32, check_nonfinite

#: The refusal of blocks whose values are not finite.
_OVERFLOW = ("{}: a block's fp16 scale overflowed (values beyond what float16 block scales "
             "hold), so its values are not finite")


def analyze_gguf(x, params: GgufParams) -> QuantReport:
    """``x`` against the values ``params`` stores (see the module docstring)."""
    return measure_blocks(x, params).report()


def measure_blocks(x, params: GgufParams) -> MeasuredBlocks:
    """Each block ``params`` stores measured against ``x``: the columns of its report, which
    :meth:`MeasuredBlocks.report` gives (or refuses, for an overflowed scale)."""
    t = params.gguf
    xf = read_only(np.ascontiguousarray(as_float32(x)))  # one loop for either kind of tensor
    if tuple(xf.shape) != tuple(params.shape):
        raise EngineValueError(f"{params.format}: the blocks hold a tensor of shape "
                               f"{params.shape}; x has shape {xf.shape}")
    check_nonfinite(xf, "raise")
    yb = blocks_of(params.blocks, t, params.shape)
    n_blocks = yb.shape[0]
    xb = xf.reshape(n_blocks, t.block)
    # each statistic's column is contiguous for the report, and the loop writes into it
    # directly (a row-major copy was 80 bytes more per block), in the one layout it is
    # compiled for
    out_f = unit_columns(n_blocks, 6)
    out_i = unit_columns(n_blocks, 4, np.int64)

    def share(lo: int, hi: int) -> np.ndarray:
        h = np.zeros(t.levels, np.int64)
        compiled.report_blocks(t.ggml_type, xb[lo:hi], yb[lo:hi], t.levels, out_f[lo:hi],
                               out_i[lo:hi], h)
        return h

    hist = np.sum(parallel(share, block_ranges(n_blocks, t.block)), axis=0)
    return MeasuredBlocks(params, out_f, out_i, hist)


def _report(params: GgufParams, out_f, out_i, hist, size: int) -> QuantReport:
    tot = UnitTotals.of(round_err=out_f[:, 0], clip_err=out_f[:, 1], max_abs=out_f[:, 2],
                        sig=out_f[:, 3], n=out_i[:, 0], x_min=out_f[:, 4], x_max=out_f[:, 5],
                        below=out_i[:, 1], above=out_i[:, 2], codes=out_i[:, 3], hist=hist)
    return build_report(params, tot, size)


def _kept_key(params: GgufParams) -> tuple:
    return ("gguf", params.format, tuple(params.shape))


@dataclasses.dataclass(frozen=True, eq=False)
class MeasuredBlocks:
    """Blocks llama.cpp writes for a tensor, each measured against its own bytes in the pass
    that encoded it: the columns :func:`analyze_gguf` fills for those blocks (column-major),
    bit for bit, so their report costs no second pass over the tensor."""

    params: GgufParams
    out_f: np.ndarray
    out_i: np.ndarray
    hist: np.ndarray

    @property
    def finite(self) -> bool:
        """Whether every block's figures are finite (else the report refuses the blocks)."""
        return bool(np.isfinite(self.out_f[:, :3]).all())

    def error_sum(self) -> float:
        """``Σ (x − x̂)²`` over the blocks, in any order (inf or NaN where a scale overflowed):
        the report's own terms, for :mod:`quantscope.core.stats.format_sweep`'s bounds."""
        return float(self.out_f[:, 0].sum() + self.out_f[:, 1].sum())

    def report(self) -> QuantReport:
        """:func:`analyze_gguf` of the tensor these blocks were encoded from, refusing as it
        does."""
        if not self.finite:
            raise EngineValueError(_OVERFLOW.format(self.params.format))
        return _report(self.params, self.out_f, self.out_i, self.hist,
                       int(np.prod(self.params.shape, dtype=np.int64)))


def _encoded(x, name: str, mode: int):
    """``x`` encoded as llama.cpp does (as :func:`~quantscope.core.formats.gguf.gguf_params`),
    each block measured (``mode`` ``MEASURE``) or its squared errors summed (``SCREEN``) in
    the pass that encodes it: ``(params, out_f, out_i, hist, error)``."""
    t = gguf_type(name)
    xf = read_only(np.ascontiguousarray(as_float32(x)))
    check_shape(xf.shape, t)
    check_nonfinite(xf, "raise")
    n_blocks = xf.size // t.block
    xb = xf.reshape(n_blocks, t.block)
    out = np.empty((n_blocks, t.type_size), np.uint8)
    measure = mode == MEASURE
    # as analyze_gguf's; one unit, never written, without the report (the same layout)
    out_f = unit_columns(n_blocks if measure else 1, 6)
    out_i = unit_columns(n_blocks if measure else 1, 4, np.int64)

    def share(lo: int, hi: int) -> tuple[np.ndarray, float]:
        h = np.zeros(t.levels, np.int64)
        units = slice(lo, hi) if measure else slice(None)
        error = compiled.encode_report_blocks(t.ggml_type, xb[lo:hi], out[lo:hi], mode,
                                              t.levels, out_f[units], out_i[units], h)
        return h, error

    done = parallel(share, block_ranges(n_blocks, t.block))
    hist = np.sum([h for h, _ in done], axis=0)
    params = from_blocks(out.reshape((*xf.shape[:-1], xf.shape[-1] // t.block * t.type_size)),
                         name, tuple(xf.shape))
    return params, out_f, out_i, hist, float(sum(e for _, e in done))


def encode_measured(x, name: str) -> MeasuredBlocks:
    """The blocks llama.cpp writes for ``x`` (as :func:`~quantscope.core.formats.gguf.
    gguf_params`), each measured in the pass that encodes it (:class:`MeasuredBlocks`)."""
    params, out_f, out_i, hist, _ = _encoded(x, name, MEASURE)
    return MeasuredBlocks(params, out_f, out_i, hist)


@dataclasses.dataclass(frozen=True, eq=False)
class ScreenedBlocks:
    """Blocks llama.cpp writes for a tensor and ``Σ (x − x̂)²`` over them (inf or NaN where a
    scale overflowed), each block's squared errors summed in the pass that encoded it: the
    report's terms in another order, the error screen's figure
    (:mod:`quantscope.core.stats.format_sweep`), without a second pass that decodes every
    block into memory and reads it back with the tensor."""

    params: GgufParams
    error: float


def encode_screened(x, name: str) -> ScreenedBlocks:
    """The blocks llama.cpp writes for ``x`` (as :func:`~quantscope.core.formats.gguf.
    gguf_params`), screened as they are encoded (:class:`ScreenedBlocks`)."""
    params, _, _, _, error = _encoded(x, name, SCREEN)
    return ScreenedBlocks(params, error)


def joined_rows(parts: list[MeasuredBlocks], shape: tuple[int, ...]) -> MeasuredBlocks:
    """One 2-D tensor's measured blocks from those of its consecutive blocks of rows, in
    order: the blocks and their columns are the whole tensor's (a block never spans rows)."""
    first = parts[0].params
    blocks = np.concatenate([p.params.blocks for p in parts])
    n_blocks = sum(p.out_f.shape[0] for p in parts)
    out_f = unit_columns(n_blocks, 6, zeros=False)  # as analyze_gguf's
    out_i = unit_columns(n_blocks, 4, np.int64, zeros=False)
    np.concatenate([p.out_f for p in parts], out=out_f)
    np.concatenate([p.out_i for p in parts], out=out_i)
    hist = np.sum([p.hist for p in parts], axis=0)
    return MeasuredBlocks(from_blocks(blocks, first.format, shape), out_f, out_i, hist)


def kept_gguf_params(prepared, name: str) -> GgufParams:
    """The blocks llama.cpp writes for the prepared tensor (as
    :func:`~quantscope.core.formats.gguf.gguf_params`), each block measured in the pass that
    encodes it; the report is kept for these blocks
    (:func:`~quantscope.core.stats.kept.kept_report`), so the report that follows
    (:func:`prepared_gguf_report`) is a comparison of the bytes instead of a second pass."""
    measured = encode_measured(prepared.x, name)
    params = measured.params
    if measured.finite:  # otherwise the report refuses them, when asked
        report = measured.report()
        kept_report(prepared, _kept_key(params), (params.blocks,), lambda: report)
    return params


def prepared_gguf_report(prepared, params: GgufParams) -> QuantReport:
    """:func:`analyze_gguf` on a prepared tensor, kept beside a private copy of the blocks it
    measured (:func:`~quantscope.core.stats.kept.kept_report`): a repaint of the same blocks
    costs one comparison of their bytes instead of a pass."""
    return kept_report(prepared, _kept_key(params), (params.blocks,),
                       lambda: analyze_gguf(prepared.x, params))
