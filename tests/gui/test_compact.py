"""The ordinary window (not presentation) on a 1280x720 laptop: it takes the size, the four
panes stay side by side with readable histograms, the views are one button (or F9) away, and
a larger window gets everything back."""

from __future__ import annotations

import pytest
from gui_measure import axis_labels_cut, cut_labels, settle


@pytest.fixture(scope="module", params=["light", "dark"])
def opened(request, shared_app_window):
    """One window per look for the tests of that look."""
    win = shared_app_window(1000)
    win.dark_action.setChecked(request.param == "dark")
    yield win
    win.dark_action.setChecked(False)  # the theme is process-wide: leave it as found
    shared_app_window.close(win)


@pytest.fixture
def small(opened, qtbot):
    """The window made 1280x720 from 1600x1000 (where it opened) before each test."""
    win = opened
    for size in ((1600, 1000), (1280, 720)):
        win.resize(*size)
        qtbot.waitUntil(lambda size=size: (win.width(), win.height()) == size, timeout=5000)
        settle(win, qtbot)
    return win


def _texts_fit(win):
    assert not cut_labels(win), cut_labels(win)
    assert not axis_labels_cut(win), axis_labels_cut(win)


def test_the_window_fits_a_laptop_screen(small, qtbot):
    win = small
    assert win.minimumSizeHint().width() <= 1280 and win.minimumSizeHint().height() <= 720
    assert all(p.isVisible() for p in win.panes.values())  # all four, as on a desk
    for key, pane in win.panes.items():
        box = pane.plot.getViewBox()
        assert box.height() >= 80, f"{key}: histogram {box.height():.0f} px tall"
        assert pane.geometry().right() < win.centralWidget().width()
    assert win.side_dock.isVisible()
    assert not win.views.isVisible() and win.compact.button.isVisible()
    assert win.compact.button.text() == "Views ▸"
    _texts_fit(win)

    win.compact.button.click()  # the views, full width, instead of the panes
    settle(win, qtbot)
    assert win.views.isVisible() and not win.splitter.widget(0).isVisible()
    assert win.compact.button.text() == "◂ Panes"
    # all the width beside the controls (which at 1280 px now keep their natural width: the
    # panes no longer need theirs, see gui/key_label.py)
    assert win.views.width() >= win.centralWidget().width() - 20 and win.views.width() > 850
    assert (win.width(), win.height()) == (1280, 720)
    _texts_fit(win)
    win.views_controller.wide_action.trigger()  # F9 does the same, and back
    settle(win, qtbot)
    assert win.splitter.widget(0).isVisible() and not win.views.isVisible()
    assert win.compact.button.text() == "Views ▸"


def test_a_larger_window_gets_the_views_strips_and_captions_back(small, qtbot):
    win = small
    assert all(not p.strip.isVisible() for p in win.panes.values())
    assert all(not p.caption.isVisible() for p in win.panes.values())
    win.resize(1920, 1080)
    qtbot.waitUntil(lambda: win.width() == 1920, timeout=5000)
    settle(win, qtbot)
    assert win.views.isVisible() and not win.compact.button.isVisible()
    assert all(p.strip.isVisible() for p in win.panes.values())
    assert any(p.caption.isVisible() for p in win.panes.values())
    _texts_fit(win)


def test_f11_from_the_small_window_comes_back_to_it(small, qtbot):
    win = small
    before = (win.views.isVisible(), win.compact.button.isVisible(),
              [p.strip.isVisible() for p in win.panes.values()])
    win.presentation_action.trigger()
    settle(win, qtbot)
    assert win.stage.active and not win.compact.button.isVisible()
    assert all(win.panes[k].strip.isVisible() for k in win.stage.visible_panes())  # in full
    win.presentation_action.trigger()
    settle(win, qtbot)
    assert (win.width(), win.height()) == (1280, 720)
    assert before == (win.views.isVisible(), win.compact.button.isVisible(),
                      [p.strip.isVisible() for p in win.panes.values()])


def test_a_layout_request_while_the_window_builds_its_panes(qtbot, monkeypatch):
    """Qt may hand the window a layout request before it has any pane (a widget made during
    the build can send one at once): the window's least size is then its layout's minimum,
    not an error out of the event handler (pytest-qt fails the test on any such error)."""
    from PySide6.QtCore import QCoreApplication, QEvent
    from PySide6.QtWidgets import QApplication

    from quantscope.gui import window_layout
    from quantscope.gui.window import MainWindow
    from quantscope.state import ExplorerState

    seen = []
    real_pane = window_layout.Pane

    def pane_after_a_layout_request(*args, **kwargs):
        for widget in QApplication.topLevelWidgets():
            if isinstance(widget, MainWindow) and not getattr(widget, "panes", None):
                seen.append(widget.compact.floor())  # with no pane yet
                QCoreApplication.sendEvent(widget, QEvent(QEvent.Type.LayoutRequest))
                assert widget.minimumSize() == seen[-1]
        return real_pane(*args, **kwargs)

    monkeypatch.setattr(window_layout, "Pane", pane_after_a_layout_request)
    win = MainWindow(ExplorerState(), install_views=False)
    qtbot.addWidget(win)
    assert seen  # the request came while the window had no pane
    assert len(win.panes) == 4
    win.close()
