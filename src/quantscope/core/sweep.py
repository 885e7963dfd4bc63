"""The rounding-versus-clipping trade-off, and the exact MSE-optimal clip, from prepared data.

A clip window ``[lo, hi]`` fixes the scale (and zero point). Narrow it and rounding error falls
(finer steps) while clipping error rises (more values beyond the window); the sweep evaluates
that exactly for a grid of windows, and :func:`mse_optimal_windows` searches the window with the
smallest total error, by exact evaluations (each one ``levels + 1`` binary searches on the
sorted data, see :mod:`quantscope.core.sorted_stats`).

The x-axis of a sweep is the *window fraction* ``f`` in ``(0, 1]``:

* symmetric: the clip threshold is ``f · max|x|`` (the window ``[-f·max|x|, f·max|x|]``);
* asymmetric: the window is the min/max window shrunk toward zero, ``[f·lo, f·hi]`` with
  ``lo = min(x_min, 0)``, ``hi = max(x_max, 0)`` -- both ends move together, so the zero point
  stays (almost) put and the curve is one-dimensional.

``f = 1`` is the min/max choice; the sweep also reports each window's ends (``lower``,
``upper``) so a plot can label its axis in the tensor's units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantscope.core.qparams import params_from_range
from quantscope.core.report import sqnr_db
from quantscope.core.sorted_stats import SortedRows, evaluate
from quantscope.core.validate import ROUNDING_RULES, EngineValueError, check_choice

#: Coarse grid, then refinement rounds around the best point, for the MSE-optimal search.
SEARCH_TENSOR = (200, 64, 64)
SEARCH_UNITS = (32, 16, 16)
#: Evaluation cells (windows x code boundaries) per batch in searches: ~100 MB of temporaries.
EVAL_CELLS = 1 << 21
#: Smallest window fraction the MSE search tries (a window 10^4 times narrower than min/max).
F_MIN = 1e-4


@dataclass(frozen=True, eq=False)
class ClipSweep:
    """Exact error split over a grid of clip windows (see the module docstring for the x-axis).

    All arrays have one entry per window, in the order of ``fraction`` (ascending).
    """

    symmetric: bool
    fraction: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    rounding_mse: np.ndarray
    clipping_mse: np.ndarray
    total_mse: np.ndarray
    sqnr_db: np.ndarray
    clipped_fraction: np.ndarray
    best: int

    @property
    def threshold(self) -> np.ndarray:
        """Symmetric clip thresholds (``upper``); for asymmetric sweeps the window's upper end."""
        return self.upper

    @property
    def best_fraction(self) -> float:
        return float(self.fraction[self.best])

    @property
    def best_window(self) -> tuple[float, float]:
        """``(lower, upper)`` of the window with the smallest total MSE."""
        return float(self.lower[self.best]), float(self.upper[self.best])

    @property
    def best_threshold(self) -> float:
        return float(self.upper[self.best])


def _rule(bits: int, symmetric: bool, narrow_range, signed: bool, rounding: str,
          arithmetic: str, lo, hi):
    """Parameters for windows ``[lo, hi]`` (arrays) under the engine's range rules."""
    p = params_from_range(lo, hi, symmetric=symmetric, bits=bits, narrow_range=narrow_range,
                          signed=signed, rounding=rounding, arithmetic=arithmetic)
    return p.scale, p.zero_point, (p.qmin, p.qmax, p.rounding, p.arithmetic)


def unit_ranges(rows: SortedRows, symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """The min/max window of each row (widened to include 0; symmetric about 0 if asked)."""
    n = rows.lengths
    if rows.values.size == 0:
        return np.zeros(rows.n_rows), np.zeros(rows.n_rows)
    first = rows.values[np.minimum(rows.starts[:-1], rows.values.size - 1)].astype(np.float64)
    last = rows.values[np.maximum(rows.starts[1:] - 1, 0)].astype(np.float64)
    lo = np.where(n > 0, np.minimum(first, 0.0), 0.0)
    hi = np.where(n > 0, np.maximum(last, 0.0), 0.0)
    if symmetric:
        amax = np.maximum(-lo, hi)
        return -amax, amax
    return lo, hi


def sweep_prepared(prepared, *, symmetric: bool, points: int = 200, fractions=None,
                   bits: int = 8, narrow_range: bool | None = None, signed: bool = True,
                   rounding: str = "half_even", arithmetic: str = "divide") -> ClipSweep:
    """The per-tensor clip sweep of a :class:`~quantscope.core.fast.Prepared` tensor."""
    check_choice(rounding, ROUNDING_RULES, "rounding")
    if fractions is None:
        if int(points) < 1:
            raise EngineValueError(f"points must be >= 1, got {points}")
        fractions = np.arange(1, int(points) + 1) / int(points)
    f = np.sort(np.asarray(fractions, np.float64).ravel())
    if f.size == 0 or not np.isfinite(f).all() or (f <= 0).any() or (f > 1).any():
        raise EngineValueError("window fractions must lie in (0, 1]")
    rows = prepared.layout(None, None)
    lo, hi = unit_ranges(rows, symmetric)
    lower, upper = f * lo[0], f * hi[0]
    scale, zp, rule = _rule(bits, symmetric, narrow_range, signed, rounding, arithmetic,
                            lower, upper)
    st = evaluate(rows, np.zeros(f.size, np.intp), scale, zp, rule, want_counts=False)
    n = int(rows.lengths[0])
    total = st.round_err + st.clip_err
    denom = max(n, 1)
    return ClipSweep(
        symmetric=symmetric, fraction=f, lower=lower, upper=upper,
        scale=np.asarray(scale), zero_point=np.asarray(zp),
        rounding_mse=st.round_err / denom, clipping_mse=st.clip_err / denom,
        total_mse=total / denom, sqnr_db=np.asarray(sqnr_db(st.sig, total), np.float64)
        if n else np.full(f.size, np.nan),
        clipped_fraction=(st.below + st.above) / denom, best=int(np.argmin(total)),
    )


def clip_sweep(x, *, symmetric: bool, points: int = 200, fractions=None, bits: int = 8,
               narrow_range: bool | None = None, signed: bool = True,
               rounding: str = "half_even", arithmetic: str = "divide") -> ClipSweep:
    """Rounding, clipping and total MSE (and SQNR) of ``x`` over a grid of clip windows.

    Parameters
    ----------
    x : array_like or Prepared
        The tensor (prepared once if it is not already; NaN/inf excluded).
    symmetric : bool
        Symmetric thresholds ``[-T, T]`` or asymmetric windows (see the module docstring).
    points : int
        Number of windows, at fractions ``1/points, 2/points, ..., 1`` of the min/max window.
    fractions : array_like, optional
        Explicit window fractions in ``(0, 1]`` instead of the even grid.
    bits, narrow_range, signed, rounding, arithmetic
        The quantization rule, as for :func:`~quantscope.core.qparams.params_from_range`.

    Returns
    -------
    ClipSweep
        Per window: its ends, scale, zero point, the exact rounding/clipping/total MSE, SQNR and
        clipped fraction; ``best`` indexes the smallest total MSE.
    """
    from quantscope.core.fast import prepare

    return sweep_prepared(prepare(x), symmetric=symmetric, points=points, fractions=fractions,
                          bits=bits, narrow_range=narrow_range, signed=signed,
                          rounding=rounding, arithmetic=arithmetic)


def _total_error(rows: SortedRows, f_lo: np.ndarray, f_hi: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray, qrule: dict) -> np.ndarray:
    """Exact total squared error of each row for windows ``[f_lo·lo, f_hi·hi]`` ([R, C])."""
    r, c = f_lo.shape
    scale, zp, rule = _rule(qrule["bits"], qrule["symmetric"], qrule["narrow_range"],
                            qrule["signed"], qrule["rounding"], qrule["arithmetic"],
                            f_lo * lo[:, None], f_hi * hi[:, None])
    scale, zp = np.asarray(scale).ravel(), np.asarray(zp).ravel()
    row = np.repeat(np.arange(r), c)
    total = np.empty(r * c)
    # chunks of about EVAL_CELLS (evaluation, code) cells keep the temporaries small
    step = max(1, EVAL_CELLS // (rule[1] - rule[0] + 4))
    for a in range(0, r * c, step):
        b = min(a + step, r * c)
        st = evaluate(rows, row[a:b], scale[a:b], zp[a:b], rule, want_counts=False)
        total[a:b] = st.round_err + st.clip_err
    return total.reshape(r, c)


def _search_1d(rows, f_other, lo, hi, qrule, grid, move_lower: bool, move_upper: bool):
    """Best fraction per row: a log-spaced coarse grid down to :data:`F_MIN` (outliers can make
    the best window tiny), then rounds of refinement around the best point."""
    r = rows.n_rows
    coarse, *refine = grid
    log_f = np.linspace(np.log(F_MIN), 0.0, coarse)
    cand = np.broadcast_to(np.exp(log_f), (r, coarse))
    best_f = np.ones(r)
    best_err = np.full(r, np.inf)
    step = np.full(r, log_f[1] - log_f[0])
    for size in [None, *refine]:
        if size is not None:
            offs = np.linspace(-1.0, 1.0, size)
            cand = np.minimum(np.exp(np.log(best_f)[:, None] + offs[None, :] * step[:, None]),
                              1.0)
            step = step * 2.0 / (size - 1)
        f_lo = cand if move_lower else np.broadcast_to(f_other[:, None], cand.shape)
        f_hi = cand if move_upper else np.broadcast_to(f_other[:, None], cand.shape)
        err = _total_error(rows, np.ascontiguousarray(f_lo), np.ascontiguousarray(f_hi),
                           lo, hi, qrule)
        i = np.argmin(err, axis=1)
        e = err[np.arange(r), i]
        better = e < best_err
        best_err = np.where(better, e, best_err)
        best_f = np.where(better, cand[np.arange(r), i], best_f)
    return best_f, best_err


def mse_optimal_windows(rows: SortedRows, *, symmetric: bool, bits: int = 8,
                        narrow_range: bool | None = None, signed: bool = True,
                        rounding: str = "half_even", arithmetic: str = "divide",
                        grid: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the clip window ``(lower, upper)`` with the smallest exact total squared error.

    Symmetric: a search over the threshold ``f · max|x|``. Asymmetric: the same search with
    both ends shrinking together, then each end on its own (coordinate descent), twice. The
    min/max window is always a candidate, so the result is never worse than min/max.
    """
    qrule = dict(bits=bits, symmetric=symmetric, narrow_range=narrow_range, signed=signed,
                 rounding=rounding, arithmetic=arithmetic)
    if grid is None:
        grid = SEARCH_TENSOR if rows.n_rows == 1 else SEARCH_UNITS
    lo, hi = unit_ranges(rows, symmetric)
    ones = np.ones(rows.n_rows)
    f, err = _search_1d(rows, ones, lo, hi, qrule, grid, True, True)
    f_lo, f_hi = f.copy(), f.copy()
    if not symmetric:
        for _ in range(2):
            g, e = _search_1d(rows, f_hi, lo, hi, qrule, grid, True, False)
            better = e < err
            f_lo, err = np.where(better, g, f_lo), np.where(better, e, err)
            g, e = _search_1d(rows, f_lo, lo, hi, qrule, grid, False, True)
            better = e < err
            f_hi, err = np.where(better, g, f_hi), np.where(better, e, err)
    return f_lo * lo, f_hi * hi
