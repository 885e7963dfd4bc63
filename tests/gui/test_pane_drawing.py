"""A pane draws what the state shaped with the result it shows: after every change its texts,
grid and histogram equal ones shaped afresh for that report and the pane's own view (none of
the previous report's, nor of a view it no longer shows)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from quantscope.state import ExplorerState, Source
from quantscope.state.display import pane_display
from quantscope.state.histogram import overview_unit_heights, pane_histogram


def _check_pane(pane, st) -> None:
    report = st.results[pane.key]
    assert pane.report is report
    fresh = pane_display(report)
    assert pane.displayed() == fresh.texts
    assert np.array_equal(pane._boundaries, fresh.grid.boundaries)
    ov = st.overview
    (x0, x1), _ = pane.plot.getViewBox().viewRange()
    view = (max(x0, ov.min), min(x1, ov.max))
    bins = int(np.clip(2 * pane.plot.getViewBox().width(), 256, 2048))
    edges, counts = pane_histogram(st.prepared.layout(None, None).values,
                                   fresh.grid.boundaries, view, bins, st.stored_dtype)
    heights, _ = overview_unit_heights(ov.hist_edges, ov.hist_counts, edges, counts,
                                       pane._log)
    assert np.array_equal(pane.hist.xData, edges)
    assert np.array_equal(pane.hist.yData, heights)
    # the bands' bounds kept between repaints are those pyqtgraph computes afresh
    for band in (pane.window, pane.clip_lo, pane.clip_hi, pane.clip_lo.band, pane.clip_hi.band):
        assert band.boundingRect() == pg.LinearRegionItem.boundingRect(band)


def test_every_pane_draws_its_own_reports_drawing_after_each_change(make_window, qtbot,
                                                                   wait_results):
    win = make_window(ExplorerState(cache_reports=False))
    x = np.random.default_rng(4).standard_normal((64, 512)).astype(np.float32)
    x[3, :5] = 30.0
    win.state.set_tensor(x, Source("array", "x", axis=0))
    wait_results(win)
    changes = [{"bits": 5}, {"method": "percentile", "percentile": 99.0},
               {"method": "manual", "manual_clip": (-2.0, 3.0)}, {"bits": 8, "method": "minmax"}]
    for i, change in enumerate(changes):
        if i == 2:  # a zoom between two changes: the next bins are the new view's
            first = next(iter(win.panes.values()))
            first.plot.setXRange(-1.0, 2.0, padding=0)
        win.state.update_settings(**change)
        wait_results(win)
        for pane in win.panes.values():
            _check_pane(pane, win.state)
    win.resize(1280, 760)  # the views' sizes move the bands' bounds as well
    qtbot.waitUntil(lambda: all(p.width() < 640 for p in win.panes.values()))
    win.state.update_settings(bits=3)
    wait_results(win)
    for pane in win.panes.values():
        _check_pane(pane, win.state)
