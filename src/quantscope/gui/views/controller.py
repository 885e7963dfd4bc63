"""The views' window integration: :class:`ViewsController` and :func:`install_views`.

The window calls ``install_views(window)`` once while it is built. It adds three tabs -- the
rounding-vs-clipping trade-off, per-channel detail and SQNR against bit width -- plus the
Matmul lab and the Mapping example, puts a one-sentence caption under each pane (View ▸ Show
captions), and adds the export and session commands to the File menu. Everything is reachable
from Python through ``window.views_controller`` (a :class:`ViewsController`), which is what the
tests drive.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QSplitter, QWidget

from quantscope.core.labs.captions import pane_captions
from quantscope.errors import QuantscopeError
from quantscope.gui.export import save_image, save_numbers, save_quantized
from quantscope.gui.session import apply_session, capture, load_session, save_session
from quantscope.gui.theme import style_page
from quantscope.gui.views.bitwidth import BitwidthView
from quantscope.gui.views.channels import ChannelsView
from quantscope.gui.views.formats import FormatsView
from quantscope.gui.views.lazy_tabs import LazyTabs, ViewTable
from quantscope.gui.views.mapping import MappingView
from quantscope.gui.views.matmul import MatmulView
from quantscope.gui.views.tradeoff import TradeoffView
from quantscope.state import PANES, pane_title
from quantscope.state.talk import load_talk


class StackedViews(QSplitter):
    """Views one above the other in one tab (each with a ``plot``); ready when each of them
    is.

    As the tab is resized, the views' plots get equal heights: each view gets what its
    text, axes and legend take around its plot, and the rest is split evenly. Halving the
    tab gave the Bit width curves, which carry a legend under their axis, 104 px of plot to
    the formats' 166 at a 1280x720 desk. A handle dragged by hand holds until the next
    resize."""

    def __init__(self, *views: QWidget) -> None:
        super().__init__(Qt.Orientation.Vertical)
        self.setChildrenCollapsible(False)
        for view in views:
            self.addWidget(view)
            # a plot is laid out after its view: once it has been, the split is measured
            # again (a legend's rows follow the width, so a resize changes what is around it)
            view.plot.getViewBox().sigResized.connect(self._on_plot_resized)
        #: True once a handle was dragged by hand, until the next resize.
        self.held = False
        self.splitterMoved.connect(self._on_handle_dragged)

    def is_ready(self) -> bool:
        return all(self.widget(i).is_ready() for i in range(self.count()))

    def resizeEvent(self, event) -> None:
        self.held = False
        around = self._around_plots()  # measured before the views take their new heights
        super().resizeEvent(event)
        if around:
            self._balance(around)

    def _on_handle_dragged(self, *_args) -> None:
        self.held = True

    def _on_plot_resized(self, *_args) -> None:
        around = self._around_plots()
        if around and not self.held:
            self._balance(around)

    def _around_plots(self) -> dict[int, float]:
        """The height each shown view spends around its plot, by index, as the last layout
        left it (a plot is laid out after its view is resized, so both are read together,
        before a resize); empty with fewer than two views or one not laid out yet. The text,
        axes and legend keep their height as the view's height changes."""
        shown = [i for i in range(self.count()) if not self.widget(i).isHidden()]
        around = {}
        for i in shown:
            view = self.widget(i)
            box = view.plot.getViewBox().height()
            if box <= 0 or view.height() <= box:
                return {}
            around[i] = view.height() - box
        return around if len(around) >= 2 else {}

    def _balance(self, around: dict[int, float]) -> None:
        """Split the height so that the plots of the views in ``around`` are equally tall."""
        shown = list(around)
        sizes = self.sizes()
        total = sum(sizes[i] for i in shown)
        each = (total - sum(around.values())) / len(shown)
        if each <= 0:
            return
        want = list(sizes)
        for i in shown:
            want[i] = round(around[i] + each)
        want[shown[-1]] += total - sum(want[i] for i in shown)
        if max(abs(a - b) for a, b in zip(want, sizes, strict=True)) > 1:
            self.setSizes(want)


class ViewsController(QObject):
    """Owns the views of one window: captions, exports, sessions, shutdown.

    The Trade-off, Channels and Mapping tabs are built with the window (Trade-off is the
    tab shown first; Channels' controls set the views' minimum width and Mapping's plots
    their height, so the window's minimum size never waits for a tab to be shown); Bit width
    (with Formats) and the Matmul lab are built when first shown or read (see
    :mod:`~quantscope.gui.views.lazy_tabs`): ``views["Matmul"]``, ``bitwidth``, ``formats``
    and ``bits_and_formats`` build theirs on first read."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        state = window.state
        self._jobs = jobs = window.jobs  # one scheduler: the window's
        self.tabs = LazyTabs(window.views, window.add_view,
                             lambda page: style_page(window, page))
        self.tabs.page_built.connect(self._on_tab_built)
        self.views = ViewTable(self.tabs)
        self.tradeoff = TradeoffView(state, jobs=jobs)
        self.channels = ChannelsView(state)
        self.tabs.add("Trade-off", self.tradeoff)
        self.tabs.add("Channels", self.channels)
        # the Bit width tab grows into bits and formats: SQNR against bits for the int
        # schemes above, against bits per element for every format below
        self.tabs.add_later("Bit width", self._build_bits_and_formats)
        for title in ("Trade-off", "Channels"):
            self.views.add(title, title)
        self.views.add("Bit width", "Bit width", lambda tab: tab.widget(0))
        self.views.add("Formats", "Bit width", lambda tab: tab.widget(1))
        self.show_captions = True
        state.results_changed.connect(self.update_captions)
        window.installEventFilter(self)
        self._build_menus()
        self.update_captions()

    def _build_bits_and_formats(self) -> StackedViews:
        state = self.window.state
        formats = FormatsView(state, jobs=self._jobs)
        tab = StackedViews(BitwidthView(state, jobs=self._jobs), formats)
        # presenting, the tab's height goes to the bit-width curves alone: at 720 rows and
        # 18 px text two plots stacked are too short for their axis labels
        for part in (formats, tab.handle(1)):  # the view, its handle
            part.setProperty("clutter", True)
        return tab

    @property
    def bits_and_formats(self) -> StackedViews:
        """The Bit width tab: the bit-width curves above, the formats below."""
        return self.tabs.page("Bit width")

    @property
    def bitwidth(self) -> BitwidthView:
        return self.views["Bit width"]

    @property
    def formats(self) -> FormatsView:
        return self.views["Formats"]

    def _on_tab_built(self, title: str, page: QWidget) -> None:
        """A tab built later: its controls get their accessible names as the others did."""
        desktop = getattr(self.window, "desktop", None)
        if desktop is not None:
            desktop.label_soon()

    # -- captions ---------------------------------------------------------------------------------
    def set_show_captions(self, on: bool) -> None:
        """Show or hide the panes' captions (speakers choose)."""
        if hasattr(self, "captions_action") and self.captions_action.isChecked() != bool(on):
            self.captions_action.setChecked(bool(on))  # its toggled signal calls us back
            return
        self.show_captions = bool(on)
        self.update_captions()

    def update_captions(self) -> None:
        state = self.window.state
        texts: dict[str, str] = {}
        compact = getattr(self.window, "compact", None)
        room = compact is None or not compact.short  # a short window keeps the plots' height
        if self.show_captions and state.results and room:
            ov = state.overview
            try:
                caps = pane_captions(state.results, *((ov.min, ov.max) if ov else ()))
                texts = {pane: cap.text for pane, cap in caps.items()}
            except ValueError:  # per-tensor results only and no overview yet
                texts = {}
        for pane, widget in self.window.panes.items():
            text = texts.get(pane, "")
            label = getattr(widget, "caption", None)
            if label is not None and label.text() == text and label.isHidden() == (not text):
                continue  # unchanged: spare the window a relayout on every slider step
            if hasattr(widget, "set_caption"):
                widget.set_caption(text)

    # -- exports and sessions (menu actions call these after a file dialog) ---------------------
    def current_view(self) -> QWidget:
        tabs = getattr(self.window, "views", None)
        widget = tabs.currentWidget() if tabs is not None else None
        return widget if widget is not None else self.tradeoff

    def view_data(self) -> dict[str, dict]:
        # a view not built yet has computed nothing, like a built one never shown
        return {title: view.export_data() for title, view in self.views.built().items()
                if view.export_data()}

    def export_window(self, path: str | Path) -> None:
        save_image(self.window, path)

    def export_view(self, path: str | Path, view: QWidget | None = None) -> None:
        """A view's figure (the current view's by default), or a pane as it is on screen."""
        view = view or self.current_view()
        save_image(view, path, figure=any(view is v for v in self.views.built().values()))

    def export_numbers(self, path: str | Path) -> None:
        save_numbers(self.window.state, path, self.view_data())

    def export_quantized(self, pane: str, path: str | Path) -> None:
        save_quantized(self.window.state, pane, path)

    def save_session(self, path: str | Path) -> None:
        save_session(capture(self.window.state, dark=getattr(self.window, "dark", False),
                             presentation=getattr(self.window, "presentation", False)), path)
        self._session_file(path)

    def open_session(self, path: str | Path) -> None:
        """Load and apply a session file; a bad one raises and changes nothing."""
        # the source is listed and checked in the window's load job, as it loads
        apply_session(self.window, load_session(path, check_source=False))
        self._session_file(path)

    def _session_file(self, path: str | Path) -> None:
        """Ctrl+S writes to the session last saved or opened, and it joins Open Recent."""
        desktop = getattr(self.window, "desktop", None)
        if desktop is not None:
            desktop.session_opened(path)

    def _guarded(self, fn, *args) -> None:
        try:
            fn(*args)
        except QuantscopeError as exc:
            self.window.show_error(str(exc))

    def _ask(self, title: str, filters: str, save: bool = True, replace: bool = True) -> str:
        ask = QFileDialog.getSaveFileName if save else QFileDialog.getOpenFileName
        options = QFileDialog.Option(0) if replace else QFileDialog.Option.DontConfirmOverwrite
        path, _ = ask(self.window, title, "", filters, options=options)
        return path

    # -- menus ----------------------------------------------------------------------------------
    def _action(self, menu, text: str, slot, **kw) -> QAction:
        act = QAction(text, self.window, **kw)
        # checkable actions follow setChecked too (menus, shortcuts and code alike)
        (act.toggled if act.isCheckable() else act.triggered).connect(slot)
        menu.addAction(act)
        return act

    def _build_menus(self) -> None:
        bar = self.window.menuBar()
        menus = {a.text().replace("&", ""): a.menu() for a in bar.actions() if a.menu()}
        file_menu = menus.get("File") or bar.addMenu("&File")
        view_menu = menus.get("View") or bar.addMenu("&View")
        first = file_menu.actions()[-1] if file_menu.actions() else None  # keep Quit last
        export = file_menu.addMenu("&Export")
        pics = "Pictures (*.png *.svg)"
        self._action(export, "Window as PNG/SVG…", lambda: self._export_dialog(
            "Export the window", pics, self.export_window))
        self._action(export, "Current view as PNG/SVG…", lambda: self._export_dialog(
            "Export the current view", pics, self.export_view))
        panes = export.addMenu("Pane as PNG/SVG")
        for pane in PANES:
            self._action(panes, pane_title(pane) + "…", lambda _=False, p=pane: (
                self._export_dialog("Export a pane", pics,
                                    lambda path: self.export_view(path, self.window.panes[p]))))
        self._action(export, "Numbers as CSV/JSON…", lambda: self._export_dialog(
            "Export the numbers", "Numbers (*.json *.csv)", self.export_numbers))
        quant = export.addMenu("Quantized tensor (.npz)")
        for pane in PANES:
            self._action(quant, pane_title(pane) + "…", lambda _=False, p=pane: (
                self._export_dialog("Export the quantized tensor", "NumPy archive (*.npz)",
                                    lambda path: self.export_quantized(p, path))))
        # Save session (Ctrl+S) and Save session as… are the window's own (gui.desktop)
        self._action(file_menu, "Open session…", self._open_session_dialog)
        self._action(file_menu, "Open talk…", self._open_talk_dialog)
        self._action(file_menu, "Add this screen to a talk…", self._add_scene_dialog)
        if first is not None:  # move Quit (the menu's last item) back to the end
            file_menu.removeAction(first)
            file_menu.addSeparator()
            file_menu.addAction(first)
        self.captions_action = self._action(view_menu, "Show &captions", self.set_show_captions,
                                            checkable=True)
        self.captions_action.setChecked(True)
        self.wide_action = self._action(view_menu, "&Views full width", self.set_views_wide,
                                        checkable=True, shortcut="F9")

    def set_views_wide(self, on: bool) -> None:
        """Give the explanatory views the whole width (for a talk) or restore the panes."""
        if self.wide_action.isChecked() != bool(on):
            self.wide_action.setChecked(bool(on))  # its toggled signal calls us back
            return
        splitter = getattr(self.window, "splitter", None)
        if splitter is None:
            return
        panes = splitter.widget(0)
        sizes = splitter.sizes()
        if on:
            if sizes[0] > 0:
                self._pane_sizes = sizes
            # hidden, not just squeezed to 0 px: a hidden widget's minimum width no longer
            # holds the window wider than a projector
            panes.hide()
        else:
            panes.show()
            total = sum(sizes)
            splitter.setSizes(getattr(self, "_pane_sizes", None)
                              or [int(total * 0.62), total - int(total * 0.62)])
        compact = getattr(self.window, "compact", None)
        if compact is not None:
            compact.fit()  # narrow: the views step back behind their button

    def _export_dialog(self, title: str, filters: str, fn) -> None:
        path = self._ask(title, filters)
        if path:
            self._guarded(fn, path)

    def add_scene(self, path: str | Path) -> None:
        """Append what the window shows, as a scene titled by its headline, to a talk."""
        self.window.talk_player.add_scene(path, self.window.headline.text()[:80])

    def open_talk(self, path: str | Path) -> None:
        self.window.talk_player.open(load_talk(path))

    def _add_scene_dialog(self) -> None:
        # an existing talk is appended to, not replaced: no "replace it?" question
        path = self._ask("Add this screen to a talk", "Talk (*.json)", replace=False)
        if path:
            self._guarded(self.add_scene, path)

    def _open_talk_dialog(self) -> None:
        path = self._ask("Open a talk", "Talk (*.json)", save=False)
        if path:
            self._guarded(self.open_talk, path)

    def _open_session_dialog(self) -> None:
        path = self._ask("Open a session", "Session (*.json)", save=False)
        if path:
            self._guarded(self.open_session, path)

    # -- lifetime ---------------------------------------------------------------------------------
    def settle(self, timeout_s: float = 120.0) -> None:
        """Wait until every visible view has drawn its data (``--screenshot`` calls this after
        the panes are ready, so a saved picture never shows an empty view)."""
        import time

        from PySide6.QtWidgets import QApplication

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            QApplication.processEvents()
            busy = [v.job for v in self.views.built().values()
                    if v.job is not None and v.job.busy]
            if not busy:
                QApplication.processEvents()  # deliver the last queued results
                return
            for job in busy:
                job.wait(0.05)

    def shutdown(self) -> None:
        """Stop the views' work (no job outlives the window)."""
        for view in self.views.built().values():  # a view built later starts no work
            view.shutdown()

    def eventFilter(self, obj, event) -> bool:
        if obj is self.window and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False


def install_views(window) -> ViewsController:
    """Add the explanatory views, captions, exports and sessions to ``window``."""
    controller = ViewsController(window)
    window.views_controller = controller
    # the integer matmul lab: its own operands, not the explorer's tensor
    controller.tabs.add_later("Matmul", lambda: MatmulView(window.state, jobs=window.jobs))
    controller.views.add("Matmul", "Matmul")
    controller.tabs.add("Mapping", MappingView())  # the worked example, live
    controller.views.add("Mapping", "Mapping")
    return controller
