"""The comparison layout in the window: the Formats tab's controls set a format per pane, each
pane shows the engine's report and draws its own grid, and the Formats view plots every format
with the panes' formats ringed."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, QRectF

from quantscope.core import analyze, choose_qparams
from quantscope.core.formats.gguf_types import GGUF_TYPES
from quantscope.gui.numbers import bucket_grid
from quantscope.state import PANES, ExplorerState, Source
from quantscope.state.formats import CHOICES, DEFAULT_COMPARISON


def _load(win, qtbot, wait_results, settings=None):
    x = np.random.default_rng(3).standard_t(4, size=(64, 256)).astype(np.float32)
    assert win.state.set_tensor(x, Source("array", "t4", axis=0), settings=settings)
    wait_results(win)
    return x


@pytest.fixture(scope="module")
def one_window(shared_window):
    """One window without views for the tests that change only its settings, and the
    settings a new window starts with."""
    win = shared_window(ExplorerState())
    return win, win.state.settings


@pytest.fixture
def loaded(one_window, qtbot, wait_results):
    """``(window, x)``: the one window showing the t4 tensor of :func:`_load` on a new
    window's settings (the same load as a new window's)."""
    win, fresh = one_window
    return win, _load(win, qtbot, wait_results, settings=fresh)


@pytest.fixture(scope="module")
def one_views_window(shared_window):
    """One window with the views for the tests that change only its settings, the tab shown
    and the Formats view's size (the last of them), and the settings a new window starts
    with."""
    win = shared_window(ExplorerState(), install_views=True)
    return win, win.state.settings


@pytest.fixture
def views_loaded(one_views_window, qtbot, wait_results):
    """:func:`loaded` for the window with the views, its first tab shown again (as in a new
    window)."""
    win, fresh = one_views_window
    win.views.setCurrentIndex(0)
    return win, _load(win, qtbot, wait_results, settings=fresh)


def test_controls_switch_the_panes_to_formats(views_loaded, qtbot, wait_results):
    win, x = views_loaded
    fc = win.format_controls
    fc.compare.setChecked(True)
    assert win.state.settings.formats == DEFAULT_COMPARISON
    wait_results(win)
    titles = [win.panes[p].title.text() for p in PANES]
    assert titles[2] == "MXFP4 · blocks of 32"
    assert win.panes[PANES[2]].heading() == "MXFP4 · blocks of 32 · E8M0 scales"
    mx = win.panes["asymmetric/tensor"].report
    assert mx.sqnr_db == analyze(x, choose_qparams(x, format="mxfp4")).sqnr_db
    fc.menus[1].setCurrentIndex(CHOICES.index("nvfp4"))
    assert win.state.settings.formats[1] == "nvfp4"
    qtbot.waitUntil(lambda: win.panes["symmetric/channel"].title.text().startswith("NVFP4"),
                    timeout=30_000)
    wait_results(win)
    nv = win.panes["symmetric/channel"].report
    assert nv.sqnr_db == analyze(x, choose_qparams(x, format="nvfp4")).sqnr_db
    fc.compare.setChecked(False)
    assert win.state.settings.formats is None
    wait_results(win)
    assert win.panes["symmetric/tensor"].title.text() == "Symmetric · per-tensor"


def test_fp8_pane_draws_every_representable_value(loaded, wait_results):
    win, x = loaded
    win.state.update_settings(formats=("fp8_e4m3/tensor", *DEFAULT_COMPARISON[1:]))
    wait_results(win)
    rep = win.panes["symmetric/tensor"].report
    g = bucket_grid(rep)
    scale = float(rep.params.scale)
    assert g.boundaries.size == 253
    assert np.allclose(g.boundaries, rep.params.values * scale)
    gaps = np.diff(g.boundaries)
    assert gaps.max() / gaps[gaps > 0].min() > 1000  # not uniform: fine near 0, wide at ends
    assert g.window[1] == (448 + 16) * scale
    assert np.abs(x).max() <= g.window[1]


def test_formats_view_plots_every_format_and_rings_the_panes(views_loaded, qtbot,
                                                              wait_results):
    win, _ = views_loaded
    view = win.views_controller.formats
    win.views.setCurrentWidget(win.views_controller.bits_and_formats)
    win.state.update_settings(formats=DEFAULT_COMPARISON)
    wait_results(win)
    qtbot.waitUntil(view.is_ready, timeout=60_000)
    specs = {p.spec for p in view.data}
    assert set(CHOICES) - set(GGUF_TYPES) <= specs  # GGUF types: only those in a pane
    ringed = view.rings.getData()
    want = [p for p in view.data if p.spec in DEFAULT_COMPARISON]
    assert sorted(ringed[0].tolist()) == sorted(p.bits_per_element for p in want)
    assert "best 4-bit" in view.summary.text()


def test_a_hidden_formats_view_never_holds_up_a_screenshot(make_window, qtbot, wait_results):
    win = make_window(install_views=True)
    _load(win, qtbot, wait_results)
    assert not win.views_controller.formats.isVisible()
    qtbot.waitUntil(win.views_ready, timeout=30_000)
    assert win.views_controller.formats.data == []  # it computed nothing while hidden


def test_keys_and_headline_name_what_the_lines_are(loaded, wait_results):
    win, _ = loaded
    assert "code grid" in win.panes["symmetric/tensor"].key_label.text()
    assert "quantized to int8 four ways" in win.headline.text()
    win.state.update_settings(formats=("fp8_e4m3/tensor", "int8/channel", "mxfp4",
                                       "fp8_e5m2/channel"))
    wait_results(win)
    keys = [win.panes[p].key_label.text() for p in PANES]
    assert keys[0].endswith("representable values")
    assert keys[1].endswith("median channel's grid")
    assert keys[2].endswith("median block's grid")
    assert keys[3].endswith("median channel's grid")
    assert "representable values" in win.panes[PANES[3]].key_label.toolTip()
    assert "four number formats" in win.headline.text()


def test_window_fits_1280x720_and_shows_the_views_when_wider(app_window, qtbot):
    """At 1280x720 (a laptop, a projector) the window is no wider than the screen: the
    views give way to the panes, and come back when the window is wide enough for both."""
    win = app_window(1000)
    win.state.update_settings(formats=DEFAULT_COMPARISON)
    qtbot.waitUntil(win.all_shown, timeout=30_000)
    for width, height in ((1280, 720), (1920, 1080), (1280, 720)):
        win.resize(width, height)
        qtbot.waitUntil(lambda w=width, h=height: (win.width(), win.height()) == (w, h),
                        timeout=5_000)
        wide = width >= 1600
        qtbot.waitUntil(lambda wide=wide: win.views.isVisible() == wide, timeout=5_000)
        assert win.minimumSizeHint().width() <= 1280
        if wide:  # the room is made once the layout has settled (gui/compact.py)
            qtbot.waitUntil(lambda: win.views.width() >= win.views.minimumSizeHint().width(),
                            timeout=5_000)


def test_metrics_file_each_format_under_its_name_with_the_pane_showing_it(loaded,
                                                                          wait_results):
    """In the comparison layout ``--metrics`` keys the numbers by format, as ``report
    --format --json`` does: NVFP4 under "nvfp4" with its bits per element, never under the
    int pane's key "symmetric/tensor"."""
    from quantscope.core.formats.catalog import bits_per_element

    win, x = loaded
    specs = ("nvfp4", "int8/channel", "mxfp4", "fp8_e4m3/tensor")
    win.state.update_settings(formats=specs)
    wait_results(win)
    doc = win.metrics()
    assert "schemes" not in doc and set(doc["formats"]) == set(specs)
    nv = doc["formats"]["nvfp4"]
    want = analyze(x, choose_qparams(x, format="nvfp4"))
    assert nv["format"] == "nvfp4" and nv["pane"] == "symmetric/tensor"
    assert nv["sqnr_db"] == want.sqnr_db and nv["mse"] == want.mse
    # 4 bits, an 8-bit scale per 16 elements, one fp32 scale for the tensor
    assert nv["bits_per_element"] == bits_per_element(want.params, x.size) == 4.5 + 32 / x.size
    assert doc["formats"]["fp8_e4m3/tensor"]["format"] == "fp8_e4m3"
    assert win.state.describe()["formats"] == doc["formats"]


def test_names_sit_beside_their_points_in_a_narrow_tab(views_loaded, qtbot):
    """At 1600 px the Bit width tab is a narrow column: two dozen names piled into one block
    in the plot's top corner, far from their points. Now each name sits beside its point,
    and where they cannot all, the panes' formats and the best of each tier are named."""
    from quantscope.gui.views.formats import MAX_BLOCK_LINES, _short

    win, _ = views_loaded
    view = win.views_controller.formats
    win.views.setCurrentWidget(win.views_controller.bits_and_formats)
    qtbot.waitUntil(view.is_ready, timeout=60_000)
    qtbot.wait(50)
    box = view.plot.getViewBox()
    assert box.width() < 400  # the narrow column beside the panes
    assert view.labels
    where = {_short(p.spec): box.mapViewToScene(QPointF(p.bits_per_element, p.sqnr_db))
             for p in view.data}
    for label in view.labels:
        lines = label.textItem.toPlainText().split("\n")
        assert len(lines) <= MAX_BLOCK_LINES, lines
        rect = label.mapRectToScene(label.boundingRect())
        near = [spot for name, spot in where.items() if name == lines[0].split()[0]]
        assert any(abs(spot.y() - rect.center().y()) < 40 and
                   (abs(spot.x() - rect.left()) < 60 or abs(spot.x() - rect.right()) < 60)
                   for spot in near), (lines, rect)


def test_format_names_never_cover_each_other(views_loaded, qtbot):
    """At a laptop's size the Formats plot is ~200 px tall: the names of the FP8 and MX
    variants around 8 bits, grouped by distance in bits and dB, printed over each other.
    Every name is shown, or where they would pile up in blocks the panes' formats and the best
    of each tier are; each block of names lies inside the plot, and no two overlap."""
    from quantscope.gui.views.formats import _short

    win, _ = views_loaded
    view = win.views_controller.formats
    win.views.setCurrentWidget(win.views_controller.bits_and_formats)
    for size in ((760, 260), (1100, 420)):
        view.resize(*size)
        qtbot.waitUntil(lambda: view.is_ready() and bool(view.data), timeout=60_000)
        qtbot.wait(50)
        view.grab()
        box = view.plot.getViewBox().sceneBoundingRect()
        rects = [label.sceneBoundingRect() for label in view.labels]
        names = [name for label in view.labels for line in label.textItem.toPlainText()
                 .splitlines() for name in line.split()]
        shown = {_short(p.spec) for p in view.data if np.isfinite(p.sqnr_db)}
        key = {_short(p.spec) for p in view.data
               if np.isfinite(p.sqnr_db) and p.spec in view._key_specs}
        assert key and sorted(names) in (sorted(shown), sorted(key)), (size, names)
        for i, a in enumerate(rects):
            assert box.adjusted(-1, -1, 1, 1).contains(a), (size, a, box)
            for b in rects[i + 1:]:
                assert not a.intersects(b), (size, a, b)


@pytest.mark.parametrize("dark", [False, True])
def test_format_names_never_cover_a_point(views_loaded, qtbot, dark):
    """The names leave every format's point in view, the points of formats left unnamed too
    (at 1920x1080 in the dark theme "nvfp4" sat over the point of another NV format): no
    label's text covers the square of any point's symbol."""
    from quantscope.gui.theme import current_theme

    win, _ = views_loaded
    win.dark_action.setChecked(dark)
    view = win.views_controller.formats
    win.views.setCurrentWidget(win.views_controller.bits_and_formats)
    try:
        for size in ((760, 260), (1100, 420), (620, 520), (900, 700)):
            view.resize(*size)
            qtbot.waitUntil(lambda: view.is_ready() and bool(view.data), timeout=60_000)
            qtbot.wait(50)
            view.grab()
            box = view.plot.getViewBox()
            radius = view.points["int"].opts["size"] / 2
            points = [box.mapViewToScene(QPointF(p.bits_per_element, p.sqnr_db))
                      for p in view.data if np.isfinite(p.sqnr_db)]
            for label in view.labels:
                margin = label.textItem.document().documentMargin()
                text = label.sceneBoundingRect().adjusted(margin, margin, -margin, -margin)
                for at in points:
                    dot = QRectF(at.x() - radius, at.y() - radius, 2 * radius, 2 * radius)
                    assert not text.intersects(dot), (size, current_theme().dark,
                                                      label.textItem.toPlainText(), at)
    finally:
        win.dark_action.setChecked(False)
