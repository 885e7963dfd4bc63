"""A per-channel pane draws as clipped exactly the elements its table counts as clipped.

The one window a per-channel pane draws is the union of the channels' windows; a channel
with a narrow window clips values well inside it. The tensor here is built so: row 0 is ten
times narrower than the others, so its percentile window clips values that lie inside the
union window and that shading "beyond the window" would never show."""

from __future__ import annotations

import numpy as np
import pytest

import quantscope as qs
from quantscope import figures
from quantscope.core.stats.prepared import Prepared
from quantscope.state.clipped_histogram import binned, clipped_values


def narrow_row_tensor() -> np.ndarray:
    rng = np.random.default_rng(30)
    x = rng.standard_normal((32, 512)).astype(np.float32)
    x[0] *= 0.1
    return x


def test_clipped_values_are_the_elements_each_channel_clips():
    x = narrow_row_tensor()
    p = qs.choose_qparams(x, bits=4, granularity="channel", axis=0, method="percentile",
                          percentile=99.0)
    rep = qs.analyze(x, p)
    got = clipped_values(Prepared(x).layout(0, None), rep.per_channel.clipped_below,
                         rep.per_channel.clipped_above)
    # brute force: every element against its own row's code range
    s = np.asarray(p.scale, np.float64).reshape(-1, 1)
    z = np.asarray(p.zero_point, np.float64).reshape(-1, 1)
    codes = np.rint(x.astype(np.float64) / s) + z
    want = np.sort(x[(codes < p.qmin) | (codes > p.qmax)])
    assert got.size == rep.clipped_below + rep.clipped_above > 0
    np.testing.assert_array_equal(got, want)
    # the union window the pane draws holds most of them: shading beyond it undercounts
    lo = float(((p.qmin - z - 0.5) * s).min())
    hi = float(((p.qmax - z + 0.5) * s).max())
    assert np.count_nonzero((x < lo) | (x > hi)) < got.size
    edges = np.linspace(float(x.min()), float(x.max()) + 0.01, 301)  # bins are half-open
    assert binned(got, edges).sum() == got.size


def test_clipped_values_refuse_counts_of_another_granularity():
    rows = Prepared(narrow_row_tensor()).layout(0, None)
    with pytest.raises(ValueError, match="granularities"):
        clipped_values(rows, np.zeros(3, np.int64), np.zeros(3, np.int64))


def test_a_per_channel_pane_draws_the_counted_clipped_elements(qapp, monkeypatch):
    seen: dict = {}
    render = figures._render

    def measuring(target, svg, pixels):
        for key, pane in target.panes.items():
            rep = pane.report
            seen[key] = (pane.clipped_drawn, rep.clipped_below + rep.clipped_above,
                         pane.clipped_hist.isVisible())
        return render(target, svg, pixels)

    monkeypatch.setattr(figures, "_render", measuring)
    qs.figure(narrow_row_tensor(), bits=4, method="percentile", percentile=99.0,
              size=(1280, 960))
    for key in ("symmetric/channel", "asymmetric/channel"):
        drawn, counted, visible = seen[key]
        assert drawn == counted > 0 and visible, (key, seen[key])
    for key in ("symmetric/tensor", "asymmetric/tensor"):
        assert seen[key][0] is None  # per tensor, the window drawn is the one applied
