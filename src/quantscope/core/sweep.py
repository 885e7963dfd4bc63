"""The rounding-versus-clipping trade-off, and the exact MSE-optimal clip, from prepared data.

A clip window ``[lo, hi]`` fixes the scale (and zero point). Narrow it and rounding error falls
(finer steps) while clipping error rises (more values beyond the window); the sweep evaluates
that exactly for a grid of windows, and :func:`mse_optimal_params` finds the scale and zero
point with the smallest total error over the whole (scale, zero point) space, by exact
evaluations (each one ``levels + 1`` binary searches on the sorted data, or a walk of a short
row, see :mod:`quantscope.core.sorted_stats`).

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

from quantscope.core.qparams import code_range, params_from_range
from quantscope.core.report import sqnr_db
from quantscope.core.sorted_stats import SortedRows, evaluate
from quantscope.core.validate import (
    MAX_SWEEP_POINTS,
    ROUNDING_RULES,
    EngineValueError,
    check_choice,
    check_points,
)

#: MSE-optimal search: coarse log grid of scales, local minima kept, then refinement rounds.
SEARCH_TENSOR = (160, 3, 17, 17, 17, 17)
SEARCH_UNITS = (32, 2, 9, 9, 9, 9)
#: Evaluation cells (windows x code boundaries) per batch in searches: ~100 MB of temporaries.
EVAL_CELLS = 1 << 21
#: Smallest and largest scale the MSE search tries, as multiples of the min/max scale.
F_MIN = 1e-4
S_MAX = 2.0
_TINY32 = float(np.finfo(np.float32).tiny)


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
    """The per-tensor clip sweep of a :class:`~quantscope.core.prepared.Prepared` tensor."""
    check_choice(rounding, ROUNDING_RULES, "rounding")
    if fractions is None:
        points = check_points(points)
        fractions = np.arange(1, points + 1) / points
    f = np.sort(np.asarray(fractions, np.float64).ravel())
    if f.size > MAX_SWEEP_POINTS:
        raise EngineValueError(f"fractions holds {f.size} windows; at most {MAX_SWEEP_POINTS}")
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


def _best_zero_points(rows: SortedRows, row: np.ndarray, scale: np.ndarray, lo: np.ndarray,
                      hi: np.ndarray, rule: tuple, hint: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """For each evaluation (row ``row[e]``, float32 ``scale[e]``): the zero point with the least
    exact total squared error, and that error.

    With the scale fixed the grid ``s·j`` is fixed (0 is on it) and the zero point only slides
    the window of ``levels`` grid points along it: elements inside keep their code and error,
    so each element's error is a convex function of the zero point (flat while it is inside,
    its distance to the window's end squared beyond). Their sum is convex too, so a binary
    search on the sign of ``E(z + 1) − E(z)`` finds the minimum, searching only the zero points
    whose window ends lie within a step of the data (a window reaching further past an end is
    never better than the one shifted back). With ``hint`` (a nearby scale's best zero point)
    ``E`` is taken at ``hint`` and its two neighbours first: where the middle is the least,
    convexity makes it the minimum; elsewhere the whole range is searched. Every ``E`` is an
    exact evaluation."""
    qmin, qmax = rule[0], rule[1]
    s = scale.astype(np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        z_lo = np.floor(qmax - 1 - hi[row] / s) + 1
        z_hi = np.ceil(qmin + 1 - lo[row] / s) - 1
    z_lo = np.clip(np.nan_to_num(z_lo, nan=qmin), qmin, qmax).astype(np.int64)
    z_hi = np.clip(np.nan_to_num(z_hi, nan=qmax), qmin, qmax).astype(np.int64)
    z_hi = np.maximum(z_hi, z_lo)
    if hint is not None:  # E at hint - 1, hint, hint + 1: a middle minimum is the minimum
        z = np.clip(hint.astype(np.int64), z_lo, z_hi)
        trio = np.clip(z[:, None] + np.arange(-1, 2), z_lo[:, None], z_hi[:, None])
        e3 = _errors(rows, np.repeat(row, 3), np.repeat(scale, 3), trio.ravel(),
                     rule).reshape(-1, 3)
        err = e3[:, 1].copy()
        far = np.flatnonzero((e3[:, 1] > e3[:, 0]) | (e3[:, 1] > e3[:, 2]))
        if far.size:
            z[far] = _zero_point_search(rows, row[far], scale[far], z_lo[far], z_hi[far],
                                        rule)
            err[far] = _errors(rows, row[far], scale[far], z[far], rule)
        return z.astype(np.int32), err
    z_lo = _zero_point_search(rows, row, scale, z_lo, z_hi, rule)
    return z_lo.astype(np.int32), _errors(rows, row, scale, z_lo, rule)


def _zero_point_search(rows, row, scale, z_lo, z_hi, rule) -> np.ndarray:
    """Binary search of the least error's zero point in ``[z_lo, z_hi]`` (convex in it)."""
    while True:
        active = np.flatnonzero(z_lo < z_hi)
        if active.size == 0:
            break
        mid = (z_lo[active] + z_hi[active]) // 2
        e2 = _errors(rows, np.repeat(row[active], 2), np.repeat(scale[active], 2),
                     np.stack([mid, mid + 1], axis=1).ravel(), rule).reshape(-1, 2)
        up = e2[:, 1] < e2[:, 0]
        z_lo[active] = np.where(up, mid + 1, z_lo[active])
        z_hi[active] = np.where(up, z_hi[active], mid)
    return z_lo


def _errors(rows: SortedRows, row: np.ndarray, scale: np.ndarray, zp: np.ndarray,
            rule: tuple) -> np.ndarray:
    """Exact total squared error of each evaluation, in batches of about :data:`EVAL_CELLS`."""
    total = np.empty(row.size)
    step = max(1, EVAL_CELLS // (rule[1] - rule[0] + 4))
    for a in range(0, row.size, step):
        b = min(a + step, row.size)
        st = evaluate(rows, row[a:b], scale[a:b], zp[a:b], rule, want_counts=False,
                      redo_loose=False)
        total[a:b] = st.round_err + st.clip_err
    return total


def mse_optimal_params(rows: SortedRows, *, qmin: int, qmax: int, symmetric: bool,
                       rounding: str = "half_even", arithmetic: str = "divide",
                       grid: tuple[int, ...] | None = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the float32 scale and zero point with the least exact total squared error
    (rounding plus clipping) for codes ``[qmin, qmax]``, and that error.

    The search space is every float32 scale in ``[F_MIN · s0, S_MAX · s0]``, ``s0`` the
    min/max scale (a larger scale only coarsens a grid that already covers the data), and, for
    affine schemes, every zero point in ``[qmin, qmax]``; symmetric schemes keep the zero point
    at 0 (the middle code for unsigned codes). For each scale the best zero point is found
    exactly (:func:`_best_zero_points`, the error is convex in it); over the scale, a
    log-spaced grid, then rounds of refinement around each of the best few local minima of the
    grid (a tensor's error can have one basin that clips its outliers and one that keeps them).
    Every value compared is an exact evaluation of the prepared statistics, so the minimum is
    that of the true error, not of a histogram. The min/max scale is on the grid, so the
    result is never worse than min/max.
    """
    rule = (qmin, qmax, rounding, arithmetic)
    n_rows = rows.n_rows
    lo, hi = unit_ranges(rows, symmetric)
    if symmetric:
        z_sym = 0 if qmin < 0 else (qmin + qmax + 1) // 2
        s0 = np.maximum(-lo, hi) / max(qmax - z_sym, z_sym - qmin)
    else:
        s0 = (hi - lo) / (qmax - qmin)
    s0 = np.where(s0 >= _TINY32 / F_MIN, s0, 1.0)
    if grid is None:
        grid = SEARCH_TENSOR if n_rows == 1 else SEARCH_UNITS
    coarse, keep, *refine = grid

    def errors_at(row, factor, hint=None):
        scale = np.maximum(s0[row] * factor, _TINY32).astype(np.float32)
        if symmetric:
            zp = np.full(row.size, z_sym, np.int32)
            return scale, zp, _errors(rows, row, scale, zp, rule)
        zp, err = _best_zero_points(rows, row, scale, lo, hi, rule, hint)
        return scale, zp, err

    log_f = np.union1d(np.linspace(np.log(F_MIN), np.log(S_MAX), coarse), [0.0])
    coarse = log_f.size
    units = np.arange(n_rows)
    scale = np.empty((n_rows, coarse), np.float32)
    zp = np.empty((n_rows, coarse), np.int32)
    err = np.empty((n_rows, coarse))
    if n_rows == 1:  # one batch: a call per grid point would cost more than its work
        scale[0], zp[0], err[0] = errors_at(np.zeros(coarse, np.intp), np.exp(log_f))
    else:
        hint = None
        for j in range(coarse - 1, -1, -1):  # from wide to narrow: each scale hints the next
            scale[:, j], zp[:, j], err[:, j] = errors_at(
                units, np.full(n_rows, np.exp(log_f[j])), hint)
            hint = zp[:, j]
    scale, zp = scale.ravel(), zp.ravel()
    best = np.argmin(err, axis=1)
    out_s = scale.reshape(n_rows, coarse)[np.arange(n_rows), best]
    out_z = zp.reshape(n_rows, coarse)[np.arange(n_rows), best]
    out_e = err[np.arange(n_rows), best]
    # the best few local minima of the grid, each refined on its own
    padded = np.pad(err, ((0, 0), (1, 1)), constant_values=np.inf)
    local = (err <= padded[:, :-2]) & (err <= padded[:, 2:])
    ranked = np.argsort(np.where(local, err, np.inf), axis=1, kind="stable")[:, :keep]
    centre = log_f[ranked].ravel()
    centre_z = zp.reshape(n_rows, coarse)[np.arange(n_rows)[:, None], ranked].ravel()
    row_k = np.repeat(np.arange(n_rows), ranked.shape[1])
    step = np.full(centre.size, (np.log(S_MAX) - np.log(F_MIN)) / (grid[0] - 1))
    for size in refine:
        offs = np.linspace(-1.0, 1.0, size)
        cand = np.minimum(centre[:, None] + offs[None, :] * step[:, None], np.log(S_MAX))
        r = np.repeat(row_k, size)
        sc, zc, ec = errors_at(r, np.exp(cand.ravel()), np.repeat(centre_z, size))
        ec = ec.reshape(-1, size)
        i = np.argmin(ec, axis=1)
        centre = cand[np.arange(centre.size), i]
        step = step * 2.0 / (size - 1)
        flat = np.arange(centre.size) * size + i
        centre_z = zc[flat]
        better = ec[np.arange(centre.size), i]
        for k in np.flatnonzero(better < out_e[row_k]):  # few: one per refined minimum
            u = row_k[k]
            if better[k] < out_e[u]:
                out_e[u], out_s[u], out_z[u] = better[k], sc[flat[k]], zc[flat[k]]
    return out_s, out_z, out_e


def mse_optimal_windows(rows: SortedRows, *, symmetric: bool, bits: int = 8,
                        narrow_range: bool | None = None, signed: bool = True,
                        rounding: str = "half_even", arithmetic: str = "divide",
                        codes: tuple[int, int] | None = None, half_steps: float | None = None,
                        grid: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the window ``(lower, upper)`` of the MSE-optimal scale and zero point
    (:func:`mse_optimal_params`): ``[s·(qmin − z), s·(qmax − z)]``, or ``±s·half_steps`` when
    symmetric, so that the range rules (``params_from_range``, with ``half_steps`` its
    ``2^(bits-1) − 1``) give back exactly that scale and zero point. ``codes`` overrides the
    code range that ``bits``, ``narrow_range`` and ``signed`` give (runtime presets)."""
    if codes is None:
        codes = code_range(bits, symmetric=symmetric, narrow_range=narrow_range, signed=signed)
    qmin, qmax = codes
    scale, zp, _ = mse_optimal_params(rows, qmin=qmin, qmax=qmax, symmetric=symmetric,
                                      rounding=rounding, arithmetic=arithmetic, grid=grid)
    s = scale.astype(np.float64)
    if symmetric:
        half = (1 << (bits - 1)) - 1 if half_steps is None else half_steps
        return -s * half, s * half
    return s * (qmin - zp), s * (qmax - zp)
