"""Histogram bins on a pane's code buckets (an integer number per bucket, finer when zoomed),
and a bf16 tensor binned on the values bf16 can represent where those are coarser."""

from __future__ import annotations

import numpy as np

from quantscope.core import choose_qparams
from quantscope.state.histogram import bucket_edges, pane_histogram, representable_values


def _boundaries(p) -> np.ndarray:
    s, z = float(p.scale), int(p.zero_point)
    return (np.arange(p.qmin, p.qmax) - z + 0.5) * s


def _per_bucket(edges: np.ndarray, b: np.ndarray) -> int:
    step = float(np.median(np.diff(b)))
    per = step / float(np.median(np.diff(edges)))
    assert abs(per - round(per)) < 1e-6 and round(per) >= 1
    inside = b[(b > edges[0]) & (b < edges[-1])]
    if inside.size:
        gap = np.abs(edges[None, :] - inside[:, None]).min(axis=1)
        assert gap.max() < 1e-6 * step  # every boundary is an edge
    return round(per)


def test_bins_fit_the_buckets_and_get_finer_when_zoomed():
    x = np.sort(np.random.default_rng(0).normal(size=50_000).astype(np.float32))
    for bits in (8, 4, 2):
        p = choose_qparams(x, symmetric=False, bits=bits)
        b = _boundaries(p)
        edges, counts = pane_histogram(x, b, (float(x[0]), float(x[-1])), 2048)
        whole = _per_bucket(edges, b)
        assert counts.sum() == x.size and edges.size - 1 <= 2048
        zoom, _ = pane_histogram(x, b, (-0.5, 0.5), 2048)
        assert _per_bucket(zoom, b) > whole


def test_bf16_values_get_one_bin_each_where_they_are_coarser_than_the_bins():
    rng = np.random.default_rng(1)
    x32 = (rng.normal(size=100_000) * 0.1).astype(np.float32)
    bf = (x32.view(np.uint32) & 0xFFFF0000).view(np.float32)  # bf16 values, as float32
    x = np.sort(bf)
    b = _boundaries(choose_qparams(x, symmetric=True))
    edges, counts = pane_histogram(x, b, (0.1, 0.3), 2048, dtype="bfloat16")
    grid = representable_values("bfloat16")
    inside = grid[(grid >= edges[0]) & (grid < edges[-1])]
    assert np.diff(np.searchsorted(inside, edges)).max() == 1  # one representable per bin
    assert counts.sum() == np.count_nonzero((x >= edges[0]) & (x < edges[-1]))
    # float32 data keeps the bucket-aligned bins
    e32, _ = pane_histogram(np.sort(x32), b, (0.1, 0.3), 2048)
    assert _per_bucket(e32, b) >= 1 and e32.size > edges.size


def test_edges_never_exceed_the_bin_budget():
    b = np.arange(-127, 127) + 0.5
    assert bucket_edges(b, (-1e4, 1e4), 512).size - 1 <= 512 + 2
