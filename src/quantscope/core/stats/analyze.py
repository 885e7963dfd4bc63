"""The direct pass: quantize, dequantize and split the error, exactly, in cache-sized blocks.

This is the reference the fast prepared path (:mod:`quantscope.core.stats.prepared`) is tested
against.
It walks the tensor as rows that share one scale
(:func:`quantscope.core.tensors.layout.param_rows`), a
block of about 64K elements at a time, so even 10^8 elements need no full-size temporary; every
sum is taken in float64; the blocks of rows are shared between the engine's threads. A large
tensor under one scale takes one compiled pass on every core
instead (:mod:`quantscope.core.kernels.direct_kernel`; the same codes and counts, bit for bit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from quantscope.core.kernels import compiled
from quantscope.core.kernels.parallel import parallel, shares
from quantscope.core.kernels.read_only import read_only
from quantscope.core.kernels.unit_columns import unit_columns
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.schemes.quantize import BLOCK, quantize_codes_float, use_compiled
from quantscope.core.stats.report import QuantReport, UnitTotals, build_report
from quantscope.core.tensors.layout import RowSet, param_rows
from quantscope.core.tensors.validate import EngineValueError, as_float32

if TYPE_CHECKING:  # for the annotations only: formats loads Numba, `import quantscope` must not
    from quantscope.core.formats.catalog import FormatParams


#: Elements from which a per-group report is one compiled pass
#: (:mod:`quantscope.core.kernels.group_kernel`): an LLM weight's groups, 26 ns per element in
#: NumPy. Below, the NumPy pass takes at most ~0.1 s and needs no compiled loop, so a window
#: whose loops are still being compiled elsewhere paints without waiting for them.
GROUP_COMPILED_MIN = 1 << 22


class _Work:
    """Block-sized scratch buffers, allocated once per analysis: fresh 512 KiB arrays in every
    block would cost more in page faults than the arithmetic itself."""

    def __init__(self) -> None:
        self.v = np.empty(BLOCK, np.float32)
        self.a = np.empty(BLOCK, np.float64)
        self.b = np.empty(BLOCK, np.float64)
        self.codes = np.empty(BLOCK, np.intp)
        self.below = np.empty(BLOCK, bool)
        self.above = np.empty(BLOCK, bool)

    def get(self, name: str, shape: tuple[int, int]) -> np.ndarray:
        return getattr(self, name)[: shape[0] * shape[1]].reshape(shape)


def _row_sums(terms: np.ndarray) -> np.ndarray:
    """Each row's sum of float64 ``terms`` (C-contiguous rows), in the order NumPy's pairwise
    sum takes along one row: the same whatever the number of rows beside it.

    Why not ``einsum("ij,ij->i")`` of the values, which needs no array of squares: it adds a
    lone row in another order than the same row among others (a 10,112-element row differed
    in the last bits), so a tensor analysed alone and as a row of a stacked batch
    (:mod:`quantscope.state.format_batch`) printed different SQNRs. ``np.dot`` is not used
    either: BLAS would start its thread pool for a 64K-element dot, which on a busy 2-core
    machine made a whole analysis 20-50x slower.
    """
    return np.add.reduce(terms, axis=1)


def _block(xb: np.ndarray, s: np.ndarray, z: np.ndarray, p: QuantParams, hist: np.ndarray,
           work: _Work, units: bool, inv: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Statistics per row of one block; adds the block's codes to ``hist`` (rows x levels).

    ``units``: also the per-row minimum and maximum (only per-channel/per-group reports show
    them).
    """
    shape = xb.shape
    r = shape[0]
    v = quantize_codes_float(xb, s, z, p.qmin, p.qmax, p.rounding, p.arithmetic,
                             out=work.get("v", shape), inv_scale=inv)
    x64 = work.get("a", shape)
    np.copyto(x64, xb)
    sq = np.square(x64, out=work.get("b", shape))
    sig = _row_sums(sq)
    fin = None
    if not np.isfinite(sig).all():  # NaN/inf present: mask them out of everything
        fin = np.isfinite(xb)
        x64[~fin] = 0.0
        sig = _row_sums(np.square(x64, out=sq))
    below = np.less(v, p.qmin, out=work.get("below", shape))
    above = np.greater(v, p.qmax, out=work.get("above", shape))
    if fin is not None:
        below &= fin
        above &= fin
    any_clipped = bool(below.any() or above.any())
    np.clip(v, p.qmin, p.qmax, out=v)
    if fin is not None:
        v[~fin] = p.qmin  # NaN has no integer cast; these elements are left out below anyway
    if p.qmin:
        v -= p.qmin  # code index from 0, shifted in float32 (exact) before the integer cast
    codes = work.get("codes", shape)
    np.copyto(codes, v, casting="unsafe")
    if r > 1:
        codes += (np.arange(r, dtype=np.intp) * hist.shape[1])[:, None]
    hist += np.bincount(codes.ravel() if fin is None else codes[fin],
                        minlength=hist.size).reshape(hist.shape)
    v += (p.qmin - z).astype(np.float32)  # back to code - zero_point, exact in float32
    v *= s
    err = np.subtract(x64, v, out=x64)
    if fin is not None:
        err[~fin] = 0.0
    out = {"n": np.count_nonzero(fin, axis=1) if fin is not None else np.full(r, shape[1]),
           "sig": sig,
           "max_abs": np.maximum(err.max(axis=1), -err.min(axis=1))}
    e2 = np.square(err, out=work.get("b", shape))
    if any_clipped:
        # each kind's squares summed as the whole row with the other kind's set to +0.0: the
        # order of a row's additions does not depend on whether (or where) it clipped
        clipped = np.logical_or(below, above, out=below)
        out["clip_err"] = _row_sums(np.where(clipped, e2, 0.0))
        np.copyto(e2, 0.0, where=clipped)
        out["round_err"] = _row_sums(e2)
        # `below` now holds below | above; the two are disjoint.
        out["above"] = np.count_nonzero(above, axis=1)
        out["below"] = np.count_nonzero(clipped, axis=1) - out["above"]
    else:
        out["round_err"] = _row_sums(e2)
        out["clip_err"] = out["below"] = out["above"] = np.zeros(r, np.int64)
    if units:
        where = fin if fin is not None else True
        out["x_min"] = np.min(xb, axis=1, where=where, initial=np.inf)
        out["x_max"] = np.max(xb, axis=1, where=where, initial=-np.inf)
    return out


def analyze(x, params: QuantParams | FormatParams) -> QuantReport:
    """Quantize ``x`` with ``params`` and report the exact error split and code usage.

    See :mod:`quantscope.core.stats.report` for the definitions. NaN/inf elements are excluded and
    counted; the codes are exactly those of ``params.quantize(x, nonfinite="saturate")`` on the
    finite elements.
    """
    if not isinstance(params, QuantParams):
        from quantscope.core.formats.catalog import FormatParams

        if isinstance(params, FormatParams):
            from quantscope.core.stats.format_stats import analyze_format

            return analyze_format(x, params)
        raise EngineValueError(f"params must be a QuantParams, got {type(params).__name__}")
    xf = as_float32(x)
    if params.granularity != "tensor" and xf.ndim == 0:
        raise EngineValueError("a 0-d tensor cannot be quantized per channel or per group")
    if params.granularity == "tensor" and use_compiled(xf, params.arithmetic):
        return build_report(params, _compiled_totals(xf, params), xf.size)
    if params.granularity == "group" and xf.size >= GROUP_COMPILED_MIN:
        return build_report(params, compiled_group_totals(xf, params), xf.size)
    sets, n_units = param_rows(xf, params.scale, params.zero_point, params.axis,
                               params.group_size)
    tot = UnitTotals(n_units, params.levels)
    work = _Work()
    inv_sets: Sequence[RowSet | None] = [None] * len(sets)
    if params.inv_scale is not None:  # the runtime's own multiplier, laid out like the scale
        inv_sets = param_rows(xf, params.inv_scale, params.zero_point, params.axis,
                              params.group_size)[0]
    for rs, inv_rs in zip(sets, inv_sets, strict=True):
        _accumulate(rs, params, tot, work, inv_rs)
    return build_report(params, tot, xf.size)


def _compiled_totals(xf: np.ndarray, params: QuantParams) -> UnitTotals:
    """The per-tensor totals from one compiled pass on every core
    (:func:`quantscope.core.kernels.direct_kernel.analyze_flat`: same codes and counts bit for
    bit)."""
    inv = None if params.inv_scale is None else np.asarray(params.inv_scale).reshape(())
    hist, sums, ints = compiled.analyze_flat(xf, np.asarray(params.scale).reshape(()),
                                    np.asarray(params.zero_point).reshape(()), params.qmin,
                                    params.qmax, params.rounding, params.arithmetic, inv)
    tot = UnitTotals(1, params.levels)
    tot.round_err[0], tot.clip_err[0], tot.sig[0], tot.max_abs[0] = sums
    tot.n[0], tot.below[0], tot.above[0] = ints
    tot.codes[0] = np.count_nonzero(hist)
    tot.hist[:] = hist
    return tot


def compiled_group_totals(xf: np.ndarray, params: QuantParams) -> UnitTotals:
    """The per-group totals from one compiled pass over the groups on every core
    (:func:`quantscope.core.kernels.group_kernel.group_rows`: the same codes and counts bit for
    bit), written straight into the report's columns."""
    from quantscope.core.kernels.parallel import parallel, shares

    z0 = np.zeros(np.shape(params.scale), np.int32)
    sets, n_units = param_rows(xf, params.scale, params.zero_point, params.axis,
                               params.group_size)
    inv_sets = None if params.inv_scale is None else param_rows(
        xf, params.inv_scale, z0, params.axis, params.group_size)[0]
    # each statistic's column contiguous, in the one layout the loop is compiled for
    out_f = unit_columns(n_units, 6)
    out_i = unit_columns(n_units, 4, np.int64)
    hists = []
    rule = (params.qmin, params.qmax, compiled.ARITHMETIC_CODES[params.arithmetic],
            params.rounding == "half_away", params.inv_scale is not None)
    for k, rs in enumerate(sets):
        # one loop for either kind of tensor (a read-only view is no copy)
        x2d = read_only(rs.x2d if rs.x2d.flags.c_contiguous else np.ascontiguousarray(rs.x2d))
        s = np.ascontiguousarray(rs.scale)
        inv = s if inv_sets is None else np.ascontiguousarray(inv_sets[k].scale)
        z = np.ascontiguousarray(rs.zero_point)
        n_rows = x2d.shape[0]
        start = int(rs.index[0]) if n_rows else 0
        # the groups of a set along the last axis are consecutive units: the loop writes
        # into the report's own columns
        direct = n_rows and int(rs.index[-1]) - start == n_rows - 1 and bool(
            np.all(np.diff(rs.index) == 1))
        f = out_f[start:start + n_rows] if direct else unit_columns(n_rows, 6)
        i = out_i[start:start + n_rows] if direct else unit_columns(n_rows, 4, np.int64)
        k_shares = len(shares(x2d.size))
        ranges = [(j * n_rows // k_shares, (j + 1) * n_rows // k_shares)
                  for j in range(k_shares)]

        def share(lo: int, hi: int, x2d=x2d, s=s, inv=inv, z=z, f=f, i=i) -> np.ndarray:
            h = np.zeros(params.levels + 1, np.int64)  # the last slot: non-finite elements
            compiled.group_rows(x2d[lo:hi], s[lo:hi], inv[lo:hi], z[lo:hi], *rule, h,
                                f[lo:hi], i[lo:hi])
            return h[:-1]

        hists += parallel(share, [(lo, hi) for lo, hi in ranges if hi > lo] or [(0, 0)])
        if not direct:
            out_f[rs.index] = f
            out_i[rs.index] = i
    hist = np.sum(hists, axis=0) if hists else np.zeros(params.levels, np.int64)
    n = out_i[:, 0]
    empty = n == 0
    x_min, x_max = out_f[:, 4], out_f[:, 5]
    if empty.any():
        x_min[empty] = np.inf
        x_max[empty] = -np.inf
    return UnitTotals.of(round_err=out_f[:, 0], clip_err=out_f[:, 1], max_abs=out_f[:, 2],
                         sig=out_f[:, 3], n=n, x_min=x_min, x_max=x_max, below=out_i[:, 1],
                         above=out_i[:, 2], codes=out_i[:, 3], hist=hist)


def _accumulate(rs, params: QuantParams, tot: UnitTotals, work: _Work, inv_rs=None) -> None:
    """The statistics of one row set into ``tot``, its blocks of rows shared between the
    engine's threads (NumPy releases the GIL inside each block's operations). A unit's rows
    all stay in one share, each walked in the same order as by one thread, so every sum is the
    same bit for bit; the shares write disjoint units (a row set holds each unit once)."""
    n_rows, length = rs.x2d.shape
    if length == 0 or n_rows == 0:
        return
    rows_per_block = max(1, BLOCK // min(length, BLOCK))
    n_blocks = -(-n_rows // rows_per_block)
    k = min(len(shares(rs.x2d.size)), n_blocks)
    cut = [rows_per_block * (j * n_blocks // k) for j in range(k)] + [n_rows]
    for hist in parallel(_accumulate_rows, [
            (rs, params, tot, work if j == 0 else _Work(), inv_rs, cut[j], cut[j + 1])
            for j in range(k)]):
        tot.hist += hist


def _accumulate_rows(rs, params: QuantParams, tot: UnitTotals, work: _Work, inv_rs,
                     row_lo: int, row_hi: int) -> np.ndarray:
    """Rows ``[row_lo, row_hi)`` of a row set into ``tot``, a block at a time; returns their
    code histogram (summed by the caller, which owns ``tot.hist``)."""
    length = rs.x2d.shape[1]
    cols = min(length, BLOCK)
    rows_per_block = max(1, BLOCK // cols)
    levels = params.levels
    units = params.granularity != "tensor"
    total = np.zeros(levels, np.int64)
    for r0 in range(row_lo, row_hi, rows_per_block):
        r1 = min(r0 + rows_per_block, row_hi)
        idx = rs.index[r0:r1]
        s = rs.scale[r0:r1, None]
        inv = None if inv_rs is None else inv_rs.scale[r0:r1, None]
        z = rs.zero_point[r0:r1, None]
        hist = np.zeros((r1 - r0, levels), np.int64)
        for c0 in range(0, length, cols):
            st = _block(rs.x2d[r0:r1, c0:c0 + cols], s, z, params, hist, work, units, inv)
            tot.n[idx] += st["n"]
            tot.round_err[idx] += st["round_err"]
            tot.clip_err[idx] += st["clip_err"]
            tot.below[idx] += st["below"]
            tot.above[idx] += st["above"]
            tot.sig[idx] += st["sig"]
            tot.max_abs[idx] = np.maximum(tot.max_abs[idx], st["max_abs"])
            if units:
                tot.x_min[idx] = np.minimum(tot.x_min[idx], st["x_min"])
                tot.x_max[idx] = np.maximum(tot.x_max[idx], st["x_max"])
        tot.codes[idx] = np.count_nonzero(hist, axis=1)
        total += hist.sum(axis=0)
    return total


