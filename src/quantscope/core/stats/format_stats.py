"""Exact reports for the formats beyond int8 (:mod:`quantscope.core.formats.catalog`).

The same :class:`~quantscope.core.stats.report.QuantReport` as for integers, with these meanings:

* codes are indices into the format's grid of representable values (ascending, ±0 once), so
  ``codes_used`` counts representable values hit and ``code_histogram`` holds their counts;
* an element is *clipped* when its scaled value rounds beyond the largest finite value (a
  non-saturating cast would give inf/NaN there); the saturating cast maps it to
  ``±max_finite`` and all its error is clipping error. Every other element's error is rounding
  error, at most half a step of its binade;
* error sums in float64 over float32 ``x̂ = float32(value · scale)``.

:func:`analyze_format` is one compiled pass over the tensor
(:func:`~quantscope.core.formats.format_kernel.direct_rows`). On a prepared tensor, per-tensor and
per-channel element formats are evaluated on the sorted rows with their prefix sums
(:func:`~quantscope.core.formats.format_kernel.sorted_rows`); block formats, whose scales follow
from
the data alone, take the one compiled pass once and keep the report for those scales.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.catalog import FormatParams
from quantscope.core.formats.elements import KIND_FLOAT, KIND_INT, OVERFLOW_SATURATE, ElementType
from quantscope.core.kernels import compiled
from quantscope.core.kernels.parallel import parallel, pieces
from quantscope.core.kernels.read_only import read_only
from quantscope.core.kernels.unit_columns import unit_columns
from quantscope.core.stats.kept import kept_report
from quantscope.core.stats.report import QuantReport, UnitTotals, build_report
from quantscope.core.tensors.layout import normalize_axis, param_rows, param_shape
from quantscope.core.tensors.validate import EngineValueError, as_float32

#: Relative accuracy of the searched error sums (as :mod:`quantscope.core.stats.sorted_stats`).
REL_TOL = 5e-10
#: Rows with fewer elements than this per grid value are walked rather than searched.
WALK_PER_LEVEL = 8
#: The largest grid whose blocks take :func:`~quantscope.core.formats.float_blocks.
#: float_block_rows` (its codes used, and the slot of non-finite elements, in one 64-bit mask).
FLOAT_BLOCK_LEVELS = 63


def element_edges(et: ElementType) -> np.ndarray:
    """The boundaries between intervals in element units: the negative overflow threshold,
    the midpoints of consecutive values, the positive overflow threshold (``levels + 1``)."""
    if et.kind == KIND_FLOAT:
        over = et.max_finite + 2.0 ** (et.emax - et.mbits) / 2
    elif et.kind == KIND_INT:
        over = et.max_finite + et.step / 2
    else:
        over = et.max_finite
    return np.concatenate([[-over], et.midpoints, [over]])


def _kernel_args(p: FormatParams) -> tuple[int, int, int, float, float, int, bool, bool,
                                           np.ndarray, np.ndarray, np.ndarray]:
    """The element type's kernel arguments (:meth:`ElementType.params`), the saturation flag
    and the grid of representable values, in the compiled loops' order."""
    et = p.element
    kind, mbits, emin, step, mx, overflow, signed_zero, lut_mid, lut_val = et.params()
    return (kind, mbits, emin, step, mx, overflow, signed_zero, bool(p.saturate), lut_mid,
            lut_val, et.values)


def _totals(p: FormatParams, n_units: int, out_f, out_i, hist) -> UnitTotals:
    """The unit totals holding ``out_f``'s and ``out_i``'s columns themselves (no copies;
    made column-major by the caller, a column is contiguous)."""
    n = out_i[:, 0]
    empty = n == 0
    x_min, x_max = out_f[:, 4], out_f[:, 5]
    if empty.any():  # in place: two more columns per unit were a tenth of a block report
        x_min[empty] = np.inf
        x_max[empty] = -np.inf
    return UnitTotals.of(round_err=out_f[:, 0], clip_err=out_f[:, 1], max_abs=out_f[:, 2],
                         sig=out_f[:, 3], n=n, x_min=x_min, x_max=x_max, below=out_i[:, 1],
                         above=out_i[:, 2], codes=out_i[:, 3], hist=hist)


def analyze_format(x, params: FormatParams) -> QuantReport:
    """Quantize ``x`` to the format and report the exact error split (one compiled pass)."""
    if params.kind == "gguf":  # stored blocks, not a grid and a scale
        from quantscope.core.stats.gguf_stats import analyze_gguf

        return analyze_gguf(x, params)  # type: ignore[arg-type]
    if params.kind == "torchao":  # torchao's bfloat16 chain, not a grid and a scale
        from quantscope.core.stats.torchao_stats import analyze_torchao

        return analyze_torchao(x, params)  # type: ignore[arg-type]
    xf = as_float32(x)
    if params.granularity != "tensor" and xf.ndim == 0:
        raise EngineValueError("a 0-d tensor cannot be quantized per channel or per block")
    sets, n_units = _row_sets(xf, params)
    out_f = unit_columns(n_units, 6)  # each statistic a contiguous column: see _totals
    out_i = unit_columns(n_units, 4, np.int64)
    hists = []
    args = _kernel_args(params)
    use_inv = params.inv_scale is not None
    et = params.element
    for rows, s, inv, index in sets:
        x2d = read_only(np.ascontiguousarray(rows))  # one loop for either kind of tensor
        n_rows = x2d.shape[0]
        # the rows of a set feed consecutive units (every full block along the last axis):
        # the loops write into the report's own columns, with no per-block temporaries (at
        # 16-element blocks those were 5 bytes per element)
        start = int(index[0]) if n_rows else 0
        direct = n_rows and int(index[-1]) - start == n_rows - 1 and (
            isinstance(index, range) or bool(np.all(np.diff(index) == 1)))
        # the loops see one layout of their outputs, whether the rows are one unit, all of
        # them or a part (Numba compiles a loop per layout; the compile-ahead warms this one)
        f = out_f[start:start + n_rows] if direct else unit_columns(n_rows, 6, zeros=False)
        i = (out_i[start:start + n_rows] if direct
             else unit_columns(n_rows, 4, np.int64, zeros=False))
        blocks = takes_float_blocks(params, x2d, s, inv, use_inv)

        def share(lo: int, hi: int, x2d=x2d, s=s, inv=inv, f=f, i=i, blocks=blocks
                  ) -> np.ndarray:
            h = np.zeros(params.levels + 1, np.int64)  # the last slot: non-finite elements
            if hi == lo:  # no rows (an empty tensor): nothing to count, no loop to compile
                pass
            elif blocks:  # short rows of a small float grid: the same totals, a leaner loop
                compiled.float_block_rows(x2d[lo:hi], s[lo:hi], inv[lo:hi], use_inv, et.mbits,
                                          et.emin, et.emax, et.max_finite, et.levels, h,
                                          f[lo:hi], i[lo:hi])
            else:
                compiled.direct_rows(x2d[lo:hi], s[lo:hi], inv[lo:hi], use_inv, *args, h,
                                     f[lo:hi], i[lo:hi])
            return h[:-1]

        hists += parallel(share, _row_shares(n_rows, x2d.size))
        if not direct:
            out_f[index] = f
            out_i[index] = i
    hist = np.sum(hists, axis=0) if hists else np.zeros(params.levels, np.int64)
    return build_report(params, _totals(params, n_units, out_f, out_i, hist), xf.size)


def takes_float_blocks(params: FormatParams, x2d: np.ndarray, scale: np.ndarray,
                       inv_scale: np.ndarray, use_inv: bool) -> bool:
    """Whether rows ``x2d`` with these scales take the block pass of small float grids
    (:mod:`quantscope.core.formats.float_blocks`, the same totals as ``direct_rows``): a
    floating-point grid of at most :data:`FLOAT_BLOCK_LEVELS` values with a mantissa bit or
    more, a saturating cast, rows of at most 64 elements, every scale (and multiplier)
    finite and positive."""
    et = params.element
    if (et.kind != KIND_FLOAT or et.levels > FLOAT_BLOCK_LEVELS or et.mbits < 1
            or x2d.ndim != 2 or not 0 < x2d.shape[1] <= 64):
        return False
    if not (params.saturate or et.overflow == OVERFLOW_SATURATE):
        return False
    good = bool(np.isfinite(scale).all() and (scale > 0).all())
    if use_inv:
        good = good and bool(np.isfinite(inv_scale).all() and (inv_scale > 0).all())
    return good


def _row_sets(xf: np.ndarray, params: FormatParams) -> tuple[list, int]:
    """``(rows, scales, multipliers, units)`` per set of rows that share one scale each
    (:func:`~quantscope.core.tensors.layout.param_rows`), and the number of units. Whole
    blocks along the last axis -- an LLM weight's -- are the tensor's own rows of the block
    size and the parameters flattened, their units ``range(n)``: the general layout's unit
    numbers, zero points and their checks were 2.5 bytes per element of temporaries."""
    inv = params.inv_scale if params.inv_scale is not None else params.scale
    g = params.group_size
    if (g is not None and xf.ndim and params.axis is not None
            and normalize_axis(params.axis, xf.ndim) == xf.ndim - 1 and xf.shape[-1] % g == 0
            and np.shape(params.scale) == np.shape(inv)
            == param_shape(xf.shape, params.axis, g)):
        n_units = xf.size // g
        flat = [np.ascontiguousarray(a, np.float32).reshape(-1) for a in (params.scale, inv)]
        return [(xf.reshape(n_units, g), *flat, range(n_units))], n_units
    sets, n_units = param_rows(xf, params.scale, np.zeros(params.scale.shape, np.int32),
                               params.axis, g)
    inv_sets = param_rows(xf, inv, np.zeros(params.scale.shape, np.int32), params.axis, g)[0]
    return [(rs.x2d, np.ascontiguousarray(rs.scale), np.ascontiguousarray(irs.scale), rs.index)
            for rs, irs in zip(sets, inv_sets, strict=True)], n_units


def _row_shares(n_rows: int, n_elements: int) -> list[tuple[int, int]]:
    """Row ranges for the engine's threads (:func:`quantscope.core.kernels.parallel.pieces`),
    each range its own rows' totals; one range ``(0, 0)`` for no rows."""
    return pieces(n_rows, n_elements)


def prepared_format_report(prepared, params: FormatParams) -> QuantReport:
    """The report :func:`analyze_format` gives, from a prepared tensor
    (:class:`~quantscope.core.stats.prepared.Prepared`)."""
    if params.kind == "gguf":  # its parameters are the blocks: one pass against them, kept
        from quantscope.core.stats.gguf_stats import prepared_gguf_report

        return prepared_gguf_report(prepared, params)  # type: ignore[arg-type]
    if params.kind == "torchao":
        from quantscope.core.stats.torchao_stats import prepared_torchao_report

        return prepared_torchao_report(prepared, params)  # type: ignore[arg-type]
    if params.group_size is not None:  # block formats: one pass, kept for these scales
        key = ("format", params.format, params.axis, params.group_size, params.saturate)
        return kept_report(prepared, key, (params.scale, params.inv_scale),
                           lambda: analyze_format(prepared.x, params))
    rows = prepared.layout(params.axis, None)
    stats = evaluate_sorted(rows, params.scale, params.inv_scale, params)
    return build_report(params, stats, prepared.size)


def evaluate_sorted(rows, scale, inv_scale, params: FormatParams, want_hist: bool = True,
                    which: np.ndarray | None = None) -> UnitTotals:
    """Totals of every sorted row of ``rows`` under ``scale`` (one per row, or a scalar);
    with ``which``, one total per entry: row ``which[e]`` under ``scale[e]`` (a row may come
    several times, with several scales, in one pass on the threads)."""
    n_rows = rows.n_rows
    row = np.arange(n_rows) if which is None else np.ascontiguousarray(which, np.int64)
    n_out = row.size
    s = np.ascontiguousarray(np.broadcast_to(np.asarray(scale, np.float32).reshape(-1),
                                             (n_out,)))
    inv = s if inv_scale is None else np.ascontiguousarray(
        np.broadcast_to(np.asarray(inv_scale, np.float32).reshape(-1), (n_out,)))
    et = params.element
    walk_below = WALK_PER_LEVEL * (et.levels + 2)
    long_rows = n_rows and int(rows.lengths.max()) >= walk_below
    rec, rec_starts, b1, b2 = (
        (rows.records, rows.rec_starts, rows.bound1, rows.bound2) if long_rows else
        (np.empty((0, 4)), np.zeros(n_rows + 1, np.intp), np.zeros(n_rows), np.zeros(n_rows)))
    out_f = np.zeros((n_out, 6))  # the kernel's own layout; _totals reads strided columns
    out_i = np.zeros((n_out, 4), np.int64)
    edges = element_edges(et)
    args = _kernel_args(params)[:-1]

    def share(lo: int, hi: int) -> np.ndarray:
        h = np.zeros(et.levels, np.int64)
        compiled.sorted_rows(rows.values, rows.starts, rec, rec_starts, b1, b2,
                    row[lo:hi], s[lo:hi], inv[lo:hi], inv_scale is not None, *args,
                    et.values, edges, walk_below, REL_TOL, h, out_f[lo:hi], out_i[lo:hi])
        return h

    hist = np.sum(parallel(share, _row_shares(n_out, rows.values.size)), axis=0)
    return _totals(params, n_out, out_f, out_i, hist)
