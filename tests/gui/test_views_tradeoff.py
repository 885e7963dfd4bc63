"""The trade-off view: its curves are the engine's reports, and the marker and the panes stay in
sync both ways (drag -> manual clip -> panes; other controls -> marker), without feedback."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from gui_measure import rich_text_lines

from quantscope.core import analyze
from quantscope.core.labs.explain import clip_threshold
from quantscope.core.stats.prepared import prepare
from quantscope.gui.views.tradeoff import TradeoffView, sweep_points
from quantscope.state import ExplorerState


def one_outlier(n: int = 40_000) -> np.ndarray:
    x = np.random.default_rng(3).normal(size=n).astype(np.float32)
    x[9] = 24.8
    return x


def _computed_state() -> ExplorerState:
    st = ExplorerState()
    x = one_outlier()
    st.set_tensor(x, prepared=prepare(x))
    st.compute()
    return st


def _shown_view(state, wait_until) -> TradeoffView:
    v = TradeoffView(state)
    v.resize(1000, 450)
    v.show()
    wait_until(lambda: v.plots["asymmetric"].sweep is not None, timeout=20_000)
    return v


@pytest.fixture
def state() -> ExplorerState:
    return _computed_state()


@pytest.fixture
def view(qtbot, state) -> TradeoffView:
    v = _shown_view(state, qtbot.waitUntil)
    qtbot.addWidget(v)
    yield v
    v.job.shutdown()


@pytest.fixture(scope="module")
def _module_views(qapp, request):
    """``open(name)`` -> ``(view, state)``: one view per ``name`` for all the tests of this
    file that ask for it (opening one costs a preparation and a sweep), closed at the end."""
    from pytestqt.qtbot import QtBot

    wait_until = QtBot(request).waitUntil
    views: dict[str, tuple[TradeoffView, ExplorerState]] = {}

    def open_view(name: str) -> tuple[TradeoffView, ExplorerState]:
        if name not in views:
            st = _computed_state()
            views[name] = _shown_view(st, wait_until), st
        return views[name]

    yield open_view
    for v, _ in views.values():
        v.job.shutdown()
        v.close()


@pytest.fixture
def opened(_module_views) -> tuple[TradeoffView, ExplorerState]:
    """``(view, state)`` as the view opened, shared by the tests that only read them."""
    return _module_views("read only")


@pytest.fixture
def moved_view(_module_views) -> TradeoffView:
    """A view shared by the tests that move its lines, ranges and size, each all of them."""
    return _module_views("lines moved")[0]


@pytest.fixture
def themed_view(_module_views) -> TradeoffView:
    """A view shared by the tests that set its theme and size, each both of them."""
    return _module_views("themed")[0]


def test_opening_does_not_change_the_settings(opened):
    view, state = opened
    # the sweep's arrival moves and clamps the markers; none of that may become a manual clip
    assert state.settings.method == "minmax"
    assert state.settings.manual_clip is None
    sym = state.results["symmetric/tensor"]
    assert view.plots["symmetric"].current.value() == pytest.approx(clip_threshold(sym.params))
    assert clip_threshold(sym.params) == pytest.approx(24.8, rel=1e-6)


@pytest.mark.parametrize("scheme", ["symmetric", "asymmetric"])
def test_curves_are_the_engine_reports(opened, scheme):
    view, state = opened
    sweep = view.plots[scheme].sweep
    assert sweep.thresholds.size >= 128
    x = state.tensor
    from quantscope.core import params_from_range

    for k in (0, 57, sweep.thresholds.size - 1):
        lo, hi = sweep.window(sweep.thresholds[k])
        rep = analyze(x, params_from_range(lo, hi, symmetric=scheme == "symmetric"))
        assert rep.mse == pytest.approx(sweep.mse[k], rel=1e-9)
        assert rep.clipping_mse == pytest.approx(sweep.clipping_mse[k], rel=1e-9, abs=1e-300)
    xs, _ = view.plots[scheme].total.getData()
    np.testing.assert_array_equal(xs, sweep.thresholds)
    assert view.plots[scheme].best_line.value() == sweep.best_threshold


def test_dragging_the_marker_sets_the_manual_clip_and_the_panes_follow(view, state, qtbot):
    sweep = view.plots["symmetric"].sweep
    k = 40
    t = float(sweep.thresholds[k])
    with qtbot.waitSignal(state.settings_changed, timeout=2000):
        view.set_threshold(t)
    assert state.settings.method == "manual"
    assert state.settings.manual_clip == sweep.window(t)
    # the other scheme's marker shows the same threshold at once
    assert view.plots["asymmetric"].current.value() == pytest.approx(t)
    results = state.compute()
    sym = results["symmetric/tensor"]
    assert clip_threshold(sym.params) == pytest.approx(t, rel=1e-6)
    # the pane's numbers are the sweep's point at that threshold, exactly
    assert sym.mse == pytest.approx(sweep.mse[k], rel=1e-12)
    assert sym.sqnr_db == pytest.approx(sweep.sqnr_db[k], rel=1e-12)
    asym = results["asymmetric/tensor"]
    assert asym.mse == pytest.approx(view.plots["asymmetric"].sweep.mse[k], rel=1e-12)
    # and the marker stays where the user put it (no echo)
    assert view.plots["symmetric"].current.value() == pytest.approx(t, rel=1e-6)


def test_other_controls_move_the_marker_without_feedback(view, state, qtbot):
    changes: list[int] = []
    state.settings_changed.connect(lambda: changes.append(1))
    # the window's clip-window control (a range slider) sets an asymmetric window
    state.update_settings(method="manual", manual_clip=(-1.0, 3.0))
    results = state.compute()
    assert len(changes) == 1  # the view did not answer with a settings change of its own
    assert state.settings.manual_clip == (-1.0, 3.0)
    for scheme in ("symmetric", "asymmetric"):
        want = clip_threshold(results[f"{scheme}/tensor"].params)
        assert view.plots[scheme].current.value() == pytest.approx(want)
        assert want == pytest.approx(3.0, rel=1e-2)
    assert "gives" in view.summary.text()


def test_rules_change_recomputes_the_sweep_but_the_clip_does_not(view, state, qtbot):
    first = view.plots["symmetric"].sweep
    view.set_threshold(5.0)
    state.compute()
    qtbot.wait(50)
    assert view.plots["symmetric"].sweep is first  # the clip is what the sweep varies
    state.update_settings(bits=4)
    qtbot.wait(50)
    assert view.plots["symmetric"].sweep is first  # the panes are served first
    state.compute()
    qtbot.waitUntil(lambda: view.plots["symmetric"].sweep is not first, timeout=20_000)
    four = view.plots["symmetric"].sweep
    assert four.mse[-1] > 100 * first.mse[-1]  # 4 bits: 16x the step, 256x the rounding MSE


def test_a_picture_does_not_ask_to_be_dragged(qtbot, state):
    """The window's view invites a drag; the same view drawn as a picture (``qs.figure``)
    names what its marks are instead."""
    live = TradeoffView(state)
    still = TradeoffView(state, still=True)
    for v in (live, still):
        qtbot.addWidget(v)
        v.resize(1000, 450)
        v.show()
    qtbot.waitUntil(lambda: all(v.plots["asymmetric"].sweep is not None for v in (live, still)),
                    timeout=20_000)
    assert "Drag the orange line" in live.summary.text()
    assert "Drag" not in still.summary.text()
    assert "orange line is the clip shown" in still.summary.text()
    for v in (live, still):
        v.job.shutdown()


def test_hidden_view_computes_nothing_until_shown(qtbot, state):
    v = TradeoffView(state)
    qtbot.addWidget(v)
    qtbot.wait(50)
    assert not v.job.busy and v.plots["symmetric"].sweep is None
    v.show()
    qtbot.waitUntil(lambda: v.plots["symmetric"].sweep is not None, timeout=20_000)
    v.job.shutdown()


def test_sweep_points_budget():
    assert sweep_points(10**8, prepared=True) == 128
    assert sweep_points(1000, prepared=False) == 128
    assert sweep_points(16_000_000, prepared=False) == 24


def test_narrow_tab_shows_one_scheme_at_a_time(view, qtbot):
    view.resize(1200, 450)
    qtbot.wait(10)
    assert view.scheme.isHidden()
    assert all(w.isVisible() for w in view.widgets.values())
    view.resize(420, 800)
    qtbot.waitUntil(lambda: not view.scheme.isHidden(), timeout=2000)
    assert view.widgets["symmetric"].isVisible() and not view.widgets["asymmetric"].isVisible()
    view.scheme.setCurrentText("asymmetric")
    assert view.widgets["asymmetric"].isVisible() and not view.widgets["symmetric"].isVisible()
    assert view.summary.text().startswith("<b>asymmetric</b>")
    assert "<b>symmetric</b>" not in view.summary.text()


@pytest.mark.parametrize("scheme", ["symmetric", "asymmetric"])
def test_best_marks_the_mse_optimum_the_panes_use(view, state, scheme):
    """"best" is method="mse"'s optimum (what the panes show with that method), never worse
    than any point of the curve."""
    sweep = view.plots[scheme].sweep
    sym = scheme == "symmetric"
    state.update_settings(method="mse")
    state.compute()
    pane = state.results[f"{scheme}/tensor"]
    assert sweep.optimum is not None
    np.testing.assert_array_equal(sweep.optimum.scale, pane.params.scale)
    np.testing.assert_array_equal(sweep.optimum.zero_point, pane.params.zero_point)
    assert sweep.best_mse == pytest.approx(analyze(state.tensor, pane.params).mse, rel=1e-9)
    assert sweep.best_mse <= sweep.mse.min() * (1 + 1e-9)
    assert view.plots[scheme].best_line.value() == pytest.approx(sweep.best_threshold)
    assert sym == sweep.optimum.symmetric


@pytest.mark.parametrize("where", [0.02, 0.3, 0.7, 0.98])
def test_line_labels_stay_in_view_wherever_the_lines_are(moved_view, qtbot, where):
    """A label sits on the side of its line with room, after the line moves, the x range moves
    and the plot resizes: each of those alone once left "best" half outside the plot."""
    view = moved_view
    scheme = view.plots["asymmetric"]
    box = scheme.plot.getViewBox()
    for width in (1000, 640):
        view.resize(width, 450)
        qtbot.wait(20)
        for x0, x1 in ((0.0, 10.0), (5.0, 25.0)):
            box.setXRange(x0, x1, padding=0)
            for line in (scheme.best_line, scheme.current):
                line.setValue(x0 + where * (x1 - x0))
            qtbot.wait(20)
            rect = box.sceneBoundingRect()
            for line in (scheme.best_line, scheme.current):
                label = line.label.sceneBoundingRect()
                assert rect.left() - 1 <= label.left() and label.right() <= rect.right() + 1, (
                    width, (x0, x1), where, line.label.toPlainText())




def test_a_narrow_summary_wraps_between_clauses(view, qtbot):
    """However narrow the tab (wide enough for a clause), each "clip … gives …" and "best …
    gives …" reads on a line of its own or beside the other, never cut inside ("≈" / "20.8",
    "25.8" / "dB"), and the summary names only the scheme on show."""
    # from a width where the longest clause fits a line (in whatever font the process's
    # theme left: a presentation's is larger)
    clause = "asymmetric: clip |x| ≤ 24.8 gives 29.86 dB;"
    start = int(1.3 * view.summary.fontMetrics().horizontalAdvance(clause)) + 20
    for width in range(start, max(1000, start + 400), 8):
        view.resize(width, 800)
        qtbot.wait(1)
        lines = rich_text_lines(view.summary)
        schemes = lines[:next(i for i, line in enumerate(lines) if line.startswith("Drag"))]
        for line in schemes:
            assert line.endswith((";", "dB")), (width, lines)
        shown = [name for name, w in view.widgets.items() if w.isVisible()]
        assert len(schemes) == len(shown) * (2 if view._vertical else 1), (width, lines)


@pytest.mark.parametrize("size", [(1260, 560), (1000, 450)])
def test_the_clip_label_sits_above_every_curve(themed_view, qtbot, size):
    """At a projector's text size the clip line's label, near the top of the plot, stays
    above the curves: over them it hid the top of the SQNR curve."""
    view = themed_view
    from quantscope.gui.theme import resolve

    view.apply_theme(resolve(True, True, 720))
    view.resize(*size)
    for name, scheme in view.plots.items():
        qtbot.wait(50)
        view.grab()
        label = scheme.current.label.sceneBoundingRect()
        for item, box in ((scheme.sqnr, scheme.sqnr_box),
                          (scheme.total, scheme.plot.getViewBox()),
                          (scheme.rounding, scheme.plot.getViewBox()),
                          (scheme.clipping, scheme.plot.getViewBox())):
            x, y = item.getData()
            ok = np.isfinite(y)
            top = min(box.mapViewToScene(pg.Point(float(a), float(b))).y()
                      for a, b in zip(x[ok], y[ok], strict=True))
            assert label.bottom() <= top, (name, item.name(), label.bottom(), top)


@pytest.mark.parametrize("size", [(1260, 560), (1000, 450)])
def test_mse_labels_only_where_the_curves_are(themed_view, qtbot, size):
    """Every labelled tick of the MSE axis lies inside the curves' range of MSE: a decade
    above the largest MSE was labelled in the empty lane kept for the clip line's label."""
    view = themed_view
    from quantscope.gui.theme import resolve

    view.apply_theme(resolve(False, True, 720))
    view.resize(*size)
    qtbot.wait(50)
    view.grab()
    for name, scheme in view.plots.items():
        # on the log axis the items hold log10 of the MSE
        values = np.concatenate([scheme.rounding.getData()[1], scheme.clipping.getData()[1],
                                 scheme.total.getData()[1]])
        values = values[np.isfinite(values)]
        axis = scheme.plot.getAxis("left")
        lo, hi = axis.range
        shown = [(v, text) for level in axis._tickLevels for v, text in level
                 if text and lo <= v <= hi]
        assert len(shown) >= 2, (name, shown)
        for v, text in shown:
            assert values.min() - 1e-9 <= v <= values.max() + 1e-9, (name, text, v,
                                                                     values.min(), values.max())


def test_thresholds_below_one_are_labelled_as_they_are(qtbot):
    """A weight's thresholds are fractions: the axis labels them as such (pyqtgraph's
    automatic prefix drew 0 ... 700 and put "(x0.001)" on a label too narrow to show it)."""
    x = (np.random.default_rng(5).standard_normal(40_000) * 0.1).astype(np.float32)
    st = ExplorerState()
    st.set_tensor(x, prepared=prepare(x))
    st.compute()
    v = TradeoffView(st)
    qtbot.addWidget(v)
    v.resize(1000, 450)
    v.show()
    qtbot.waitUntil(lambda: v.plots["symmetric"].sweep is not None, timeout=20_000)
    try:
        qtbot.wait(50)
        v.grab()
        for name, scheme in v.plots.items():
            axis = scheme.plot.getAxis("bottom")
            lo, hi = axis.range
            shown = [float(text) for spacing, values in
                     axis.tickValues(lo, hi, axis.geometry().width())
                     for text in axis.tickStrings(values, axis.autoSIPrefixScale, spacing)
                     if text]
            # the labels read as the axis's own values: none beyond its end (0.5 here)
            assert shown and max(shown) <= hi + 1e-9 and hi < 1, (name, shown, hi)
    finally:
        v.job.shutdown()


def test_old_curves_fade_and_lose_their_best_point_while_the_new_sweep_computes(view, state,
                                                                               qtbot):
    plot = view.plots["symmetric"]
    first = plot.sweep
    assert plot.total.opacity() == 1.0 and plot.best_dot.isVisible()
    state.update_settings(bits=4)
    state.compute()
    qtbot.waitUntil(lambda: plot.sweep is not first or plot.total.opacity() < 1.0,
                    timeout=20_000)
    if plot.sweep is first:  # caught computing: the curves on screen are the 8-bit ones
        assert plot.total.opacity() < 0.5 and plot.rounding.opacity() < 0.5
        assert not plot.best_dot.isVisible() and not plot.best_line.isVisible()
        qtbot.waitUntil(lambda: plot.sweep is not first, timeout=20_000)
    assert plot.total.opacity() == 1.0 and plot.best_dot.isVisible()
    assert plot.best_line.isVisible()
    view.show_computing()  # whatever the timing, computing fades every scheme's curves
    assert all(p.total.opacity() < 0.5 and not p.best_line.isVisible()
               for p in view.plots.values())


def test_old_curves_fade_the_moment_the_settings_change(view, state, qtbot):
    """Not only once the new sweep starts (after the panes' results and a rest): the panes'
    new numbers and the marker on the new clip line come first, and must not sit over curves
    of the old settings as if they matched."""
    plots = list(view.plots.values())
    assert all(p.total.opacity() == 1.0 and p.best_dot.isVisible() for p in plots)
    state.update_settings(bits=4)  # nothing computed yet: the state's results are cleared
    assert all(p.total.opacity() < 0.5 and p.sqnr.opacity() < 0.5 for p in plots)
    assert not any(p.best_dot.isVisible() or p.best_line.isVisible() for p in plots)
    state.compute()
    qtbot.waitUntil(lambda: all(p.total.opacity() == 1.0 for p in plots), timeout=20_000)
    assert all(p.best_dot.isVisible() for p in plots)
    state.update_settings(method="percentile")  # the sweep varies the range: nothing fades
    assert all(p.total.opacity() == 1.0 for p in plots)


def test_on_a_first_run_the_curves_come_first_and_the_best_only_when_known(qtbot, state,
                                                                           monkeypatch):
    """The twins serve the curves while the MSE search is compiled in another process: the
    curves are drawn with no best point and a summary that says it is being computed; the
    best appears once the compiled loops are in."""
    import threading

    from quantscope.core.stats import loop_twins
    from quantscope.state import compile_ahead

    def never_wait():
        raise AssertionError("the view waited for a loop without a twin")

    ready = threading.Event()
    monkeypatch.setattr(compile_ahead, "compiled_ready", ready)
    loop_twins.install(until=never_wait)
    v = TradeoffView(state)
    qtbot.addWidget(v)
    try:
        v.resize(1000, 450)
        v.show()
        qtbot.waitUntil(lambda: v.plots["asymmetric"].sweep is not None, timeout=60_000)
        for plot in v.plots.values():
            assert plot.optimum_pending and plot.sweep.optimum is None
            assert not plot.best_dot.isVisible() and not plot.best_line.isVisible()
        assert v.summary.text().count("best: computing the optimum") == 2
        assert "best |x|" not in v.summary.text() and "dot" not in v.summary.text()
        assert v.job.busy
        assert all("best_threshold" not in d for d in v.export_data().values())
        loop_twins.remove()  # the compile-ahead process's word
        ready.set()
        qtbot.waitUntil(lambda: not v.plots["asymmetric"].optimum_pending, timeout=60_000)
    finally:
        loop_twins.remove()
        v.job.shutdown()
    for plot in v.plots.values():
        assert plot.sweep.optimum is not None
        assert plot.best_dot.isVisible() and plot.best_line.isVisible()
    assert v.summary.text().count("best |x| ≈") == 2 and "computing" not in v.summary.text()
    assert "the dot marks the best" in v.summary.text()
