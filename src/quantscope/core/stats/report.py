"""The result of analysing one quantization: the exact error split and the code occupancy.

Definitions (shared by the direct pass and the fast prepared path, which must agree):

* an element is *clipped* when ``round(x / scale) + zero_point`` falls outside ``[qmin, qmax]``;
  all its error is clipping error. Every other element's error is rounding error (<= scale/2);
* ``mse``, ``rounding_mse`` and ``clipping_mse`` are sums over their elements divided by the
  number of finite elements ``n``, so ``rounding_mse + clipping_mse == mse``;
* ``sqnr_db = 10 log10(sum x^2 / sum (x - x̂)^2)``: ``inf`` when the quantization is exact,
  ``-inf`` when the signal is all zeros but the reconstruction is not; ``nan`` only for an empty
  tensor;
* NaN and inf elements are excluded from every statistic and counted in ``n_nonfinite``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from quantscope.core.kernels.parallel import parallel, shares
from quantscope.core.schemes.qparams import QuantParams

if TYPE_CHECKING:  # for the annotations only: formats loads Numba, `import quantscope` must not
    from quantscope.core.formats.catalog import FormatParams


def sqnr_db(signal_sum_sq, error_sum_sq):
    """``10 log10(signal / error)`` with the edge cases stated in the module docstring."""
    sig = np.asarray(signal_sum_sq, np.float64)
    err = np.asarray(error_sum_sq, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 10.0 * np.log10(sig / err)
    out = np.where(err == 0, np.inf, out)
    out = np.where((sig == 0) & (err > 0), -np.inf, out)
    return out if out.ndim else float(out)


@dataclass(frozen=True, eq=False)
class UnitStats:
    """Statistics per channel or per group (1-D arrays, one entry per unit, in the C order of
    the per-channel / per-group parameter array)."""

    n: np.ndarray
    mse: np.ndarray
    rounding_mse: np.ndarray
    clipping_mse: np.ndarray
    sqnr_db: np.ndarray
    max_abs_error: np.ndarray
    clipped_below: np.ndarray
    clipped_above: np.ndarray
    codes_used: np.ndarray
    x_min: np.ndarray
    x_max: np.ndarray

    def worst(self, k: int = 5) -> np.ndarray:
        """Indices of the ``k`` units with the lowest SQNR, worst first."""
        return np.argsort(self.sqnr_db, kind="stable")[:k]

    @classmethod
    def of_totals(cls, tot: UnitTotals) -> UnitStats:
        """The statistics of units with totals ``tot``: the counts are the totals' own
        arrays; the columns formed from them (:data:`FORMED`, :func:`unit_stats`) are formed
        when one of them is first read. A block format of an LLM weight has millions of
        units: seven float64 columns of them were a fifth of its first report (fresh memory
        the system zeroes, then a pass per column), while a pane that shows the report reads
        none of them."""
        units = object.__new__(cls)
        for name, value in (("_totals", tot), ("n", tot.n), ("clipped_below", tot.below),
                            ("clipped_above", tot.above), ("codes_used", tot.codes)):
            object.__setattr__(units, name, value)
        return units

    def __getattr__(self, name: str):
        """A formed column not read before (only then does Python ask here): all of them,
        formed once. Two threads that both get here form the same numbers."""
        tot = self.__dict__.get("_totals")
        if tot is None or name not in FORMED:
            raise AttributeError(name)
        formed = unit_stats(tot)
        for column in FORMED:
            object.__setattr__(self, column, getattr(formed, column))
        return getattr(formed, name)


#: The columns of :class:`UnitStats` formed from the totals (the others are the totals).
FORMED = ("mse", "rounding_mse", "clipping_mse", "sqnr_db", "max_abs_error", "x_min", "x_max")


@dataclass(frozen=True, eq=False)
class QuantReport:
    """Exact error split and code usage of one quantization of one tensor (see module doc)."""

    params: QuantParams | FormatParams
    n: int
    n_nonfinite: int
    mse: float
    rounding_mse: float
    clipping_mse: float
    sqnr_db: float
    max_abs_error: float
    clipped_below: int
    clipped_above: int
    codes_used: int
    code_histogram: np.ndarray
    signal_power: float
    per_channel: UnitStats | None = None
    #: The per-unit sums the report was built from (None where assembled otherwise): a caller
    #: that laid many tensors out as the units of one array splits them back per tensor
    #: exactly (:mod:`quantscope.state.format_batch`).
    unit_totals: UnitTotals | None = field(default=None, repr=False)

    @property
    def clipped_fraction(self) -> float:
        """Share of finite elements that were clipped (0 for an empty tensor)."""
        return (self.clipped_below + self.clipped_above) / self.n if self.n else 0.0

    @property
    def qmin(self) -> int:
        return self.params.qmin

    @property
    def qmax(self) -> int:
        return self.params.qmax

    def __repr__(self) -> str:
        """One line of the numbers that matter, however many channels: the generated repr
        printed every per-channel array in full (tens of thousands of characters for a few
        hundred channels). The details stay a step away: ``summary()``, ``params``,
        ``per_channel``."""
        p = self.params
        fmt = getattr(p, "format", None)
        what = (str(fmt) if fmt is not None else
                f"{'symmetric' if p.symmetric else 'asymmetric'} int{p.bits}")
        units = np.asarray(p.scale).size
        gran = f"per-{p.granularity}" + (f" ({units:,} units)" if units > 1 else "")
        clipped = self.clipped_below + self.clipped_above
        more = "; per_channel: each unit's numbers" if self.per_channel is not None else ""
        return (f"<QuantReport {what} {gran}: SQNR {self.sqnr_db:.2f} dB, rounding MSE "
                f"{self.rounding_mse:.4g}, clipping MSE {self.clipping_mse:.4g}, codes used "
                f"{self.codes_used}/{p.levels}, clipped {clipped:,} of {self.n:,}{more}>")

    def _repr_html_(self) -> str:
        """A compact table of :meth:`summary` (what Jupyter shows for a report)."""
        from quantscope.core.text.display import report_html

        return report_html(self)

    def summary(self) -> dict:
        """The scalar numbers, JSON-ready (what the report table and the panes show)."""
        p = self.params
        scale = np.asarray(p.scale, np.float64)
        zp = np.asarray(p.zero_point)
        return {
            "granularity": p.granularity,
            "symmetric": p.symmetric,
            "qmin": p.qmin,
            "qmax": p.qmax,
            "scale": float(scale) if scale.ndim == 0 else None,
            "scale_min": float(scale.min()),
            "scale_median": float(np.median(scale)),
            "scale_max": float(scale.max()),
            "zero_point": int(zp) if zp.ndim == 0 else None,
            "zero_point_min": int(zp.min()),
            "zero_point_max": int(zp.max()),
            "n": self.n,
            "n_nonfinite": self.n_nonfinite,
            "mse": self.mse,
            "rounding_mse": self.rounding_mse,
            "clipping_mse": self.clipping_mse,
            "sqnr_db": self.sqnr_db,
            "max_abs_error": self.max_abs_error,
            "clipped_below": self.clipped_below,
            "clipped_above": self.clipped_above,
            "clipped_fraction": self.clipped_fraction,
            "codes_used": self.codes_used,
            "levels": p.levels,
        }


class UnitTotals:
    """Per-unit running sums (one entry per tensor, channel or group), as the direct pass and
    the prepared path accumulate them; :func:`build_report` turns them into a report."""

    def __init__(self, n_units: int, levels: int) -> None:
        self.n = np.zeros(n_units, np.int64)
        self.round_err = np.zeros(n_units)
        self.clip_err = np.zeros(n_units)
        self.max_abs = np.zeros(n_units)
        self.below = np.zeros(n_units, np.int64)
        self.above = np.zeros(n_units, np.int64)
        self.sig = np.zeros(n_units)
        self.codes = np.zeros(n_units, np.int64)
        self.x_min = np.full(n_units, np.inf)
        self.x_max = np.full(n_units, -np.inf)
        self.hist = np.zeros(levels, np.int64)

    @classmethod
    def of(cls, **arrays: np.ndarray) -> UnitTotals:
        """Totals holding the given arrays themselves (every attribute of ``__init__``, by
        name), not copies: a per-group report of 16M elements has half a million units, and
        copying eleven columns of them cost as much as a third of its evaluation."""
        tot = cls.__new__(cls)
        names = ("n", "round_err", "clip_err", "max_abs", "below", "above", "sig", "codes",
                 "x_min", "x_max", "hist")
        if set(arrays) != set(names):
            raise TypeError(f"UnitTotals.of takes exactly {names}")
        tot.__dict__.update(arrays)
        return tot


def build_report(params: QuantParams | FormatParams, tot: UnitTotals, size: int
                 ) -> QuantReport:
    """The report of ``params`` over a tensor of ``size`` elements from its unit totals (NaN and
    infinities are the elements the totals did not count)."""
    n = int(tot.n.sum())
    rnd = float(tot.round_err.sum())
    clip = float(tot.clip_err.sum())
    err = rnd + clip
    sig = float(tot.sig.sum())
    per = None
    if params.granularity != "tensor":
        per = UnitStats.of_totals(tot)
    # An exact unit's largest error can come out of the kernels as -0.0 (the maximum of 0.0
    # and -0.0); adding +0.0 makes it the 0.0 a reader expects, in JSON too (to the maximum:
    # the maximum of the units' errors each plus +0.0, without a column of them).
    max_abs = tot.max_abs
    return QuantReport(
        params=params, n=n, n_nonfinite=size - n,
        mse=err / n if n else 0.0,
        rounding_mse=rnd / n if n else 0.0,
        clipping_mse=clip / n if n else 0.0,
        sqnr_db=sqnr_db(sig, err) if n else float("nan"),
        max_abs_error=float(max_abs.max() + 0.0) if n else 0.0,
        clipped_below=int(tot.below.sum()), clipped_above=int(tot.above.sum()),
        codes_used=int(np.count_nonzero(tot.hist)), code_histogram=tot.hist,
        signal_power=sig / n if n else 0.0, per_channel=per, unit_totals=tot,
    )


#: Units per piece of :func:`unit_stats`: a piece's temporaries stay in the cache (128 KiB
#: a column).
UNIT_PIECE = 1 << 14


def unit_stats(tot: UnitTotals) -> UnitStats:
    """Each unit's statistics from its totals, the same numbers :func:`sqnr_db` and NumPy's
    element-wise division give over whole columns, computed in pieces of :data:`UNIT_PIECE`
    units over the engine's threads. A block format of an LLM weight has millions of units
    (NVFP4: 3.7M for 58.7M elements): whole-column NumPy on one thread, with a temporary per
    step, was a third of its first report and left the other cores idle."""
    m = tot.n.size
    mse, rounding, clipping, sqnr, max_abs, x_min, x_max = (np.empty(m) for _ in range(7))

    def share(lo: int, hi: int) -> None:
        with np.errstate(invalid="ignore", divide="ignore"):  # per thread: set it here
            for a in range(lo, hi, UNIT_PIECE):
                u = slice(a, min(a + UNIT_PIECE, hi))
                n = tot.n[u]
                nn = np.maximum(n, 1)
                err = np.add(tot.round_err[u], tot.clip_err[u])
                np.divide(err, nn, out=mse[u])
                np.divide(tot.round_err[u], nn, out=rounding[u])
                np.divide(tot.clip_err[u], nn, out=clipping[u])
                sig = tot.sig[u]
                s = sqnr[u]
                np.divide(sig, err, out=s)
                np.log10(s, out=s)
                np.multiply(10.0, s, out=s)
                np.copyto(s, np.inf, where=err == 0)
                np.copyto(s, -np.inf, where=(sig == 0) & (err > 0))
                # an exact unit's -0.0 largest error made 0.0 (see build_report)
                np.add(tot.max_abs[u], 0.0, out=max_abs[u])
                empty = n <= 0
                np.copyto(x_min[u], tot.x_min[u])
                np.copyto(x_min[u], 0.0, where=empty)
                np.copyto(x_max[u], tot.x_max[u])
                np.copyto(x_max[u], 0.0, where=empty)

    parallel(share, shares(m))
    return UnitStats(n=tot.n, mse=mse, rounding_mse=rounding, clipping_mse=clipping,
                     sqnr_db=sqnr, max_abs_error=max_abs, clipped_below=tot.below,
                     clipped_above=tot.above, codes_used=tot.codes, x_min=x_min, x_max=x_max)
