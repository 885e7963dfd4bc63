"""The window on a laptop or projector screen, with any installed fonts: it opens fitting the
screen, can be made 1280x720 and 1366x768 whatever size it had before (the compact layout is
its floor, not the tall layout's minimum of the moment), and F11 fills the screen and gives
the window back as it was.

Fonts differ between machines; the font sets of ``font_sets.py`` stand for them here (the
``fonts`` fixture): the default one, a serif face drawn 12 % wider, and a face whose lines are
1.45 em tall (Noto Sans CJK's)."""

from __future__ import annotations

import math

import pytest
from gui_measure import axis_labels_cut, cut_labels, project, settle
from PySide6.QtCore import Qt

from quantscope.gui.compact import open_fitting
from quantscope.gui.style import reserve_lines


@pytest.mark.parametrize("size", [(1280, 720), (1366, 768)])
def test_a_window_opened_tall_can_be_made_laptop_sized(fonts, size, app_window, qtbot):
    win = app_window(1000)
    win.resize(1920, 1080)
    settle(win, qtbot)
    assert not win.compact.short  # the captions and strips are in
    win.resize(*size)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == size, timeout=5000)
    settle(win, qtbot)
    assert (win.width(), win.height()) == size
    assert win.minimumSize().width() <= 1280 and win.minimumSize().height() <= 720
    for key, pane in win.panes.items():  # every pane whole, side by side, above the bar
        assert pane.isVisible() and pane.width() >= pane.minimumSizeHint().width(), key
        assert pane.height() >= pane.minimumSizeHint().height(), key
        assert pane.plot.getViewBox().height() >= 80, key
    assert win.centralWidget().height() >= win.centralWidget().minimumSizeHint().height()
    assert not cut_labels(win), cut_labels(win)  # every text whole, in every font
    assert not axis_labels_cut(win), axis_labels_cut(win)
    tabs = win.side_tabs.tabBar()  # the side panel's titles apart, not one run of words
    for i in range(tabs.count()):
        room = tabs.tabRect(i).width() - tabs.fontMetrics().horizontalAdvance(tabs.tabText(i))
        assert room >= 16, (tabs.tabText(i), room)


def test_a_tall_layout_taller_than_the_screen_still_goes_down_in_one_step(app_window, qtbot):
    """The compact floor is read once the captions' leaving has reached the window's layout:
    read before, it still counted them, and a window made 1280x720 was held taller (751 rows
    with Noto Sans Mono as the fixed-width face) until asked a second time."""
    win = app_window(1000)
    win.resize(1920, 1080)
    settle(win, qtbot)
    for pane in win.panes.values():
        reserve_lines(pane.caption, 6)  # captions taller than a laptop screen has room for
    settle(win, qtbot)
    assert win.layout().totalMinimumSize().height() > 720 >= win.compact.floor().height()
    win.resize(1280, 720)
    assert (win.width(), win.height()) == (1280, 720)  # at once
    settle(win, qtbot)
    assert (win.width(), win.height()) == (1280, 720)
    assert win.minimumSize().height() <= 720


def test_the_keys_of_a_narrow_pane_keep_every_mark(fonts, app_window, qtbot):
    win = app_window(1000)
    win.resize(1280, 720)
    settle(win, qtbot)
    for pane in win.panes.values():
        key = pane.key_label
        assert key.width() >= key.minimumSizeHint().width()
        for word in ("window", "clipped", "zero point", "grid"):
            assert word in key.text()
    win.resize(1920, 1080)
    settle(win, qtbot)
    assert "code grid" in win.panes["symmetric/tensor"].key_label.text()


def test_f11_fills_the_screen_and_gives_the_window_back(app_window, qtbot):
    win = app_window(1000)
    win.resize(1280, 720)
    settle(win, qtbot)
    win.full_screen_action.trigger()  # F11
    qtbot.waitUntil(win.isFullScreen, timeout=5000)
    assert win.presentation
    settle(win, qtbot)
    screen = win.screen().geometry()
    assert (win.width(), win.height()) == (screen.width(), screen.height())
    win.full_screen_action.trigger()
    qtbot.waitUntil(lambda: not win.isFullScreen(), timeout=5000)
    assert not win.presentation
    settle(win, qtbot)
    assert (win.width(), win.height()) == (1280, 720)


def test_a_window_opens_maximized_on_a_screen_smaller_than_its_size(qtbot):
    """Qt's offscreen screen is 800x800: 1600x1000 does not fit, so the window is
    maximized to the screen's free area instead of hanging off its edges."""
    from quantscope.gui import create_window

    win = create_window()
    qtbot.addWidget(win)
    open_fitting(win)
    assert win.windowState() & Qt.WindowState.WindowMaximized
    free = win.screen().availableGeometry()  # or, smaller than the floor, the floor
    assert win.width() <= max(free.width(), win.minimumWidth())
    assert win.height() <= max(free.height(), win.minimumHeight())
    assert win.width() < 1600 and win.height() < 1000
    win.close()


def test_the_views_get_their_room_back_after_a_talk_on_a_small_screen(app_window, qtbot):
    """F11 at 1280x720 and back left the splitter with views of no width: a window made
    larger afterwards showed the panes alone, the views shown but 0 px wide."""
    win = app_window(1000)
    win.resize(1280, 720)
    settle(win, qtbot)
    win.full_screen_action.trigger()
    settle(win, qtbot)
    win.full_screen_action.trigger()
    settle(win, qtbot)
    win.resize(1920, 1080)
    settle(win, qtbot)
    qtbot.waitUntil(lambda: win.splitter.sizes()[1] >= win.views.minimumSizeHint().width(),
                    timeout=5000)
    assert win.views.isVisible() and not win.compact.narrow


def _one_line(label) -> int:
    """The most rows a tightened one-line label takes: its letters' room (as
    ``test_tight_lines`` bounds it) and the style's own padding and border."""
    from PySide6.QtGui import QFontInfo, QFontMetricsF

    from quantscope.gui.tight_lines import INK_PROBE, LINE_EM, trimmed

    font = label.font()
    ink = QFontMetricsF(font).tightBoundingRect(INK_PROBE)
    room = max(LINE_EM * QFontInfo(font).pixelSize(), ink.height() + 2)
    margins = label.contentsMargins()
    top, bottom = trimmed(label)
    return math.ceil(room) + 1 + margins.top() + top + margins.bottom() + bottom


def test_a_talk_gives_the_histograms_the_rows_of_its_one_line_bars(fonts, app_window, qtbot):
    """In a talk at 1280x720 the headline above the panes and the keys below take a line
    each, no taller than their letters need in every font set (the headline kept the room
    of the two lines it has outside a talk, and a font with tall lines took 17 more rows for
    the two): each histogram is at least a quarter of the screen tall."""
    win = app_window(1000)
    win.presentation_action.setChecked(True)
    win.resize(1280, 720)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == (1280, 720), timeout=5000)
    qtbot.wait(100)  # the resize re-sizes the text (a zero timer) and relays out
    settle(win, qtbot)
    for label in (win.headline, win.stage.keys):
        assert label.isVisible() and label.height() <= _one_line(label), label.objectName()
    for key in win.stage.visible_panes():
        assert win.panes[key].plot.getViewBox().height() >= 720 / 4, key
    assert not cut_labels(win), cut_labels(win)


def _line_bound(label) -> int:
    """The most rows a tightened label's line takes below the one before it: its letters'
    room (as ``test_tight_lines`` bounds it)."""
    from PySide6.QtGui import QFontInfo, QFontMetricsF

    from quantscope.gui.tight_lines import INK_PROBE, LINE_EM

    font = label.font()
    ink = QFontMetricsF(font).tightBoundingRect(INK_PROBE)
    return math.ceil(max(LINE_EM * QFontInfo(font).pixelSize(), ink.height() + 2)) + 1


def test_a_talks_captions_take_the_rows_of_their_letters(fonts, app_window, qtbot):
    """In a talk at 1280x720 the scene's line and the panes' two-line captions take no more
    rows than their letters need in every font set: with the tall-lines face the scene's one
    line took 28 rows and each caption's two and a half lines 70 (the default face: 22 and
    55), which the histograms gave up. Every line whole."""
    from PySide6.QtGui import QFontMetricsF

    from quantscope.gui.caption_label import line_count
    from quantscope.state.talk import builtin_talk

    win = app_window(1000)
    win.presentation_action.setChecked(True)
    talk = builtin_talk()
    win.talk_player.open(talk)
    win.resize(1280, 720)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == (1280, 720), timeout=5000)
    qtbot.waitUntil(lambda: win.talk_player._shown(talk.scene(1)) and win.all_shown(),
                    timeout=60_000)
    qtbot.wait(100)  # the resize re-sizes the text (a zero timer) and relays out
    settle(win, qtbot)
    scene = win.talk_player.caption
    assert scene.text().startswith("Scene 1 of 5 · Adding a zero point: symmetric uses")
    width = scene.contentsRect().width()
    lines = line_count(QFontMetricsF(scene.font()), scene.shown_text(), width)
    assert scene.isVisible() and lines >= 1
    assert scene.height() <= (lines - 1) * _line_bound(scene) + _one_line(scene)
    for key in win.stage.visible_panes():
        caption = win.panes[key].caption
        assert caption.isVisible() and caption.text(), key
        # two lines and the half line of slack its reservation keeps
        assert caption.height() <= int(1.5 * _line_bound(caption)) + _one_line(caption), key
    assert not cut_labels(win), cut_labels(win)


def test_the_bars_around_the_panes_take_no_room_for_a_taller_line(qapp, app_window, qtbot):
    """At 1280x720 the menu bar, the headline, the status bar and the side column's tabs take
    the rows of the default face's letters with the "tall lines" face (its letters are DejaVu
    Sans's, its lines 1.45 em): 1 px more at most for a bar (the letters' room is 1.2 em),
    and for the two lines of the headline the one line spacing between them besides. The
    first three took 4, 8 and 4 more rows, which the four histograms gave up; the menu bar's
    items and the View menu's rows took 4 and 3 more (27 and 29 rows)."""
    from font_sets import font_set
    from PySide6.QtGui import QFont, QFontMetrics

    before = QFont(qapp.font())
    heights = {}
    try:
        for name in ("default", "tall lines"):
            qapp.setFont(font_set(name, before))
            win = app_window(1000)
            win.resize(1280, 720)
            qtbot.waitUntil(lambda w=win: (w.width(), w.height()) == (1280, 720), timeout=5000)
            settle(win, qtbot)
            assert not cut_labels(win), cut_labels(win)
            spacing = QFontMetrics(win.headline.font()).lineSpacing()
            bar = win.menuBar()
            rows = [win.view_menu.actionGeometry(a).height() for a in win.view_menu.actions()
                    if not a.isSeparator()]
            heights[name] = (bar.height(), win.statusBar().height(),
                             win.headline.height() - spacing, win.side_tabs.tabBar().height(),
                             max(bar.actionGeometry(a).height() for a in bar.actions()),
                             max(rows))
            win.close()
    finally:
        qapp.setFont(before)
    for what, plain, tall in zip(("menu bar", "status bar", "headline", "tabs", "menu bar item",
                                  "menu row"),
                                 *heights.values(),
                                 strict=True):
        assert tall <= plain + 1, (what, plain, tall)


def test_the_f11_key_leaves_a_talk_whose_menu_bar_is_hidden(app_window, qtbot):
    """The key, not only the action: the talk hides the menu bar, whose View menu held the
    window's only F11, and the key bar's "F11 leave" did nothing under a real X server."""
    win = app_window(1000)
    win.activateWindow()
    qtbot.waitUntil(win.isActiveWindow, timeout=5000)
    qtbot.keyClick(win, Qt.Key.Key_F11)
    qtbot.waitUntil(lambda: win.presentation and win.isFullScreen(), timeout=5000)
    assert win.menuBar().isHidden() and "F11 leave" in win.stage.keys.text()
    qtbot.keyClick(win, Qt.Key.Key_F11)
    qtbot.waitUntil(lambda: not win.presentation and not win.isFullScreen(), timeout=5000)
    assert win.menuBar().isVisible()


def test_a_talks_matmul_numbers_fit_without_scrolling_in_every_font(fonts, app_window, qtbot):
    """At 1280x720 in a talk every number of the Matmul view is on screen in every font set:
    with the tall-lines face the room its lines keep above their letters pushed the last
    line of the left column ("here K = 384") below the fold of a scrolled column. Each
    choice reads whole too: the wide serif cut the sources, "per output channel" and
    "half away from 0 (TFLite)"."""
    from gui_measure import cut_combo_texts
    from PySide6.QtWidgets import QComboBox

    win = app_window(1000)
    project(win, qtbot)
    view = win.views_controller.tabs.page("Matmul")
    win.views.setCurrentWidget(view)
    win.stage.show_views(True)
    qtbot.waitUntil(lambda: view.outcome is not None, timeout=30_000)
    settle(win, qtbot)
    assert view.side_area.verticalScrollBar().maximum() == 0, fonts
    assert not cut_labels(win), cut_labels(win)
    boxes = [b for b in view.controls.findChildren(QComboBox) if b.isVisible()]
    assert len(boxes) >= 9
    assert not cut_combo_texts(boxes), (fonts, cut_combo_texts(boxes))
    assert view.controls_area.horizontalScrollBar().maximum() == 0


@pytest.mark.parametrize("presenting", [False, True])
def test_the_bit_width_curves_are_taller_than_their_legend(fonts, app_window, qtbot,
                                                           presenting):
    """At 1280x720, at a desk (the views in the panes' place) and in a talk, in every font
    set: the legend's five entries in two columns took three rows, taller than the curves
    above them at the desk (84 px under 82 of plot; 96 under 57 with tall lines). At the
    desk the curves are as tall as the formats' plot under them (halving the tab gave them
    104 px to the formats' 166: their legend's rows came out of their half)."""
    win = app_window(1000)
    win.presentation_action.setChecked(presenting)
    win.resize(1280, 720)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == (1280, 720), timeout=5000)
    settle(win, qtbot)
    if win.compact.narrow:
        win.compact.button.click()  # "Views ▸": the views instead of the panes
    views = win.views_controller
    win.views.setCurrentWidget(views.bits_and_formats)
    if presenting:
        win.stage.show_views(True)
    qtbot.waitUntil(lambda: bool(views.bitwidth.data), timeout=30_000)
    settle(win, qtbot)
    plot = views.bitwidth.plot
    assert plot.isVisible()
    legend = plot.legend.boundingRect().height()
    assert plot.getViewBox().height() > legend, (fonts, plot.getViewBox().height(), legend)
    if not presenting:
        formats = views.formats.plot.getViewBox()
        qtbot.waitUntil(lambda: plot.getViewBox().height() >= formats.height() - 2,
                        timeout=3000)


def test_the_matmul_choices_read_whole_at_a_laptops_desk(fonts, app_window, qtbot):
    """At 1280x720 outside a talk, the views in the panes' place, every font set: each
    Matmul choice reads whole. Side by side fitted the controls' minimum (each combo box a
    few letters wide), which cut "half away from 0 (TFLite)" and "per output channel"."""
    from gui_measure import cut_combo_texts
    from PySide6.QtWidgets import QComboBox

    win = app_window(1000)
    win.resize(1280, 720)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == (1280, 720), timeout=5000)
    settle(win, qtbot)
    assert win.compact.narrow
    win.compact.button.click()  # "Views ▸"
    view = win.views_controller.tabs.page("Matmul")
    win.views.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.outcome is not None, timeout=30_000)
    settle(win, qtbot)
    boxes = [b for b in view.controls.findChildren(QComboBox) if b.isVisible()]
    assert len(boxes) >= 9
    assert not cut_combo_texts(boxes), (fonts, cut_combo_texts(boxes))
    assert view.controls_area.horizontalScrollBar().maximum() == 0
