"""Exact reports of torchao's int4 weight-only parameters
(:mod:`quantscope.core.formats.torchao_int4`) against a tensor.

The same :class:`~quantscope.core.stats.report.QuantReport` as every format, one unit per
group: ``x̂`` is torchao's dequantized bfloat16 value of each element's code, the error
``x - x̂`` summed in float64; an element is clipped when its code before the clamp to 0..15
lies outside it (a group's own extremes can round half a step beyond, rarely), every other
element's error is rounding error; codes are 0..15. One compiled pass that quantizes and
measures each group (:func:`~quantscope.core.formats.torchao_kernel.group_report`), split in
ranges of groups over the engine's threads.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.torchao_int4 import TorchaoInt4Params, groups_of, ranges
from quantscope.core.kernels import compiled
from quantscope.core.kernels.parallel import parallel
from quantscope.core.kernels.unit_columns import unit_columns
from quantscope.core.stats.report import QuantReport, UnitTotals, build_report
from quantscope.core.tensors.validate import EngineValueError, as_float32


def analyze_torchao(x, params: TorchaoInt4Params) -> QuantReport:
    """``x`` against torchao's values under ``params`` (see the module docstring)."""
    xf = as_float32(x)
    if tuple(xf.shape) != tuple(params.shape):
        raise EngineValueError(f"{params.format}: the scales are for a tensor of shape "
                               f"{params.shape}; x has shape {xf.shape}")
    xg, g = groups_of(xf, params.format)
    n = xg.shape[0]
    s = np.ascontiguousarray(params.scale).reshape(-1)
    z = np.ascontiguousarray(params.zero).reshape(-1)
    # each statistic's column is contiguous for the report, and the loop writes into it
    # directly (a row-major copy was 80 bytes more per unit), in the one layout it is
    # compiled for
    out_f = unit_columns(n, 6)
    out_i = unit_columns(n, 4, np.int64)

    def share(lo: int, hi: int) -> np.ndarray:
        h = np.zeros(16, np.int64)
        compiled.group_report(xg[lo:hi], s[lo:hi], z[lo:hi], out_f[lo:hi], out_i[lo:hi], h)
        return h

    hist = np.sum(parallel(share, ranges(n, g)), axis=0)
    tot = UnitTotals.of(round_err=out_f[:, 0], clip_err=out_f[:, 1], max_abs=out_f[:, 2],
                        sig=out_f[:, 3], n=out_i[:, 0], x_min=out_f[:, 4], x_max=out_f[:, 5],
                        below=out_i[:, 1], above=out_i[:, 2], codes=out_i[:, 3], hist=hist)
    return build_report(params, tot, xf.size)


def prepared_torchao_report(prepared, params: TorchaoInt4Params) -> QuantReport:
    """:func:`analyze_torchao` on a prepared tensor, kept beside private copies of the scales
    and zeros it measured: a repaint costs one comparison of their bytes."""
    from quantscope.core.stats.kept import kept_report

    key = ("torchao", params.format, tuple(params.shape))
    return kept_report(prepared, key, (params.scale, params.zero),
                       lambda: analyze_torchao(prepared.x, params))
