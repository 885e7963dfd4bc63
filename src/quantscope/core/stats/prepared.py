"""Exact statistics at interactive speed: prepare a tensor once, then report in microseconds.

``prepare(x)`` sorts the finite values (a parallel radix sort,
:mod:`quantscope.core.kernels.radix_sort`)
and builds double-double prefix sums of ``x`` and ``x²``, one record per block of 128 sorted
values (:mod:`quantscope.core.kernels.block_sums`): about 4.3 bytes per element besides ``x`` itself
(see :mod:`quantscope.core.stats.sorted_stats`); :meth:`Prepared.analyze` then gives the same
:class:`~quantscope.core.stats.report.QuantReport` as the direct
:func:`~quantscope.core.stats.analyze.analyze`
-- identical code histogram, clip counts, codes used and maximum error, error sums within 1e-9
relative -- at a cost of ``O(levels · log N)`` per tensor (or long channel) instead of ``O(N)``.

Per-channel and per-group layouts (each row sorted on its own) are built on first use for an
``(axis, group_size)`` and cached. The per-row work is one compiled loop
(:mod:`quantscope.core.kernels.sorted_kernel`, free of the GIL): rows with many elements per code
are
split at their code thresholds by binary search, shorter ones (a 4096-wide channel at 8 bits,
a group of 128) are walked element by element.

The prepared object keeps a reference to a float32 ``x`` (no copy: a memory-mapped tensor stays
mapped); other dtypes are converted once, in blocks. ``x`` must not change afterwards -- nor,
for a memory map, its file: a file rewritten in place under a mapping kills the process with
SIGBUS at the next read. The app's loaders (``quantscope.io.load_for_analysis``) never map.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from quantscope.core.kernels import compiled
from quantscope.core.schemes.qparams import QuantParams, unit_min_max
from quantscope.core.stats.report import QuantReport, UnitTotals, build_report
from quantscope.core.stats.sorted_stats import SortedRows, evaluate
from quantscope.core.stats.sweep import ClipSweep, clip_sweep_curve
from quantscope.core.tensors.frameworks import as_numpy  # torch, JAX, CuPy, DLPack, lists
from quantscope.core.tensors.layout import granularity_of, normalize_axis, param_rows, param_shape
from quantscope.core.tensors.validate import (
    MAX_SWEEP_POINTS,
    EngineValueError,
    as_float32,
    check_narrowed,
    check_params_fit,
    check_points,
)

if TYPE_CHECKING:  # for the annotations only: formats loads Numba, `import quantscope` must not
    from quantscope.core.formats.catalog import FormatParams

#: ``progress(fraction, stage)``: how far a preparation is (0 to 1) and what it does now. An
#: exception raised by it stops the preparation (that is how a caller cancels).
Progress = Callable[[float, str], None]
#: Elements converted to float32 per block (progress between blocks).
CONVERT_BLOCK = 1 << 22
#: Units (groups) beyond which a per-group layout is not sorted for a min/max or a report:
#: each sorted unit costs ~350 bytes and ~13 µs, so an LLM weight in groups of 32 (1.8M
#: groups) would hold 640 MB and take half a minute; its min/max and its reports stream the
#: tensor instead (one pass each, the reports kept for their parameters), within a few bytes
#: per element. The calibrations that need order statistics (percentile, MSE) still sort it.
LAYOUT_MAX_UNITS = 1 << 20


def reads_sorted_rows(params: QuantParams | FormatParams, shape: tuple[int, ...]) -> bool:
    """Whether :meth:`Prepared.analyze` of ``params``, on a fresh preparation of a tensor of
    ``shape``, takes its report from sorted rows and their prefix sums rather than from the
    direct pass's own loop.

    Why: the two agree to :data:`~quantscope.core.stats.sorted_stats.REL_TOL`, not to the last
    digit, so a caller that must print what a prepared tensor prints (``scan --formats``
    beside ``report --format``) prepares the tensor only for these parameters: integer codes
    per tensor, per channel and per group (unless the groups are too many to sort,
    :data:`LAYOUT_MAX_UNITS`), element formats per tensor and per channel. Block formats,
    llama.cpp's types and torchao's INT4 are reported by the direct pass either way (kept for
    their parameters), bit for bit."""
    if isinstance(params, QuantParams):
        if params.group_size is None:
            return True
        units = np.prod(param_shape(shape, params.axis, params.group_size), dtype=np.float64)
        return bool(units <= LAYOUT_MAX_UNITS)
    return params.group_size is None  # blocks, llama.cpp's and torchao's all have groups


class Prepared:
    """A tensor prepared for fast exact reports (see the module docstring).

    Parameters
    ----------
    x : array_like
        Floating-point tensor (converted to float32, as the direct pass does). NaN and inf are
        excluded from every statistic and counted, exactly as in the direct pass.
    progress : callable, optional
        ``progress(fraction, stage)`` along the way (see :data:`Progress`; raise to cancel).
    """

    def __init__(self, x, progress: Progress | None = None) -> None:
        arr = as_numpy(x, "x")
        share = _stages(progress)
        start = 0.0 if arr.dtype == np.float32 else 0.1  # converting takes about a tenth
        self.x = working_copy(arr, share(0.0, start))
        self._layouts: dict[tuple, SortedRows] = {}
        # the one-time preparation: the sort (most of the time), then the prefix sums
        sorted_at = start + 0.8 * (1 - start)
        self.layout(None, None, share(start, sorted_at)).build_sums(share(sorted_at, 1.0))
        if progress:
            progress(1.0, "prepared")

    @property
    def shape(self) -> tuple[int, ...]:
        return self.x.shape

    @property
    def size(self) -> int:
        return self.x.size

    @property
    def n_nonfinite(self) -> int:
        """NaN and inf elements (excluded from every statistic)."""
        return self.layout(None, None).n_nonfinite

    def _repr_html_(self) -> str:
        """Shape, element counts and built layouts as a table (what Jupyter shows)."""
        from quantscope.core.text.display import prepared_html

        return prepared_html(self)

    @property
    def nbytes(self) -> int:
        """Bytes the preparation holds besides ``x``: sorted values and prefix records of every
        layout built so far."""
        return sum(rows.nbytes for rows in self._layouts.values())

    def layout(self, axis: int | None, group_size: int | None,
               progress: Progress | None = None) -> SortedRows:
        """Sorted rows and prefix sums for one granularity, built on first use and cached."""
        granularity_of(axis, group_size)
        if axis is not None:
            if self.x.ndim == 0:
                raise EngineValueError("a 0-d tensor has no axis for channels or groups")
            axis = normalize_axis(axis, self.x.ndim)
        key = (axis, group_size)
        if key not in self._layouts:
            shape = param_shape(self.x.shape, axis, group_size)
            sets, n_units = param_rows(self.x, np.ones(shape, np.float32),
                                       np.zeros(shape, np.int32), axis, group_size)
            self._layouts[key] = SortedRows.from_rows([(rs.index, rs.x2d) for rs in sets],
                                                      n_units, progress)
        return self._layouts[key]

    def analyze(self, params: QuantParams | FormatParams) -> QuantReport:
        """The report :func:`~quantscope.core.stats.analyze.analyze` gives for ``(x, params)``."""
        if not isinstance(params, QuantParams):
            from quantscope.core.formats.catalog import FormatParams

            if isinstance(params, FormatParams):
                from quantscope.core.stats.format_stats import prepared_format_report

                return prepared_format_report(self, params)
            raise EngineValueError(f"params must be a QuantParams, got {type(params).__name__}")
        if params.granularity != "tensor" and self.x.ndim == 0:
            raise EngineValueError("a 0-d tensor cannot be quantized per channel or per group")
        shape = param_shape(self.x.shape, params.axis, params.group_size)
        check_params_fit(params, shape, self.x.shape)
        if params.group_size is not None:
            return self._kept_group_report(params)
        return self._sorted_report(params)

    def _sorted_report(self, params: QuantParams) -> QuantReport:
        """The report from the sorted rows of the params' layout."""
        shape = param_shape(self.x.shape, params.axis, params.group_size)
        rows = self.layout(params.axis, params.group_size)
        scale = np.broadcast_to(np.asarray(params.scale, np.float32), shape).reshape(-1)
        zero_point = np.broadcast_to(np.asarray(params.zero_point, np.int32), shape).reshape(-1)
        rule = (params.qmin, params.qmax, params.rounding, params.arithmetic)
        inv = None
        if params.inv_scale is not None:
            inv = np.broadcast_to(np.asarray(params.inv_scale, np.float32), shape).reshape(-1)
        st = evaluate(rows, np.arange(rows.n_rows), scale, zero_point, rule, inv_scale=inv)
        assert st.hist is not None  # evaluate counts the codes unless told not to
        tot = UnitTotals.of(n=st.n, round_err=st.round_err, clip_err=st.clip_err,
                            max_abs=st.max_abs, below=st.below, above=st.above, sig=st.sig,
                            codes=st.codes_used, x_min=np.where(st.n > 0, st.x_min, np.inf),
                            x_max=np.where(st.n > 0, st.x_max, -np.inf), hist=st.hist)
        return build_report(params, tot, self.x.size)

    def _streamed(self, axis: int | None, group_size: int | None) -> bool:
        """Whether a per-group layout holds too many groups to sort (see
        :data:`LAYOUT_MAX_UNITS`) and is not sorted already."""
        if group_size is None or self.x.ndim == 0:
            return False
        ax = normalize_axis(axis, self.x.ndim) if axis is not None else None
        if (ax, group_size) in self._layouts:
            return False
        units = int(np.prod(param_shape(self.x.shape, ax, group_size), dtype=np.float64))
        return units > LAYOUT_MAX_UNITS

    def _kept_group_report(self, params: QuantParams) -> QuantReport:
        """A per-group report, kept for these exact parameters (a repaint costs a comparison
        of their bytes): from the sorted groups, or by the direct pass where the layout holds
        too many groups to sort."""
        from quantscope.core.stats.analyze import analyze
        from quantscope.core.stats.kept import kept_report

        streamed = self._streamed(params.axis, params.group_size)
        key = ("int", streamed, params.axis, params.group_size, params.qmin, params.qmax,
               params.rounding, params.arithmetic, params.symmetric)
        compute = (lambda: analyze(self.x, params)) if streamed else (
            lambda: self._sorted_report(params))
        return kept_report(self, key, (params.scale, params.zero_point, params.inv_scale),
                           compute)

    def min_max(self, axis: int | None = None, group_size: int | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """Each unit's finite (min, max) in the parameter array's shape, as
        :func:`~quantscope.core.schemes.qparams.unit_min_max` gives them (empty units (0, 0)): the
        ends
        of the sorted rows, so O(1) per unit instead of a pass over the tensor."""
        if self._streamed(axis, group_size):
            lo, hi, _ = unit_min_max(self.x, axis, group_size)
            return lo, hi
        rows = self.layout(axis, group_size)
        n = rows.lengths
        last = np.maximum(rows.starts[1:] - 1, 0)
        values = rows.values if rows.values.size else np.zeros(1, np.float32)
        lo = np.where(n > 0, values[np.minimum(rows.starts[:-1], last)], 0.0)
        hi = np.where(n > 0, values[last], 0.0)
        if axis is None:
            return lo.reshape(()), hi.reshape(())
        shape = param_shape(self.x.shape, normalize_axis(axis, self.x.ndim), group_size)
        return lo.reshape(shape), hi.reshape(shape)

    def percentile(self, q, *, absolute: bool = False, axis: int | None = None,
                   group_size: int | None = None):
        """Exact percentile(s) of the finite values (of ``|x|`` with ``absolute=True``).

        Same definition as ``numpy.percentile`` (linear interpolation between order
        statistics) in O(1) per unit (O(log N) for ``|x|``, found by a search over the split
        between negative and non-negative values). Per tensor: a float (or an array for an array
        ``q``); per channel/group: one value per unit, in the parameter array's shape. Units
        without finite values give 0.0.
        """
        qa = np.asarray(q, np.float64)
        if not np.isfinite(qa).all() or (qa < 0).any() or (qa > 100).any():
            raise EngineValueError(f"percentile must lie in [0, 100], got {q!r}")
        rows = self.layout(axis, group_size)
        lengths = rows.lengths
        out = np.zeros((rows.n_rows, *qa.shape))
        for idx in np.ndindex(qa.shape):
            out[(slice(None), *idx)] = _row_percentiles(rows, lengths, float(qa[idx]), absolute)
        if axis is None:
            return float(out[0]) if qa.ndim == 0 else out[0]
        shape = param_shape(self.x.shape, normalize_axis(axis, self.x.ndim), group_size)
        return out.reshape(shape + qa.shape)

    def clip_sweep(self, *, symmetric: bool, **options) -> ClipSweep:
        """Rounding/clipping trade-off (see :func:`clip_sweep`)."""
        return clip_sweep(self, symmetric=symmetric, **options)


def prepare(x, progress: Progress | None = None) -> Prepared:
    """Sort ``x`` once and build its prefix sums, for fast exact reports (see :class:`Prepared`).

    ``progress(fraction, stage)`` is called along the way; raise from it to cancel."""
    return x if isinstance(x, Prepared) else Prepared(x, progress)


def clip_sweep(x, *, symmetric: bool, points: int = 200, fractions=None, bits: int = 8,
               narrow_range: bool | None = None, signed: bool = True,
               rounding: str = "half_even", arithmetic: str = "divide") -> ClipSweep:
    """Rounding, clipping and total MSE (and SQNR) of ``x`` along the clip threshold.

    The sweep the window's Trade-off tab draws
    (:func:`~quantscope.core.stats.sweep.clip_sweep_curve`,
    whose docstring says why the thresholds are these), evaluated in one batched pass over the
    prepared statistics: a threshold ``t`` clips the values with ``|x| > t`` and nothing else.

    Parameters
    ----------
    x : array_like or Prepared
        The tensor (prepared once if it is not already; NaN/inf excluded).
    symmetric : bool
        Symmetric window ``[-t, t]``, or an asymmetric one that keeps the real minimum (or
        maximum) until ``t`` reaches it (see :mod:`quantscope.core.stats.sweep`).
    points : int
        Number of thresholds, at fractions ``1/points, 2/points, ..., 1`` of ``max|x|``.
    fractions : array_like, optional
        Explicit threshold fractions of ``max|x|`` in ``(0, 1]`` instead of the even grid.
    bits, narrow_range, signed, rounding, arithmetic
        The quantization rule, as for :func:`~quantscope.core.schemes.qparams.params_from_range`.

    Returns
    -------
    ClipSweep
        Per threshold: its manual clip window, scale, zero point, the exact
        rounding/clipping/total MSE, SQNR and clipped fraction; ``best`` indexes the smallest
        total MSE.
    """
    if fractions is None:
        points = check_points(points)
        fractions = np.arange(1, points + 1) / points
    f = np.sort(np.asarray(fractions, np.float64).ravel())
    if f.size > MAX_SWEEP_POINTS:
        raise EngineValueError(f"fractions holds {f.size} windows; at most {MAX_SWEEP_POINTS}")
    if f.size == 0 or not np.isfinite(f).all() or (f <= 0).any() or (f > 1).any():
        raise EngineValueError("window fractions must lie in (0, 1]")
    prepared = prepare(x)
    lo, hi = (float(v) for v in prepared.min_max())
    return clip_sweep_curve(
        rows=prepared.layout(None, None), x_min=lo, x_max=hi, symmetric=symmetric, bits=bits,
        narrow_range=narrow_range, signed=signed, rounding=rounding, arithmetic=arithmetic,
        thresholds=f * max(abs(lo), abs(hi)), refine=0)


def working_copy(x, progress: Progress | None = None) -> np.ndarray:
    """``x`` as float32: itself if it is float32 (a memory map stays a map), else converted
    once, in blocks of :data:`CONVERT_BLOCK` elements with ``progress`` between them (no
    float64 or full-size temporary on the way)."""
    arr = as_numpy(x, "x")
    if arr.dtype == np.float32 or arr.size <= CONVERT_BLOCK or not arr.flags.c_contiguous:
        return as_float32(arr)
    as_float32(arr.reshape(-1)[:1])  # refuses a dtype that is not floating point
    out = np.empty(arr.shape, np.float32)
    src, dst = arr.reshape(-1), out.reshape(-1)
    for lo in range(0, src.size, CONVERT_BLOCK):
        hi = min(lo + CONVERT_BLOCK, src.size)
        with np.errstate(over="ignore"):
            dst[lo:hi] = src[lo:hi]
        if progress:
            progress(hi / src.size, "converting to float32")
    check_narrowed(arr, out)
    return out


def _stages(progress: Progress | None):
    """``share(lo, hi)``: a callback that reports its own 0..1 as ``lo..hi`` of the whole."""
    def share(lo: float, hi: float) -> Progress | None:
        if progress is None:
            return None
        return lambda f, stage: progress(lo + (hi - lo) * f, stage)
    return share


_warmed_up = False


def warm_up() -> None:
    """Load every compiled loop this module uses (once per process, ~0.1 s each from Numba's
    cache, ~8 s on the very first run): called while a tensor is being prepared, so the first
    percentile or per-channel report of a session does not stall for it. Nothing while NumPy
    stand-ins serve the loops (another process compiles them; see
    :mod:`quantscope.core.stats.loop_twins`): a later call loads them."""
    global _warmed_up
    if _warmed_up or compiled.standing_in():
        return
    _warmed_up = True
    x = np.linspace(-1.0, 1.0, 8 * 64, dtype=np.float32).reshape(8, 64)
    compiled.sort_finite(x)  # the sort of large tensors
    p = prepare(x)
    p.layout(0, None).build_sums()  # the prefix sums of many rows
    for axis in (None, 0):
        p.percentile(99.0, axis=axis, group_size=None, absolute=True)
        p.analyze(QuantParams(np.full(8 if axis == 0 else (), 0.01, np.float32),
                              np.zeros(8 if axis == 0 else (), np.int32), -127, 127, axis=axis))


def _row_percentiles(rows: SortedRows, lengths: np.ndarray, q: float,
                     absolute: bool) -> np.ndarray:
    """numpy's linear-interpolation percentile of every row (of ``|x|`` if ``absolute``)."""
    qf = q / 100.0
    n = lengths.astype(np.float64)
    virtual = (n - 1.0) * qf  # numpy's 'linear' method, operation for operation
    prev = np.floor(virtual)
    gamma = virtual - prev
    i0 = np.clip(prev, 0, np.maximum(n - 1, 0)).astype(np.intp)
    i1 = np.clip(prev + 1, 0, np.maximum(n - 1, 0)).astype(np.intp)
    above = virtual >= n - 1
    i0 = np.where(above, np.maximum(lengths - 1, 0), i0)
    i1 = np.where(above, np.maximum(lengths - 1, 0), i1)
    if absolute:
        a, b = np.empty(n.size), np.empty(n.size)
        compiled.abs_order_stats(rows.values, rows.starts, i0, a)
        compiled.abs_order_stats(rows.values, rows.starts, i1, b)
    else:
        safe = np.minimum(rows.starts[:-1], max(rows.values.size - 1, 0))
        a = rows.values[safe + i0].astype(np.float64) if rows.values.size else np.zeros(n.size)
        b = rows.values[safe + i1].astype(np.float64) if rows.values.size else np.zeros(n.size)
    diff = b - a
    res = np.where(gamma >= 0.5, b - diff * (1.0 - gamma), a + diff * gamma)
    return np.where(lengths > 0, res, 0.0)
