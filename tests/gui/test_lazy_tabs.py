"""View tabs built when first shown or read: the tab then holds the view itself, the view has
the window's look as if built with it (theme, presentation's hidden clutter), the window's
minimum size does not wait for a tab, and exports or readiness checks build nothing."""

from __future__ import annotations

import numpy as np
from gui_measure import look
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel, QTabWidget

from quantscope.gui.accessible import controls, unlabelled
from quantscope.gui.views.lazy_tabs import LazyTabs, Placeholder, ViewTable

LATER = ("Bit width", "Matmul")  # the tabs built when first shown or read


def _pages(win) -> list[str]:
    return [type(win.views.widget(i)).__name__ for i in range(win.views.count())]


def _titles(win) -> list[str]:
    return [win.views.tabText(i) for i in range(win.views.count())]


def test_a_tab_is_built_once_in_its_place_when_first_shown_or_read(qtbot):
    tabs = QTabWidget()
    qtbot.addWidget(tabs)
    made: list[str] = []

    def build(title):
        def make():
            made.append(title)
            return QLabel(title)
        return make

    lazy = LazyTabs(tabs, lambda title, w: tabs.addTab(w, title), lambda page: None)
    lazy.add("a", QLabel("a"))
    for title in ("b", "c", "d"):
        lazy.add_later(title, build(title))
    table = ViewTable(lazy)
    for title in "abcd":
        table.add(title, title)
    assert made == [] and list(table.built()) == ["a"] and list(table) == list("abcd")
    assert isinstance(tabs.widget(2), Placeholder)
    tabs.setCurrentIndex(2)  # shown: built, and current in the placeholder's place
    assert made == ["c"] and tabs.currentIndex() == 2 and tabs.currentWidget().text() == "c"
    assert table["d"].text() == "d"  # read: built, the current tab left as it was
    assert made == ["c", "d"] and tabs.currentIndex() == 2 and tabs.widget(3) is table["d"]
    assert [tabs.tabText(i) for i in range(4)] == list("abcd")
    tabs.setCurrentIndex(3)
    tabs.setCurrentIndex(2)
    assert made == ["c", "d"]  # built once
    assert [type(tabs.widget(i)).__name__ for i in range(4)] == [
        "QLabel", "Placeholder", "QLabel", "QLabel"]
    assert sorted(table.built()) == ["a", "c", "d"]


def test_the_window_builds_the_later_tabs_only_when_shown_or_read(make_window, qtbot):
    win = make_window(install_views=True)
    vc = win.views_controller
    titles = _titles(win)
    assert titles == ["Trade-off", "Channels", "Bit width", "Matmul", "Mapping"]
    assert _pages(win) == ["TradeoffView", "ChannelsView", "Placeholder", "Placeholder",
                           "MappingView"]
    minimum = win.minimumSizeHint()
    # what reads every view's state builds nothing: readiness, numbers, shutdown's list
    assert win.views_ready()
    assert set(vc.view_data()) == {"Mapping"}  # the worked example's numbers, always there
    vc.shutdown()
    assert sorted(vc.views.built()) == ["Channels", "Mapping", "Trade-off"]
    assert _pages(win)[2:4] == ["Placeholder", "Placeholder"]
    win.views.setCurrentIndex(titles.index("Bit width"))
    assert win.views.currentWidget() is vc.bits_and_formats
    assert vc.bits_and_formats.widget(0) is vc.bitwidth and vc.bitwidth.isVisible()
    matmul = vc.views["Matmul"]  # read, not shown: built in its place, the tab left as it was
    assert win.views.widget(titles.index("Matmul")) is matmul and not matmul.isVisible()
    assert win.views.currentWidget() is vc.bits_and_formats
    assert _titles(win) == titles and "Placeholder" not in _pages(win)
    qtbot.wait(20)
    assert win.minimumSizeHint() == minimum  # no tab built later holds the window larger
    # its controls are named a turn later, as those built with the window were
    assert controls(matmul) and unlabelled(matmul) == []


def _grab(widget) -> np.ndarray:
    image = widget.grab().toImage().convertToFormat(QImage.Format.Format_ARGB32)
    return np.frombuffer(image.constBits(), np.uint32,
                         image.width() * image.height()).reshape(image.height(), -1).copy()


def test_a_tab_built_after_a_theme_change_looks_as_one_built_with_the_window(app_window,
                                                                             qtbot):
    from quantscope.gui.theme import current_theme

    early, late = app_window(1000), app_window(1000)  # the same tensor, its numbers shown
    early.views_controller.tabs.page("Bit width")  # built with the window, in its light theme
    for win in (early, late):
        win.dark_action.setChecked(True)
        win.presentation_action.setChecked(True)
    tab = late.views_controller.bits_and_formats  # built now, dark and presenting
    formats = late.views_controller.formats
    assert late.views_controller.bitwidth._quantscope_theme == current_theme()
    assert formats.isHidden()  # presentation's clutter: the formats make room for the curves
    for win in (early, late):
        win.views.setCurrentWidget(win.views_controller.bits_and_formats)
        win.stage.show_views(True)
    for win in (early, late):
        qtbot.waitUntil(lambda w=win: bool(w.views_controller.bitwidth.data), timeout=30_000)
        win.views_controller.settle()
    qtbot.wait(50)
    pictures = [_grab(win.views_controller.bits_and_formats) for win in (early, late)]
    assert pictures[0].shape == pictures[1].shape
    assert np.count_nonzero(pictures[0] != pictures[1]) == 0
    dark = _grab(tab)
    for win in (early, late):
        win.presentation_action.setChecked(False)  # the clutter comes back
        win.dark_action.setChecked(False)
    assert not formats.isHidden()
    qtbot.wait(50)
    light = _grab(tab)
    assert light.shape != dark.shape or np.count_nonzero(light != dark) > 0
    # out of the talk, every widget as in the window whose tab was built with it
    assert look(late) == look(early)
