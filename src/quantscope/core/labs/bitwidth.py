"""SQNR against bit width: what each extra bit buys for one scheme on one tensor.

For a uniform tensor quantized over its own range, every bit halves the step and so quarters
the rounding error: about 6.02 dB per bit. Real tensors with outliers or clipping fall below
that line, and the curve shows where: this is the bit-width view's data.

The parameters for each width come from a caller-supplied function (the explorer passes its
own settings with ``bits`` changed), and the report from a caller-supplied analyser (the fast
prepared path when it exists, the direct pass otherwise), so the curve uses exactly the rules
the panes use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from quantscope.core.calibration.choose import choose_qparams
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.stats.analyze import analyze
from quantscope.core.stats.report import QuantReport
from quantscope.core.tensors.validate import EngineValueError, as_float32

#: The widths the explorer offers.
BIT_WIDTHS = tuple(range(2, 9))
#: 20 log10(2): the SQNR gained per bit when only rounding error remains.
DB_PER_BIT = 20.0 * np.log10(2.0)


@dataclass(frozen=True, eq=False)
class BitwidthCurve:
    """SQNR (dB), MSE and its split at each bit width, in the order of ``bits``."""

    bits: np.ndarray
    sqnr_db: np.ndarray
    mse: np.ndarray
    rounding_mse: np.ndarray
    clipping_mse: np.ndarray

    def db_per_bit(self) -> float:
        """Least-squares slope of SQNR against bits over the finite points (nan if < 2)."""
        ok = np.isfinite(self.sqnr_db)
        if np.count_nonzero(ok) < 2:
            return float("nan")
        return float(np.polyfit(self.bits[ok], self.sqnr_db[ok], 1)[0])

    def to_dict(self) -> dict:
        """JSON-ready lists (non-finite SQNR kept as floats; JSON writers decide)."""
        return {"bits": self.bits.tolist(), "sqnr_db": self.sqnr_db.tolist(),
                "mse": self.mse.tolist(), "rounding_mse": self.rounding_mse.tolist(),
                "clipping_mse": self.clipping_mse.tolist()}


def bitwidth_curve(
    params_for_bits: Callable[[int], QuantParams],
    analyze_params: Callable[[QuantParams], QuantReport],
    bits: Iterable[int] = BIT_WIDTHS,
) -> BitwidthCurve:
    """Evaluate ``analyze_params(params_for_bits(b))`` for each width ``b``.

    Parameters
    ----------
    params_for_bits : callable
        Width -> parameters (the same rules as the pane whose curve this is).
    analyze_params : callable
        Parameters -> report, e.g. ``prepared.analyze`` or ``lambda p: analyze(x, p)``.
    bits : iterable of int
        Widths in 2..8.
    """
    widths = np.array(sorted(set(int(b) for b in bits)), dtype=np.int64)
    if widths.size == 0 or widths.min() < 2 or widths.max() > 8:
        raise EngineValueError(f"bit widths must lie in 2..8, got {widths.tolist()}")
    reports = [analyze_params(params_for_bits(int(b))) for b in widths]
    return BitwidthCurve(
        bits=widths,
        sqnr_db=np.array([r.sqnr_db for r in reports], np.float64),
        mse=np.array([r.mse for r in reports], np.float64),
        rounding_mse=np.array([r.rounding_mse for r in reports], np.float64),
        clipping_mse=np.array([r.clipping_mse for r in reports], np.float64),
    )


def sqnr_vs_bits(
    x,
    *,
    symmetric: bool = True,
    granularity: str = "tensor",
    axis: int = 0,
    group_size: int | None = None,
    bits: Iterable[int] = BIT_WIDTHS,
    analyze_params: Callable[[QuantParams], QuantReport] | None = None,
    **choose_options,
) -> BitwidthCurve:
    """SQNR against bit width for one scheme chosen by :func:`choose_qparams`.

    ``choose_options`` (``method``, ``narrow_range``, ``rounding``, ``runtime``...) are passed
    through unchanged; ``analyze_params`` defaults to the direct pass on ``x``.
    """
    xf = as_float32(x)
    if analyze_params is None:
        def analyze_params(p: QuantParams) -> QuantReport:
            return analyze(xf, p)

    def params_for_bits(b: int) -> QuantParams:
        return choose_qparams(xf, symmetric=symmetric, granularity=granularity, axis=axis,
                              group_size=group_size, bits=b, **choose_options)

    return bitwidth_curve(params_for_bits, analyze_params, bits)


def ideal_line(bits, anchor_bits: int, anchor_db: float) -> np.ndarray:
    """The 6.02 dB-per-bit law through one measured point (a guide line for the eye)."""
    return float(anchor_db) + DB_PER_BIT * (np.asarray(bits, np.float64) - int(anchor_bits))
