"""A theme applied again changes nothing and costs nothing: the window's style sheet is not set
again (every widget would be re-polished), a plot or view that has the theme is not restyled,
and the Mapping tab, not on screen, draws when it is shown, before its first paint."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

from quantscope.gui.theme import (
    AXIS_TEXT_START,
    apply_theme,
    current_theme,
    resolve,
    restyle,
    style_plot,
)


class _StyleChanges(QObject):
    """Counts the style changes (re-polishes) a widget receives."""

    def __init__(self, widget) -> None:
        super().__init__(widget)
        self.count = 0
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.StyleChange:
            self.count += 1
        return False


def test_an_equal_theme_leaves_the_window_unpolished_and_a_new_one_restyles(make_window):
    win = make_window()
    title = next(iter(win.panes.values())).title
    changes = _StyleChanges(title)
    sheet = win.styleSheet()
    apply_theme(win)  # what the window has: light, at a desk
    assert changes.count == 0 and win.styleSheet() == sheet
    apply_theme(win, dark=True)
    assert changes.count > 0 and win.styleSheet() != sheet
    apply_theme(win)
    assert win.styleSheet() == sheet  # and back, exactly


def test_presentation_leaves_the_sheet_and_sizes_each_widgets_text(make_window):
    """Text sizes are the widgets' own, not the window's sheet's: a talk sets each widget's
    font and gives only the sliders and tab bars sheets of their own (the stage's handle and
    tab sizes); the window's sheet, whose every change re-polishes every widget under the
    window, stays as it was."""
    from PySide6.QtWidgets import QSlider, QTabBar, QWidget

    from quantscope.gui.descendants import descendants

    win = make_window()
    sheet = win.styleSheet()
    title = next(iter(win.panes.values())).title
    widgets = descendants(win, QWidget)
    own = {w: w.styleSheet() for w in widgets}
    win.presentation_action.setChecked(True)
    assert win.styleSheet() == sheet
    given = [w for w in widgets if w.styleSheet() != own[w]]
    assert given and all(isinstance(w, QSlider | QTabBar) for w in given), given[:5]
    theme = current_theme()
    assert title.font().pointSize() == theme.font_pt + 2 and title.font().bold()
    assert win.headline.font().pointSize() == theme.text_pt == theme.font_pt
    assert QApplication.font().pointSize() == theme.text_pt  # what a widget made now starts at
    win.presentation_action.setChecked(False)
    assert title.font().pointSize() == 15 and win.headline.font().pointSize() == 11
    assert win.styleSheet() == sheet
    assert {w: w.styleSheet() for w in widgets} == own


def test_the_window_starts_with_the_sheet_its_theme_gives(make_window):
    from quantscope.gui.theme import stylesheet

    win = make_window()
    assert win.styleSheet() == stylesheet(resolve(False, False))


def test_a_plot_with_the_theme_is_left_alone_and_a_new_theme_restyles_it(qtbot):
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    plot = widget.getPlotItem()
    light, dark = resolve(False, False), resolve(True, False)
    style_plot(plot, light)
    axis = plot.getAxis("left")
    assert axis.pen().color() == QColor(light.foreground)
    axis.setPen(pg.mkPen("#FF0000"))  # a change the theme did not make...
    style_plot(plot, light)
    assert axis.pen().color() == QColor("#FF0000")  # ...is not undone by the same theme
    style_plot(plot, dark)
    assert axis.pen().color() == QColor(dark.foreground)


def test_restyle_calls_a_view_once_per_theme(qtbot):
    class View(QObject):
        themed = True

        def __init__(self) -> None:
            super().__init__()
            self.themes: list = []

        def apply_theme(self, theme) -> None:
            self.themes.append(theme)

    view = View()
    light, dark = resolve(False, False), resolve(True, False)
    for theme in (light, light, dark, dark, light, resolve(False, False)):
        restyle(view, theme)
    assert view.themes == [light, dark, light]


def _items(view) -> int:
    return sum(len(p.getPlotItem().items) for p in view.plots.values())


def test_the_mapping_tab_draws_when_shown_before_it_is_painted(make_window, qtbot):
    win = make_window(install_views=True)
    mapping = win.views_controller.views["Mapping"]
    assert win.views.currentWidget() is not mapping
    assert mapping._unpainted and _items(mapping) == 0  # nothing drawn off screen...
    assert "z = " in mapping.info["symmetric"].text()  # ...but its numbers are written
    assert mapping.plots["cast"].isHidden()  # and the figures not shown are hidden
    assert mapping.is_ready() and win.views_ready()  # a --screenshot does not wait for it
    apply_theme(win, dark=True)
    assert mapping._unpainted and _items(mapping) == 0  # nor restyled there
    painted: list[int] = []

    class FirstPaint(QObject):
        def eventFilter(self, obj, event) -> bool:
            if event.type() == QEvent.Type.Paint and not painted:
                painted.append(_items(mapping))
            return False

    spy = FirstPaint(mapping)
    mapping.installEventFilter(spy)
    win.views.setCurrentWidget(mapping)
    assert not mapping._unpainted and _items(mapping) > 0  # drawn as it was shown
    qtbot.waitUntil(lambda: bool(painted))
    assert painted[0] > 0  # its first paint had the drawing
    assert "z = " in mapping.info["symmetric"].text()
    apply_theme(win)


def test_a_plot_gets_only_what_a_new_theme_changes(qtbot):
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    plot = widget.getPlotItem()
    desk, talk = resolve(False, False), resolve(False, True, 1080)
    style_plot(plot, desk)
    axis = plot.getAxis("bottom")
    axis.setTextPen(pg.mkPen("#FF0000"))  # colours: presentation keeps them...
    style_plot(plot, talk)
    assert axis.textPen().color() == QColor("#FF0000")
    # ...and sets the sizes and the thicker pen
    assert axis.style["tickFont"].pointSize() == talk.axis_font_pt != desk.axis_font_pt
    assert axis.label.font().pointSize() == talk.axis_font_pt
    assert axis.pen().widthF() == 1.5 and axis.style["tickTextOffset"][1] == 8
    dark_talk = resolve(True, True, 1080)
    axis.setTickFont(None)  # sizes: a dark toggle keeps them...
    style_plot(plot, dark_talk)
    assert axis.style["tickFont"] is None
    # ...and sets the colours
    assert axis.textPen().color() == QColor(dark_talk.foreground)
    assert axis.pen().color() == QColor(dark_talk.foreground) and axis.pen().widthF() == 1.5
    style_plot(plot, desk)  # both change: both set
    assert axis.style["tickFont"].pointSize() == desk.axis_font_pt
    assert axis.textPen().color() == QColor(desk.foreground) and axis.pen().widthF() == 1.0
    assert axis.style["tickTextOffset"][1] == 4



def test_an_axis_gets_back_the_tick_text_room_it_had_at_each_text_size(qtbot):
    """pyqtgraph shrinks an axis's room for tick text only when it is 10 px too big: the
    room a talk's big ticks took must not stay after the talk, nor the room measured before
    it be lost."""
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    plot = widget.getPlotItem()
    axis = plot.getAxis("bottom")
    assert (axis.textWidth, axis.textHeight) == AXIS_TEXT_START  # pyqtgraph's first guess
    desk, talk, big_talk = resolve(False, False), resolve(False, True, 720), resolve(
        False, True, 1080)
    style_plot(plot, desk)
    axis.textWidth, axis.textHeight = 41, 23  # what the desk's ticks measured
    style_plot(plot, talk)
    assert (axis.textWidth, axis.textHeight) == AXIS_TEXT_START  # a size not shown before
    axis.textHeight = 30
    style_plot(plot, big_talk)
    assert (axis.textWidth, axis.textHeight) == AXIS_TEXT_START
    axis.textHeight = 35
    style_plot(plot, resolve(True, True, 1080))  # a dark toggle keeps the sizes
    assert axis.textHeight == 35
    style_plot(plot, talk)
    assert (axis.textWidth, axis.textHeight) == (30, 30)
    style_plot(plot, desk)
    assert (axis.textWidth, axis.textHeight) == (41, 23)


def test_a_fonts_line_room_is_measured_once_and_kept_per_font(qapp):
    from PySide6.QtGui import QFont

    from quantscope.gui import tight_lines

    fonts = [QFont(qapp.font()) for _ in range(3)]
    fonts[1].setPointSize(31)
    fonts[2].setFamily("DejaVu Sans Mono")
    for font in fonts:
        room = tight_lines.font_line_room(font)
        assert room == tight_lines._measure_line_room(font)
        assert tight_lines.font_line_room(QFont(font)) is room  # an equal font: kept
