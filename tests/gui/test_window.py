"""The explorer window, offscreen: first numbers equal ``quantscope report``'s, every control
changes every pane to exactly the engine's numbers, bad input leaves a readable message and the
previous tensor, files open (checkpoints in the model view) and by drag-and-drop."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QMimeData, QObject, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QApplication, QLabel

from quantscope.core import analyze
from quantscope.core.tensors.generators import generate
from quantscope.gui.numbers import display_values
from quantscope.state import (
    PANES,
    ExplorerState,
    Source,
    pane_params,
    params_key,
    prepare_tensor,
)
from quantscope.state.source import DEMO_AXIS, DEMO_SAMPLE


def engine_texts(state) -> dict[str, dict[str, str]]:
    """What each pane must display: the direct engine pass for the state's settings."""
    x, s = state.tensor, state.settings
    return {p: display_values(analyze(x, pane_params(x, p, s))) for p in PANES
            if p not in state.errors}


def shown(win) -> dict[str, dict[str, str]]:
    return {p: win.panes[p].displayed() for p in PANES}


def _outliers() -> tuple[np.ndarray, Source]:
    return (generate("outliers", (48, 320), seed=4, count=5, magnitude=25.0),
            Source.generator("outliers", (48, 320), 4, count=5, magnitude=25.0))


@pytest.fixture
def outlier_window(make_window, wait_results):
    """A new window showing the outlier tensor, for a test that leaves something of its own in
    the window (a caption, a zoom, a rewired pane timer or pane method): the others share
    :func:`loaded_window`."""
    st = ExplorerState()
    win = make_window(st)
    assert st.set_tensor(*_outliers())
    wait_results(win)
    return win


@pytest.fixture(scope="module")
def one_window(shared_window):
    """One window for the tests that change only its settings, its tensor or its message,
    and the settings a new window starts with."""
    win = shared_window(ExplorerState())
    return win, win.state.settings


@pytest.fixture
def loaded_window(one_window, wait_results):
    """:func:`outlier_window` for a test that changes only the settings, the tensor or the
    message shown: the one window, its message cleared and the outlier tensor loaded again on
    a new window's settings (the same load as :func:`outlier_window`'s)."""
    win, fresh = one_window
    win.clear_error()
    win.statusBar().clearMessage()
    assert win.state.set_tensor(*_outliers(), settings=fresh)
    wait_results(win)
    return win


def test_opens_on_the_demo_with_the_reports_numbers(make_window, wait_results, engine_reports):
    win = make_window()
    win.load(Source("sample", DEMO_SAMPLE, axis=DEMO_AXIS))
    wait_results(win)
    ref = engine_reports(win.state.tensor, DEMO_AXIS)
    for pane in PANES:
        assert win.panes[pane].displayed() == display_values(ref[pane])
    assert win.panes["symmetric/tensor"].heading() == "Symmetric · per-tensor"
    assert win.panes["asymmetric/channel"].heading() == (
        "Asymmetric · per-channel · axis -1 · 1,536 channels")
    assert win.state.prepared is not None  # the fast exact path served these numbers
    rows = dict(win.source_panel.summary_rows())
    assert rows["shape"] == "197x1536" and rows["max"] == f"{win.state.tensor.max():.6g}"


def _combo(box, value):
    box.setCurrentIndex(box.findData(value))
    box.activated.emit(box.currentIndex())


CONTROLS = [
    ("method percentile", lambda c: _combo(c.method, "percentile"), {"method": "percentile"}),
    ("percentile p", lambda c: (_combo(c.method, "percentile"), c.percentile.setValue(99.5)),
     {"percentile": 99.5}),
    ("method mse", lambda c: _combo(c.method, "mse"), {"method": "mse"}),
    ("method entropy", lambda c: _combo(c.method, "entropy"), {"method": "entropy"}),
    ("manual clip", lambda c: c.clip.setValue((-2.0, 3.0)),
     {"method": "manual", "manual_clip": (-2.0, 3.0)}),
    ("typed clip", lambda c: (c.clip_lo.setValue(-1.25), c.clip_hi.setValue(2.5)),
     {"method": "manual", "manual_clip": (-1.25, 2.5)}),
    ("rounding", lambda c: _combo(c.rounding, "half_away"), {"rounding": "half_away"}),
    ("full range", lambda c: _combo(c.narrow, False), {"narrow_range": False}),
    ("bits slider", lambda c: c.bits.setValue(4), {"bits": 4}),
    ("bits box", lambda c: c.bits_label.setValue(3), {"bits": 3}),
    ("axis", lambda c: c.axis.setValue(1), {"axis": 1}),
    ("group size", lambda c: c.group.setValue(40), {"group_size": 40}),
    ("runtime", lambda c: _combo(c.runtime, "pytorch"), {"runtime": "pytorch"}),
]


@pytest.mark.parametrize(("name", "act", "expect"), CONTROLS, ids=[c[0] for c in CONTROLS])
def test_each_control_updates_every_pane_to_the_engine(loaded_window, wait_results, name, act,
                                                       expect):
    win = loaded_window
    act(win.controls)
    for key, value in expect.items():
        assert getattr(win.state.settings, key) == value
    wait_results(win)
    after = shown(win)
    want = engine_texts(win.state)
    for pane in PANES:
        if pane in win.state.errors:  # e.g. entropy is per-tensor symmetric only
            assert win.panes[pane].error.text() == win.state.errors[pane]
            continue
        assert after[pane] == want[pane], pane
        # the pane holds the report of exactly the current settings' parameters (rounding
        # alone may not move four significant digits, so the text is not enough)
        report = win.panes[pane].report
        assert report is win.state.results[pane]
        x, s = win.state.tensor, win.state.settings
        assert params_key(report.params) == params_key(pane_params(x, pane, s))
    assert set(want) | set(win.state.errors) == set(PANES)


def test_entropy_explains_the_panes_it_cannot_fill(loaded_window, wait_results):
    _combo(loaded_window.controls.method, "entropy")
    wait_results(loaded_window)
    err = loaded_window.panes["asymmetric/tensor"].error
    assert err.isVisibleTo(loaded_window) and "symmetric" in err.text()
    assert loaded_window.panes["asymmetric/tensor"].values["sqnr_db"].text() == "—"


def test_state_changes_show_in_the_controls(loaded_window, wait_results):
    win, c = loaded_window, loaded_window.controls
    win.state.update_settings(bits=5, rounding="half_away", group_size=64, runtime="tflite")
    assert (c.bits.value(), c.bits_label.value(), c.rounding.currentData(),
            c.group.value(), c.runtime.currentData()) == (5, 5, "half_away", 64, "tflite")
    assert not c.rounding.isEnabled()  # the runtime decides its rounding
    assert win.panes["symmetric/channel"].heading() == (
        "Symmetric · per-group of 64 · axis 1 · 240 groups")
    wait_results(win)
    assert shown(win) == engine_texts(win.state)


def test_a_slider_drag_reaches_the_state_at_each_step_and_only_the_newest_computes(
        loaded_window, wait_results, qtbot):
    """No timer holds a dragged value back: each step is a new generation of the state, and
    the state's scheduler runs only the newest request (the older ones' results, if any
    finish, are dropped by their stale generation)."""
    win, c = loaded_window, loaded_window.controls
    gen = win.state.generation
    landed = []
    win.live.results_ready.connect(lambda: landed.append(win.state.generation))
    c.bits.setSliderDown(True)
    for v in (7, 6, 5, 4):
        c.bits.setValue(v)
        assert win.state.settings.bits == v
    c.bits.setSliderDown(False)
    assert win.state.generation == gen + 4
    wait_results(win)
    assert landed and set(landed) == {gen + 4}
    assert shown(win) == engine_texts(win.state)


def test_log_counts_toggle(loaded_window, qtbot):
    win = loaded_window
    pane = win.panes["symmetric/tensor"]
    n = win.state.tensor.size
    ov = win.state.overview
    # the pane's own bins, log10(1 + n) by default, n in values per 1/2048 of the range
    per = np.diff(np.asarray(pane.hist.xData)) * ov.hist_counts.size / (ov.max - ov.min)
    log = np.asarray(pane.hist.yData)
    np.testing.assert_allclose(np.sum((10 ** log - 1.0) * per), n, rtol=1e-9)
    assert win.log_action.isChecked()
    win.controls.log_counts.setChecked(False)
    qtbot.waitUntil(win.all_shown)  # the panes redraw a pane per turn
    counts = np.asarray(pane.hist.yData)
    np.testing.assert_allclose(np.sum(counts * per), n, rtol=1e-9)
    np.testing.assert_allclose(log, np.log10(counts + 1.0))
    assert not win.log_action.isChecked()
    win.log_action.setChecked(True)
    assert win.controls.log_counts.isChecked()
    qtbot.waitUntil(win.all_shown)
    np.testing.assert_allclose(pane.hist.yData, log)


def test_bucket_grid_window_and_occupancy_are_drawn(loaded_window, wait_results):
    pane = loaded_window.panes["symmetric/tensor"]
    r = pane.report
    s = float(r.params.scale)
    lo, hi = pane.window.getRegion()
    assert lo == pytest.approx((r.qmin - 0.5) * s) and hi == pytest.approx((r.qmax + 0.5) * s)
    assert pane.grid.path().elementCount() == 2 * (r.qmax - r.qmin)  # a line per boundary
    assert not pane.clip_lo.isVisible()  # min/max: nothing clipped
    np.testing.assert_allclose(pane.bar_heights, np.log10(r.code_histogram + 1.0))
    outline = pane.bars.path()  # each code's bar: a step at its height, one unit wide
    ys = [outline.elementAt(i).y for i in range(outline.elementCount())]
    np.testing.assert_allclose(ys[1:-1:2], pane.bar_heights)
    assert outline.boundingRect().width() == r.qmax - r.qmin + 1
    loaded_window.state.update_settings(method="manual", manual_clip=(-1.0, 1.0))
    loaded_window.state.compute()
    wait_results(loaded_window)
    assert pane.clip_lo.isVisible() and pane.clip_hi.isVisible()
    assert pane.clip_hi.getRegion() == pytest.approx((1.0 + 0.5 * float(pane.report.params.scale),
                                                      loaded_window.state.overview.max))


def test_the_grid_and_zero_label_follow_every_report(loaded_window, wait_results):
    """The grid's path and the zero point's label are rebuilt only when they change: each new
    report, and one shown again after an error cleared the plot, still draws its own."""
    from quantscope.gui.numbers import bucket_grid

    win = loaded_window
    pane = win.panes["asymmetric/tensor"]

    def assert_drawn() -> None:
        g = bucket_grid(pane.report)
        path = pane.grid.path()
        assert [path.elementAt(i).x for i in range(0, path.elementCount(), 2)] == \
            pytest.approx(g.boundaries)
        zero = display_values(pane.report)["zero_point"]
        assert pane.zero.isVisible() and pane.zero.value() == g.zero
        assert pane.zero.label.toPlainText() == f"zero point {zero}"

    texts = set()
    for clip in ((-1.0, 3.0), (-3.0, 1.0), (-3.0, 1.0)):
        win.state.update_settings(method="manual", manual_clip=clip)
        wait_results(win)
        assert_drawn()
        texts.add(pane.zero.label.toPlainText())
    assert len(texts) == 2  # the zero point moved
    report = pane.report
    pane.set_error("refused")
    assert pane.grid.path().elementCount() == 0 and not pane.zero.isVisible()
    pane.set_report(report)
    assert_drawn()


@pytest.mark.parametrize(("bad", "message"), [
    (np.full((4, 4), np.nan, np.float32), "NaN or infinite"),
    (np.float32(2.0), "0-d"),
    (np.zeros((0,), np.float32), "empty"),
])
def test_bad_arrays_leave_a_message_and_the_previous_tensor(loaded_window, bad, message):
    win = loaded_window
    tensor, settings, texts = win.state.tensor, win.state.settings, shown(win)
    win.state.update_settings(bits=6)
    settings = win.state.settings
    assert not win.state.set_tensor(bad)
    assert win.banner.isVisibleTo(win) and message in win.banner.text()
    assert message in win.statusBar().currentMessage()
    assert win.state.tensor is tensor and win.state.settings is settings
    del texts


@pytest.mark.parametrize(("content", "message"), [
    (b"not a tensor at all", "not a NumPy .npy file"),
    (None, "NaN"),
    (np.float32(3.0), "0-d"),
    (np.zeros((2, 0), np.float32), "empty"),
])
def test_bad_files_leave_a_message_and_the_previous_tensor(loaded_window, qtbot, tmp_path,
                                                           content, message):
    win = loaded_window
    path = tmp_path / "bad.npy"
    if content is None:
        np.save(path, np.full((3, 3), np.nan, np.float32))
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        np.save(path, content)
    tensor, texts = win.state.tensor, shown(win)
    with qtbot.waitSignal(win.error_shown, timeout=10_000):
        win.open_path(path)
    assert "bad.npy" in win.banner.text() and message.lower() in win.banner.text().lower()
    assert win.state.tensor is tensor and shown(win) == texts
    assert not win.progress_box.isVisible()


def test_multi_tensor_files_open_the_model_view(make_window, qtbot, wait_results, tmp_path):
    arrays = {"encoder.weight": generate("weights", (32, 64), seed=1),
              "encoder.bias": generate("normal", (32,), seed=2),
              "decoder.weight": generate("laplace", (16, 8), seed=3)}
    path = tmp_path / "model.npz"
    np.savez(path, **arrays)
    win = make_window()
    win.open_path(path)
    qtbot.waitUntil(win.model_active, timeout=30_000)  # the file is listed in the worker
    view = win.model_view
    assert win.picker is None
    qtbot.waitUntil(view.is_complete, timeout=30_000)
    names = [view.model.data(view.model.index(i, 0)) for i in range(view.model.rowCount())]
    assert sorted(names) == sorted(arrays)
    view.filter.setText("weight")
    assert view.model.rowCount() == 2
    shapes = {view.model.row_at(i).name: view.model.data(view.model.index(i, 1))
              for i in range(view.model.rowCount())}
    assert shapes["encoder.weight"] == "32x64"
    view.tensor_chosen.emit(next(r for r in view.rows if r.name == "decoder.weight"))
    wait_results(win)
    np.testing.assert_array_equal(win.state.tensor, arrays["decoder.weight"])
    assert win.state.source.tensor == "decoder.weight"
    assert "model.npz [decoder.weight]" in win.source_status.text()


def test_dropping_a_file_opens_it(make_window, wait_results, tmp_path):
    x = generate("relu", (20, 30), seed=9)
    path = tmp_path / "acts.npy"
    np.save(path, x)
    win = make_window()
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    win.dropEvent(event)
    wait_results(win)
    np.testing.assert_array_equal(win.state.tensor, x)
    assert shown(win) == engine_texts(win.state)


def test_generators_from_the_source_panel(make_window, wait_results):
    win = make_window()
    panel = win.source_panel
    panel.set_generator("outliers", count=3, magnitude=50.0)
    panel.shape.setText("30x40")
    panel.seed.setValue(11)
    assert set(panel.param_widgets) == {"std", "count", "magnitude"}
    panel.generate_button.click()
    wait_results(win)
    want = generate("outliers", (30, 40), seed=11, count=3, magnitude=50.0)
    np.testing.assert_array_equal(win.state.tensor, want)
    assert win.state.source == Source.generator("outliers", (30, 40), 11, std=1.0, count=3,
                                                magnitude=50.0)
    panel.shape.setText("30 by 40")
    panel.generate_button.click()
    assert "30 by 40" in win.banner.text()


def test_multi_tensor_sample_opens_the_picker(make_window, wait_results, qtbot):
    win = make_window()
    samples = win.source_panel.samples
    item = next(samples.item(i) for i in range(samples.count())
                if samples.item(i).text() == "bf16_checkpoint")
    samples.itemActivated.emit(item)
    qtbot.waitUntil(lambda: win.picker is not None, timeout=30_000)  # listed in the worker
    assert len(win.picker.visible_names()) == 16
    name = next(n for n in win.picker.visible_names() if n.endswith("query.weight"))
    win.picker.choose(name)
    wait_results(win)
    assert win.state.source == Source("sample", "bf16_checkpoint", tensor=name)
    assert dict(win.source_panel.summary_rows())["dtype"] == "bfloat16"


def test_samples_are_listed_and_load(make_window, wait_results):
    from quantscope.io.samples import list_samples

    win = make_window()
    names = [win.source_panel.samples.item(i).text()
             for i in range(win.source_panel.samples.count())]
    assert names == [n for n, _, _ in list_samples()]
    item = win.source_panel.samples.item(names.index("query_weight"))
    win.source_panel.samples.itemActivated.emit(item)
    wait_results(win)
    assert win.state.source == Source("sample", "query_weight")
    assert win.state.tensor.shape == (384, 384)


def test_cancel_keeps_the_previous_tensor(loaded_window, qtbot):
    import threading

    win = loaded_window
    tensor = win.state.tensor
    started, release = threading.Event(), threading.Event()

    def slow(ctx):
        started.set()
        while not release.wait(0.005):
            ctx.check()  # raises once cancelled
        raise AssertionError("released without cancel")

    win._start_progress("loading something big")
    win.jobs.submit("load", slow)
    qtbot.waitUntil(started.is_set, timeout=5000)
    assert win.progress_box.isVisible()
    win.cancel_button.click()
    assert not win.progress_box.isVisible()
    qtbot.waitUntil(win.jobs.is_idle, timeout=5000)
    assert win.state.tensor is tensor and "cancelled" in win.statusBar().currentMessage()


def test_add_view_shows_a_tab_beside_the_panes(make_window):
    win = make_window()
    assert win.views.isHidden()
    label = QLabel("a view")
    win.add_view("Extra", label)
    assert win.views.isVisibleTo(win) and win.views.tabText(0) == "Extra"
    assert win.views.widget(0) is label


def _hold_per_channel_reports(win, monkeypatch, wait_results):
    """Make the window's reports run on parallel threads, prepared, and the per-channel ones
    wait for the returned gate (set it to let them finish): the per-tensor pair arrives first,
    as a partial result."""
    import threading

    import quantscope.state.compute as compute_module

    monkeypatch.setattr(compute_module, "PARALLEL_MIN_SIZE", 1)
    monkeypatch.setattr(compute_module, "PARALLEL_CORES", True)
    x = win.state.tensor
    assert win.state.set_tensor(x, win.state.source, prepared=prepare_tensor(x, win.state.settings))
    wait_results(win)
    gate = threading.Event()
    real = compute_module.analyze_with

    def held(x, prepared, params):
        if params.granularity != "tensor":
            gate.wait(10)
        return real(x, prepared, params)

    monkeypatch.setattr(compute_module, "analyze_with", held)
    return gate


def test_numbers_that_lag_the_controls_are_marked(loaded_window, wait_results, qtbot):
    import threading

    win = loaded_window
    gate = threading.Event()
    win.jobs.submit("load", lambda ctx: gate.wait(10) and None)  # keeps the worker busy
    win.state.update_settings(bits=5)
    qtbot.waitUntil(win.computing_label.isVisible, timeout=5000)
    value = win.panes["symmetric/tensor"].values["sqnr_db"]
    assert "color" in value.styleSheet()
    win.jobs.cancel("load")  # its (dummy) result is dropped
    gate.set()
    wait_results(win)
    assert not win.computing_label.isVisible() and value.styleSheet() == ""
    assert win.panes["symmetric/tensor"].report.params.bits == 5


def test_panes_ready_first_are_shown_while_the_others_compute(loaded_window, wait_results,
                                                              qtbot, monkeypatch):
    """With the per-channel panes on their own threads, the per-tensor panes show their new
    numbers as soon as they are ready, the per-channel panes keep the previous ones (greyed)
    until theirs arrive, and then every pane equals the engine."""
    win = loaded_window
    gate = _hold_per_channel_reports(win, monkeypatch, wait_results)
    before = win.panes["symmetric/channel"].report
    win.state.update_settings(bits=5)
    tensor_panes = [win.panes[p] for p in PANES if p.endswith("/tensor")]
    qtbot.waitUntil(lambda: all(p.report.params.bits == 5 for p in tensor_panes), timeout=5000)
    assert win.panes["symmetric/channel"].report is before and not win.all_shown()
    gate.set()
    wait_results(win)
    assert shown(win) == engine_texts(win.state)


def test_captions_of_any_length_leave_the_plots_their_size(outlier_window, qtbot):
    """A caption that wraps to one line or two must not resize the plots: every resize
    regenerates the axes and repaints all four panes (100-200 ms of GUI thread per change)."""
    win = outlier_window
    panes = list(win.panes.values())
    for pane in panes:
        pane.set_caption("short.")
    qtbot.wait(20)
    sizes = [pane.graphics.size() for pane in panes]
    for pane in panes:
        pane.set_caption("a caption long enough to wrap onto a second line in a pane of this "
                         "width, as the engine's captions often do when a window clips")
    qtbot.wait(20)
    assert [pane.graphics.size() for pane in panes] == sizes
    assert all(pane.caption.height() >= 2 * pane.caption.fontMetrics().lineSpacing()
               for pane in panes)


class PaintCounter:
    """Counts paint events on each pane's plot viewport (an event filter)."""

    def __init__(self, win) -> None:
        from PySide6.QtCore import QEvent, QObject

        self.counts = dict.fromkeys(win.panes, 0)
        counter = self

        class Filter(QObject):
            def eventFilter(self, obj, event):
                if event.type() == QEvent.Type.Paint:
                    counter.counts[self.property("pane")] += 1
                return False

        self.filters = []
        for key, pane in win.panes.items():
            f = Filter()
            f.setProperty("pane", key)
            pane.graphics.viewport().installEventFilter(f)
            self.filters.append(f)


@pytest.mark.parametrize("change", [{"bits": 6}, {"rounding": "half_away"},
                                    {"narrow_range": False}])
def test_a_change_paints_each_pane_once(loaded_window, wait_results, qtbot, change):
    """Each pane's plot is painted at most once per change, however its results arrive: pyqtgraph
    applies a new axis range while painting (which asked for a second paint), and linked strips
    redrew every pane whenever one pane's code range moved (four paints per pane per bit-width
    change before; each paint is 3-5 ms of GUI thread)."""
    win = loaded_window
    qtbot.wait(50)
    before = {key: pane.report for key, pane in win.panes.items()}
    counter = PaintCounter(win)
    win.state.update_settings(**change)
    wait_results(win)
    qtbot.wait(100)
    # a pane whose parameters did not change keeps its report and is not repainted at all
    # (full range leaves the asymmetric panes as they were); one whose picture is the same
    # (a new rounding rule moves no boundary) need not be either
    changed = {key: int(pane.report is not before[key]) for key, pane in win.panes.items()}
    assert changed["symmetric/tensor"] == 1
    assert all(counter.counts[key] <= changed[key] for key in changed), counter.counts
    if "bits" in change:  # every plot changes: each pane paints, once
        assert counter.counts == changed


def test_strips_follow_a_users_zoom_but_keep_their_own_code_range(outlier_window):
    win = outlier_window
    sym, asym = win.panes["symmetric/tensor"].strip, win.panes["asymmetric/tensor"].strip
    assert sym.getViewBox().viewRange()[0] == [-128, 128]  # narrow range: -127..127
    assert asym.getViewBox().viewRange()[0] == [-129, 128]  # -128..127
    vb = sym.getViewBox()
    vb.setXRange(-20, 30, padding=0)  # a zoom by code: the others stay
    assert asym.getViewBox().viewRange()[0] == [-129, 128]
    vb.sigRangeChangedManually.emit([True, False])  # what a wheel or a drag emits after it
    for pane in win.panes.values():
        assert pane.strip.getViewBox().viewRange()[0] == pytest.approx([-20, 30])


def test_numbers_of_any_length_leave_the_plots_their_size(make_window, wait_results, qtbot):
    """Clipping counts, scales and zero points change length from one setting to the next;
    the panes' tables and plots must not move (a pane's size hint followed its text: a few
    pixels of difference between the two columns of panes, or a pane's minimum passing its
    width beside the views, resized all four plots, ~90 ms of repaint each time at 16M). A
    text longer than any before may widen its column, once: the second pass moves nothing."""
    st = ExplorerState()
    win = make_window(st, install_views=True)
    assert st.set_tensor(generate("outliers", (256, 1024), seed=1, count=40, magnitude=30.0),
                         Source.generator("outliers", (256, 1024), 1, count=40, magnitude=30.0))
    wait_results(win)
    qtbot.wait(50)
    clips = [(-3.0, 3.0), (-0.5, 0.4), (-2.0, 25.0), (-0.01, 0.02), (-1.0, 1.0)]
    sizes = [pane.graphics.size() for pane in win.panes.values()]
    texts = set()
    for i, clip in enumerate(clips * 2):
        st.update_settings(method="manual", manual_clip=clip)
        wait_results(win)
        qtbot.wait(20)
        texts.add(win.panes["asymmetric/channel"].values["clipped_fraction"].text())
        if i == len(clips) - 1:
            sizes = [pane.graphics.size() for pane in win.panes.values()]
        elif i >= len(clips):
            assert [pane.graphics.size() for pane in win.panes.values()] == sizes
    assert len({len(t) for t in texts}) > 2  # the texts did change length


def test_a_load_moves_what_it_built_out_of_the_collectors_reach(make_window, wait_results):
    """A full cyclic collection over everything a load built took 30-100 ms of GUI thread
    in the middle of slider steps; the window freezes the heap after a load, and makes it
    collectable again when it shuts down."""
    import gc

    gc.unfreeze()
    win = make_window()
    win.load(Source.generator("normal", (64, 128), 0))
    wait_results(win)
    assert gc.get_freeze_count() > 0
    win.shutdown()
    assert gc.get_freeze_count() == 0


def test_numbers_are_selectable_under_the_mouse(loaded_window, qtbot):
    """Selectable labels cost a text document each on every update (~11 ms per change for
    the four tables); the numbers become selectable only while the mouse is over them."""
    from PySide6.QtCore import QEvent, QPointF
    from PySide6.QtGui import QEnterEvent
    from PySide6.QtWidgets import QApplication

    label = loaded_window.panes["symmetric/tensor"].values["sqnr_db"]
    selectable = Qt.TextInteractionFlag.TextSelectableByMouse
    assert not label.textInteractionFlags() & selectable
    QApplication.sendEvent(label, QEnterEvent(QPointF(2, 2), QPointF(2, 2), QPointF(2, 2)))
    assert label.textInteractionFlags() & selectable
    label.setSelection(0, 3)
    QApplication.sendEvent(label, QEvent(QEvent.Type.Leave))
    assert label.textInteractionFlags() & selectable  # a selection is kept for copying
    label.setSelection(0, 0)
    QApplication.sendEvent(label, QEvent(QEvent.Type.Leave))
    assert not label.textInteractionFlags() & selectable


def test_new_reports_reach_the_panes_one_per_turn_of_the_event_loop(outlier_window,
                                                                     wait_results):
    """Four pane updates and repaints in a row kept the loop from timers and input for
    100-300 ms on a load; each pane gets a turn of its own, and all_shown waits for the
    last."""
    win, st = outlier_window, outlier_window.state
    st.update_settings(bits=5)
    st.compute()  # all four reports at once, as at 1M elements
    fresh_per_turn: list[int] = []
    win.pane_timer.timeout.connect(lambda: fresh_per_turn.append(
        sum(pane.report is st.results[key] for key, pane in win.panes.items())))
    assert not any(pane.report is st.results[key] for key, pane in win.panes.items())
    assert not win.all_shown()
    wait_results(win)
    # one more pane per turn at most (the window's own compute job may land meanwhile with
    # equal reports, which the panes then show again), all four at the end
    steps = np.diff([0, *fresh_per_turn])
    assert fresh_per_turn[-1] == 4 and steps.max() == 1, fresh_per_turn
    assert shown(win) == engine_texts(st)


class _Paints(QObject):
    """Counts the paints of each pane's plots."""

    def __init__(self, win) -> None:
        super().__init__()
        self.counts = dict.fromkeys(win.panes, 0)
        self._keys = {}
        for key, pane in win.panes.items():
            viewport = pane.graphics.viewport()
            self._keys[viewport] = key
            viewport.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.Paint and obj in self._keys:
            self.counts[self._keys[obj]] += 1
        return False

    def take(self) -> dict[str, int]:
        counts, self.counts = self.counts, dict.fromkeys(self.counts, 0)
        return counts


def _load_outliers(st) -> None:
    """A 64x1000 tensor with five large outliers, set as the window's tensor."""
    x = generate("outliers", (64, 1000), seed=7, count=5, magnitude=40.0)
    assert st.set_tensor(x, Source.generator("outliers", (64, 1000), 7, count=5,
                                             magnitude=40.0))


def test_each_pane_paints_once_per_change_and_twice_per_load(loaded_window, wait_results):
    """A pane's repaint is its turn's work: a pyqtgraph range or axis width applied mid-paint,
    or a linked pane that moved every other one, painted panes two to seven times each."""
    win, st = loaded_window, loaded_window.state
    paints = _Paints(win)
    _load_outliers(st)
    wait_results(win)
    QApplication.processEvents()
    assert all(1 <= n <= 2 for n in paints.take().values())  # the histogram, then the numbers
    for changes in ({"bits": 6}, {"method": "percentile", "percentile": 99.9},
                    {"rounding": "half_away"}):
        st.update_settings(**changes)
        wait_results(win)
        QApplication.processEvents()
        assert paints.take() == dict.fromkeys(win.panes, 1), changes


class _TurnPaints(QObject):
    """Records, for each paint of a pane's plots, numbers or field names, the pane, what was
    painted and the turn of the window's pane timer it came in (-1: outside any turn)."""

    def __init__(self, win) -> None:
        super().__init__()
        self.turn = -1
        self.in_turn = False
        self.paints: list[tuple[str, str, int]] = []
        self._what = {}
        for key, pane in win.panes.items():
            self._what[pane.graphics.viewport()] = (key, "plots")
            for value in pane.values.values():
                self._what[value] = (key, "number")
            for name in pane.labels.values():
                self._what[name] = (key, "name")
        for widget in self._what:
            widget.installEventFilter(self)
        show_next = win._show_next_pane

        def turn() -> None:
            self.turn += 1
            self.in_turn = True
            show_next()
            self.in_turn = False

        win.pane_timer.timeout.disconnect()
        win.pane_timer.timeout.connect(turn)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.Paint and obj in self._what:
            key, what = self._what[obj]
            self.paints.append((key, what, self.turn if self.in_turn else -1))
        return False


def test_a_turn_paints_what_changed_and_nothing_before_it(outlier_window, wait_results):
    """A pane's turn paints its plots and the numbers that changed, in that turn: greyed
    numbers turn back with the new ones, and the unchanged field names are not painted (the
    whole pane's repaint painted its two dozen labels every turn)."""
    win, st = outlier_window, outlier_window.state
    win._mark_stale(True)  # as after a slow computation
    QApplication.processEvents()
    paints = _TurnPaints(win)
    st.update_settings(bits=6)
    wait_results(win)
    QApplication.processEvents()
    assert not any(what == "name" for _, what, _ in paints.paints), paints.paints
    for key in win.panes:
        plots = [turn for k, what, turn in paints.paints if k == key and what == "plots"]
        numbers = {turn for k, what, turn in paints.paints if k == key and what == "number"}
        assert len(plots) == 1 and plots[0] >= 0, (key, paints.paints)
        assert numbers == {plots[0]}, (key, paints.paints)


def test_a_first_load_paints_the_plots_on_turns_only(make_window, wait_results, qtbot):
    """The first tensor in a window: every paint of a pane's plots comes in one of its turns.
    The zero-point label set up its transform in its first paint, which moved it and asked
    for a second paint of the plots right after the turn (6-20 ms of GUI thread each at 16M,
    while the engine holds the GIL for the next reports)."""
    win = make_window()
    st = win.state
    qtbot.waitExposed(win)
    qtbot.wait(50)  # the window's own first paint
    paints = _TurnPaints(win)
    _load_outliers(st)
    wait_results(win)
    QApplication.processEvents()
    outside = [(key, what) for key, what, turn in paints.paints if what == "plots" and turn < 0]
    assert not outside, [p for p in paints.paints if p[1] == "plots"]


def _record_calls(paints: _TurnPaints, win, *names: str) -> list[tuple[str, str, int]]:
    """``(pane, method, turn)`` for each call of the panes' methods ``names`` (the turn of
    ``paints``, -1 outside any turn)."""
    calls: list[tuple[str, str, int]] = []
    for key, pane in win.panes.items():
        for name in names:
            method = getattr(pane, name)

            def call(*args, _key=key, _name=name, _method=method, **kwargs):
                calls.append((_key, _name, paints.turn if paints.in_turn else -1))
                return _method(*args, **kwargs)

            setattr(pane, name, call)
    return calls


def test_a_panes_data_and_its_paint_come_on_separate_turns(outlier_window, wait_results):
    """A pane's new data (a new tensor's histogram, a report's numbers and grid) is set on
    one turn and painted on the next: together, 10-15 ms of GUI thread at 16M elements, and
    two to four times that beside a busy process."""
    win, st = outlier_window, outlier_window.state
    paints = _TurnPaints(win)
    calls = _record_calls(paints, win, "set_report", "set_overview")
    _load_outliers(st)
    wait_results(win)
    st.update_settings(bits=6)
    wait_results(win)
    QApplication.processEvents()
    data_turns = {(key, turn) for key, _, turn in calls}
    paint_turns = {(key, turn) for key, what, turn in paints.paints if what == "plots"}
    assert {name for _, name, _ in calls} == {"set_report", "set_overview"}
    assert all(turn >= 0 for _, turn in data_turns | paint_turns), (calls, paints.paints)
    assert not data_turns & paint_turns, (calls, paints.paints)
    assert {key for key, _ in paint_turns} == set(win.panes)


def test_numbers_turn_from_grey_on_their_panes_turns(outlier_window, wait_results):
    """Greyed numbers turn back on their pane's turn, not all four when the results arrive
    (a style sheet on each of a pane's number labels: ~1 ms a pane, four in the stretch that
    also took the results in)."""
    win, st = outlier_window, outlier_window.state
    win._mark_stale(True)  # as after a slow computation
    paints = _TurnPaints(win)
    calls = _record_calls(paints, win, "set_stale", "set_report")
    st.update_settings(bits=6)
    wait_results(win)
    QApplication.processEvents()
    for key, pane in win.panes.items():
        ungrey = [turn for k, name, turn in calls if k == key and name == "set_stale"]
        report = [turn for k, name, turn in calls if k == key and name == "set_report"]
        assert len(ungrey) == 1 and ungrey == report, (key, calls)
        assert pane.values["sqnr_db"].styleSheet() == ""


def test_numbers_shown_from_a_partial_result_are_not_greyed(loaded_window, wait_results,
                                                           qtbot, monkeypatch):
    """When the wait for the other panes grows long, only they are greyed: the panes that
    show a partial result's numbers show the current settings' (greyed, they said the
    opposite, and the complete result then spent a style sheet per label to undo it)."""
    win = loaded_window
    gate = _hold_per_channel_reports(win, monkeypatch, wait_results)
    win.state.update_settings(bits=5)
    tensor_panes = [p for p in PANES if p.endswith("/tensor")]
    qtbot.waitUntil(lambda: all(win.panes[p].report.params.bits == 5 for p in tensor_panes)
                    and not win._queued_panes, timeout=5000)
    qtbot.waitUntil(win.computing_label.isVisible, timeout=5000)  # the wait grew long
    greyed = {p: "color" in win.panes[p].values["sqnr_db"].styleSheet() for p in PANES}
    gate.set()
    wait_results(win)
    assert greyed == {p: not p.endswith("/tensor") for p in PANES}
    assert all(pane.values["sqnr_db"].styleSheet() == "" for pane in win.panes.values())


def test_the_stale_timer_leaves_current_numbers_alone(loaded_window):
    """Every pane has the current settings' numbers when the stale timer fires (it was
    started before they came): nothing is greyed and the status bar does not say otherwise."""
    win = loaded_window
    win.stale_timer.timeout.emit()
    assert not win.computing_label.isVisible()
    assert all(pane.values["sqnr_db"].styleSheet() == "" for pane in win.panes.values())
