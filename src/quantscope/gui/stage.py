"""Presentation layout ("the stage"): what a projector shows, and the keys that change it.

At 1280x720 with every text at least 18 px, four panes and the views cannot share the screen
and stay readable (the histograms shrank to a few pixels), so presentation shows one *pair* of
panes side by side, full width, and everything else a key press away:

==========  =====================================================================
1           per tensor: symmetric vs asymmetric (the default pair)
2           per channel: symmetric vs asymmetric
3           symmetric: per tensor vs per channel
4           asymmetric: per tensor vs per channel
V           the views (full width) instead of the panes, and back
[ / ]       previous / next view tab
C           show or hide the controls
F11         leave presentation (restores the window exactly as it was)
==========  =====================================================================

The keys are listed on screen in a bar under the panes. :class:`Stage` saves what it changes
on entering (pane positions, which of panes / views / controls / menu bar were shown, the
splitter sizes, the current tab) and puts it back on leaving.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel

from quantscope.gui.pane import link_plots
from quantscope.gui.tight_lines import tighten
from quantscope.state import PANES, PaneKey, pane_title

#: key -> (the two panes, left and right; what the pair compares).
PAIRS: dict[str, tuple[tuple[PaneKey, PaneKey], str]] = {
    "1": ((PaneKey.SYMMETRIC_TENSOR, PaneKey.ASYMMETRIC_TENSOR),
          "per tensor: symmetric vs asymmetric"),
    "2": ((PaneKey.SYMMETRIC_CHANNEL, PaneKey.ASYMMETRIC_CHANNEL),
          "per channel: symmetric vs asymmetric"),
    "3": ((PaneKey.SYMMETRIC_TENSOR, PaneKey.SYMMETRIC_CHANNEL),
          "symmetric: per tensor vs per channel"),
    "4": ((PaneKey.ASYMMETRIC_TENSOR, PaneKey.ASYMMETRIC_CHANNEL),
          "asymmetric: per tensor vs per channel"),
}
DEFAULT_PAIR = "1"


class Stage(QObject):
    """The presentation layout of one window (see the module docstring).

    Attributes
    ----------
    pair : str
        The key of the pair shown (:data:`PAIRS`).
    showing_views : bool
        True while the views fill the stage instead of the panes.
    keys : QLabel
        The bar that lists the keys (shown only in presentation).
    """

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.active = False
        self.pair = DEFAULT_PAIR
        self.showing_views = False
        self.talk_keys = False  # PageDown / PageUp are listed once a talk is open
        self._saved: dict | None = None
        self.keys = tighten(QLabel(""))  # a font with tall lines makes the bar no taller
        self.keys.setObjectName("stageKeys")
        self.keys.hide()
        self.actions: dict[str, QAction] = {}
        for key in PAIRS:
            self._action(key, f"PaneKey pair {key}", lambda _=False, k=key: self.show_pair(k))
        self._action("V", "Views / panes", lambda: self.show_views(not self.showing_views))
        self._action("]", "Next view", lambda: self.step_view(1))
        self._action("[", "Previous view", lambda: self.step_view(-1))
        self._action("C", "Controls", self.toggle_controls)
        self.update_keys()

    def _action(self, key: str, text: str, slot) -> None:
        act = QAction(text, self.window, shortcut=key, enabled=False)
        act.triggered.connect(slot)
        self.window.addAction(act)  # works with the menu bar hidden
        self.actions[key] = act

    # -- entering and leaving -----------------------------------------------------------------
    def enter(self) -> None:
        """Save the window's layout and show the stage."""
        if self.active:
            return
        w = self.window
        self._saved = {
            "splitter": w.splitter.sizes(),
            "panes_hidden": w.splitter.widget(0).isHidden(),
            "views_hidden": w.views.isHidden(),
            "dock_hidden": w.side_dock.isHidden(),
            "menu_hidden": w.menuBar().isHidden(),
            "view_index": w.views.currentIndex(),
            "hidden_panes": {k: p.isHidden() for k, p in w.panes.items()},
        }
        self.active = True
        for act in self.actions.values():
            act.setEnabled(True)
        w.menuBar().hide()
        w.side_dock.hide()
        self.keys.show()
        self.showing_views = False
        self._arrange()

    def leave(self) -> None:
        """Put back exactly what :meth:`enter` saved."""
        if not self.active:
            return
        self.active = False
        for act in self.actions.values():
            act.setEnabled(False)
        w, saved = self.window, self._saved or {}
        self.keys.hide()
        grid = w.pane_grid
        for key in PANES:
            grid.removeWidget(w.panes[key])
        for i, key in enumerate(PANES):
            grid.addWidget(w.panes[key], *divmod(i, 2))
            w.panes[key].setHidden(saved.get("hidden_panes", {}).get(key, False))
        grid.setRowStretch(1, 1)
        link_plots([w.panes[key] for key in PANES])
        w.splitter.widget(0).setHidden(saved.get("panes_hidden", False))
        w.views.setHidden(saved.get("views_hidden", w.views.count() == 0))
        w.side_dock.setHidden(saved.get("dock_hidden", False))
        w.menuBar().setHidden(saved.get("menu_hidden", False))
        if w.views.count():
            w.views.setCurrentIndex(saved.get("view_index", 0))
        if "splitter" in saved:
            w.splitter.setSizes(saved["splitter"])
        self._saved = None

    # -- keys ---------------------------------------------------------------------------------
    def show_pair(self, key: str) -> None:
        """Show the pair ``key`` (:data:`PAIRS`) side by side, the panes instead of the views."""
        if key not in PAIRS:
            raise ValueError(f"unknown pane pair {key!r}; choose one of {', '.join(PAIRS)}")
        self.pair = key
        self.showing_views = False
        if self.active:
            self._arrange()

    def show_views(self, on: bool) -> None:
        """The views full width (``on``) or the pair of panes."""
        self.showing_views = bool(on) and self.window.views.count() > 0
        if self.active:
            self._arrange()

    def step_view(self, step: int) -> None:
        """Next / previous view tab (and show the views)."""
        tabs = self.window.views
        if tabs.count() == 0:
            return
        tabs.setCurrentIndex((tabs.currentIndex() + step) % tabs.count())
        self.show_views(True)

    def toggle_controls(self) -> None:
        """Show or hide the side column of controls (beside the left pane alone when the
        window is too narrow for the controls and both panes)."""
        w = self.window
        dock = w.side_dock
        dock.setVisible(dock.isHidden())
        if not dock.isHidden():  # room for the sliders beside the labels' stacked text
            width = max(dock.minimumSizeHint().width(), int(w.width() * 0.3))
            w.resizeDocks([dock], [width], Qt.Orientation.Horizontal)
        self.fit()

    def fit(self) -> None:
        """Hide the pair's right pane while the controls leave too little room for both."""
        w = self.window
        if not self.active or self.showing_views:
            return
        left, right = PAIRS[self.pair][0]
        need = sum(w.panes[k].minimumSizeHint().width() for k in (left, right)) + 24
        room = w.width() - (w.side_dock.minimumSizeHint().width()
                            if not w.side_dock.isHidden() else 0)
        w.panes[right].setHidden(room < need)

    def visible_panes(self) -> tuple[str, ...]:
        """The panes on screen now."""
        if self.active and self.showing_views:
            return ()
        keys = PAIRS[self.pair][0] if self.active else PANES
        return tuple(k for k in keys if not self.window.panes[k].isHidden())

    def _arrange(self) -> None:
        w = self.window
        grid = w.pane_grid
        left, right = PAIRS[self.pair][0]
        for key in PANES:
            grid.removeWidget(w.panes[key])
            w.panes[key].setHidden(key not in (left, right))
        grid.addWidget(w.panes[left], 0, 0)
        grid.addWidget(w.panes[right], 0, 1)
        link_plots([w.panes[left], w.panes[right]],
                   hidden=tuple(w.panes[k] for k in PANES if k not in (left, right)))
        grid.setRowStretch(1, 0)
        w.splitter.widget(0).setHidden(self.showing_views)
        w.views.setHidden(not self.showing_views)
        self.fit()
        self.update_keys()
        if hasattr(w, "update_headline"):
            w.update_headline()

    def update_keys(self) -> None:
        parts = ["F11 leave", "1–4 pane pairs", "V views" if not self.showing_views
                 else "V panes", "[ ] view tabs", "C controls"]
        if self.talk_keys:
            parts.append("PgDn/PgUp scenes")
        self.keys.setText("   ·   ".join(parts))

    def describe(self) -> str:
        """What the stage shows, in a few words (for the headline): in a comparison of number
        formats the pair's formats, since the int schemes the keys name are not on show."""
        if self.showing_views:
            tabs = self.window.views
            return f"the {tabs.tabText(tabs.currentIndex())} view"
        settings = self.window.state.settings
        if settings.formats is not None:
            # the format and its granularity, as the pane's title line shows them
            left, right = (" ".join(pane_title(key, settings).split(" · ")[:2])
                           for key in PAIRS[self.pair][0])
            return f"number formats: {left} vs {right}"
        return PAIRS[self.pair][1]
