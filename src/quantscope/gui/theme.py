"""Light and dark themes, and presentation mode, for the whole window in one call.

``apply_theme(window, dark=..., presentation=...)`` sets the Qt palette, the application font,
pyqtgraph's default colours and every existing plot's background, axes and line widths. Views
that draw their own items set the class attribute ``themed = True`` and implement
``apply_theme(theme: Theme)``; this module calls it on the window and every descendant that has
it, so a view restyles its own curves (thick lines, bigger markers)
without this module knowing them.

Presentation mode is for projectors: fonts sized in pixels from the window's height (18 px at
720 rows, 24 px at 1080: a projector shows pixels, not points), thick lines, and clutter hidden
-- any widget whose dynamic property ``"clutter"`` is true, plus status and tool bars. Light
and dark both pass :func:`contrast_ratio` checks: text 4.5:1, plot marks 3:1 against the
background they are drawn on.

Colours follow the Okabe-Ito palette, which stays distinguishable with the common forms of
colour blindness and in greyscale print: rounding is blue, clipping vermillion, SQNR green.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QPalette, QPen
from PySide6.QtWidgets import (
    QApplication,
    QLayout,
    QSlider,
    QStatusBar,
    QTabBar,
    QToolBar,
    QWidget,
)

from quantscope.gui.descendants import descendants
from quantscope.gui.tight_lines import font_line_room
from quantscope.gui.widget_text import set_stage_sheets, set_text_sizes

#: Dynamic property that marks a widget as hidden in presentation mode.
CLUTTER_PROPERTY = "clutter"

_SERIES_LIGHT = {
    "rounding": "#0072B2",  # blue
    "clipping": "#D55E00",  # vermillion
    "total": "#1A1A1A",
    "sqnr": "#009E73",  # bluish green
    "current": "#E69F00",  # orange: the user's threshold / width
    "optimum": "#CC79A7",  # reddish purple: the best one
    "outlier": "#D55E00",
    "range": "#56B4E9",  # sky blue
    "histogram": "#7F7F7F",
    "window": "#0072B2",
    "grid": "#C8C8C8",
}
_SERIES_DARK = dict(_SERIES_LIGHT, total="#EDEDED", rounding="#56B4E9", histogram="#A0A0A0",
                    grid="#4A4A4A", window="#56B4E9")

#: The panes' plot marks, opaque, as drawn (fills are translucent tints of these, under the
#: opaque outline or hatch that carries the contrast): every one at least 3:1 on the plot.
MARK_ROLES = ("histogram", "grid", "window", "clipped", "zero")
_MARKS_LIGHT = {"histogram": "#1F4E9C", "grid": "#6B6B6B", "window": "#1B7A36",
                "clipped": "#B8400A", "zero": "#333333"}
_MARKS_DARK = {"histogram": "#7DB3F5", "grid": "#9A9A9A", "window": "#55C27E",
               "clipped": "#FF8A4C", "zero": "#E6E6E6"}

#: Text roles of the style sheet: (text colour, background it sits on), light and dark.
_TEXT_LIGHT = {"body": ("#1A1A1A", "#FFFFFF"), "muted": ("#555B66", "#FFFFFF"),
               "title": ("#14213D", "#FFFFFF"), "caption": ("#3D4A5C", "#FFFFFF"),
               "error": ("#B00020", "#FFFFFF"), "banner": ("#8A1010", "#FDE8E8"),
               "computing": ("#7A4F00", "#FFFFFF"), "selected": ("#FFFFFF", "#0072B2"),
               "zero_label": ("#1A1A1A", "#FFFFFF"), "key": ("#1A1A1A", "#EEF2F7")}
_TEXT_DARK = {"body": ("#EDEDED", "#252525"), "muted": ("#A9B0BB", "#252525"),
              "title": ("#E8EDF5", "#1E1E1E"), "caption": ("#C4CCD8", "#1E1E1E"),
              "error": ("#FF8A80", "#1E1E1E"), "banner": ("#FFD6D6", "#5A1A1A"),
              "computing": ("#F0C36A", "#252525"), "selected": ("#0B0B0B", "#56B4E9"),
              "zero_label": ("#EDEDED", "#1E1E1E"), "key": ("#EDEDED", "#33373D")}

#: Presentation text size in pixels at the two projector heights it is designed for; between
#: and beyond them it follows the window's height.
STAGE_PX = ((720, 18), (1080, 24))
#: Left and right padding of the side panel's tabs at a desk: with the view tabs' 3 px its
#: three titles ran together ("Quantization Source Formats"); it has the room, where the
#: view tabs beside the panes have not.
SIDE_TAB_PAD_PX = 10


def stage_px(height: int | None) -> int:
    """Presentation text size for a window ``height`` pixels tall (18 px at 720, 24 at 1080,
    linear between, never below 18 nor above 32)."""
    (h0, p0), (h1, p1) = STAGE_PX
    if height is None:
        return p0
    return int(min(32, max(p0, math.ceil(p0 + (height - h0) * (p1 - p0) / (h1 - h0)))))


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two opaque ``#RRGGBB`` colours (1 to 21)."""
    def luminance(color: str) -> float:
        c = QColor(color)
        lin = [(v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4)
               for v in (c.redF(), c.greenF(), c.blueF())]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def over(color: QColor, background: str) -> str:
    """``color`` (with its alpha) composited over an opaque ``background``: what the eye sees."""
    bg = QColor(background)
    a = color.alphaF()
    mix = [round(255 * (a * f + (1 - a) * g)) for f, g in (
        (color.redF(), bg.redF()), (color.greenF(), bg.greenF()), (color.blueF(), bg.blueF()))]
    return QColor(*mix).name()


@dataclass(frozen=True)
class Theme:
    """Resolved look: colours, font size and line width for one (dark, presentation) choice."""

    dark: bool
    presentation: bool
    #: Presentation text size in pixels (see :func:`stage_px`); unused otherwise.
    text_px: int = STAGE_PX[0][1]

    @property
    def background(self) -> str:
        return "#1E1E1E" if self.dark else "#FFFFFF"

    @property
    def foreground(self) -> str:
        return "#EDEDED" if self.dark else "#1A1A1A"

    @property
    def font_pt(self) -> int:
        """Presentation text size in points: the smallest whole point size that is at least
        ``text_px`` pixels at 96 dpi (what projectors are driven at); 10 at a desk (the
        Matmul view's numbers start from it)."""
        return math.ceil(self.text_px * 0.75) if self.presentation else 10

    @property
    def text_pt(self) -> int:
        """Size in points of the window's text (and the application's font): 11 at a desk,
        :attr:`font_pt` when presenting."""
        return self.font_pt if self.presentation else 11

    def text_sizes(self) -> dict[str, int]:
        """Point sizes of the texts that are not :attr:`text_pt`, by widget object name."""
        if self.presentation:  # one size for every text (the projector's minimum is the
            return {"paneTitle": self.font_pt + 2}  # rule); titles a step up
        return {"paneTitle": 15, "hint": 10}

    @property
    def axis_font_pt(self) -> int:
        """Tick and axis-label size: as large as the text when presenting (numbers on axes are
        read from the back of the room too)."""
        return self.font_pt if self.presentation else 9

    def mark(self, role: str) -> str:
        """Opaque colour of one of the panes' plot marks (:data:`MARK_ROLES`)."""
        return (_MARKS_DARK if self.dark else _MARKS_LIGHT)[role]

    def text(self, role: str) -> tuple[str, str]:
        """(text colour, background) of a text role of the style sheet."""
        return (_TEXT_DARK if self.dark else _TEXT_LIGHT)[role]

    def text_roles(self) -> dict[str, tuple[str, str]]:
        """Every text role, for the contrast checks."""
        return dict(_TEXT_DARK if self.dark else _TEXT_LIGHT)

    @property
    def line_width(self) -> float:
        """Curve width in device-independent pixels (never 0: no hairlines in exports)."""
        return 4.0 if self.presentation else 1.6

    @property
    def marker_width(self) -> float:
        return 5.0 if self.presentation else 2.5

    def color(self, role: str) -> str:
        """Hex colour of a series role (see ``_SERIES_LIGHT`` for the names)."""
        return (_SERIES_DARK if self.dark else _SERIES_LIGHT)[role]

    def pen(self, role: str, *, width_scale: float = 1.0, dashed: bool = False) -> QPen:
        """A non-cosmetic-hairline pen for a series: explicit width so SVG export is visible."""
        pen = pg.mkPen(self.color(role), width=self.line_width * width_scale)
        if dashed:
            pen.setStyle(Qt.PenStyle.DashLine)
        return pen

    def brush(self, role: str, alpha: int = 255) -> QColor:
        c = QColor(self.color(role))
        c.setAlpha(alpha)
        return c


_current = Theme(dark=False, presentation=False)

#: The room (width, height in px) pyqtgraph gives an axis's tick text before it has measured
#: any (``AxisItem.__init__``): an axis shown at a text size for the first time starts there.
AXIS_TEXT_START = (30, 18)
#: Attribute of an axis: the room its tick text had at each text size it was shown at.
_TEXT_ROOMS = "_quantscope_text_rooms"


def _swap_text_room(axis: pg.AxisItem, before: Theme | None, theme: Theme) -> None:
    """Keep the room ``axis`` gave its tick text at ``before``'s text size, and give it the
    room it had at ``theme``'s when it was last shown at it.

    pyqtgraph lets that room grow with the text but shrink only when it is more than 10 px
    too big, so the room depends on every text the axis has measured. Left as it was, the
    room a talk's big ticks took stayed after the talk (13 px less plot in each pane the talk
    showed at 1920x1080); set to pyqtgraph's first guess, the axes that had measured wider
    text before the talk (the Trade-off view's SQNR axis) came back narrower. The room each
    text size had is what the window showed at that size: the talk's end gives it back."""
    rooms = getattr(axis, _TEXT_ROOMS, None)
    if rooms is None:
        rooms = {}
        setattr(axis, _TEXT_ROOMS, rooms)
    if before is not None:
        rooms[(before.presentation, before.axis_font_pt)] = (axis.textWidth, axis.textHeight)
    axis.textWidth, axis.textHeight = rooms.get((theme.presentation, theme.axis_font_pt),
                                                AXIS_TEXT_START)


#: Attribute naming the :class:`Theme` a plot or themed widget was last styled with.
_STYLED = "_quantscope_theme"


def restyle(widget: QWidget, theme: Theme) -> None:
    """``widget.apply_theme(theme)`` unless the widget has ``theme`` already.

    A themed view styles itself with the current theme as it is built, and the window's
    theme, applied once the window is built, reached every view again with the same theme
    (the Mapping view redrew both its plots: ~50 ms of a ~900 ms build). A view's
    ``apply_theme`` is a function of the theme alone, so a second call with an equal theme
    changes nothing; call it through here so that the theme it has is known."""
    if getattr(widget, _STYLED, None) == theme:
        return
    widget.apply_theme(theme)  # type: ignore[attr-defined]
    setattr(widget, _STYLED, theme)


def current_theme() -> Theme:
    """The theme last applied (views created later start from it)."""
    return _current


def resolve(dark: bool, presentation: bool, height: int | None = None) -> Theme:
    """The theme for a request; ``height`` (the window's) sizes presentation text."""
    return Theme(dark=bool(dark), presentation=bool(presentation),
                 text_px=stage_px(height) if presentation else STAGE_PX[0][1])


def configure_pyqtgraph(theme: Theme) -> None:
    """pyqtgraph defaults for plots created from now on (call before creating widgets)."""
    pg.setConfigOptions(background=theme.background, foreground=theme.foreground,
                        antialias=True)


#: The application's font size while a window builds its widgets (the theme then gives each
#: widget its size): a scroll area keeps the size its contents asked for the first time they
#: were asked, before any polish, in this font -- the side column's width comes from it.
BUILD_PT = 10


def set_application_pt(point_size: int) -> None:
    """The application's font at ``point_size``: a widget made under a window starts from it
    (see :mod:`quantscope.gui.widget_text`), as do the menus no window owns.

    A window sets it (:data:`BUILD_PT`) before it builds its widgets, and :func:`apply_theme`
    to the theme's text size: the first window of a process, built under Qt's default font,
    kept a side column 9 px narrower than every later window's."""
    app = QApplication.instance()
    if app is None:
        return
    font = app.font()
    if font.pointSize() != point_size:
        font.setPointSize(point_size)
        app.setFont(font)


def _palette(theme: Theme) -> QPalette:
    pal = QPalette()
    bg = QColor(theme.background)
    fg = QColor(theme.foreground)
    base = QColor("#2A2A2A") if theme.dark else QColor("#FFFFFF")
    button = QColor("#333333") if theme.dark else QColor("#F0F0F0")
    window_bg = QColor("#252525") if theme.dark else QColor("#F7F7F7")
    for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
        pal.setColor(group, QPalette.ColorRole.Window, window_bg)
        pal.setColor(group, QPalette.ColorRole.WindowText, fg)
        pal.setColor(group, QPalette.ColorRole.Base, base)
        pal.setColor(group, QPalette.ColorRole.AlternateBase, bg.darker(110) if not theme.dark
                     else bg.lighter(130))
        pal.setColor(group, QPalette.ColorRole.Text, fg)
        pal.setColor(group, QPalette.ColorRole.Button, button)
        pal.setColor(group, QPalette.ColorRole.ButtonText, fg)
        pal.setColor(group, QPalette.ColorRole.ToolTipBase, base)
        pal.setColor(group, QPalette.ColorRole.ToolTipText, fg)
        selected_fg, selected_bg = theme.text("selected")
        pal.setColor(group, QPalette.ColorRole.Highlight, QColor(selected_bg))
        pal.setColor(group, QPalette.ColorRole.HighlightedText, QColor(selected_fg))
    grey = QColor("#808080")
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text,
                 QPalette.ColorRole.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, grey)
    return pal


def style_plot(plot: pg.PlotItem, theme: Theme) -> None:
    """Axes colours, tick font and label size of one plot for ``theme``; nothing when the plot
    has them already (a view styles its plots as it is built, and the window's theme then
    reached them again: re-rendering every axis label and legend entry of 47 plots for
    nothing)."""
    before = getattr(plot, _STYLED, None)
    if before == theme:
        return
    setattr(plot, _STYLED, theme)
    # an axis re-renders its label on each of these calls: only what the new theme changes is
    # set again (presentation on or off keeps the colours, a dark toggle keeps the sizes)
    recolour = before is None or before.dark != theme.dark
    resize = (before is None or before.presentation != theme.presentation
              or before.axis_font_pt != theme.axis_font_pt)
    font = QFont()
    font.setPointSize(theme.axis_font_pt)
    for name in ("left", "bottom", "right", "top"):
        axis = plot.getAxis(name)
        if axis is None:
            continue
        if recolour or resize:  # the pen's colour, and its width, thicker when presenting
            axis.setPen(pg.mkPen(theme.foreground, width=1.5 if theme.presentation else 1.0))
        if recolour:
            axis.setTextPen(pg.mkPen(theme.foreground))
        if resize:
            _swap_text_room(axis, before, theme)
            axis.setTickFont(font)
            axis.label.setFont(font)
            axis.setStyle(tickTextOffset=8 if theme.presentation else 4)
    if not (recolour or resize):
        return
    if plot.titleLabel is not None:
        # LabelItem re-renders its HTML from these options on every setText, so set them
        # rather than the text item's font (which the next title change would discard)
        label = plot.titleLabel
        label.opts.update(color=theme.foreground, size=f"{theme.axis_font_pt + 1}pt",
                          bold=True)
        label.setText(label.text)
    if plot.legend is not None:
        plot.legend.setLabelTextColor(theme.foreground)
        plot.legend.setLabelTextSize(f"{theme.axis_font_pt}pt")
        for _, label in plot.legend.items:  # setAttr alone does not re-render the label
            label.setText(label.text)
        plot.legend.setBrush(QColor(theme.background))
        plot.legend.setPen(pg.mkPen(theme.color("grid"), width=1))


def stylesheet(theme: Theme) -> str:
    """The window's style sheet for ``theme``: the window's own rules (quantscope.gui.style),
    with colours from the theme, so that dark reaches every widget (a style sheet beats the
    palette). Every text colour is a role of :meth:`Theme.text`, which the contrast tests
    check. No text size: those are the widgets' own (:mod:`quantscope.gui.widget_text`), so
    presentation mode leaves the sheet as it is."""
    bg, fg = theme.background, theme.foreground
    panel = "#252525" if theme.dark else "#ffffff"
    border = "#4a4f57" if theme.dark else "#d5d9e0"
    muted = theme.text("muted")[0]
    title = theme.text("title")[0]
    caption = theme.text("caption")[0]
    error = theme.text("error")[0]
    banner_fg, banner_bg = theme.text("banner")
    computing = theme.text("computing")[0]
    key_fg, key_bg = theme.text("key")
    disabled = "#7A7A7A" if theme.dark else "#8C8C8C"
    # sliders: no background of their own (superqt's range slider, the clip window, draws
    # its handles in several passes, and the style sheet's QWidget background erased all but
    # the last -- one bare handle, no groove, once any theme toggle re-applied the sheet),
    # and a groove and handles drawn here, since the platform's vanish under a style sheet
    desk = resolve(theme.dark, False)
    return f"""
QMainWindow, QWidget {{ background: {panel}; color: {fg}; }}
QWidget:disabled {{ color: {disabled}; }}
QFrame#pane {{ border: 1px solid {border}; border-radius: 6px; background: {bg}; }}
QLabel#paneTitle {{ font-weight: 600; color: {title}; padding: 2px 2px; background: {bg}; }}
QLabel#paneKey {{ background: {bg}; }}
QLabel#paneDetail {{ color: {muted}; background: {bg}; }}
QLabel#paneCaption, QLabel#viewCaption, QLabel#sceneCaption {{ color: {caption};
                                                             font-style: italic; }}
QLabel#paneCaption {{ background: {bg}; }}
QLabel#paneError {{ color: {error}; }}
QLabel#fieldName {{ color: {muted}; background: {bg}; }}
QLabel#fieldValue {{ background: {bg}; }}
QLabel#hint {{ color: {muted}; }}
QLabel#headline {{ font-weight: 600; }}
QLabel#stageKeys {{ background: {key_bg}; color: {key_fg}; border-top: 1px solid {border};
                    padding: 3px 8px; }}
QLabel#banner {{ background: {banner_bg}; color: {banner_fg}; border: 1px solid {error};
                 border-radius: 4px; padding: 6px 10px; font-weight: 600; }}
QLabel#computing {{ color: {computing}; font-style: italic; }}
QGroupBox {{ font-weight: 600; border: 1px solid {border}; border-radius: 6px;
             margin-top: 10px; padding-top: 6px; }}
QGroupBox::title {{ subcontrol-origin: margin; left: 8px; padding: 0 4px; }}
QTableWidget {{ border: none; gridline-color: {border}; }}
QHeaderView::section {{ background: {panel}; color: {fg}; border: 1px solid {border};
                        padding: 2px 4px; }}
QSlider {{ background: transparent; }}
QSlider::groove:horizontal {{ height: 4px; background: {border}; border-radius: 2px; }}
QSlider::handle:horizontal {{ {_handle_rule(desk)} background: {panel};
                              border: 1px solid {muted}; }}
QSlider::handle:horizontal:disabled {{ border: 1px dashed {disabled}; }}
QTabBar::tab {{ {_tab_rule(desk)} }}
QTabWidget#sideTabs > QTabBar::tab {{ {_tab_padding(desk, SIDE_TAB_PAD_PX)} }}
QTabBar::tab:selected {{ border-bottom: 3px solid {theme.color("rounding")}; }}
QStatusBar {{ border-top: 1px solid {border}; }}
QMenuBar, QMenu {{ background: {panel}; color: {fg}; }}
QMenu::item:selected {{ background: {theme.text("selected")[1]};
                        color: {theme.text("selected")[0]}; }}
"""


def _handle_rule(theme: Theme) -> str:
    """A slider handle's size: bigger on a stage."""
    handle = 18 if theme.presentation else 14
    return f"width: {handle}px; margin: -{handle // 2 - 2}px 0; border-radius: {handle // 2}px;"


def _tab_rule(theme: Theme) -> str:
    """A tab's padding: wider on a stage (the five view tabs still fit beside the panes)."""
    return _tab_padding(theme, 8 if theme.presentation else 3)


def _tab_padding(theme: Theme, pad: int) -> str:
    """Tab padding of ``pad`` pixels left and right, and the line's room above and below."""
    # a tab is its line and 6 px above and below: a font with tall lines gives up the
    # room its line has beyond its letters (see gui/tight_lines.py) out of those 6 px
    tab_font = QFont(QApplication.font())
    tab_font.setPointSize(theme.text_pt)
    top, bottom = (6 - min(6, trim) for trim in font_line_room(tab_font))
    return f"padding: {top}px {pad}px {bottom}px;"


def stage_sheets(theme: Theme) -> dict[type, str]:
    """The sheets of their own that sliders and tab bars get while presenting (none at a
    desk: the window's sheet has the desk's sizes)."""
    if not theme.presentation:
        return {}
    return {QSlider: f"QSlider::handle:horizontal {{ {_handle_rule(theme)} }}",
            QTabBar: f"QTabBar::tab {{ {_tab_rule(theme)} }}"}


def _style_pyqtgraph_widgets(widgets: list[QWidget], theme: Theme) -> None:
    for view in widgets:
        if not isinstance(view, pg.GraphicsView):
            continue
        view.setBackground(theme.background)
        scene = view.scene()
        if scene is None:
            continue
        for item in scene.items():
            if isinstance(item, pg.PlotItem):
                style_plot(item, theme)


def _hide_clutter(root: QWidget, widgets: list[QWidget], presentation: bool) -> None:
    """Hide (or show again) the clutter among ``widgets``, ``root``'s descendants."""
    for w in widgets:
        if bool(w.property(CLUTTER_PROPERTY)) or isinstance(w, QStatusBar | QToolBar):
            # remember the pre-presentation visibility so leaving restores it exactly
            if presentation:
                if w.property("_clutter_was_visible") is None:
                    w.setProperty("_clutter_was_visible", not w.isHidden())
                w.setVisible(False)
            elif w.property("_clutter_was_visible") is not None:
                w.setVisible(bool(w.property("_clutter_was_visible")))
                w.setProperty("_clutter_was_visible", None)
    # Qt does not pass a hidden widget's size change up its layouts, so a widget restyled or
    # hidden on a tab page not shown kept its old room in the cached size hints: the Channels
    # tab held the 283 px of its hidden outlier box and pushed a 1600 px window to 1682
    for w in widgets:
        w.updateGeometry()
    for layout in descendants(root, QLayout):
        layout.invalidate()


def apply_theme(window: QWidget, *, dark: bool = False, presentation: bool = False,
                height: int | None = None) -> Theme:
    """Restyle ``window`` and everything in it; return the resolved :class:`Theme`.

    Safe to call repeatedly (menu toggles, F11, a presentation window resized): each call
    derives everything from the flags and ``height`` (default: the window's), so toggling
    back restores the previous look exactly.
    """
    global _current
    theme = resolve(dark, presentation, window.height() if height is None else height)
    _current = theme
    configure_pyqtgraph(theme)
    app = QApplication.instance()
    if app is not None:
        app.setPalette(_palette(theme))
    set_application_pt(theme.text_pt)
    window.setPalette(_palette(theme))
    if hasattr(window, "menuBar"):  # the main window: its style sheet carries the look
        sheet = stylesheet(theme)
        # setting a sheet re-polishes every widget under the window (~120 ms), even one equal
        # to the sheet it has: the window sets the light sheet before it builds its widgets
        if window.styleSheet() != sheet:
            window.setStyleSheet(sheet)
    _style_widgets(window, theme)
    setattr(window, _STYLED, theme)  # what a page built later is given (see style_page)
    window.setProperty("presentation", theme.presentation)
    window.setProperty("dark", theme.dark)
    return theme


def style_page(window: QWidget, page: QWidget) -> None:
    """Give ``page``, built after ``window``'s theme was applied (a view tab built when first
    shown), what :func:`apply_theme` gives the widgets already in the window: its plots,
    themed views and hidden clutter. The window's style sheet and palette reach the page
    as Qt polishes it."""
    _style_widgets(page, getattr(window, _STYLED, None) or _current)


def _style_widgets(root: QWidget, theme: Theme) -> None:
    """Restyle ``root`` and its descendants' own items for ``theme``."""
    widgets = descendants(root, QWidget)
    set_text_sizes([root, *widgets], theme.text_pt, theme.text_sizes())
    set_stage_sheets(widgets, stage_sheets(theme))
    _style_pyqtgraph_widgets(widgets, theme)
    for w in [root, *widgets]:
        if getattr(w, "themed", False):  # views that restyle their own items
            restyle(w, theme)
    _hide_clutter(root, widgets, theme.presentation)
