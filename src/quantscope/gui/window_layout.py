"""How the main window is laid out: built once, in :class:`WindowLayout` (a mixin of
:class:`quantscope.gui.window.MainWindow`, kept apart so the window module reads as behaviour).

Left: a dock with two tabs (Quantization controls over the tensor summary; Source). Centre: an
inline error banner, a one-line headline, then a splitter with the four panes in a 2x2 grid
and the views' tabs, and (in presentation) the bar of keys (:mod:`quantscope.gui.stage`).
Bottom: the status bar with the source, a "computing" note, and progress + cancel.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from quantscope.gui.caption_label import pair_captions
from quantscope.gui.compact import Compact
from quantscope.gui.controls import ControlsPanel
from quantscope.gui.format_controls import FormatControls
from quantscope.gui.pane import Pane, link_plots
from quantscope.gui.source_panel import SourcePanel
from quantscope.gui.stage import Stage
from quantscope.gui.style import reserve_lines
from quantscope.gui.talk_player import TalkPlayer
from quantscope.gui.tight_lines import tighten, tighten_bar
from quantscope.gui.tight_menus import tighten_menus
from quantscope.state import PANES, pane_title

#: Lines the headline keeps room for outside a talk (see ``reserve_lines``).
HEADLINE_LINES = 2


class WindowLayout:
    """Builds the widgets of the main window (``self`` is the QMainWindow)."""

    def _build(self) -> None:
        central = QWidget()
        outer = QVBoxLayout(central)
        outer.setContentsMargins(6, 6, 6, 0)
        self.banner = QLabel("")
        self.banner.setObjectName("banner")
        self.banner.setWordWrap(True)
        self.banner.hide()
        outer.addWidget(self.banner)
        # one line that tells a newcomer what the screen shows (see MainWindow.update_headline)
        self.headline = QLabel("")
        self.headline.setObjectName("headline")
        self.headline.setWordWrap(True)  # one line, unless the controls squeeze it
        tighten(self.headline)  # a font with tall lines makes it no taller
        # room for two lines: a headline that wraps on a load would resize every pane
        # (MainWindow.set_presentation keeps one for the shorter headline of a talk)
        reserve_lines(self.headline, HEADLINE_LINES, slack=0)
        outer.addWidget(self.headline)
        # on a small screen the views step behind a button in the menu bar's corner
        self.compact = Compact(self)
        # the scene of an open talk and its caption (hidden without a talk)
        self.talk_player = TalkPlayer(self)
        outer.addWidget(self.talk_player.caption)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        grid_host = QWidget()
        grid = QGridLayout(grid_host)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(6)
        self.pane_grid = grid
        self.panes: dict[str, Pane] = {}
        for i, key in enumerate(PANES):
            pane = Pane(key, pane_title(key, self.state.settings))
            pane.histogram_source = self.state.histogram  # binned on each pane's buckets
            pane.display_source = self.state.display  # shaped with its result
            pane.clipped_source = self.state.clipped_histogram  # per unit's own window
            grid.addWidget(pane, *divmod(i, 2))
            self.panes[key] = pane
        for i in range(2):  # equal halves, whatever the captions and numbers say (a pane's
            grid.setColumnStretch(i, 1)  # size hint follows its text; a shift of a few
            grid.setRowStretch(i, 1)  # pixels resized all four plots, twice per step)
        link_plots([self.panes[key] for key in PANES])
        pair_captions([pane.caption for pane in self.panes.values()])  # a row reads alike
        follow_user_zoom([pane.strip for pane in self.panes.values()])
        self.splitter.addWidget(grid_host)
        self.views = QTabWidget()
        self.views.setDocumentMode(True)
        self.views.hide()
        self.splitter.addWidget(self.views)
        self.splitter.setStretchFactor(0, 7)  # the panes are the product; views explain them
        self.splitter.setStretchFactor(1, 3)
        outer.addWidget(self.splitter, 1)
        self.compact.install()
        self.stage = Stage(self)
        outer.addWidget(self.stage.keys)
        self.setCentralWidget(central)
        self._build_side()
        self._build_status()
        self._build_menus()
        self.menuBar().setCornerWidget(self.compact.button)

    def _build_side(self) -> None:
        self.controls = ControlsPanel(self.state)
        self.controls.log_counts.setChecked(self.log_counts)
        self.controls.log_counts.toggled.connect(self.set_log_counts)
        self.source_panel = SourcePanel(self.state, self.load, self.open_dialog)
        tabs = QTabWidget()
        tabs.setObjectName("sideTabs")
        quant = QWidget()
        qv = QVBoxLayout(quant)
        qv.setContentsMargins(4, 4, 4, 4)
        qv.addWidget(self.controls)
        qv.addWidget(self.source_panel.summary_box, 1)
        self.source_panel.summary_box.setProperty("clutter", True)  # hidden in presentation
        # scrolled: at presentation sizes the controls are taller than a 720-row projector
        quant_scroll = QScrollArea()
        quant_scroll.setWidgetResizable(True)
        quant_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        quant_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        quant_scroll.setWidget(quant)
        tabs.addTab(quant_scroll, "Quantization")
        self.quant_scroll = quant_scroll
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.source_panel)
        tabs.addTab(scroll, "Source")
        self.format_controls = FormatControls(self.state)
        fmt = QWidget()
        fv = QVBoxLayout(fmt)
        fv.setContentsMargins(4, 4, 4, 4)
        fv.addWidget(self.format_controls)
        fv.addStretch(1)
        # hidden in presentation, like the tensor summary: its menus at presentation sizes
        # would widen the side panel (and the window, for good)
        self.format_controls.setProperty("clutter", True)
        tabs.addTab(fmt, "Formats")
        self.side_tabs = tabs
        dock = QDockWidget("", self)
        dock.setObjectName("sideDock")
        dock.setTitleBarWidget(QWidget())
        dock.setFeatures(QDockWidget.DockWidgetFeature.NoDockWidgetFeatures)
        dock.setWidget(tabs)
        dock.setMinimumWidth(290)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        self.side_dock = dock

    def _build_status(self) -> None:
        # a font with tall lines makes the bar no taller (QStatusBar keeps 3 px above its row
        # and 2 below)
        bar = tighten_bar(self.statusBar(), (3, 2))
        self.source_status = QLabel("")
        bar.addWidget(self.source_status, 1)
        self.computing_label = QLabel("computing… the numbers shown are for the previous "
                                      "settings")
        self.computing_label.setObjectName("computing")
        self.computing_label.hide()
        bar.addWidget(self.computing_label)
        box = QWidget()
        h = QHBoxLayout(box)
        h.setContentsMargins(0, 0, 0, 0)
        self.progress_label = QLabel("")
        self.progress = QProgressBar()
        self.progress.setFixedWidth(220)
        self.progress.setRange(0, 0)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel_long_work)
        for w in (self.progress_label, self.progress, self.cancel_button):
            h.addWidget(w)
        bar.addPermanentWidget(box)
        self.progress_box = box
        box.hide()

    def _build_menus(self) -> None:
        tighten_menus(self.menuBar())  # a font with tall lines makes no item taller
        file_menu = self.menuBar().addMenu("&File")
        act = QAction("&Open…", self, shortcut=QKeySequence.StandardKey.Open,
                      triggered=self.open_dialog)
        file_menu.addAction(act)
        file_menu.addAction(QAction("&Quit", self, shortcut=QKeySequence.StandardKey.Quit,
                                    triggered=self.close))
        view = self.menuBar().addMenu("&View")
        self.log_action = QAction("&Log counts", self, checkable=True, checked=self.log_counts,
                                  toggled=self.controls.log_counts.setChecked)
        view.addAction(self.log_action)
        self.presentation_action = QAction("&Presentation mode", self, checkable=True,
                                           toggled=self.set_presentation)
        view.addAction(self.presentation_action)
        self.full_screen_action = QAction("&Full-screen presentation / leave", self,
                                          shortcut="F11", triggered=self.toggle_full_screen)
        view.addAction(self.full_screen_action)
        self.addAction(self.full_screen_action)  # the key works with the menu bar hidden
        self.dark_action = QAction("&Dark theme", self, checkable=True, toggled=self.set_dark)
        view.addAction(self.dark_action)
        self.view_menu = view


def follow_user_zoom(plots) -> None:
    """Zoom and pan in one plot's x axis carry over to the others, as ``setXLink`` does, but
    ranges set by code do not: each occupancy strip spans its own pane's codes (-127..127 or
    -128..127), and a new bit width reaching one pane first must not redraw the other panes'
    old bars on new axes (that was four extra pane repaints per change)."""
    def follow(source):
        def apply(*_):
            lo, hi = source.getViewBox().viewRange()[0]
            for other in plots:
                if other is not source:
                    other.setXRange(lo, hi, padding=0)
        return apply

    for plot in plots:
        plot.getViewBox().sigRangeChangedManually.connect(follow(plot))
