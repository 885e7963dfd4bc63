"""Figures for notebooks: ``quantscope.figure(x)`` draws the panes (or some, or a view) and
Jupyter shows the picture inline -- on a server with no display too.

The picture is the window's own drawing, not a re-plot, but no window is built: a live state
(:class:`~quantscope.state.live.LiveExplorer`) loads the tensor and computes the panes' reports
in its scheduler, :func:`figure` waits for the *state's* results, then builds only what it
draws -- the panes asked for and their headline (:class:`~quantscope.gui.pane_board.PaneBoard`),
or one view on the same state -- in Qt's offscreen platform when there is no display (chosen
here before Qt starts), and renders it through :mod:`quantscope.gui.export` -- PNG at twice the
pixel density and SVG -- at exactly the size asked for. Everything is closed before
:func:`figure` returns; the figure keeps only the pictures and the numbers they show.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from quantscope.errors import UserError, one_line
from quantscope.inputs import live_state
from quantscope.state import PANES
from quantscope.viewer import WAIT_TIMEOUT_S, qt_app, state_numbers

#: A figure's size when none is given: the 2x2 panes as a notebook cell shows them well.
DEFAULT_SIZE = (1280, 960)
#: Views a figure can show instead of panes (the window's tab titles, also in lower case).
VIEWS = ("Trade-off", "Channels", "Bit width", "Matmul")


class Figure:
    """A rendered figure: Jupyter displays it (``_repr_png_``); :meth:`save` writes it.

    Attributes
    ----------
    png : bytes
        The picture, ``ratio`` x ``size`` pixels.
    svg : str or None
        The same picture as SVG (when asked for: it takes longer than the PNG).
    size : (int, int)
        Width and height in screen pixels (the PNG holds ``ratio`` times as many).
    numbers : dict
        What the panes showed (:meth:`Viewer.numbers`).
    """

    def __init__(self, png: bytes, svg: str | None, size: tuple[int, int], ratio: float,
                 numbers: dict) -> None:
        self.png, self.svg, self.size, self.ratio, self.numbers = png, svg, size, ratio, numbers

    def _repr_png_(self) -> bytes:
        return self.png

    def _repr_mimebundle_(self, include=None, exclude=None):
        """The PNG with its size in screen pixels, so a notebook shows the 2x picture sharp
        at its intended size rather than twice as large."""
        w, h = self.size
        return {"image/png": self.png}, {"image/png": {"width": w, "height": h}}

    def save(self, path: str | Path) -> Path:
        """Write ``.png`` (2x) or ``.svg``; returns the path."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".png":
            path.write_bytes(self.png)
        elif suffix == ".svg":
            if self.svg is None:
                raise UserError(f"{path}: this figure has no SVG; draw it with "
                                "quantscope.figure(..., svg=True)")
            path.write_text(self.svg, encoding="utf-8")
        else:
            raise UserError(f"{path}: a figure is saved as .png or .svg")
        return path

    def __repr__(self) -> str:
        return f"<quantscope.Figure {self.size[0]}x{self.size[1]}>"


def _targets(panes) -> tuple[list[str], str | None]:
    """(pane keys, view title) for the ``panes`` argument."""
    if panes is None:
        return list(PANES), None
    items = [panes] if isinstance(panes, str) else list(panes)
    views = {v.lower(): v for v in VIEWS}
    if len(items) == 1 and items[0].lower() in views:
        return [], views[items[0].lower()]
    unknown = [p for p in items if p not in PANES]
    if unknown or not items:
        raise UserError(f"panes must be pane keys ({', '.join(PANES)}) or one view "
                        f"({', '.join(VIEWS)}), got {panes!r}")
    return [p for p in PANES if p in items], None


def _refuse_folder(data, tensor: str | None) -> None:
    """A figure draws one tensor: a folder without ``tensor=`` (a model, or ``""``: the
    current folder) would leave it waiting for a tensor the window never loads, until the
    timeout. A folder with ``tensor=NAME`` opens that tensor of the model."""
    if not isinstance(data, str | os.PathLike):
        return
    text = os.fspath(data)
    if isinstance(text, str) and (not text or (tensor is None and os.path.isdir(text))):
        raise UserError(f"{one_line(repr(text))[:120]} is {'a folder' if text else 'empty'}: "
                        "a figure draws one tensor; name a tensor file (with tensor=NAME "
                        "for one of several), a sample or a generator")


def figure(data=None, *, panes=None, size: tuple[int, int] | None = None,
           svg: bool = False, name: str | None = None, tensor: str | None = None,
           timeout: float = WAIT_TIMEOUT_S, **settings) -> Figure:
    """Render the explorer's panes for ``data`` without showing a window.

    Parameters
    ----------
    data : array_like, str, path or Source, optional
        What :func:`quantscope.view` takes: a tensor of any framework, a file, a sample's or
        a generator's name (None: the demo tensor).
    panes : str or sequence of str, optional
        Pane keys to draw (``"symmetric/tensor"``, ...; default all four), or one view:
        ``"Trade-off"``, ``"Channels"``, ``"Bit width"`` or ``"Matmul"``.
    size : (int, int), optional
        Width and height in screen pixels (default 1280 x 960); the PNG is exactly twice as
        large. Where the panes' contents need more room than ``size`` (a small size, wide
        fonts), they are laid out on a larger canvas of the same shape and drawn scaled down
        to it, rather than refused.
    svg : bool
        Also draw the figure as SVG, for :meth:`Figure.save` to a ``.svg`` (about 0.5 s more).
    **settings
        As :meth:`Viewer.set` takes them (``bits=4``, ``method="percentile"``, ``clip=...``).

    Where there is no display and no QApplication yet, Qt's offscreen platform is chosen
    (``QT_QPA_PLATFORM=offscreen``), so this works in a Jupyter kernel on a headless server.
    """
    keys, view = _targets(panes)
    _refuse_folder(data, tensor)
    _one_tensor(data, tensor)
    width, height = size or DEFAULT_SIZE
    if not (100 <= width <= 10000 and 100 <= height <= 10000):
        raise UserError(f"size {size!r} is out of range (100..10000 per side)")
    # the state's results, no Qt
    live = live_state(data, tensor=tensor, name=name, settings=settings, timeout=timeout)
    qt_app(offscreen_if_headless=True)
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QWidget

    from quantscope.gui.descendants import descendants

    jobs, target = None, None
    try:
        if view is None:
            from quantscope.gui.compact import SHORT_ROWS
            from quantscope.gui.pane_board import PaneBoard

            # a short figure, as a short window, gives the histograms its height first
            target = PaneBoard(live.state, keys, short=height < SHORT_ROWS)
        else:
            from quantscope.gui.jobs import Jobs

            jobs = Jobs(live)  # the views' work goes to the same scheduler
            target = _view(live, view, jobs)
        target.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)  # a display too
        target.show()
        _fit(target, target, (width, height))  # laid out once, before the numbers are drawn
        if view is None:
            target.show_state()
        else:
            _settle(target, timeout)
        _fit(target, target, (width, height))
        from quantscope.gui.export import _warm_up

        _warm_up(target)  # the axes take their widths from a first paint: lay out after it
        _fit(target, target, (width, height))
        png, text = _render(target, svg, (2 * width, 2 * height))
        return Figure(png, text, (width, height), 2.0, state_numbers(live.state))
    finally:
        if target is not None:
            for part in [target, *descendants(target, QWidget)]:
                if hasattr(part, "shutdown"):
                    part.shutdown()  # a view's lane: its work stops before the state's
        live.shutdown()
        if target is not None:
            target.close()
            target.deleteLater()
        if jobs is not None:
            jobs.deleteLater()
        qt_app().processEvents()


def _view(live, title: str, jobs):
    """The view ``title`` on the live state, built alone (as the window's tab shows it)."""
    st = live.state
    if title == "Trade-off":
        from quantscope.gui.views.tradeoff import TradeoffView

        return TradeoffView(st, jobs=jobs, still=True)
    if title == "Channels":
        from quantscope.gui.views.channels import ChannelsView

        return ChannelsView(st)
    if title == "Bit width":
        from quantscope.gui.views.bitwidth import BitwidthView
        from quantscope.gui.views.controller import StackedViews
        from quantscope.gui.views.formats import FormatsView

        return StackedViews(BitwidthView(st, jobs=jobs), FormatsView(st, jobs=jobs))
    from quantscope.gui.views.matmul import MatmulView

    return MatmulView(st, jobs=jobs)


def _settle(target, timeout: float) -> None:
    """Turn the event loop until the view has drawn the state's data (its work runs in the
    state's scheduler; the adapter delivers the outcome on this thread)."""
    import time

    from PySide6.QtWidgets import QWidget

    from quantscope.gui.descendants import descendants

    app = qt_app()
    deadline = time.monotonic() + timeout
    parts = [target, *descendants(target, QWidget)]
    lanes = [p.job for p in parts if getattr(p, "job", None) is not None]
    while time.monotonic() < deadline:
        app.processEvents()
        if target.is_ready() and not any(lane.busy for lane in lanes):
            app.processEvents()  # the last queued outcome
            if target.is_ready():
                return
        for lane in lanes:
            lane.wait(0.02)
    raise TimeoutError(f"the {type(target).__name__} was not drawn within {timeout} s")


def _one_tensor(data, tensor: str | None) -> None:
    """Refuse at once a file of several tensors without ``tensor=``: the window would open it
    in its model view, where no pane ever shows numbers, and the figure would wait for them
    until its timeout."""
    if tensor is not None or not isinstance(data, str | os.PathLike) or not Path(data).exists():
        return
    from quantscope.io import list_tensors
    from quantscope.io.checks import list_for_message

    names = [t.name for t in list_tensors(data)]
    if len(names) > 1:
        raise UserError(f"{one_line(os.fspath(data))} holds {len(names)} tensors; choose one "
                        f"with tensor=NAME: {list_for_message(names)}")


def _fit(w, target, size: tuple[int, int]) -> tuple[int, int]:
    """Lay ``target`` out at ``size``, or, where its contents need more room than that (the
    four panes' numbers in wider fonts), at the least multiple of ``size`` that holds them,
    same shape: the picture is then drawn scaled to ``size``, its text a little smaller.
    Returns the size laid out. (The rest of the window's layout around ``target`` is
    measured, not assumed.)"""
    want = size
    for _ in range(4):
        got = _resize_to(w, target, want)
        if got == want:
            return want
        need = target.minimumSizeHint()
        grow = max(got[0] / size[0], got[1] / size[1], need.width() / size[0],
                   need.height() / size[1], want[0] / size[0] * 1.02)
        want = (math.ceil(size[0] * grow), math.ceil(size[1] * grow))
    raise UserError(f"cannot lay the figure out at {size[0]}x{size[1]} or any multiple of it "
                    f"(its contents need at least {target.minimumSizeHint().width()}x"
                    f"{target.minimumSizeHint().height()})")


def _resize_to(w, target, want: tuple[int, int]) -> tuple[int, int]:
    """Resize the window until ``target`` is ``want``, as far as it goes; return its size."""
    app = qt_app()
    w.resize(*want)
    for _ in range(4):
        app.processEvents()
        dw, dh = target.width() - want[0], target.height() - want[1]
        if dw == 0 and dh == 0:
            break
        w.resize(w.width() - dw, w.height() - dh)
    app.processEvents()
    return target.width(), target.height()


def _render(target, svg: bool, pixels: tuple[int, int]) -> tuple[bytes, str | None]:
    from quantscope.gui.export import render_png, render_svg

    with tempfile.TemporaryDirectory(prefix="quantscope-figure-") as tmp:
        png_path, svg_path = Path(tmp) / "figure.png", Path(tmp) / "figure.svg"
        render_png(target, png_path, pixels=pixels)
        png = palette_png(png_path.read_bytes())
        if svg:
            render_svg(target, svg_path, shown=(pixels[0] // 2, pixels[1] // 2))
        return png, svg_path.read_text(encoding="utf-8") if svg else None


def palette_png(png: bytes) -> bytes:
    """``png`` re-encoded with a palette of 128 colours, at the same pixels.

    A figure is flat colours, lines and antialiased text: its 128 most frequent colours are
    kept exactly and only rare edge pixels take the nearest of them (about 1 % of a default
    figure's pixels change, by a few levels on average), and the file shrinks about 3x (the
    default four-pane figure: ~400 KB in RGB, ~140 KB with the palette), which is what a
    notebook stores and sends for every figure cell."""
    import numpy as np
    from PySide6.QtGui import QImage

    from quantscope.notebook.raster import encode_png, quantize_colours

    image = QImage.fromData(png).convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = image.width(), image.height(), image.bytesPerLine()
    rgb = np.frombuffer(image.constBits(), np.uint8).reshape(h, stride)[:, :3 * w]
    index, palette = quantize_colours(rgb.reshape(h, w, 3), 128)
    out = encode_png(index, palette, level=9)
    return out if len(out) < len(png) else png
