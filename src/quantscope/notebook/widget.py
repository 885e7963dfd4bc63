"""``quantscope.widget(x, ...)``: the panes with live controls in any Jupyter front end.

The controls write to an :class:`~quantscope.state.ExplorerState`, the state the window and
``quantscope report`` compute through, so a setting gives the same numbers in all three; the
panes are redrawn by :mod:`quantscope.notebook.raster` on the kernel and sent as small palette
PNGs (nothing needs Qt, a display or a JavaScript build). The tensor is prepared once (sorted,
with prefix sums), after which a change costs ~2^bits binary searches per pane, so a redraw
stays interactive at 16M elements.

One live state behind every front end: the widget drives a
:class:`~quantscope.state.live.LiveExplorer`, the state and scheduler the window, ``qs.figure``
and the Python handle use, so a setting is computed by the same job and gives the same
mapping everywhere. A change never blocks the kernel: the control's callback only checks and
records the new setting (the live state queues its reports; the latest change wins, a newer
one replaces a queued computation and makes a running one stale, so dragging a slider never
builds a backlog). A notebook kernel has no event loop to hand the outcome back on, so the
thread that computed it delivers it (:meth:`QuantWidget._pump`, one at a time under the
widget's lock: that lock is the state's "owner's thread") and then draws the PNGs and sends
them (ipykernel sends comm messages from any thread), outside the lock, dropping a drawing
whose settings changed meanwhile.
"""

from __future__ import annotations

import collections
import html
import threading
import time
from collections.abc import Callable

from quantscope.errors import UserError
from quantscope.inputs import live_state
from quantscope.notebook.font import text_width
from quantscope.notebook.raster import TEXT_SIZE, draw_pane, encode_png, view_range
from quantscope.state import METHODS, PANES, RUNTIME_DESCRIPTIONS, ExplorerState
from quantscope.state.compute import ComputeResult
from quantscope.state.display import FIELDS, bucket_grid, display_values
from quantscope.state.formats import CHOICES, DEFAULT_COMPARISON
from quantscope.state.histogram import pane_histogram
from quantscope.state.live import LiveExplorer
from quantscope.state.setting_names import settings_changes
from quantscope.state.settings import Settings
from quantscope.state.titles import pane_title

#: Pixels of one pane's image (two panes side by side fill a notebook's width).
PANE_SIZE = (640, 280)
#: What each pane's image shows, after the pane's own title.
DRAWN = "values per bin (log count)"
#: ``scheme`` control value that shows every pane.
ALL_PANES = "all four"
#: ``layout`` control values: the four int schemes, or one number format per pane.
LAYOUTS = ("int schemes", "number formats")
#: The numbers under each pane (the window's fields, its strings).
SHOWN = ("scale", "zero_point", "sqnr_db", "rounding_mse", "clipping_mse", "codes_used",
         "clipped_fraction")


def _ipywidgets():
    try:
        import ipywidgets
    except ImportError:
        raise UserError("quantscope.widget needs ipywidgets: pip install 'quantscope[notebook]'"
                        ) from None
    return ipywidgets


#: Seconds a widget waits for its tensor's load and first reports.
LOAD_TIMEOUT_S = 600.0
#: The name prefix of a widget's job threads: a kernel keeps them as long as the widget,
#: apart from the window's (a window's close checks that none of its own are left).
THREAD_NAME = "quantscope-widget"


class QuantWidget:
    """The panes of one tensor with controls for bits, method, percentile, clip window,
    scheme, preset and formats (see the module docstring).

    Attributes
    ----------
    live : LiveExplorer
        The live state: it computes every change in its scheduler (the window's kind).
    state : ExplorerState
        ``live.state``: what every control writes to and every pane is drawn from.
    controls : dict[str, ipywidgets.Widget]
        The controls by name: ``bits``, ``method``, ``percentile``, ``clip``, ``scheme``,
        ``preset``, ``layout`` and ``format0`` .. ``format3``; set their ``value`` from Python
        and the panes follow, as when a person moves them.
    images : dict[str, ipywidgets.Image]
        Each pane's image (``value`` is its PNG).
    last_redraw_s : float
        Seconds the last change took, from the control's new value to new images.
    redraws : int
        Redraws installed since the widget was made (a superseded change draws nothing).
    """

    def __init__(self, live: LiveExplorer) -> None:
        w = _ipywidgets()
        self.live = live
        self.state = state = live.state
        # one writer of the state and the controls at a time: the kernel's thread (a control
        # moved, set()) or a job's (an outcome delivered, a redraw installed); re-entrant, as
        # a control set while holding it calls back at once
        self._lock = threading.RLock()
        self._local = threading.local()  # per thread: "this thread is echoing the state"
        self._asked = 0.0  # when the change the pending redraw is for was made
        self._idle = threading.Event()
        self._idle.set()
        self._to_draw: _Snapshot | None = None  # complete results delivered, not yet drawn
        self._shown_generation = state.generation  # the results the images show
        self.redraws = 0
        self.closed = False
        #: The last windows shown on the clip slider (what a browser may echo back).
        self._shown_windows: collections.deque[tuple[float, float]] = collections.deque(
            maxlen=16)
        lo, hi = self._data_range()
        s = state.settings
        layout = w.Layout(width="auto")
        self.controls = {
            "bits": w.IntSlider(value=s.bits, min=2, max=8, description="bits"),
            "method": w.Dropdown(options=METHODS, value=s.method, description="method"),
            "percentile": w.BoundedFloatText(value=s.percentile, min=50.0, max=100.0,
                                             step=0.001, description="percentile"),
            "clip": w.FloatRangeSlider(value=(lo, hi), min=lo, max=hi, step=(hi - lo) / 1000,
                                       description="clip window", readout_format=".4g",
                                       layout=w.Layout(width="420px")),
            "scheme": w.Dropdown(options=(ALL_PANES, *PANES), value=ALL_PANES,
                                 description="scheme"),
            "preset": w.Dropdown(options=[(k or "none", k) for k in RUNTIME_DESCRIPTIONS],
                                 value=s.runtime, description="preset"),
            "layout": w.ToggleButtons(options=LAYOUTS, value=LAYOUTS[s.formats is not None],
                                      description="panes"),
        }
        for i, spec in enumerate(s.formats or DEFAULT_COMPARISON):
            self.controls[f"format{i}"] = w.Dropdown(options=CHOICES, value=spec,
                                                     description=f"format {i + 1}",
                                                     layout=layout)
        for key, control in self.controls.items():
            control.observe(lambda change, key=key: self._on_control(key), names="value")
        self.images = {p: w.Image(format="png", layout=w.Layout(width="100%")) for p in PANES}
        self.titles = {p: w.HTML() for p in PANES}
        self.tables = {p: w.HTML() for p in PANES}
        self.message = w.HTML()
        self.last_redraw_s = 0.0
        self.pngs: dict[str, bytes] = {}
        # the title is drawn in the image (a saved pane still says what it shows); the HTML
        # one is kept for screen readers' and tests' sake, not displayed
        boxes = {p: w.VBox([self.images[p], self.tables[p]],
                           layout=w.Layout(width="49%", min_width="300px"))
                 for p in PANES}
        self._boxes = boxes
        c = self.controls
        rows = [w.HBox([c["bits"], c["method"], c["percentile"]]),
                w.HBox([c["clip"], c["scheme"], c["preset"]]),
                w.HBox([c["layout"]]),
                w.HBox([c[f"format{i}"] for i in range(4)])]
        self.panes_box = w.HBox(list(boxes.values()),
                                layout=w.Layout(flex_flow="row wrap", width="100%"))
        self.box = w.VBox([*rows, self.message, self.panes_box])
        state.error.connect(self._on_error)
        live.failed.connect(self._on_failed)
        live.results_ready.connect(self._on_results)
        self._sync_controls()
        first = _render(_Snapshot.of(state, self._data_range(), with_results=True))
        assert first is not None  # nothing stops the first drawing
        self._install(first)
        live.wake = self._pump  # from now on the thread that computed delivers and draws

    # -- what Python callers use ----------------------------------------------------------
    def set(self, **settings) -> QuantWidget:
        """Change settings by name, as ``Viewer.set`` and ``quantscope report`` take them
        (``bits=4``, ``method="percentile"``, ``clip=(lo, hi)``...); the controls follow.
        An unknown name or a bad value raises SettingsError and changes nothing."""
        if self.closed:
            raise UserError("the widget was closed; quantscope.widget(x) makes a new one")
        changes = settings_changes(self.state.settings, settings, self.state.tensor.ndim)
        self._change(changes, time.perf_counter())
        return self

    def wait(self, timeout: float | None = None) -> QuantWidget:
        """Block until the panes show the latest change (a script's or a test's step; the
        controls never need it). Without ``timeout`` it waits as long as the change takes
        (a first use of a number format compiles its loops: a minute on a loaded machine);
        with one, raises TimeoutError after that many seconds."""
        if not self._idle.wait(timeout):
            raise TimeoutError(f"the widget's redraw took over {timeout} s")
        return self

    def numbers(self) -> dict:
        """The panes' numbers and the settings applied: the keys of ``report --json``
        (after the redraw in progress, so they are those of the latest change)."""
        self.wait()
        return self.state.describe()

    def close(self) -> None:
        """Stop the widget's work and join its threads (idempotent); the images stay as
        they are and the controls change nothing any more."""
        self.closed = True
        self.live.wake = None
        for control in self.controls.values():
            control.disabled = True
        self.live.shutdown()

    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        s = self.state
        return (f"<quantscope widget: {s.source.label() if s.source else 'tensor'}, shape "
                f"{tuple(s.tensor.shape)}, {s.settings.bits} bits, {s.settings.method}>")

    # -- controls -> state ----------------------------------------------------------------
    def _on_control(self, key: str) -> None:
        if getattr(self._local, "syncing", False) or self.closed:
            return
        start = time.perf_counter()
        c = self.controls
        if key == "scheme":
            self._show_panes()
            return
        changes: dict = {}
        if key == "bits":
            changes["bits"] = int(c["bits"].value)
        elif key == "method":
            changes["method"] = c["method"].value
            if c["method"].value == "manual":
                changes["manual_clip"] = tuple(float(v) for v in c["clip"].value)
        elif key == "percentile":
            changes["percentile"] = float(c["percentile"].value)
        elif key == "clip":
            if self._echoes_window():
                return
            changes = {"method": "manual",
                       "manual_clip": tuple(float(v) for v in c["clip"].value)}
        elif key == "preset":
            changes["runtime"] = c["preset"].value
        else:  # the layout or a pane's format
            numbers = c["layout"].value == LAYOUTS[1]
            changes["formats"] = (tuple(c[f"format{i}"].value for i in range(4))
                                  if numbers else None)
        self._change(changes, start)

    def _on_error(self, message: str) -> None:
        self.message.value = f'<span style="color:#c00">{html.escape(message)}</span>'

    def _change(self, changes: dict, start: float) -> None:
        """Apply ``changes`` to the state (on the caller's thread: a refusal shows at once);
        the live state queues the reports, and the caller returns as soon as they are."""
        with self._lock:
            self._asked = start
            self._idle.clear()
            if not self.live.update_settings(**changes):
                self._settle()  # refused or unchanged: nothing is computing for it
                return
            self.message.value = ""
            self._sync_controls()

    def _settle(self) -> None:
        """Mark the panes current once they show the state's results (under the lock)."""
        if (self._to_draw is None and self.live.has_results()
                and self._shown_generation == self.state.generation):
            self._idle.set()

    def _pump(self) -> None:
        """The live state's ``wake``, on the job thread that queued an outcome: deliver it
        (under the lock: the state's owner is whoever holds it), then draw the panes of a
        complete result outside the lock, so a control moved meanwhile is taken at once."""
        with self._lock:
            self.live.deliver()
            snap, self._to_draw = self._to_draw, None
        if snap is None:
            return
        drawn = _render(snap, stop=lambda: self.state.generation != snap.generation)
        with self._lock:
            if drawn is None or snap.generation != self.state.generation:
                return  # computed for settings changed since: a newer result follows
            self._install(drawn)
            self._shown_generation = snap.generation
            self._sync_window()
            self.last_redraw_s = time.perf_counter() - self._asked
            self.redraws += 1
            self._settle()

    def _on_results(self) -> None:
        """Every pane's report is in the state (delivered under the lock): draw them next."""
        self._to_draw = _Snapshot.of(self.state, self._data_range(), with_results=True)

    def _on_failed(self, kind: str, message: str) -> None:
        self._on_error(message)
        self._idle.set()

    # -- state -> controls and panes ------------------------------------------------------
    def _data_range(self) -> tuple[float, float]:
        values = self.state.prepare().layout(None, None).values
        if values.size == 0:
            return -1.0, 1.0
        lo, hi = float(values[0]), float(values[-1])
        return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)

    def _sync_controls(self) -> None:
        """Show the state's settings on the controls without feeding them back."""
        s, c = self.state.settings, self.controls
        self._local.syncing = True
        try:
            c["bits"].value = s.bits
            c["method"].value = s.method
            c["percentile"].value = s.percentile
            c["preset"].value = s.runtime
            c["layout"].value = LAYOUTS[s.formats is not None]
            for i in range(4):
                if s.formats is not None:
                    c[f"format{i}"].value = s.formats[i]
                c[f"format{i}"].disabled = s.formats is None
            c["percentile"].disabled = s.method != "percentile"
        finally:
            self._local.syncing = False
        self._sync_window()

    def _echoes_window(self) -> bool:
        """True when the clip slider's new value is a window the kernel showed on it, sent
        back: a browser's slider snaps a value the kernel set to its step and returns it as
        if moved, sometimes after the next change was made (the echo of an older window),
        which must not switch the method to manual."""
        c = self.controls["clip"]
        return any(all(abs(float(v) - s) <= c.step for v, s in zip(c.value, shown, strict=True))
                   for shown in self._shown_windows)

    def _sync_window(self) -> None:
        """Show the clip window the panes use on its slider (known once they are computed)."""
        window = self.state.window_in_use()
        if window is None:
            return
        c = self.controls["clip"]
        shown = (min(max(window[0], c.min), c.max), max(min(window[1], c.max), c.min))
        self._shown_windows.append(shown)
        self._local.syncing = True
        try:
            c.value = shown
        finally:
            self._local.syncing = False

    def _show_panes(self) -> None:
        chosen = self.controls["scheme"].value
        for pane, box in self._boxes.items():
            box.layout.display = None if chosen in (ALL_PANES, pane) else "none"
            box.layout.width = "100%" if chosen == pane else "49%"

    def _install(self, drawn: _Drawn) -> None:
        """Put drawn panes on the page: titles, images, tables."""
        for pane in PANES:
            title, png, table = drawn.panes[pane]
            self.titles[pane].value = f"<b>{html.escape(title)}</b>"
            self.pngs[pane] = png
            self.images[pane].value = png
            self.tables[pane].value = table
        self._show_panes()


class _Snapshot:
    """What a redraw needs, taken under the widget's lock: the results to draw, their
    generation, and what the drawing reads (settings, shape, sorted values, the data's
    range); ``request`` is the state's, for a caller that computes the reports itself."""

    __slots__ = ("data", "dtype", "generation", "request", "result", "settings", "shape",
                 "values")

    def __init__(self, request, settings: Settings, shape: tuple[int, ...], values,
                 dtype: str, data: tuple[float, float], result: ComputeResult | None = None,
                 generation: int = 0) -> None:
        self.request, self.settings, self.shape = request, settings, shape
        self.values, self.dtype, self.data = values, dtype, data
        self.result, self.generation = result, generation

    @classmethod
    def of(cls, state: ExplorerState, data: tuple[float, float], *,
           with_results: bool = False) -> _Snapshot:
        """The state now; ``with_results``: its current reports too (else the drawing must
        be given them)."""
        prepared = state.prepare()
        result = None
        if with_results:
            result = ComputeResult(state.generation, state.settings, dict(state.results),
                                   dict(state.errors))
        return cls(state.request(), state.settings, tuple(state.tensor.shape),
                   prepared.layout(None, None).values, state.stored_dtype, data, result,
                   state.generation)


class _Drawn:
    """A redraw's outcome: the reports and, by pane, ``(title, png, table html)``."""

    __slots__ = ("panes", "result")

    def __init__(self, result: ComputeResult, panes: dict[str, tuple[str, bytes, str]]):
        self.result, self.panes = result, panes


def _render(snap: _Snapshot, result: ComputeResult | None = None, *,
            stop: Callable[[], bool] | None = None) -> _Drawn | None:
    """Every pane of ``result`` (default: the snapshot's reports, which the live state
    computed) drawn: a pure function of the snapshot, run on whichever thread holds it.
    ``stop()``, asked before each pane, abandons a drawing nobody will see (None is
    returned)."""
    result = result or snap.result
    if result is None:
        raise ValueError("a snapshot without reports: take it with_results=True")
    panes: dict[str, tuple[str, bytes, str]] = {}
    for pane in PANES:
        if stop is not None and stop():
            return None
        title = pane_title(pane, snap.settings, snap.shape)
        report = result.reports.get(pane)
        if report is None:
            message = html.escape(result.errors.get(pane, "no result"))
            panes[pane] = (title, b"", message)
            continue
        grid = bucket_grid(report)
        view = view_range(snap.data, grid.window)
        edges, counts = pane_histogram(snap.values, grid.boundaries, view,
                                       PANE_SIZE[0], snap.dtype)
        img = draw_pane(edges, counts, grid.boundaries, grid.window, grid.zero, view,
                        PANE_SIZE, image_title(title))
        panes[pane] = (title, encode_png(img), _table(report, view))
    return _Drawn(result, panes)


def image_title(title: str) -> str:
    """The title drawn in a pane's image: the pane's and what is drawn, or the pane's alone
    when both do not fit (the axes' labels say the rest)."""
    full = f"{title}: {DRAWN}"
    return full if text_width(full, TEXT_SIZE) <= PANE_SIZE[0] - 8 else title


def _table(report, view: tuple[float, float]) -> str:
    """The pane's numbers as a small HTML table (the window's labels and strings)."""
    shown = display_values(report)
    labels = dict(FIELDS)
    cells = "".join(f"<tr><td>{labels[k]}</td><td style='text-align:right'>"
                    f"{html.escape(shown[k])}</td></tr>" for k in SHOWN)
    axis = f"<tr><td>value axis</td><td style='text-align:right'>{view[0]:.4g} … " \
           f"{view[1]:.4g}</td></tr>"
    return f"<table style='font-size:12px'>{cells}{axis}</table>"


def widget(data=None, *, tensor: str | None = None, name: str | None = None,
           **settings) -> QuantWidget:
    """The panes of ``data`` with live controls, for any Jupyter front end (no Qt).

    Parameters
    ----------
    data : array_like, str, path or Source, optional
        What :func:`quantscope.view` takes: a tensor of any framework, a file (``tensor=``
        names one inside it), a sample's or a generator's name (None: the demo tensor).
    **settings
        As ``Viewer.set`` takes them (``bits=4``, ``method="percentile"``, ``clip=(lo, hi)``).

    Returns
    -------
    QuantWidget
        Displays itself as the last expression of a cell; ``.set(...)`` changes settings,
        ``.numbers()`` returns the keys of ``quantscope report --json``.
    """
    _ipywidgets()  # the missing extra is named before any loading or compiling
    live = live_state(data, tensor=tensor, name=name, settings=settings,
                      timeout=LOAD_TIMEOUT_S, threads_name=THREAD_NAME)
    try:
        return QuantWidget(live)
    except BaseException:
        live.shutdown()
        raise

