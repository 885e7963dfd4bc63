"""The window's numbers are the ones the user asked for, in the flows that used to show wrong
ones: loads after other tensors, presets the controls cannot express, refused panes, the
trade-off drag, captions, a view left while settings changed, and histograms on the buckets."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import analyze
from quantscope.core.labs.explain import clip_window
from quantscope.core.tensors.generators import generate
from quantscope.gui.numbers import display_values
from quantscope.state import PANES, ExplorerState, Source, pane_params

DEMO = Source("sample", "gelu_activations")


def _combo(box, value):
    box.setCurrentIndex(box.findData(value))
    box.activated.emit(box.currentIndex())


def engine_texts(state) -> dict[str, dict[str, str]]:
    x, s = state.tensor, state.settings
    return {p: display_values(analyze(x, pane_params(x, p, s))) for p in PANES
            if p not in state.errors}


def shown(win) -> dict[str, dict[str, str]]:
    return {p: win.panes[p].displayed() for p in PANES if p not in win.state.errors}


@pytest.fixture
def loaded(make_window, qtbot):
    def make(source: Source, install_views: bool = False, win=None):
        win = win or make_window(install_views=install_views)
        win.load(source)
        qtbot.waitUntil(lambda: win.state.source == source and win.all_shown(), timeout=60_000)
        return win
    return make


def test_each_load_gets_its_own_axis_in_the_window(loaded, wait_results, engine_reports):
    win = loaded(DEMO)
    assert win.panes["symmetric/channel"].heading().endswith("axis -1 · 1,536 channels")
    assert win.controls.role.currentText() == 'name "gelu_activations" says activation'
    loaded(Source.generator("weights", (64, 96), 0), win=win)
    assert win.state.settings.axis == 0
    assert win.panes["asymmetric/channel"].heading().endswith("axis 0 · 64 channels")
    loaded(DEMO, win=win)  # the demo again: axis -1 again (was 26.37 dB on axis 0)
    ref = engine_reports(win.state.tensor, -1)
    assert win.panes["symmetric/channel"].displayed() == display_values(
        ref["symmetric/channel"])
    assert win.panes["symmetric/channel"].displayed()["sqnr_db"] == "39.69 dB"


def test_the_clip_fields_show_the_window_in_use(loaded, wait_results):
    win = loaded(DEMO)
    c = win.controls
    win.state.update_settings(method="manual", manual_clip=(-0.0613, 8.94))
    wait_results(win)
    assert (c.clip_lo.value(), c.clip_hi.value()) == (-0.0613, 8.94)
    loaded(Source.generator("normal", (64, 128), 0), win=win)  # the old window is gone
    st = win.state
    assert st.settings.manual_clip is None
    assert st.results["asymmetric/tensor"].clipped_below == 0
    lo, hi = clip_window(st.results["asymmetric/tensor"].params)
    assert (c.clip_lo.value(), c.clip_hi.value()) == (round(lo, 4), round(hi, 4))
    _combo(c.method, "percentile")
    wait_results(win)
    lo, hi = clip_window(st.results["asymmetric/tensor"].params)
    assert (c.clip_lo.value(), c.clip_hi.value()) == (round(lo, 4), round(hi, 4))
    assert shown(win) == engine_texts(st)


def test_controls_a_preset_decides_are_greyed_and_show_its_value(loaded, wait_results):
    win = loaded(Source.generator("normal", (64, 128), 0))
    c = win.controls
    _combo(c.runtime, "onnxruntime")
    assert not c.narrow.isEnabled() and c.narrow.currentText() == (
        "preset: sym -128…127 / asym 0…255")
    _combo(c.runtime, "tflite")
    assert not c.rounding.isEnabled() and c.rounding.currentData() == "half_away"
    assert win.state.settings.rounding == "half_even"  # the user's own choice is kept
    assert not c.note.isVisibleTo(win)
    win.state.update_settings(method="manual", manual_clip=(-1.0, 1.5))
    wait_results(win)
    assert c.note.isVisibleTo(win) and "tflite preset has no manual clip" in c.note.text()
    win.state.update_settings(method="minmax")
    _combo(c.runtime, "tflite-xnnpack")  # weights half away, activations half to even
    wait_results(win)
    assert not c.rounding.isEnabled()
    assert c.rounding.currentText() == "preset: sym half away from zero / asym half to even"
    assert {p: win.state.results[p].params.rounding for p in win.state.results} == {
        "symmetric/tensor": "half_away", "symmetric/channel": "half_away",
        "asymmetric/tensor": "half_even", "asymmetric/channel": "half_even"}
    _combo(c.runtime, None)
    assert c.narrow.isEnabled() and c.rounding.isEnabled() and not c.note.isVisibleTo(win)
    assert c.rounding.count() == 2 and c.rounding.currentData() == "half_even"
    wait_results(win)
    assert shown(win) == engine_texts(win.state)


def test_refused_panes_clear_their_plots_and_keep_the_rows_level(make_window, wait_results):
    win = make_window()
    win.state.set_tensor(generate("gelu", (64, 128), seed=1), Source("file", "act.npy"))
    wait_results(win)
    pane = win.panes["asymmetric/tensor"]
    assert not pane.grid.path().isEmpty()
    _combo(win.controls.runtime, "tensorrt")  # symmetric only
    wait_results(win)
    assert pane.stack.currentWidget() is pane.error and "symmetric" in pane.error.text()
    assert pane.grid.path().isEmpty() and pane.bars.path().isEmpty()
    assert not pane.window.isVisible() and not pane.zero.isVisible()
    # a 1-D tensor: its per-channel panes say why beside per-tensor panes with numbers
    win.state.set_tensor(np.linspace(-1, 2, 500, dtype=np.float32), Source("file", "b.npy"))
    wait_results(win)
    for sym in ("symmetric", "asymmetric"):
        left, right = win.panes[f"{sym}/tensor"], win.panes[f"{sym}/channel"]
        assert "1-D tensor (500 values) has no channels" in right.error.text()
        for key in ("sqnr_db", "clipped_above"):
            y = [p.values[key].mapTo(win, p.values[key].rect().topLeft()).y()
                 for p in (left, right)]
            assert y[0] == y[1], key


def test_one_clipped_value_reads_as_a_count(make_window, wait_results):
    win = make_window()
    x = generate("normal", (400, 500), seed=2)
    x[0, 0] = 50.0
    win.state.set_tensor(x, Source("file", "n.npy"))
    win.state.update_settings(method="manual", manual_clip=(-10.0, 40.0))
    wait_results(win)
    rep = win.state.results["asymmetric/tensor"]
    assert rep.clipped_above == 1
    assert win.panes["asymmetric/tensor"].displayed()["clipped_above"] == "1 value"


@pytest.fixture(scope="module")
def one_demo_window(shared_window):
    """One window with the views for the Trade-off tests, which change only its settings
    and the tab shown; the settings a new window starts with."""
    win = shared_window(ExplorerState(), install_views=True)
    return win, win.state.settings


@pytest.fixture
def demo_views(one_demo_window, qtbot, wait_results):
    """The demo in the window with the views, on a new window's settings (loaded once, then
    installed again on them), the Trade-off tab shown once its sweep is in."""
    win, fresh = one_demo_window
    if win.state.source != DEMO:
        win.load(DEMO)
        qtbot.waitUntil(lambda: win.state.source == DEMO and win.all_shown(), timeout=60_000)
    st = win.state
    assert st.set_tensor(st.tensor, st.source, prepared=st.prepared, settings=fresh)
    wait_results(win)
    view = win.views_controller.tradeoff
    win.views.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.plots["asymmetric"].sweep is not None, timeout=60_000)
    return win, view


def test_dragging_the_tradeoff_line_clips_only_above(demo_views, wait_results):
    win, view = demo_views
    x = win.state.tensor
    view.set_threshold(9.0, "asymmetric")
    wait_results(win)
    assert win.state.settings.manual_clip == (float(x.min()), 9.0)
    asym = win.state.results["asymmetric/tensor"]
    assert asym.clipped_below == 0  # was 44% clipped below, 8.79 dB
    assert asym.sqnr_db > 9.7
    axis = view.plots["asymmetric"].plot.getAxis("bottom")
    assert axis.labelText == "t: clips x>t"  # the side a drag moves, in the narrow tab
    assert axis.toolTip() == f"t: clips x>t, x<−t if t<{-float(x.min()):.3g}"
    assert shown(win) == engine_texts(win.state)


def test_the_tradeoff_label_follows_changes_made_in_another_tab(demo_views, wait_results,
                                                                qtbot):
    win, view = demo_views
    win.views.setCurrentWidget(win.views_controller.channels)
    _combo(win.controls.method, "percentile")
    wait_results(win)
    win.views.setCurrentWidget(view)
    line = view.plots["symmetric"].current
    qtbot.waitUntil(lambda: line.label.toPlainText() == f"clip {line.value():.3g}",
                    timeout=5_000)
    assert line.value() < 20  # the percentile's threshold, not min/max's 24.8


BF16_FILE = "/work/shared/data/minilm/layer0_bf16.safetensors"


def _bins(pane) -> tuple[np.ndarray, np.ndarray]:
    """The pane's drawn histogram: (edges, counts), undoing the log scale it may show and the
    scaling of each bar to the overview's bin width."""
    edges = np.asarray(pane.hist.xData, np.float64)
    heights = np.asarray(pane.hist.yData, np.float64)
    if pane._log:
        heights = 10.0 ** heights - 1.0
    ov = pane._overview
    unit = (ov.hist_edges[-1] - ov.hist_edges[0]) / ov.hist_counts.size
    return edges, np.round(heights * np.diff(edges) / unit)


def test_histograms_are_binned_on_each_panes_buckets_and_again_when_zoomed(loaded, qtbot):
    from quantscope.gui.numbers import bucket_grid

    win = loaded(DEMO)
    x = win.state.tensor
    for key in PANES:
        pane = win.panes[key]
        edges, heights = _bins(pane)
        step = float(np.median(np.diff(bucket_grid(pane.report).boundaries)))
        width = np.diff(edges)
        assert np.allclose(width, width[0], rtol=1e-9)
        # an integer number of bins per bucket (or of buckets per bin), on the bucket grid
        ratio = step / width[0] if step >= width[0] else width[0] / step
        assert abs(ratio - round(ratio)) < 1e-6, key
        origin = bucket_grid(pane.report).boundaries[0]
        assert np.allclose((edges - origin) / width[0], np.round((edges - origin) / width[0]))
        inside = (x >= edges[0]) & (x < edges[-1])
        assert heights.sum() == np.count_nonzero(inside), key  # counts, not a resample
    pane = win.panes["symmetric/tensor"]
    step = float(np.median(np.diff(bucket_grid(pane.report).boundaries)))
    before = _bins(pane)[0]
    pane.plot.setXRange(0.0, 6 * step, padding=0)  # six buckets across the pane
    qtbot.waitUntil(lambda: not np.array_equal(_bins(pane)[0], before), timeout=10_000)
    edges, _ = _bins(pane)
    assert round(step / np.diff(edges)[0]) >= 8  # the zoom shows inside each bucket
    assert edges[0] <= 0.0 + 1e-12 and edges[-1] >= min(6 * step, float(x.max())) - 1e-9


def test_a_bf16_tensor_is_binned_on_its_own_values(loaded):
    import ml_dtypes

    from quantscope.state.histogram import representable_values

    name = "encoder.layer.0.attention.output.LayerNorm.weight"  # values near 1: coarse bf16
    win = loaded(Source("file", BF16_FILE, tensor=name))
    edges, heights = _bins(win.panes["symmetric/tensor"])
    grid = representable_values("bfloat16")
    grid = grid[(grid >= edges[0]) & (grid <= edges[-1])]
    # each bin holds exactly one representable value: no empty bins between filled ones
    assert np.array_equal(np.searchsorted(edges, grid, side="right") - 1,
                          np.arange(len(edges) - 1))
    x = win.state.tensor
    assert np.all(x == x.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert heights.sum() == np.count_nonzero((x >= edges[0]) & (x < edges[-1]))
