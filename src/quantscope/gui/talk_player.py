"""Playing a talk in the window: PageDown / PageUp (what a presentation clicker sends) step
through the scenes of a :class:`quantscope.state.talk.Talk`.

Going to a scene puts the window where the scene says: its settings, its tensor (loaded in
the worker unless it is already the one shown), its tab (the panes or a view), its pair of
panes on the stage, its zoom of the histograms. A line under the headline names the scene and
carries its caption, which :func:`quantscope.state.talk.scene_caption` writes from the reports
the panes show -- it is rewritten whenever they change, so it never describes other numbers.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction

from quantscope.errors import QuantscopeError
from quantscope.gui.caption_label import CaptionLabel
from quantscope.gui.tight_lines import tighten
from quantscope.state import PANES
from quantscope.state.talk import TABS, Scene, Talk, load_talk, save_talk, scene_caption

#: Lines the scene's line may take (a caption longer than that at the window's width ends in
#: "…", the whole of it in the tooltip).
SCENE_LINES = 3


def _same_tensor(a, b) -> bool:
    """Two sources of the same tensor (the suggested channel axis aside: the settings
    carry the axis)."""
    return a is not None and b is not None and \
        dataclasses.replace(a, axis=None) == dataclasses.replace(b, axis=None)


class TalkPlayer(QObject):
    """The talk open in one window (none until :meth:`open`).

    Attributes
    ----------
    talk : Talk or None
    number : int
        The scene shown, counted from 1 (0 while no talk is open).
    caption : CaptionLabel
        "Scene n of N · title: caption", under the headline (hidden without a talk).
    """

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.talk: Talk | None = None
        self.number = 0
        self._zoom_pending = False
        # broken between its clauses, and with a font of tall lines no taller than its
        # letters need: every row it does not take is the histograms'
        self.caption = tighten(CaptionLabel(SCENE_LINES), every_line=True)
        self.caption.setObjectName("sceneCaption")
        self.caption.hide()
        self.actions: dict[str, QAction] = {}
        for key, step in (("PgDown", 1), ("PgUp", -1)):
            act = QAction("Next scene" if step > 0 else "Previous scene", window,
                          shortcut=key, enabled=False)
            act.triggered.connect(lambda _=False, s=step: self.step(s))
            window.addAction(act)  # works with the menu bar hidden, as on the stage
            self.actions[key] = act
        window.state.results_changed.connect(self.update_caption)
        window.state.partial_results.connect(self.update_caption)
        # the zoom waits until the panes show the scene: a pane that takes a new tensor's
        # overview on its own turn fits the whole range, after any zoom set before it
        window.results_shown.connect(self._zoom)

    @property
    def scene(self) -> Scene | None:
        """The scene shown (None while no talk is open)."""
        return self.talk.scene(self.number) if self.talk is not None else None

    def open(self, talk: Talk, number: int = 1) -> None:
        """Open ``talk`` at scene ``number`` (a number the talk does not have is refused
        before anything changes)."""
        talk.scene(number)
        self.talk = talk
        for act in self.actions.values():
            act.setEnabled(True)
        self.window.stage.talk_keys = True
        self.window.stage.update_keys()
        self.caption.show()
        self.go(number)

    def step(self, step: int) -> None:
        """The next (``step`` = 1) or previous (-1) scene; nothing past the first or last."""
        if self.talk is None:
            return
        number = min(max(self.number + step, 1), len(self.talk.scenes))
        if number != self.number:
            self.go(number)

    def go(self, number: int) -> None:
        """Show scene ``number`` (see the module docstring)."""
        if self.talk is None:
            raise QuantscopeError("no talk is open")
        scene = self.talk.scene(number)
        self.number = number
        w = self.window
        state = w.state
        changes = dataclasses.asdict(scene.settings)
        axis = changes.pop("axis")
        # the axis travels with the source (as in a session): the scene's tensor may have
        # another number of dimensions than the one shown, which update_settings would refuse
        source = dataclasses.replace(scene.source, axis=axis)
        if state.tensor is not None and _same_tensor(state.source, source):
            state.update_settings(**changes, axis=axis)
        else:
            state.update_settings(**changes)
            w.load(source, pick=False)
        self._show_tab(scene)
        self._zoom_pending = True
        self.update_caption()
        if self.window.all_shown():  # nothing to compute: no panes will be shown again
            self._zoom()

    def _show_tab(self, scene: Scene) -> None:
        w = self.window
        # by the tab's title: a tab may hold more than its view (Bit width holds Formats)
        titles = [w.views.tabText(i) for i in range(w.views.count())]
        if scene.tab != "panes" and scene.tab in titles:
            w.views.setCurrentIndex(titles.index(scene.tab))
        if w.presentation:
            w.stage.show_pair(scene.pair)
            w.stage.show_views(scene.tab != "panes")
        elif scene.tab != "panes" and w.views.isHidden():
            w.views.show()

    def _zoom(self) -> None:
        """The scene's zoom of the histograms, once its tensor is shown (a new tensor's
        overview sets the whole range); later zooms by hand are the speaker's."""
        scene, state = self.scene, self.window.state
        if not self._zoom_pending or scene is None or state.overview is None \
                or not self._shown(scene):
            return
        self._zoom_pending = False
        lo, hi = scene.zoom or (state.overview.min, state.overview.max)
        pad = 0.0 if scene.zoom else 0.02  # the panes' own fit (Pane.set_overview)
        for pane in self.window.panes.values():
            pane.plot.setXRange(lo, hi, padding=pad)

    def _shown(self, scene: Scene) -> bool:
        """True when the window shows the scene's own tensor and settings."""
        state = self.window.state
        return _same_tensor(state.source, scene.source) and state.settings == scene.settings

    def update_caption(self) -> None:
        """Rewrite the scene line from the reports shown now."""
        scene = self.scene
        if scene is None:
            return
        # until the scene's own tensor and settings are computed, the reports are another's
        shown = self._shown(scene)
        text = scene_caption(scene, self.window.state.results) if shown else ""
        head = f"Scene {self.number} of {len(self.talk.scenes)} · {scene.title}"
        self.caption.setText(f"{head}: {text}" if text else head)
        self.caption.setToolTip(self.caption.text())  # whole, should "…" end its lines

    # -- writing a talk from the window ---------------------------------------------------
    def capture(self, title: str) -> Scene:
        """The screen as a scene: its tensor, settings, tab, pane pair and zoom."""
        w = self.window
        state = w.state
        if state.source is None or state.source.kind not in ("sample", "file", "generator"):
            raise QuantscopeError("a scene needs a tensor from a file, a sample or a generator "
                                  "(load one first)")
        views_shown = (w.stage.showing_views if w.presentation
                       else w.splitter.widget(0).isHidden())
        tab = w.views.tabText(w.views.currentIndex()) if views_shown else "panes"
        if tab not in TABS:
            raise QuantscopeError(f"the {tab} view cannot be a talk's scene (scenes show "
                                  f"{', '.join(TABS)})")
        (lo, hi), _ = w.panes[PANES[0]].plot.getViewBox().viewRange()
        ov = state.overview
        zoom = None if ov is None or (lo <= ov.min and hi >= ov.max) else (lo, hi)
        return Scene(title, state.source, state.settings, tab, w.stage.pair, zoom)

    def add_scene(self, path: str | Path, title: str) -> Talk:
        """Append the screen (:meth:`capture`) to the talk file ``path`` (a new talk when
        there is none); an unreadable talk file is refused and left as it is."""
        scene = self.capture(title)
        path = Path(path)
        talk = load_talk(path) if path.exists() else Talk(path.stem, ())
        talk = Talk(talk.title, (*talk.scenes, scene))
        save_talk(talk, path)
        return talk
