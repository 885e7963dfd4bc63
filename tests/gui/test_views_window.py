"""The views inside the real window: tabs, pane captions, the trade-off marker driving the live
panes through the window's worker, menus, and no thread left behind."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from gui_measure import cut_combo_texts

from quantscope.core.labs.captions import pane_captions
from quantscope.core.labs.explain import clip_threshold
from quantscope.state import PANES


@pytest.fixture(scope="module")
def opened(shared_app_window):
    """The window at 1600x900, its settings and its current view, as opened."""
    win = shared_app_window(900)
    return win, win.state.settings, win.views.currentIndex()


@pytest.fixture
def window(opened, qtbot):
    """The one window of these tests, put back as opened after each: captions shown, outside
    a talk, the views beside the panes, the first view, the settings it opened with."""
    win, settings, view = opened
    yield win
    win.views_controller.captions_action.setChecked(True)
    win.presentation_action.setChecked(False)
    win.views_controller.wide_action.setChecked(False)
    win.views.setCurrentIndex(view)
    win.state.update_settings(**{f.name: getattr(settings, f.name)
                                 for f in dataclasses.fields(settings)})
    qtbot.waitUntil(win.all_shown, timeout=30_000)
    assert win.state.settings == settings


def test_tabs_and_menus_are_installed(window):
    titles = [window.views.tabText(i) for i in range(window.views.count())]
    assert titles[:3] == ["Trade-off", "Channels", "Bit width"] or {
        "Trade-off", "Channels", "Bit width"} <= set(titles)
    vc = window.views_controller
    assert vc.captions_action.isChecked()
    file_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&File")
    texts = [a.text() for a in file_menu.actions()]
    assert "&Save session" in texts and "Save session &as…" in texts
    assert "Open session…" in texts and texts[-1] == "&Quit"


def test_pane_captions_follow_the_results_and_can_be_hidden(window, qtbot):
    st = window.state
    want = pane_captions(st.results, st.overview.min, st.overview.max)
    for pane in PANES:
        assert window.panes[pane].caption.text() == want[pane].text
        assert not window.panes[pane].caption.isHidden()
    window.views_controller.captions_action.setChecked(False)
    assert all(window.panes[p].caption.isHidden() for p in PANES)
    window.views_controller.captions_action.setChecked(True)
    st.update_settings(bits=4)
    qtbot.waitUntil(lambda: window.panes["symmetric/tensor"].report is not None
                    and window.panes["symmetric/tensor"].report.params.bits == 4,
                    timeout=20_000)
    want = pane_captions(st.results, st.overview.min, st.overview.max)
    assert window.panes["asymmetric/tensor"].caption.text() == want["asymmetric/tensor"].text


def test_dragging_the_marker_updates_the_live_panes(window, qtbot):
    view = window.views_controller.tradeoff
    window.views.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.plots["symmetric"].sweep is not None, timeout=30_000)
    assert window.state.settings.method == "minmax"  # opening the view changed nothing
    sweep = view.plots["symmetric"].sweep
    k = int(np.searchsorted(sweep.thresholds, 4.0))
    view.set_threshold(float(sweep.thresholds[k]))
    pane = window.panes["symmetric/tensor"]
    qtbot.waitUntil(lambda: pane.report is not None and pane.report.params.method == "manual",
                    timeout=20_000)
    assert clip_threshold(pane.report.params) == pytest.approx(sweep.thresholds[k], rel=1e-6)
    assert pane.report.sqnr_db == pytest.approx(sweep.sqnr_db[k], rel=1e-12)
    assert pane.displayed()["sqnr_db"] == f"{sweep.sqnr_db[k]:.2f} dB"
    # and back: the window's own controls move the marker
    window.state.update_settings(method="minmax")
    qtbot.waitUntil(lambda: pane.report is not None and pane.report.params.method == "minmax",
                    timeout=20_000)
    assert view.plots["symmetric"].current.value() == pytest.approx(
        clip_threshold(pane.report.params))


def test_views_full_width_and_back(window):
    vc = window.views_controller
    before = window.splitter.sizes()
    vc.set_views_wide(True)
    assert window.splitter.widget(0).isHidden() and vc.wide_action.isChecked()
    vc.set_views_wide(False)
    assert not window.splitter.widget(0).isHidden() and not vc.wide_action.isChecked()
    assert window.splitter.sizes()[0] > 0 and len(before) == 2


def test_export_commands_write_files(window, tmp_path):
    vc = window.views_controller
    vc.export_window(tmp_path / "w.svg")
    vc.export_view(tmp_path / "v.png", vc.bitwidth)
    vc.export_numbers(tmp_path / "n.json")
    vc.export_quantized("symmetric/channel", tmp_path / "q.npz")
    assert all((tmp_path / n).stat().st_size > 0 for n in ("w.svg", "v.png", "n.json", "q.npz"))


def test_presentation_mode_reaches_the_views(window):
    view = window.views_controller.bitwidth
    thin = view.curves["symmetric/tensor"].opts["pen"].widthF()
    window.presentation_action.setChecked(True)  # what F11 toggles
    try:
        assert view.curves["symmetric/tensor"].opts["pen"].widthF() > 2 * thin
        from quantscope.gui.theme import current_theme

        assert view.font().pointSize() == current_theme().font_pt  # the view's text too
        assert current_theme().font_pt >= 14
        assert window.statusBar().isHidden()
    finally:
        window.presentation_action.setChecked(False)
    assert view.curves["symmetric/tensor"].opts["pen"].widthF() == thin
    assert not window.statusBar().isHidden()


def test_export_a_single_pane(window, tmp_path):
    from PySide6.QtGui import QImage

    pane = window.panes["asymmetric/channel"]
    window.views_controller.export_view(tmp_path / "pane.png", pane)
    img = QImage(str(tmp_path / "pane.png"))
    assert (img.width(), img.height()) == (2 * pane.width(), 2 * pane.height())


@pytest.fixture(scope="module")
def wide_opened(shared_app_window, request):
    """The window at 1920x1080 outside a talk, the views beside the panes, and its first
    view."""
    from pytestqt.qtbot import QtBot

    win = shared_app_window(1080)
    win.resize(1920, 1080)
    QtBot(request).waitUntil(lambda: (win.width(), win.height()) == (1920, 1080),
                             timeout=5000)
    return win, win.views.currentIndex()


@pytest.fixture
def wide(wide_opened, qtbot):
    """The wide window, back on its first view after each test."""
    win, view = wide_opened
    qtbot.wait(50)
    yield win
    win.views.setCurrentIndex(view)


def _show_view(win, qtbot, title: str):
    tabs = {win.views.tabText(i): i for i in range(win.views.count())}
    win.views.setCurrentIndex(tabs[title])
    qtbot.wait(100)
    win.grab()
    assert win.views.isVisible() and any(p.isVisible() for p in win.panes.values())
    return win.views.currentWidget()


def test_the_views_beside_the_panes_have_room_on_a_wide_screen(wide, qtbot):
    """At 1920x1080 the views get a fair share of the width: at 30% (440 px) the Mapping
    plots were a sliver beside their numbers."""
    mapping = _show_view(wide, qtbot, "Mapping")
    plot, info = mapping.plots["symmetric"], mapping.info["symmetric"]
    assert plot.width() >= info.width(), (plot.width(), info.width())


def test_the_matmul_controls_stack_in_a_tab_beside_the_panes(wide, qtbot):
    """Beside the panes the Matmul controls put each side's scheme under its source and
    read whole, without a sideways scroll bar."""
    from PySide6.QtWidgets import QComboBox

    view = _show_view(wide, qtbot, "Matmul")
    qtbot.waitUntil(lambda: view.outcome is not None, timeout=30_000)
    wide.grab()
    assert view.controls_area.horizontalScrollBar().maximum() == 0
    cut = cut_combo_texts(b for b in view.controls.findChildren(QComboBox) if b.isVisible())
    assert not cut, cut
