"""What the panes draw of a result is shaped on the compute job's thread, equal to what the
owner's thread would shape, and never served for another report or another view."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import quantscope.state.drawing as drawing_module
from quantscope.state import PANES, ExplorerState, Source
from quantscope.state.display import pane_display
from quantscope.state.drawing import Drawings
from quantscope.state.histogram import pane_histogram
from quantscope.state.live import LiveExplorer


@pytest.fixture
def live():
    lv = LiveExplorer()
    yield lv
    assert lv.shutdown()


def _tensor(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((32, 256)).astype(np.float32)


def _same_display(a, b) -> None:
    assert a.texts == b.texts and a.labels == b.labels
    assert (a.grid_words, a.is_format) == (b.grid_words, b.is_format)
    assert np.array_equal(a.grid.boundaries, b.grid.boundaries)
    assert (a.grid.window, a.grid.zero, a.grid.note, a.grid.spacing) == (
        b.grid.window, b.grid.zero, b.grid.note, b.grid.spacing)
    assert np.array_equal(a.strip.edges, b.strip.edges)
    assert np.array_equal(a.strip.heights, b.strip.heights)
    assert (a.strip.top, a.strip.qmin, a.strip.qmax) == (b.strip.top, b.strip.qmin,
                                                          b.strip.qmax)


def test_a_results_drawings_come_with_it_shaped_off_the_owners_thread(live, monkeypatch):
    """The panes ask the state to bin on a view once; the next results arrive with every
    pane's display and its histogram on that view, shaped on another thread, and each equals
    one shaped afresh for the new report."""
    live.set_tensor(_tensor(), Source("array", "x", axis=0))
    assert live.wait(timeout=60)
    st = live.state
    view, bins = (-1.5, 2.25), 300
    for key in PANES:  # as each pane draws the first results
        assert st.histogram(st.display(st.results[key]).grid.boundaries, view, bins) is not None
    shaped_on: list[int] = []
    for name in ("pane_display", "pane_histogram"):
        real = getattr(drawing_module, name)
        monkeypatch.setattr(drawing_module, name, lambda *a, real=real: (
            shaped_on.append(threading.get_ident()), real(*a))[1])
    old = dict(st.results)
    live.update_settings(bits=5, method="percentile", percentile=99.0)
    assert live.wait(timeout=60)
    # what the panes draw now: all of it shaped with the result, none on this thread
    drawn = {key: st.display(st.results[key]) for key in PANES}
    binned = {key: st.histogram(drawn[key].grid.boundaries, view, bins) for key in PANES}
    assert shaped_on and threading.get_ident() not in shaped_on
    values = st.prepared.layout(None, None).values
    for key in PANES:
        report = st.results[key]
        assert report is not old[key]
        _same_display(drawn[key], pane_display(report))
        assert drawn[key].texts != pane_display(old[key]).texts  # new numbers, not the old
        want = pane_histogram(values, drawn[key].grid.boundaries, view, bins)
        assert np.array_equal(binned[key][0], want[0])
        assert np.array_equal(binned[key][1], want[1])
        # another view is binned for itself, not served the one made with the result
        other = st.histogram(drawn[key].grid.boundaries, (-0.5, 0.75), bins)
        want = pane_histogram(values, drawn[key].grid.boundaries, (-0.5, 0.75), bins)
        assert np.array_equal(other[0], want[0]) and np.array_equal(other[1], want[1])


def test_a_display_is_never_served_for_another_report():
    """Displays are kept by report: a report that arrived after them (even at the address of
    one gone) gets its own."""
    st = ExplorerState()
    st.set_tensor(_tensor(1), Source("array", "x", axis=0))
    first = dict(st.compute())
    drawings = Drawings()
    from quantscope.state.compute import ComputeResult

    shown = {k: pane_display(r) for k, r in first.items()}
    drawings.keep(ComputeResult(st.generation, st.settings, first, displays=shown),
                  list(first.values()))
    for key in PANES:
        assert drawings.display(first[key]) is shown[key]
    st.update_settings(bits=3)
    second = st.compute()
    for key in PANES:
        _same_display(drawings.display(second[key]), pane_display(second[key]))
        assert drawings.display(second[key]).texts != shown[key].texts


def test_the_views_binned_are_those_the_panes_asked_for_since_the_last_request():
    drawings = Drawings()
    values = np.sort(_tensor(2).ravel())
    grid = np.linspace(-2.0, 2.0, 9)
    assert drawings.views() == ()
    drawings.histogram(values, grid, (-1.0, 1.0), 256, "float32")
    drawings.histogram(values, grid, (-1.0, 1.0), 512, "float32")
    assert drawings.views() == (((-1.0, 1.0), 256), ((-1.0, 1.0), 512))
    assert drawings.views() == (((-1.0, 1.0), 256), ((-1.0, 1.0), 512))  # nothing drawn since
    drawings.histogram(values, grid, (0.0, 1.0), 256, "float32")  # a zoom
    assert drawings.views() == (((0.0, 1.0), 256),)
