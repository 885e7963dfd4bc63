"""The explorer window: controls and source on the left, the four panes in a 2x2 grid, extra
views in tabs beside them, errors in an inline banner, progress and cancel in the status bar.

The window computes nothing and moves no data between the engine and the state: the live state
(:class:`~quantscope.state.live.LiveExplorer`) owns the one scheduler and the computation, and
the window only subscribes to its events and draws (:class:`~quantscope.gui.jobs.Jobs`, the one
Qt adapter, makes its outcomes arrive on the GUI thread). The views submit through the same
scheduler (their lanes).
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QEvent, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QApplication,
    QMainWindow,
    QWidget,
)

from quantscope.gui import collector
from quantscope.gui.jobs import Jobs
from quantscope.gui.loading import Loading
from quantscope.gui.model_mode import ModelMode
from quantscope.gui.numbers import metrics_entry
from quantscope.gui.picker import TensorPicker
from quantscope.gui.style import base_font, light_palette, reserve_lines
from quantscope.gui.theme import BUILD_PT, resolve, set_application_pt, stylesheet
from quantscope.gui.window_layout import HEADLINE_LINES, WindowLayout
from quantscope.state import (
    PANES,
    ExplorerState,
    Source,
    pane_title,
)
from quantscope.state.live import LiveExplorer
from quantscope.state.numbers import pane_numbers

#: How long the panes may lag the controls before they are marked as showing old numbers.
STALE_MS = 200


class MainWindow(WindowLayout, Loading, ModelMode, QMainWindow):
    """quantscope's main window over an :class:`ExplorerState` (see the module docstring).

    Attributes
    ----------
    state : ExplorerState
    panes : dict[str, Pane]
        The four panes by key (``quantscope.state.PANES``).
    views : QTabWidget
        Extra views added with :meth:`add_view` (hidden while empty).
    banner : QLabel
        The last error message (hidden when there is none).
    """

    #: Emitted after every pane shows the results of the current tensor and settings.
    results_shown = Signal()
    #: Emitted with each error message the window displays.
    error_shown = Signal(str)
    #: Emitted once the window has closed (by hand or by code) and stopped its work.
    closed = Signal()

    def __init__(self, state: ExplorerState | None = None, *, install_views: bool = True,
                 live: LiveExplorer | None = None) -> None:
        super().__init__()
        collector.hold()  # collections on the GUI thread only while the window lives
        self._holds_collector = True
        #: The live state: it computes; the window listens (one is made around ``state``).
        self.live = live if live is not None else LiveExplorer(state or ExplorerState())
        self.state = self.live.state
        self.setWindowTitle("quantscope — int8 quantization explorer")
        self.setAcceptDrops(True)
        self.setPalette(light_palette(self.palette()))
        self.setFont(base_font(self.font()))
        # the sheet the theme gives a new window (light, at a desk), before the widgets: it
        # stays, and the theme applied at the end of the build finds it in place (setting it
        # there re-polished every widget the build made)
        self.setStyleSheet(stylesheet(resolve(dark=False, presentation=False)))
        set_application_pt(BUILD_PT)
        self.picker: TensorPicker | None = None
        self.log_counts = True  # tails and lone outliers visible from the first frame
        self.presentation = False
        self.dark = False
        self._load_source: Source | None = None
        self._load_extras: tuple = (None, None, None)  # see Loading.load
        self._own_load = 0  # the ticket of the latest load the window started itself
        # Numbers that lag the controls must say so: after STALE_MS without results the panes'
        # numbers turn grey and the status bar says they belong to the previous settings.
        self.stale_timer = QTimer(self)
        self.stale_timer.setSingleShot(True)
        self.stale_timer.setInterval(STALE_MS)
        self.stale_timer.timeout.connect(self._mark_lagging)
        # New reports and histograms reach the panes a pane at a time, over turns of the
        # event loop (see _show_panes).
        self._queued_panes: list[str] = []  # in turn order
        self._queued_overviews: set[str] = set()  # of those, the ones with a new histogram
        self._queued_reports: set[str] = set()  # and with new results
        self._queued_stale: dict[str, bool] = {}  # and greyed or not on their turn
        self.pane_timer = QTimer(self)
        self.pane_timer.setSingleShot(True)
        self.pane_timer.setInterval(0)
        self.pane_timer.timeout.connect(self._show_next_pane)
        self.jobs = Jobs(self.live, self)  # the live state's outcomes, on this thread
        self._build()
        self._build_model_menu()
        live = self.live
        live.tensor_changed.connect(self._tensor_changed)
        live.settings_changed.connect(self._settings_changed)
        live.stale.connect(self._results_stale)
        live.results_ready.connect(self._show_results)
        live.partial.connect(self._show_partial)
        live.failed.connect(self._job_failed)
        live.progress.connect(self._job_progress)
        live.loaded.connect(self._loaded)
        self.state.prepared_changed.connect(self._show_overview)
        self.state.prepared_changed.connect(self._settle_heap)
        self.state.error.connect(self.show_error)
        if install_views:
            self._install_views()
        from quantscope.gui.desktop import Desktop

        self.desktop = Desktop(self)  # Ctrl+S, Open Recent, Help ▸ About, accessible names
        # re-sizes presentation text when a presenting window is resized (see resizeEvent)
        self.theme_timer = QTimer(self)
        self.theme_timer.setSingleShot(True)
        self.theme_timer.setInterval(0)
        self.theme_timer.timeout.connect(self._apply_theme)
        self._apply_theme()  # the look is the theme's from the start: F11 off returns to it
        # the widgets built under BUILD_PT have the window's text size now: what each layout
        # measured from them is measured again before the window is shown (the status bar's
        # height counted its labels' old lines, and the window's minimum with it)
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        self.update_headline()

    def _install_views(self) -> None:
        try:
            from quantscope.gui.views import install_views
        except ImportError as exc:  # the views are optional while being written
            if exc.name != "quantscope.gui.views":
                raise
            return
        install_views(self)

    def add_view(self, title: str, widget: QWidget) -> None:
        """Add an extra view as a tab beside the panes (the views engineer's entry point)."""
        self.views.addTab(widget, title)
        if self.views.isHidden():
            self.views.show()
            total = max(self.splitter.width(), 1000)
            self.splitter.setSizes([int(total * 0.7), int(total * 0.3)])
            self.compact.fit()

    # -- theme --------------------------------------------------------------------------------
    def set_presentation(self, on: bool) -> None:
        """Large fonts, thick lines, clutter hidden (the theme module does the styling), one
        pair of panes full width with the rest a key away (the stage module does the layout).
        Off restores the window exactly as it was before."""
        self.presentation = bool(on)
        reserve_lines(self.headline, 1 if self.presentation else HEADLINE_LINES, slack=0)
        if not self.presentation:
            self._show_full_screen(False)  # leaving the talk leaves full screen
        if self.presentation:
            self.compact.fit()  # gives the stage back what a small window left out
            self.stage.enter()
            self._apply_theme()
        else:
            self._apply_theme()
            self.stage.leave()
            self.compact.fit()
        self.update_headline()

    def update_headline(self) -> None:
        """One line saying what the screen shows, for whoever sees it first."""
        if self.model_active():  # the panes' line would describe what is not on screen
            text = self.model_headline()
            self.headline.setText(text)
            self.headline.setToolTip(text)
            return
        st = self.state
        what = st.source.label() if st.source is not None else "no tensor yet"
        if st.tensor is not None and (st.source is None or st.source.kind != "generator"):
            what += f" ({'×'.join(map(str, st.tensor.shape))})"  # a generator's label has it
        bits = st.settings.bits
        if self.presentation and st.settings.formats is not None:
            text = f"{what} · {self.stage.describe()}"  # each format names its own bits
        elif self.presentation:
            text = f"{what} · {self.stage.describe()} · int{bits}"
        elif st.settings.formats is not None:
            text = (f"{what} in four number formats: each pane shows the values' histogram, "
                    "the format's representable values over it, and the error")
        else:
            text = (f"{what} quantized to int{bits} four ways: each pane shows the values' "
                    f"histogram, the code grid over it, and the error")
        self.headline.setText(text)
        self.headline.setToolTip(text)

    def toggle_full_screen(self) -> None:
        """F11: present, filling the screen (what F11 means everywhere); while presenting:
        leave, giving the window back as it was before, look, state (maximized, or its size)
        and all. View > Presentation mode alone keeps the window's size."""
        if self.presentation:
            self.presentation_action.setChecked(False)
        else:
            self._show_full_screen(True)
            self.presentation_action.setChecked(True)

    def _show_full_screen(self, on: bool) -> None:
        if on:
            if not self.isFullScreen():
                self._before_full = (self.windowState(), self.size())
                self.setWindowState(self.windowState() | Qt.WindowState.WindowFullScreen)
        elif self.isFullScreen():
            state, size = getattr(self, "_before_full", (Qt.WindowState.WindowNoState,
                                                         self.size()))
            self.setWindowState(state & ~Qt.WindowState.WindowFullScreen)
            if not state & (Qt.WindowState.WindowMaximized | Qt.WindowState.WindowFullScreen):
                self.resize(size)  # not every platform restores the size of a normal window

    def event(self, event) -> bool:
        handled = super().event(event)
        if event.type() == QEvent.Type.LayoutRequest:
            self.compact.hold_floor()  # the contents' minimum may have changed
        return handled

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.presentation:
            from quantscope.gui.theme import current_theme, stage_px

            self.stage.fit()
            if stage_px(self.height()) != current_theme().text_px:
                self.theme_timer.start()
        else:
            self.compact.fit()  # a small screen: the views step behind a button
            self.narrow_side_panel()

    def set_dark(self, on: bool) -> None:
        """Dark or light theme."""
        self.dark = bool(on)
        self._apply_theme()

    def _apply_theme(self) -> None:
        try:
            from quantscope.gui.theme import apply_theme
        except ImportError as exc:
            if exc.name != "quantscope.gui.theme":
                raise
            return
        apply_theme(self, dark=self.dark, presentation=self.presentation)
        if self.presentation:
            self.stage.fit()  # the panes' widths follow the new text size
        # presentation stacks the controls' labels over their fields: the side column then
        # needs only its minimum, and the plots get the width back
        dock = getattr(self, "side_dock", None)
        if dock is None:
            return
        if not dock.isHidden():
            hint = dock.minimumSizeHint() if self.presentation else dock.sizeHint()
            self.resizeDocks([dock], [hint.width()], Qt.Orientation.Horizontal)
        if not self.presentation:
            self.compact.fit()  # the views' room beside the panes, at the new text size
            self.narrow_side_panel()

    def set_log_counts(self, on: bool) -> None:
        """Histogram counts on a log scale (outliers become visible) or linear."""
        self.log_counts = bool(on)
        self.log_action.setChecked(self.log_counts)
        self._show_overview()

    # -- errors -------------------------------------------------------------------------------
    @Slot(str)
    def show_error(self, message: str) -> None:
        """Show ``message`` in the inline banner and the status bar (never a blocking box)."""
        self.banner.setText(f"⚠  {message}")
        self.banner.show()
        self.statusBar().showMessage(message, 15_000)
        self.error_shown.emit(message)

    def clear_error(self) -> None:
        """Hide the banner."""
        self.banner.hide()
        self.banner.setText("")

    # -- reacting to the state ----------------------------------------------------------------
    def _tensor_changed(self) -> None:
        self.label_what_is_shown()
        self._show_titles()
        if self.live.preparing():  # set directly (tests, views): the state prepares it
            self._start_progress("preparing")

    def _settings_changed(self) -> None:
        self.update_headline()
        self._show_titles()

    def _show_titles(self) -> None:
        """Pane headings with the channel axis and the number of channels (or groups)."""
        st = self.state
        shape = st.tensor.shape if st.tensor is not None else None
        for key, pane in self.panes.items():
            pane.set_title(pane_title(key, st.settings, shape))

    def _results_stale(self) -> None:
        """The state is computing new reports: numbers still shown after STALE_MS turn grey."""
        if not self.stale_timer.isActive() and not self.computing_label.isVisible():
            self.stale_timer.start()

    @staticmethod
    def _settle_heap() -> None:
        """What a load built lives as long as the tensor (the engine's compiled loops, the
        prepared layouts): move it out of the cyclic GC's reach, as ``quantscope`` does with
        the window, so a full collection -- 30-100 ms with it all in view -- does not land in
        a slider drag. :meth:`shutdown` makes it collectable again."""
        gc.freeze()

    def _job_failed(self, kind: str, message: str) -> None:
        if kind == "compute":
            self._mark_stale(False)
        if kind in ("load", "prepare"):
            self._stop_progress()
        self.show_error(message)
        if kind == "load":  # the state drops a superseded load's failure
            self._load_failed()

    def _show_overview(self) -> None:
        """The tensor's histogram in every pane, a pane per turn (see :meth:`_show_panes`);
        the new range at once, while all are held (a range set on a later turn would move the
        linked panes that were painted already)."""
        self._queued_overviews.update(self.panes)
        self._queue_panes(self.panes)
        if self.state.overview is not None:
            for pane in self.panes.values():
                pane.show_range(self.state.overview)

    def _mark_stale(self, on: bool, keys: list[str] | None = None) -> None:
        """Grey the numbers of ``keys`` (every pane's when None), and say so, while they
        belong to the previous settings; or none."""
        if not on:
            self.stale_timer.stop()
        self.computing_label.setVisible(on)
        for key in self.panes if keys is None else keys:
            self._set_stale(key, on)

    def _mark_lagging(self) -> None:
        """The wait for results grew long: grey the panes that have none of the current
        settings yet. A pane that has them (a partial result's) shows current numbers."""
        st = self.state
        lagging = [k for k in self.panes if k not in st.results and k not in st.errors]
        if lagging:
            self._mark_stale(True, lagging)

    def _set_stale(self, key: str, on: bool) -> None:
        """Grey a pane's numbers or not; a queued pane's on its turn, with its new numbers
        (held, it shows neither until then). A style sheet on each of a pane's number labels
        costs ~1 ms: four panes at once made a result's arrival the loop's longest stretch."""
        if key in self._queued_panes:
            self._queued_stale[key] = on
        else:
            self.panes[key].set_stale(on)

    def _show_results(self) -> None:
        # held first: a held pane's numbers turn from grey on its turn, with the new ones
        self._show_panes(self.panes)
        self._mark_stale(False)

    def _show_partial(self) -> None:
        """The panes whose reports arrived first; the others stay as they are (greyed if the
        wait grows long) until the complete result."""
        st = self.state
        ready = [k for k in self.panes if k in st.results or k in st.errors]
        self._show_panes(ready)
        for key in ready:
            self._set_stale(key, False)

    def _show_panes(self, keys) -> None:
        """Queue ``keys`` for display, one pane at a time, each over two turns of the event
        loop (:meth:`_show_next_pane`): a pane's update and repaint take 10-35 ms (a first
        paint, with new axes, the most), and four in one repaint -- as on a load, or at 1M
        elements, where all reports arrive together -- kept the loop from timers and input
        for 100-300 ms. A queued pane stops repainting at once and keeps its old picture (its
        numbers and plots change together, on its turn, and a pane that follows another's
        zoom does not repaint early); each shows the newest report when its turn comes; a
        pane that shows it already (a partial result's) is left alone."""
        st = self.state
        keys = [k for k in keys
                if not (k in st.results and self.panes[k].report is st.results[k])]
        self._queued_reports.update(keys)
        self._queue_panes(keys)

    def _queue_panes(self, keys) -> None:
        for key in keys:
            if key not in self._queued_panes:
                self._queued_panes.append(key)
                self.panes[key].hold_paint()
        if not self.pane_timer.isActive():
            self.pane_timer.start()  # a zero timer: the turn that queued them ends first

    def _show_next_pane(self) -> None:
        """One turn of the pane at the head of the queue: its new data (set and prepared
        for painting) on one turn, its paint on the next. Together they took 10-15 ms of GUI
        thread at 16M elements, and beside a busy process a turn takes two to four times its
        CPU: apart, neither keeps the loop from timers and input for long."""
        st = self.state
        if self._queued_panes:
            key = self._queued_panes.pop(0)
            pane = self.panes[key]
            if key in self._queued_stale:
                pane.set_stale(self._queued_stale.pop(key))
            new_tensor = key in self._queued_overviews
            new_report = key in self._queued_reports
            if new_tensor:
                self._queued_overviews.discard(key)
                pane.set_overview(st.overview, self.log_counts)
            if new_report:
                self._queued_reports.discard(key)
                if key in st.results:
                    if pane.report is not st.results[key]:
                        pane.set_report(st.results[key])
                else:
                    pane.set_error(st.errors.get(key, ""))
            if new_tensor or new_report:
                pane.prepare_paint()
                self._queued_panes.insert(0, key)  # the paint's turn comes next
            else:
                pane.paint_now()
        if self._queued_panes:
            self.pane_timer.start()  # fires once the loop has handled what is pending
        elif self.all_shown():
            self.results_shown.emit()

    def all_shown(self) -> bool:
        """True when every pane shows a report (or an error) for the current settings and the
        histogram is drawn: what ``--screenshot`` waits for."""
        st = self.state
        return (st.overview is not None and bool(st.results or st.errors)
                and not self._queued_panes
                and all(k in st.results or k in st.errors for k in PANES))

    def views_ready(self) -> bool:
        """True when every added view that defines ``is_ready()`` says it is up to date (so a
        ``--screenshot`` never catches a view half-drawn)."""
        for i in range(self.views.count()):
            ready = getattr(self.views.widget(i), "is_ready", None)
            if callable(ready) and not ready():
                return False
        return True

    def metrics(self) -> dict:
        """The numbers every pane displays (the ``--metrics`` JSON): the keys of
        ``quantscope report --json`` (``ExplorerState.describe``) for the reports the panes
        show, and under ``panes`` each pane's title and displayed strings; the model view's
        table while it is on screen."""
        if self.model_active():
            return self.model_view.metrics()
        st = self.state
        doc = st.describe()
        doc["source_spec"] = st.source.to_dict() if st.source else None
        shown, refused, panes = {}, {}, {}
        for key, pane in self.panes.items():
            if pane.report is not None:
                entry = metrics_entry(pane.heading(), pane.report)
                entry["displayed"] = pane.displayed()
                panes[key] = entry
                shown[key] = pane.report
            else:
                panes[key] = {"title": pane.heading(), "error": pane.error.text()}
                refused[key] = pane.error.text()
        doc.pop("schemes", None)
        doc.pop("formats", None)
        doc.update(pane_numbers(st.settings, shown, refused))  # the reports on screen
        doc["panes"] = panes
        return doc

    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)
        self.closed.emit()

    def shutdown(self) -> None:
        """Stop the background work and every timer (idempotent)."""
        self.desktop.shutdown()
        self.stale_timer.stop()
        self.pane_timer.stop()
        self.theme_timer.stop()
        self.compact.room_timer.stop()
        for pane in self.panes.values():
            pane.rebin_timer.stop()
        self._queued_panes.clear()
        self._queued_overviews.clear()
        self._queued_reports.clear()
        self._queued_stale.clear()
        for pane in self.panes.values():
            pane.release_paint()  # no pane stays held
        self.statusBar().clearMessage()  # stops the status bar's message timeout timer
        self._stop_progress()
        if self.picker is not None:
            self.picker.close()
        controller = getattr(self, "views_controller", None)  # the views' own jobs
        if controller is not None and hasattr(controller, "shutdown"):
            controller.shutdown()
        if self.model_view is not None:
            self.model_view.shutdown()
        self.jobs.shutdown()  # the live state's scheduler: every job of the window and views
        gc.unfreeze()  # see _settle_heap
        if self._holds_collector:
            self._holds_collector = False
            collector.release()
