"""Screening formats by their error alone: which ones cannot be a tensor's best.

Why: a tensor's best format among some thirty (``quantscope scan --formats``) needs each
format's SQNR only to compare them, yet a full report of each (code histogram, codes used,
clip counts, per-unit minima and maxima, each unit's sums in a fixed order) cost 15-50 ns per
element and format. Most formats lose by decibels, which a far cheaper figure shows.

How: for a format whose report is the direct pass of a saturating cast (element formats per
tensor or per channel, MX, NVFP4, NF4), of integer codes by the divide rule (int8, INT4
groups, GPTQ, AWQ) or of decoded values (llama.cpp's blocks, torchao's INT4), an
:class:`ErrorScreen` forms every element's squared error exactly as that pass does (the same
terms, bit for bit: :mod:`quantscope.core.formats.format_screen`) and sums them in whatever
order vectorises, on every core. Both sums add the same ``n`` non-negative terms, so they
differ by at most about ``2 n`` units of roundoff of the sum; the signal ``Σx²`` likewise.
A prepared tensor's report (what ``quantscope report`` and the window print above a quarter
million elements) takes its per-tensor and per-channel sums from sorted prefix sums instead,
certified within :data:`~quantscope.core.stats.sorted_stats.REL_TOL` of the exact sum
(:data:`~quantscope.core.stats.format_stats.REL_TOL` for the element formats) (a looser
one is redone element by element), so the interval is widened by that much too.
The SQNR of either report therefore lies in the interval :func:`bounds` gives, and a format
whose interval lies wholly below another format's is certainly not the best: only the others
need their exact report, which alone supplies every figure shown. A part of the terms sums to
less than all of them, so a slice of the tensor already bounds the SQNR from above: most
formats are ruled out on a slice or two.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from quantscope.core.formats.catalog import FormatParams
from quantscope.core.formats.elements import OVERFLOW_SATURATE
from quantscope.core.formats.format_screen import (
    diff_sum_sq,
    finite_sum_sq,
    screen_int_rows,
    screen_rows,
)
from quantscope.core.formats.gguf import GgufParams
from quantscope.core.formats.torchao_int4 import TorchaoInt4Params
from quantscope.core.kernels.parallel import parallel, shares
from quantscope.core.kernels.read_only import read_only
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.stats.format_stats import REL_TOL as FORMAT_REL_TOL
from quantscope.core.stats.sorted_stats import REL_TOL
from quantscope.core.tensors.layout import param_rows
from quantscope.core.tensors.validate import as_float32

#: The format kinds whose report is the direct pass of :func:`screen_rows`'s terms.
SCREENED_KINDS = frozenset({"element", "mx", "nvfp4", "nf4"})
#: Units of roundoff per term a sum of ``n`` non-negative terms may be off by, in any order of
#: additions (``n - 1`` is the bound; twice that for the two sums compared, and room to spare).
_ROUNDOFF_PER_TERM = 4.0
#: How far a prepared tensor's error sum may be from the exact one, relative (its a posteriori
#: bound against :data:`~quantscope.core.stats.sorted_stats.REL_TOL`, with room for that
#: bound's own rounding).
_PREPARED_REL = 2 * max(REL_TOL, FORMAT_REL_TOL)
#: Decibels a float64 ``10 log10`` may be off by beyond the sums' own error (a few ulps of a
#: value below 10^3 dB).
_LOG_SLACK_DB = 1e-9


@dataclasses.dataclass(frozen=True)
class SqnrBounds:
    """Where the exact report's SQNR lies: ``low <= sqnr_db <= high`` (both ``inf`` when the
    error is exactly zero, both ``-inf`` when the signal is)."""

    low: float
    high: float


def screenable(params) -> bool:
    """Whether :func:`screen_sqnr` bounds the report of ``params``: a format of
    :data:`SCREENED_KINDS` with a saturating cast (a non-saturating one's inf and NaN stand
    for the clipped elements, which a sum of squares cannot hold), or integer codes by the
    divide rule (int8, INT4 groups, GPTQ's and AWQ's rules; a runtime's other arithmetics
    take their exact report), or llama.cpp's blocks and torchao's INT4 (their decoded values
    against ``x``)."""
    if isinstance(params, QuantParams):
        return params.arithmetic == "divide" and params.inv_scale is None
    if isinstance(params, GgufParams | TorchaoInt4Params):
        return True
    return (isinstance(params, FormatParams) and params.kind in SCREENED_KINDS
            and (params.saturate or params.element.overflow == OVERFLOW_SATURATE))


def signal_sum(x: np.ndarray) -> float:
    """``Σx²`` over the finite elements of ``x`` (float64, any order, every core)."""
    flat = read_only(as_float32(x)).reshape(-1)  # one loop for either kind of tensor
    return float(sum(parallel(finite_sum_sq, [(flat, lo, hi) for lo, hi in
                                              shares(flat.size)])))


def error_sum(x: np.ndarray, params: FormatParams | QuantParams) -> float:
    """``Σ (x − x̂)²`` over the finite elements of ``x`` under ``params`` (a
    :func:`screenable` format), the direct pass's terms summed in any order."""
    return ErrorScreen(x, params).slice_sum(0, 1)


class ErrorScreen:
    """One format's squared errors on ``x`` (a :func:`screenable` format), summed a slice at
    a time: ``slice_sum(k, slices)`` adds the terms of the ``k``-th of ``slices`` equal parts
    of the rows (of the columns, for one long row). A slice's sum is at most the whole sum
    (the terms are not negative), so ``bounds(signal, partial, n).high`` bounds the SQNR
    from above by itself: a format well below the best is ruled out after a slice or two."""

    def __init__(self, x: np.ndarray, params: FormatParams | QuantParams) -> None:
        if not screenable(params):
            raise ValueError(f"{params!r} is not screened (see screenable)")
        self.params = params
        xf = read_only(as_float32(x))  # one loop for either kind of tensor
        # (loop, rows, per-row arguments after the row and column range)
        self._jobs: list[tuple[Callable[..., float], np.ndarray, tuple]] = []
        if isinstance(params, QuantParams):
            sets, _ = param_rows(xf, params.scale, params.zero_point, params.axis,
                                 params.group_size)
            rule = (params.qmin, params.qmax, params.rounding == "half_away")
            for rs in sets:
                self._add(screen_int_rows, rs.x2d, rs.scale, rs.zero_point, *rule)
        elif isinstance(params, GgufParams | TorchaoInt4Params):
            # one row: the tensor against its decoded values (llama.cpp's stored blocks;
            # torchao's codes turned back into its bfloat16 values)
            values = (params.dequantize() if isinstance(params, GgufParams)
                      else params.dequantize(params.quantize(xf)))
            self._add(_decoded_rows, np.ascontiguousarray(xf).reshape(1, -1),
                      np.ascontiguousarray(values).reshape(1, -1))
        else:
            inv = params.inv_scale if params.inv_scale is not None else params.scale
            zeros = np.zeros(params.scale.shape, np.int32)
            sets, _ = param_rows(xf, params.scale, zeros, params.axis, params.group_size)
            inv_sets = param_rows(xf, inv, zeros, params.axis, params.group_size)[0]
            kind, mbits, emin, step, mx, _, _, lut_mid, lut_val = params.element.params()
            use_inv = params.inv_scale is not None
            for rs, irs in zip(sets, inv_sets, strict=True):
                self._add(screen_rows, rs.x2d, rs.scale, irs.scale, use_inv, kind, mbits, emin,
                          step, mx, lut_mid, lut_val)

    def _add(self, loop: Callable[..., float], x2d: np.ndarray, *args) -> None:
        if x2d.size:
            # a unit's rows may be a view of the read-only tensor or a gathered copy: the
            # same loop for either (quantscope.core.kernels.read_only)
            self._jobs.append((loop, read_only(np.ascontiguousarray(x2d)), tuple(
                np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in args)))

    def slice_sum(self, k: int, slices: int) -> float:
        """``Σ d²`` over the ``k``-th of ``slices`` parts, on every core."""
        total = 0.0
        for loop, x2d, args in self._jobs:
            n_rows, width = x2d.shape
            if n_rows == 1:  # one row: a slice of its columns, shared between the threads
                a, b = k * width // slices, (k + 1) * width // slices
                parts = [(0, 1, a + lo, a + hi) for lo, hi in shares(b - a) if hi > lo]
            else:  # whole rows, each thread its own
                a, b = k * n_rows // slices, (k + 1) * n_rows // slices
                parts = [(a + lo, a + hi, 0, width)
                         for lo, hi in _row_ranges(b - a, (b - a) * width)] if b > a else []
            if parts:
                total += sum(parallel(loop, [(x2d, *part, *args) for part in parts]))
        return total


def _decoded_rows(x2d, r0, r1, c0, c1, values) -> float:
    """:func:`diff_sum_sq` of one row's columns ``c0:c1`` (the decoded formats' loop)."""
    return float(diff_sum_sq(x2d[0], values[0], c0, c1))


def _row_ranges(n_rows: int, n_elements: int) -> list[tuple[int, int]]:
    k = len(shares(n_elements))
    ranges = [(j * n_rows // k, (j + 1) * n_rows // k) for j in range(k)]
    return [(lo, hi) for lo, hi in ranges if hi > lo] or [(0, n_rows)]


def bounds(signal: float, error: float, n_finite: int) -> SqnrBounds:
    """The interval holding the exact report's ``10 log10(signal / error)``, the direct
    pass's or a prepared tensor's, from sums of the same ``n_finite`` terms each formed in
    another order (module docstring)."""
    if not math.isfinite(error):  # a value the exact report refuses: it must decide
        return SqnrBounds(-math.inf, math.inf)
    if error == 0:
        return SqnrBounds(math.inf, math.inf)
    if signal == 0:
        return SqnrBounds(-math.inf, -math.inf)
    rel = _ROUNDOFF_PER_TERM * (n_finite + 2) * 2.0 ** -53 + _PREPARED_REL
    if rel >= 0.5:  # no useful bound (never for a tensor that fits in memory)
        return SqnrBounds(-math.inf, math.inf)
    db = 10.0 * math.log10(signal / error)
    # 10 log10((1 ± rel) / (1 ∓ rel)) at most, both ways
    spread = 10.0 * math.log10((1 + rel) / (1 - rel)) + _LOG_SLACK_DB * (1 + abs(db))
    return SqnrBounds(db - spread, db + spread)


def screen_sqnr(x: np.ndarray, params: FormatParams | QuantParams, signal: float,
                n_finite: int) -> SqnrBounds:
    """Bounds on the SQNR the report of ``params`` on ``x`` gives (``signal``: Σx² over the
    finite elements by :func:`signal_sum`; ``n_finite``: their count)."""
    return bounds(signal, error_sum(x, params), n_finite)
