"""Light and dark themes, and presentation mode, for the whole window in one call.

``apply_theme(window, dark=..., presentation=...)`` sets the Qt palette, the application font,
pyqtgraph's default colours and every existing plot's background, axes and line widths. Views
that draw their own items set the class attribute ``themed = True`` and implement
``apply_theme(theme: Theme)``; this module calls it on the window and every descendant that has
it, so a view restyles its own curves (thick lines, bigger markers)
without this module knowing them.

Presentation mode is for projectors: large fonts, thick lines, the light theme (dark slides wash
out on most projectors, so presentation overrides ``dark``), and clutter hidden -- any widget
whose dynamic property ``"clutter"`` is true, plus status and tool bars.

Colours follow the Okabe-Ito palette, which stays distinguishable with the common forms of
colour blindness and in greyscale print: rounding is blue, clipping vermillion, SQNR green.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QPalette, QPen
from PySide6.QtWidgets import QApplication, QLayout, QStatusBar, QToolBar, QWidget

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


@dataclass(frozen=True)
class Theme:
    """Resolved look: colours, font size and line width for one (dark, presentation) choice."""

    dark: bool
    presentation: bool

    @property
    def background(self) -> str:
        return "#1E1E1E" if self.dark else "#FFFFFF"

    @property
    def foreground(self) -> str:
        return "#EDEDED" if self.dark else "#1A1A1A"

    @property
    def font_pt(self) -> int:
        """Application font size in points: readable from the back of a room when presenting."""
        return 17 if self.presentation else 10

    @property
    def axis_font_pt(self) -> int:
        return 16 if self.presentation else 9

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


def current_theme() -> Theme:
    """The theme last applied (views created later start from it)."""
    return _current


def resolve(dark: bool, presentation: bool) -> Theme:
    """The theme for a request: presentation mode is always light (see module docstring)."""
    return Theme(dark=bool(dark) and not presentation, presentation=bool(presentation))


def configure_pyqtgraph(theme: Theme) -> None:
    """pyqtgraph defaults for plots created from now on (call before creating widgets)."""
    pg.setConfigOptions(background=theme.background, foreground=theme.foreground,
                        antialias=True)


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
        pal.setColor(group, QPalette.ColorRole.Highlight, QColor(theme.color("rounding")))
        pal.setColor(group, QPalette.ColorRole.HighlightedText, QColor("#FFFFFF"))
    grey = QColor("#808080")
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text,
                 QPalette.ColorRole.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, grey)
    return pal


def style_plot(plot: pg.PlotItem, theme: Theme) -> None:
    """Axes colours, tick font and label size of one plot for ``theme``."""
    font = QFont()
    font.setPointSize(theme.axis_font_pt)
    for name in ("left", "bottom", "right", "top"):
        axis = plot.getAxis(name)
        if axis is None:
            continue
        axis.setPen(pg.mkPen(theme.foreground, width=1.5 if theme.presentation else 1.0))
        axis.setTextPen(pg.mkPen(theme.foreground))
        axis.setTickFont(font)
        axis.label.setFont(font)
        axis.setStyle(tickTextOffset=8 if theme.presentation else 4)
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
    with colours and font sizes from the theme, so dark and presentation reach every widget
    (a style sheet beats the palette and application font)."""
    bg, fg = theme.background, theme.foreground
    panel = "#252525" if theme.dark else "#ffffff"
    border = "#4a4f57" if theme.dark else "#d5d9e0"
    muted = "#a9b0bb" if theme.dark else "#555b66"
    title = "#e8edf5" if theme.dark else "#14213d"
    caption = "#c4ccd8" if theme.dark else "#3d4a5c"
    base = 14 if theme.presentation else 11
    # the panes' number tables are read up close, not from the back of the room: growing
    # them with the rest would push the window past a 1920-pixel projector
    table = 12 if theme.presentation else 11
    # sliders: no background of their own (superqt's range slider, the clip window, draws
    # its handles in several passes, and the style sheet's QWidget background erased all but
    # the last -- one bare handle, no groove, once any theme toggle re-applied the sheet),
    # and a groove and handles drawn here, since the platform's vanish under a style sheet
    handle = 18 if theme.presentation else 14
    # tab names are navigation, read up close: at the base size the four view tabs beside the
    # panes did not fit a 1600 px window and "Matmul" hid behind scroll arrows
    tab_pad = 8 if theme.presentation else 14
    return f"""
QMainWindow, QWidget {{ background: {panel}; color: {fg}; font-size: {base}pt; }}
QFrame#pane {{ border: 1px solid {border}; border-radius: 6px; background: {bg}; }}
QLabel#paneTitle {{ font-size: {base + 4}pt; font-weight: 600; color: {title};
                    padding: 2px 2px; }}
QLabel#paneCaption, QLabel#viewCaption {{ color: {caption}; font-style: italic; }}
QLabel#paneError {{ color: #e0524f; }}
QLabel#fieldName {{ color: {muted}; font-size: {table}pt; }}
QLabel#fieldValue {{ font-size: {table}pt; }}
QLabel#hint {{ color: {muted}; font-size: {base - 1}pt; }}
QLabel#banner {{ background: #fde8e8; color: #8a1010; border: 1px solid #f5b5b5;
                 border-radius: 4px; padding: 6px 10px; font-weight: 600; }}
QGroupBox {{ font-weight: 600; border: 1px solid {border}; border-radius: 6px;
             margin-top: 10px; padding-top: 6px; }}
QGroupBox::title {{ subcontrol-origin: margin; left: 8px; padding: 0 4px; }}
QTableWidget {{ border: none; gridline-color: {border}; }}
QHeaderView::section {{ background: {panel}; color: {fg}; border: 1px solid {border};
                        padding: 2px 4px; }}
QSlider {{ background: transparent; }}
QSlider::groove:horizontal {{ height: 4px; background: {border}; border-radius: 2px; }}
QSlider::handle:horizontal {{ width: {handle}px; margin: -{handle // 2 - 2}px 0;
                              background: {panel}; border: 1px solid {muted};
                              border-radius: {handle // 2}px; }}
QTabBar::tab {{ padding: 6px {tab_pad}px; font-size: {table}pt; }}
QTabBar::tab:selected {{ border-bottom: 3px solid {theme.color("rounding")}; }}
QStatusBar {{ border-top: 1px solid {border}; }}
QMenuBar, QMenu {{ background: {panel}; color: {fg}; }}
QMenu::item:selected {{ background: {theme.color("rounding")}; color: #ffffff; }}
"""


def _style_pyqtgraph_widgets(root: QWidget, theme: Theme) -> None:
    for view in root.findChildren(pg.GraphicsView):
        view.setBackground(theme.background)
        scene = view.scene()
        if scene is None:
            continue
        for item in scene.items():
            if isinstance(item, pg.PlotItem):
                style_plot(item, theme)


def _hide_clutter(root: QWidget, presentation: bool) -> None:
    for w in root.findChildren(QWidget):
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
    for w in root.findChildren(QWidget):
        w.updateGeometry()
    for layout in root.findChildren(QLayout):
        layout.invalidate()


def apply_theme(window: QWidget, *, dark: bool = False, presentation: bool = False) -> Theme:
    """Restyle ``window`` and everything in it; return the resolved :class:`Theme`.

    Safe to call repeatedly (menu toggles, F11): each call derives everything from the two
    flags, so toggling back restores the previous look exactly.
    """
    global _current
    theme = resolve(dark, presentation)
    _current = theme
    configure_pyqtgraph(theme)
    app = QApplication.instance()
    if app is not None:
        app.setPalette(_palette(theme))
        font = app.font()
        font.setPointSize(theme.font_pt)
        app.setFont(font)
    window.setPalette(_palette(theme))
    if hasattr(window, "menuBar"):  # the main window: its style sheet carries the look
        window.setStyleSheet(stylesheet(theme))
    _style_pyqtgraph_widgets(window, theme)
    for w in [window, *window.findChildren(QWidget)]:
        if getattr(w, "themed", False):  # views that restyle their own items
            w.apply_theme(theme)
    _hide_clutter(window, theme.presentation)
    window.setProperty("presentation", theme.presentation)
    window.setProperty("dark", theme.dark)
    return theme
