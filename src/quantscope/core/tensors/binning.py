"""Equal-width histograms that cannot fail on a finite range, however narrow or wide.

``np.histogram`` computes its bin edges in the data's dtype: on float32 data a nearly constant
range (``1 + k·eps``, ``[1e6, 1e6 + 0.0625]``, subnormals) has fewer distinct float32 values
than bins and it refuses ("Too many bins for data range"), while a range spanning ±FLT_MAX
overflows to ``inf`` in ``hi - lo``. Here the edges are float64 from the start; the fast
uniform path is used whenever float32 resolves them, the explicit-edges path otherwise.
"""

from __future__ import annotations

import numpy as np


def equal_bins(values: np.ndarray, bins: int, lo: float, hi: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """Counts and edges of ``bins`` equal bins on ``[lo, hi]`` (finite, ``lo < hi``); the edges
    are float64 where the data's dtype cannot hold them.

    Values outside the range are not counted, as with ``np.histogram(range=...)``.
    """
    edges = np.linspace(float(lo), float(hi), int(bins) + 1)
    with np.errstate(over="ignore"):  # edges beyond FLT_MAX become inf: the explicit path
        edges32 = edges.astype(np.float32)
        width32 = np.float32(hi) - np.float32(lo)
    if (values.dtype != np.float32 or (np.isfinite(width32) and np.all(np.diff(edges32) > 0))):
        try:  # numpy's own edges (in the data's dtype), exactly as before this module
            return np.histogram(values, bins=int(bins), range=(float(lo), float(hi)))
        except ValueError:  # float32 cannot resolve the edges after all
            pass
    counts, _ = np.histogram(values, bins=edges)  # compares blockwise against float64 edges
    return counts, edges


def percentiles(values: np.ndarray, q) -> np.ndarray:
    """``np.percentile(values, q)`` (linear interpolation) with the interpolation in float64:
    NumPy's own interpolates in the data's dtype, and ``b - a`` between two float32 values near
    ±FLT_MAX overflows."""
    n = values.size
    pos = (n - 1) * (np.asarray(q, np.float64) / 100.0)  # as numpy: q / 100 first
    below = np.floor(pos).astype(np.intp)
    above = np.minimum(below + 1, n - 1)
    part = np.partition(values, np.unique(np.concatenate([below, above])))
    a, b = part[below].astype(np.float64), part[above].astype(np.float64)
    gamma = pos - below
    return np.where(gamma >= 0.5, b - (b - a) * (1.0 - gamma), a + (b - a) * gamma)
