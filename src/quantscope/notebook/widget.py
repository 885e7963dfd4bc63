"""``quantscope.widget(x, ...)``: the panes with live controls in any Jupyter front end.

The controls write to an :class:`~quantscope.state.ExplorerState`, the state the window and
``quantscope report`` compute through, so a setting gives the same numbers in all three; the
panes are redrawn by :mod:`quantscope.notebook.raster` on the kernel and sent as small palette
PNGs (nothing needs Qt, a display or a JavaScript build). The tensor is prepared once (sorted,
with prefix sums), after which a change costs ~2^bits binary searches per pane, so a redraw
stays interactive at 16M elements.
"""

from __future__ import annotations

import html
import time

from quantscope.errors import UserError
from quantscope.notebook.raster import draw_pane, encode_png, view_range
from quantscope.state import METHODS, PANES, RUNTIME_DESCRIPTIONS, ExplorerState
from quantscope.state.display import FIELDS, bucket_grid, display_values
from quantscope.state.formats import CHOICES, DEFAULT_COMPARISON
from quantscope.state.titles import pane_title

#: Pixels of one pane's image (the four panes' grid fits a notebook's width).
PANE_SIZE = (560, 200)
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


def load_state(data=None, *, tensor: str | None = None, name: str | None = None,
               **settings) -> ExplorerState:
    """An :class:`ExplorerState` on ``data`` (what ``quantscope.view`` takes), prepared and
    computed, with ``settings`` as ``Viewer.set`` takes them; bad input raises at once."""
    from quantscope.inputs import resolve_source, settings_changes
    from quantscope.state import load_source

    source, read, hint = resolve_source(data, tensor=tensor, name=name)
    x, _ = read() if read is not None else load_source(source)
    state = ExplorerState()
    errors: list[str] = []
    state.error.connect(errors.append)
    if not state.set_tensor(x, source):
        raise UserError(errors[-1])
    changes = settings_changes(state.settings, {**hint, **settings}, state.tensor.ndim)
    if changes and not state.update_settings(**changes) and errors:
        raise UserError(errors[-1])
    from quantscope.core.kernels.compile_notice import announce_compiles

    announce_compiles()
    state.prepare()
    state.compute()
    return state


class QuantWidget:
    """The panes of one tensor with controls for bits, method, percentile, clip window,
    scheme, preset and formats (see the module docstring).

    Attributes
    ----------
    state : ExplorerState
        What every control writes to and every pane is drawn from.
    controls : dict[str, ipywidgets.Widget]
        The controls by name: ``bits``, ``method``, ``percentile``, ``clip``, ``scheme``,
        ``preset``, ``layout`` and ``format0`` .. ``format3``; set their ``value`` from Python
        and the panes follow, as when a person moves them.
    images : dict[str, ipywidgets.Image]
        Each pane's image (``value`` is its PNG).
    last_redraw_s : float
        Seconds the last change took, from the control's new value to new images.
    """

    def __init__(self, state: ExplorerState) -> None:
        w = _ipywidgets()
        self.state = state
        self._syncing = False
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
        boxes = {p: w.VBox([self.titles[p], self.images[p], self.tables[p]],
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
        self._sync_controls()
        self._draw()

    # -- what Python callers use ----------------------------------------------------------
    def set(self, **settings) -> QuantWidget:
        """Change settings by name, as ``Viewer.set`` and ``quantscope report`` take them
        (``bits=4``, ``method="percentile"``, ``clip=(lo, hi)``...); the controls follow.
        An unknown name or a bad value raises SettingsError and changes nothing."""
        from quantscope.inputs import settings_changes

        changes = settings_changes(self.state.settings, settings, self.state.tensor.ndim)
        start = time.perf_counter()
        if self.state.update_settings(**changes):
            self._redraw(start)
        return self

    def numbers(self) -> dict:
        """The panes' numbers and the settings applied: the keys of ``report --json``."""
        return self.state.describe()

    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        s = self.state
        return (f"<quantscope widget: {s.source.label() if s.source else 'tensor'}, shape "
                f"{tuple(s.tensor.shape)}, {s.settings.bits} bits, {s.settings.method}>")

    # -- controls -> state ----------------------------------------------------------------
    def _on_control(self, key: str) -> None:
        if self._syncing:
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
            changes = {"method": "manual",
                       "manual_clip": tuple(float(v) for v in c["clip"].value)}
        elif key == "preset":
            changes["runtime"] = c["preset"].value
        else:  # the layout or a pane's format
            numbers = c["layout"].value == LAYOUTS[1]
            changes["formats"] = (tuple(c[f"format{i}"].value for i in range(4))
                                  if numbers else None)
        if self.state.update_settings(**changes):
            self._redraw(start)

    def _on_error(self, message: str) -> None:
        self.message.value = f'<span style="color:#c00">{html.escape(message)}</span>'

    def _redraw(self, start: float) -> None:
        self.message.value = ""
        self.state.compute()
        self._sync_controls()
        self._draw()
        self.last_redraw_s = time.perf_counter() - start

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
        self._syncing = True
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
            window = self.state.window_in_use()
            if window is not None:
                lo, hi = c["clip"].min, c["clip"].max
                c["clip"].value = (min(max(window[0], lo), hi), max(min(window[1], hi), lo))
            c["percentile"].disabled = s.method != "percentile"
        finally:
            self._syncing = False

    def _show_panes(self) -> None:
        chosen = self.controls["scheme"].value
        for pane, box in self._boxes.items():
            box.layout.display = None if chosen in (ALL_PANES, pane) else "none"
            box.layout.width = "100%" if chosen == pane else "49%"

    def _draw(self) -> None:
        s = self.state
        data = self._data_range()
        for pane in PANES:
            title = pane_title(pane, s.settings, tuple(s.tensor.shape))
            self.titles[pane].value = f"<b>{html.escape(title)}</b>"
            report = s.results.get(pane)
            if report is None:
                self.pngs[pane] = b""
                self.images[pane].value = b""
                self.tables[pane].value = html.escape(s.errors.get(pane, "no result"))
                continue
            grid = bucket_grid(report)
            view = view_range(data, grid.window)
            hist = s.histogram(grid.boundaries, view, PANE_SIZE[0])
            assert hist is not None  # prepared above
            img = draw_pane(hist[0], hist[1], grid.boundaries, grid.window, grid.zero, view,
                            PANE_SIZE)
            png = encode_png(img)
            self.pngs[pane] = png
            self.images[pane].value = png
            self.tables[pane].value = _table(report, view)
        self._show_panes()


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
    return QuantWidget(load_state(data, tensor=tensor, name=name, **settings))

