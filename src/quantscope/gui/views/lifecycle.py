"""The one lifecycle of the explanatory views.

Every view restyles its own items (``themed``: :mod:`quantscope.gui.theme` calls
``apply_theme``), draws only while on screen (asked while hidden, it is *dirty* and draws when
shown: a hidden tab costs nothing during a slider drag) and stops its work when it closes.
That is :class:`View`.

The views that compute from the explorer's state share one more pattern, :class:`StateView`:
a view declares which settings its work depends on (:meth:`StateView.depends`), builds an
immutable Qt-free request from the state (:meth:`StateView.request`: a ``state/`` module's
``...Request.of(state)``, with a ``key`` and a ``run(ctx)``), and displays the result
(:meth:`StateView.show_result`). The base does the rest, the same way for every view:

* its work runs on the view's :class:`~quantscope.gui.jobs.Lane` of the window's scheduler;
* what is shown is *stale* once the tensor changes, or settings it depends on do;
* a settings change while the work runs cancels it: the panes are about to compute, and their
  latency is what a dragging user feels;
* stale work is requested again once the panes have their new numbers and the controls have
  rested for :attr:`StateView.settle_ms`, never alongside the panes' own computation.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import ClassVar

from PySide6.QtWidgets import QWidget

from quantscope.gui.jobs import Jobs, Lane
from quantscope.state import ExplorerState


class View(QWidget):
    """What every explanatory view shares (see the module docstring).

    Attributes
    ----------
    job : Lane or None
        The view's key of the scheduler, when it has background work.
    """

    #: :mod:`quantscope.gui.theme` calls :meth:`apply_theme` on every theme change.
    themed = True
    #: A request while hidden waits for the next show (False: the view is cheap, it always
    #: draws at once).
    defers_while_hidden: ClassVar[bool] = True
    job: Lane | None = None

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._dirty = self.defers_while_hidden

    def apply_theme(self, theme) -> None:
        """Restyle the view's own items (pens, brushes, fonts) for ``theme``."""

    def refresh(self) -> None:
        """Bring the view up to date (a view says how)."""

    def on_screen(self) -> bool:
        """True when the view may draw now; else it is marked dirty and :meth:`refresh`
        runs when it is next shown."""
        if self.isVisible():
            self._dirty = False
            return True
        self._dirty = True
        return False

    def on_show(self) -> None:
        """The view was just shown (before a dirty view's :meth:`refresh`)."""

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.on_show()
        if self._dirty:
            self.refresh()

    def is_ready(self) -> bool:
        """True unless the view is on show with results not yet of what it displays (what
        ``--screenshot`` waits for)."""
        return True

    def shutdown(self) -> None:
        """Stop the view's work and timers (the window calls this as it closes)."""
        if self.job is not None:
            self.job.shutdown()

    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)


class StateView(View):
    """A view whose work follows the explorer's state (see the module docstring). A
    subclass builds its widgets, then calls :meth:`bind`; without ``jobs`` (a view used alone)
    its lane has a scheduler of its own.

    Attributes
    ----------
    state : ExplorerState or None
    job : Lane
        The view's key of the scheduler.
    shown_key : object
        The ``key`` of the request whose result is on screen (None before one).
    """

    #: The view's key in the scheduler.
    lane: ClassVar[str]
    #: Quiet time after the panes' last update before the work starts.
    settle_ms: ClassVar[int] = 250
    #: The work follows the panes' results (not only the tensor): it starts once they arrive
    #: (never at once on a new tensor or its preparation).
    needs_results: ClassVar[bool] = False

    def __init__(self, parent: QWidget | None = None, *, jobs: Jobs | None = None) -> None:
        super().__init__(parent)
        self.state: ExplorerState | None = None
        self.job = Lane(self.lane, jobs, self)
        self.job.finished.connect(self._on_finished)
        self.job.failed.connect(self.show_failure)
        self.job.progress.connect(self.show_progress)
        self.shown_key: object = None
        self._stale = True

    # -- what a view provides -----------------------------------------------------------------
    def depends(self, settings) -> Hashable | None:
        """The part of ``settings`` the work depends on (None: all of them)."""
        return None

    def request(self, state: ExplorerState):
        """The Qt-free request for ``state`` as it is now: ``key`` and ``run(ctx)``."""
        raise NotImplementedError

    def show_result(self, result) -> None:
        """Display what the request's ``run`` returned (after its key)."""

    def show_failure(self, message: str) -> None:
        """The work failed with ``message``."""

    def show_progress(self, fraction: float) -> None:
        """The work is ``fraction`` done."""

    def show_computing(self) -> None:
        """The work was just requested."""

    def show_stale(self) -> None:
        """What is shown no longer belongs to the tensor or the settings it depends on (the
        new work starts once the panes have their numbers and the hand rests): a view that
        draws curves fades them, so the panes' new numbers never sit over old ones as if
        they matched."""

    def follow(self) -> None:
        """The state changed: what follows it at once (a marker on the current setting)."""

    def on_tensor_changed(self) -> None:
        """A new tensor (or its preparation) is in place; the old result is stale."""

    def on_results_changed(self) -> None:
        """The panes have new results (after the work is requested if it was stale)."""

    # -- the lifecycle ------------------------------------------------------------------------
    def bind(self, state: ExplorerState) -> None:
        """Follow ``state``: the work is stale when the tensor or the settings it depends on
        change, and runs again once the panes have their numbers."""
        self.state = state
        state.tensor_changed.connect(self._on_tensor_changed)
        state.prepared_changed.connect(self._on_tensor_changed)
        state.settings_changed.connect(self._on_settings_changed)
        state.results_changed.connect(self._on_results_changed)
        self._on_tensor_changed()

    def refresh(self, delay_ms: int = 0) -> None:
        """Request the work for the state as it is now (when on screen; else when shown)."""
        st = self.state
        if st is None or st.tensor is None or (self.needs_results and not st.results):
            return
        self.follow()
        if not self.on_screen():
            return  # computed when first shown: hidden views cost nothing
        self._stale = False
        request = self.request(st)
        self.show_computing()
        self.job.submit(request.run, delay_ms=delay_ms)

    def is_stale(self) -> bool:
        """True while what is shown is not of the current tensor and settings."""
        return self._stale

    def _on_tensor_changed(self) -> None:
        self.shown_key = None
        self._stale = True
        self.job.cancel()
        self.show_stale()
        if self.state is not None and self.state.tensor is not None:
            self.follow()
        self.on_tensor_changed()
        if self.state is not None and self.state.results and not self.needs_results:
            self.refresh()

    def _on_settings_changed(self) -> None:
        if self.state is None:
            return
        self.follow()
        if self.job.busy:  # the panes are about to compute: step aside, resume afterwards
            self.job.cancel()
            self._stale = True
        depends = self.depends(self.state.settings)
        if depends is None or depends != self.shown_key:
            self._stale = True
            self.show_stale()

    def _on_results_changed(self) -> None:
        if self.state is None:
            return
        if self._stale and self.state.results:
            self.refresh(delay_ms=self.settle_ms)  # when the hand rests (see Lane.submit)
        self.on_results_changed()

    def _on_finished(self, outcome) -> None:
        self.shown_key, result = outcome
        self.show_result(result)
