"""The panes' value histograms, binned on each pane's own code buckets. Qt-free.

A fixed set of bins over ``[min, max]`` cannot show how values fall into buckets: zoomed in,
one bin is wider than a bucket, and a bf16 tensor's values (8 bits of mantissa) alias into
false steps where bins hold one or two representable values in turn. So the edges here are
the pane's bucket boundaries, split into an integer number of bins per bucket (at least one,
as many as ``max_bins`` allows over the visible range), recomputed for every zoom; and where
the tensor was stored in bf16 or fp16 and its representable values are coarser than those
bins, each bin holds exactly one representable value instead (edges halfway between them).

Counts come from the prepared tensor's sorted finite values: ``O(bins · log N)``, well under a
millisecond at 16M elements, so zooming re-bins at once.
"""

from __future__ import annotations

import functools

import numpy as np

#: Storage types whose representable values a histogram can resolve (16-bit: 65,536 each).
COARSE_DTYPES = ("bfloat16", "float16")


@functools.cache
def representable_values(dtype: str) -> np.ndarray | None:
    """Every finite value of a 16-bit float type, sorted, as float64 (None for others)."""
    bits = np.arange(1 << 16, dtype=np.uint32)
    if dtype == "bfloat16":
        vals = (bits << 16).view(np.float32)
    elif dtype == "float16":
        vals = bits.astype(np.uint16).view(np.float16)
    else:
        return None
    # the NaN patterns go before the widening (casting signalling NaNs warns)
    return np.unique(vals[np.isfinite(vals)].astype(np.float64))


def bucket_edges(boundaries: np.ndarray, view: tuple[float, float], max_bins: int
                 ) -> np.ndarray:
    """Bin edges over ``view`` on the bucket grid of ``boundaries`` (evenly spaced code
    boundaries): ``k`` bins per bucket, ``k`` the largest integer >= 1 that keeps the count
    within ``max_bins`` (when even one bin per bucket is too many, an integer number of
    buckets per bin). The grid continues past the outer boundaries at the same spacing."""
    b = np.asarray(boundaries, np.float64)
    lo, hi = float(view[0]), float(view[1])
    if b.size < 2 or not hi > lo:
        return np.linspace(lo, hi if hi > lo else lo + 1.0, max(max_bins, 1) + 1)
    step = float(np.median(np.diff(b)))
    buckets = (hi - lo) / step
    per = max(1, int(max_bins // max(buckets, 1e-300)))
    width = step / per if buckets * per <= max_bins else step * np.ceil(buckets / max_bins)
    origin = float(b[0])
    j0 = int(np.floor((lo - origin) / width))
    j1 = int(np.ceil((hi - origin) / width))
    return origin + width * np.arange(j0, j1 + 1, dtype=np.float64)


def pane_histogram(sorted_values: np.ndarray, boundaries: np.ndarray,
                   view: tuple[float, float], max_bins: int, dtype: str = "float32"
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(edges, counts) of the finite ``sorted_values`` over ``view`` (see the module doc).

    ``boundaries`` are the pane's code boundaries; ``dtype`` what the tensor was stored as.
    """
    edges = bucket_edges(boundaries, view, max_bins)
    grid = representable_values(dtype) if dtype in COARSE_DTYPES else None
    if grid is not None:
        edges = _merge_empty(edges, grid)
    # float32 needles: float64 ones would convert the whole float32 array on every call; an
    # edge beyond float32's range becomes inf, which every finite value lies below
    with np.errstate(over="ignore"):
        needles = edges.astype(sorted_values.dtype)
    cuts = np.searchsorted(sorted_values, needles, side="left")
    return edges, np.diff(cuts).astype(np.int64)


def bar_heights(counts: np.ndarray, log: bool) -> np.ndarray:
    """Bar heights as drawn: the counts, or ``log10(1 + n)`` on a log axis (empty bins sit on
    the axis instead of at -inf)."""
    counts = np.asarray(counts, np.float64)
    return np.log10(counts + 1.0) if log else counts


def overview_unit_heights(hist_edges: np.ndarray, hist_counts: np.ndarray, edges: np.ndarray,
                          counts: np.ndarray, log: bool) -> tuple[np.ndarray, np.ndarray]:
    """Heights of a histogram binned on ``edges``, in the unit of the tensor's overview
    histogram (``hist_edges``/``hist_counts``: values per 1/2048 of the range), and one value's
    height in each bin (for bars drawn on the same bins, such as the clipped values).

    In that shared unit a re-binning on new buckets or a zoom leaves the count axis where it
    was: heights in raw counts moved it, which repainted every linked pane.
    """
    unit = (hist_edges[-1] - hist_edges[0]) / max(hist_counts.size, 1)
    widths = np.diff(edges)  # near ±FLT_MAX adjacent edges can coincide (no values)
    per_value = unit / np.where(widths > 0, widths, np.inf)
    return bar_heights(counts * per_value, log), per_value


def _merge_empty(edges: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The bucket-aligned ``edges`` without those that would leave a bin holding no value of
    ``grid`` (the representable values): where the storage type is coarser than the bins, each
    bin then holds exactly one representable value, elsewhere the bins stay as they were.
    Bins that hold nothing the type can represent would otherwise alternate with full ones
    (the false steps of a bf16 tensor), however the data fall."""
    below = np.searchsorted(grid, edges, side="left")  # representable values under each edge
    keep = np.flatnonzero(np.diff(below) > 0) + 1  # each bin's right edge, if it holds one
    if keep.size == 0:
        return edges[[0, -1]]
    kept = np.concatenate([[0], keep])
    kept[-1] = edges.size - 1  # trailing empty bins join the last full one
    return edges[kept]
