"""Export what the window shows: pictures (PNG at 2x, SVG), the numbers (CSV, JSON) and the
quantized tensor (.npz).

"Current view" pictures hold the view's figure -- its plots and the labels that carry
their numbers -- not the combo boxes, fields and scroll bars around them.

pyqtgraph's own exporters have known bugs (black backgrounds, hairline strokes, wrong sizes
at high DPI), so pictures are made the reliable way: the widget renders itself into a
``QImage`` with device pixel ratio 2 (PNG), or, recorded as a ``QPicture``, into an SVG 1.1
``QSvgGenerator`` whose clip paths keep each plot inside its axes. The SVG is then cleaned for
every viewer: a background rectangle first, width/height in pixels, font names a browser
knows, and the data transforms that Qt leaves on curve groups (scale factors like 26 x -21,
with ``vector-effect="non-scaling-stroke"``, which Inkscape ignores) folded into the
coordinates, so a 1.6 px line is 1.6 px everywhere; no zero-width (hairline) stroke survives.

Numbers are the engine's: each pane's ``QuantReport.summary()`` with its caption, plus the
source and the settings. The quantized tensor goes through the ``quantscope export`` command's
own archive writer, so both produce the same file.
"""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QColor, QImage, QPainter, QPicture, QRegion
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsItem, QGraphicsView, QLabel, QWidget

from quantscope.core.labs.captions import pane_captions
from quantscope.errors import QuantscopeError
from quantscope.gui.descendants import descendants
from quantscope.gui.theme import current_theme
from quantscope.io.archive import build_metadata, write_archive
from quantscope.jsonable import dumps
from quantscope.state import PANES, ExplorerState, analyze_with, pane_title

SVG_NS = "http://www.w3.org/2000/svg"
PIXEL_RATIO = 2.0
IMAGE_SUFFIXES = (".png", ".svg")


class ExportError(QuantscopeError):
    """An export that cannot be written (bad suffix, unwritable path, nothing to export)."""


def _background(widget: QWidget) -> QColor:
    return QColor(current_theme().background)


def _check_dir(path: Path) -> None:
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ExportError(f"cannot write {path}: directory {parent} does not exist")


# -- pictures -------------------------------------------------------------------------------
def _render_widget(widget: QWidget, painter: QPainter) -> None:
    """QWidget's own render (graphics views override ``render`` with a scene-only one)."""
    QWidget.render(widget, painter, QPoint(0, 0), QRegion(),
                   QWidget.RenderFlag.DrawWindowBackground | QWidget.RenderFlag.DrawChildren)


@contextmanager
def _vector_items(widget: QWidget):
    """Paint every graphics item afresh while exporting: items with a pixmap cache (the
    panes' axes and histogram, the views' axes, blitted on screen) would otherwise be written
    into an SVG as bitmaps, and into the 2x PNG as 1x pixels scaled up."""
    views = descendants(widget, QGraphicsView)
    if isinstance(widget, QGraphicsView):
        views.append(widget)
    saved = []
    background = [(view, view.cacheMode()) for view in views]
    for view in views:  # a cached background is a bitmap too (pyqtgraph caches it)
        view.setCacheMode(QGraphicsView.CacheModeFlag.CacheNone)
        if view.scene() is None:
            continue
        for item in view.scene().items():
            if item.cacheMode() != QGraphicsItem.CacheMode.NoCache:
                saved.append((item, item.cacheMode()))
                item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
    try:
        yield
    finally:
        for item, mode in saved:
            item.setCacheMode(mode)
        for view, mode in background:
            view.setCacheMode(mode)


def _warm_up(widget: QWidget) -> None:
    """Paint once into a scratch image and let Qt settle: pyqtgraph sizes its axes from the
    text it measured while painting, so a first-ever paint can leave tick labels out (the
    axis is still too narrow for them). On screen the next frame fixes it; an export has
    no next frame."""
    from PySide6.QtWidgets import QApplication

    scratch = QImage(max(1, widget.width()), max(1, widget.height()),
                     QImage.Format.Format_ARGB32_Premultiplied)
    painter = QPainter(scratch)
    try:
        _render_widget(widget, painter)
    finally:
        painter.end()
    QApplication.processEvents()


def figure_parts(view: QWidget) -> list[QWidget]:
    """What a view's picture holds: its figure, without the widgets that drive it (combo
    boxes, fields, check boxes, scroll bars). A view names its figure with a
    ``figure_widgets()`` method (plots and the labels that carry their numbers); otherwise
    the figure is its summary sentence and its plots on screen."""
    named = getattr(view, "figure_widgets", None)
    if callable(named):
        parts = named()
    else:  # its summary sentence (the numbers in words) and its plots
        parts = [w for w in descendants(view, QLabel, "viewCaption") if w.text()]
        parts += descendants(view, pg.GraphicsView)
    parts = [w for w in parts if w.isVisibleTo(view) and not w.size().isEmpty()]
    # a part inside another part is painted with it
    return [w for w in parts if not any(o is not w and o.isAncestorOf(w) for o in parts)]


def _layout(widget: QWidget, parts: list[QWidget] | None) -> tuple[QSize, list]:
    """The picture's size and each part with its offset in it: the parts as they sit on
    screen, cropped to the rectangle around them (the whole widget without ``parts``)."""
    if parts is None:
        return widget.size(), [(widget, QPoint(0, 0))]
    if not parts:
        raise ExportError("nothing to export: the view shows no plot yet")
    rects = [QRect(w.mapTo(widget, QPoint(0, 0)), w.size()) for w in parts]
    box = rects[0]
    for r in rects[1:]:
        box = box.united(r)
    return box.size(), [(w, r.topLeft() - box.topLeft()) for w, r in zip(parts, rects, strict=True)]


def _paint(painter: QPainter, placed) -> None:
    for w, offset in placed:
        QWidget.render(w, painter, offset, QRegion(),
                       QWidget.RenderFlag.DrawWindowBackground
                       | QWidget.RenderFlag.DrawChildren)


def _recorded(widget: QWidget) -> QPicture:
    """``widget`` painted into a QPicture (a list of paint commands, not pixels).

    Qt's SVG engine writes a clip path without the offset that ``render`` gives each child
    widget, while it moves the child's drawing by it: every label, table and plot was then
    clipped to a rectangle up and left of where it is drawn (a plot's data vanished, or
    spilled over the axes when clipping was off). A picture records the clips where they
    are; played back through the painter's transform, the SVG engine places them right."""
    picture = QPicture()
    painter = QPainter(picture)
    try:
        _render_widget(widget, painter)
    finally:
        painter.end()
    return picture


def _paint_svg(painter: QPainter, placed) -> None:
    for w, offset in placed:
        painter.save()
        painter.translate(offset)
        _recorded(w).play(painter)
        painter.restore()


def render_png(widget: QWidget, path: str | Path, ratio: float = PIXEL_RATIO,
               parts: list[QWidget] | None = None,
               pixels: tuple[int, int] | None = None) -> QSize:
    """Save ``widget`` (or only its ``parts``, see :func:`figure_parts`) as a PNG of
    ``ratio`` x its size in pixels (crisp on slides), or of exactly ``pixels`` (width,
    height), the widget drawn scaled to them."""
    path = Path(path)
    _check_dir(path)
    _warm_up(widget)
    size, placed = _layout(widget, parts)
    if pixels is None:
        pixels = (round(size.width() * ratio), round(size.height() * ratio))
    sx, sy = pixels[0] / max(size.width(), 1), pixels[1] / max(size.height(), 1)
    image = QImage(pixels[0], pixels[1], QImage.Format.Format_ARGB32_Premultiplied)
    image.setDevicePixelRatio(min(sx, sy))
    image.fill(_background(widget))
    painter = QPainter(image)
    ratio = image.devicePixelRatio()
    if abs(sx - sy) > 1e-9:  # the same shape to the pixel is not always possible: stretch
        painter.scale(sx / ratio, sy / ratio)  # the few pixels of difference
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
    try:
        with _vector_items(widget):
            _paint(painter, placed)
    finally:
        painter.end()
    if not image.save(str(path), "PNG"):
        raise ExportError(f"cannot write {path}")
    return image.size()


def render_svg(widget: QWidget, path: str | Path, title: str = "quantscope",
               parts: list[QWidget] | None = None,
               shown: tuple[int, int] | None = None) -> None:
    """Save ``widget`` (or only its ``parts``) as an SVG that browsers and Inkscape show as
    on screen, each plot's contents clipped to its plot (SVG 1.1 clip paths: what Qt's
    default SVG Tiny 1.2 lacks, so a zoomed histogram spilled over its axes). ``shown``
    (width, height) is the size the picture is displayed at, when not the widget's."""
    path = Path(path)
    _check_dir(path)
    _warm_up(widget)
    size, placed = _layout(widget, parts)
    w, h = size.width(), size.height()
    tmp = path.with_name(f".{path.name}.tmp")
    gen = QSvgGenerator(QSvgGenerator.SvgVersion.Svg11)
    gen.setFileName(str(tmp))
    gen.setSize(QSize(w, h))
    gen.setViewBox(QRect(0, 0, w, h))
    gen.setResolution(QPicture().logicalDpiX())  # the recording's: played back 1:1
    gen.setTitle(title)
    gen.setDescription("exported by quantscope")
    painter = QPainter()
    if not painter.begin(gen):
        raise ExportError(f"cannot write {path}")
    try:
        painter.fillRect(QRect(0, 0, w, h), _background(widget))
        with _vector_items(widget):
            _paint_svg(painter, placed)
    finally:
        painter.end()
    try:
        text = clean_svg(tmp.read_text(encoding="utf-8"), w, h, _background(widget).name(),
                         shown=shown)
        path.write_text(text, encoding="utf-8")
    finally:
        tmp.unlink(missing_ok=True)


def save_image(widget: QWidget, path: str | Path, *, figure: bool = False) -> None:
    """PNG (2x) or SVG by the file's suffix; anything else is refused with the choices.
    ``figure=True`` saves only the view's figure (:func:`figure_parts`)."""
    suffix = Path(path).suffix.lower()
    parts = figure_parts(widget) if figure else None
    if suffix == ".png":
        render_png(widget, path, parts=parts)
    elif suffix == ".svg":
        render_svg(widget, path, parts=parts)
    else:
        raise ExportError(f"{path}: pictures can be saved as {' or '.join(IMAGE_SUFFIXES)}")


# -- SVG clean-up -------------------------------------------------------------------------------
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_MATRIX = re.compile(rf"matrix\(\s*({_NUM})[ ,]+({_NUM})[ ,]+({_NUM})[ ,]+({_NUM})[ ,]+({_NUM})"
                     rf"[ ,]+({_NUM})\s*\)")
_PATH_TOKEN = re.compile(rf"([A-Za-z])|({_NUM})\s*,\s*({_NUM})")


def _fmt(v: float) -> str:
    return f"{v:.3f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


def _map_points(text: str, m: tuple[float, ...]) -> str | None:
    a, b, c, d, e, f = m
    out = []
    pos = 0
    for tok in _PATH_TOKEN.finditer(text):
        if text[pos:tok.start()].strip():
            return None  # something we do not understand: leave the group alone
        pos = tok.end()
        if tok.group(1):
            if tok.group(1) not in "MLCZ":
                return None  # relative or arc commands would need more than a point map
            out.append(tok.group(1))
        else:
            x, y = float(tok.group(2)), float(tok.group(3))
            out.append(f"{_fmt(a * x + c * y + e)},{_fmt(b * x + d * y + f)}")
    if text[pos:].strip():
        return None
    return " ".join(out)


def _flatten_group(g: ET.Element) -> None:
    """Fold a scaling transform into the coordinates of the group's paths and polylines."""
    match = _MATRIX.fullmatch(g.get("transform", "").strip())
    if match is None:
        return
    m = tuple(float(v) for v in match.groups())
    if m[:4] == (1.0, 0.0, 0.0, 1.0):
        return  # a translation scales nothing: strokes are already right
    new = {}
    for child in g:
        tag = child.tag.removeprefix(f"{{{SVG_NS}}}")
        attr = {"path": "d", "polyline": "points", "polygon": "points"}.get(tag)
        if attr is None:
            return
        mapped = _map_points(child.get(attr, ""), m)
        if mapped is None:
            return
        new[child] = (attr, mapped)
    for child, (attr, mapped) in new.items():
        child.set(attr, mapped)
    del g.attrib["transform"]


def css_fonts(family: str) -> str:
    """A CSS font list for a Qt family name: the font Qt actually drew with, the name, and
    the generic family. Qt writes names such as "Sans Serif" that only Qt resolves; a
    browser fell back to a serif face of other widths, so texts ran into each other."""
    from PySide6.QtGui import QFont, QFontInfo

    info = QFontInfo(QFont(family))
    generic = "monospace" if info.fixedPitch() or family == "monospace" else "sans-serif"
    names = dict.fromkeys(n for n in (info.family(), family) if n and n != generic)
    return ", ".join([*(f"'{n}'" for n in names), generic])


def clean_svg(text: str, width: int, height: int, background: str = "#ffffff",
              shown: tuple[int, int] | None = None) -> str:
    """Make Qt's SVG portable (see the module docstring); returns the new document text."""
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    root = ET.fromstring(text)
    root.set("width", str(shown[0] if shown else width))  # the viewBox scales to it
    root.set("height", str(shown[1] if shown else height))
    root.set("viewBox", f"0 0 {width} {height}")
    for g in root.iter(f"{{{SVG_NS}}}g"):
        _flatten_group(g)
    fonts: dict[str, str] = {}
    for el in root.iter():
        family = el.get("font-family")
        if family is not None and "," not in family:
            el.set("font-family", fonts.setdefault(family, css_fonts(family)))
        sw = el.get("stroke-width")
        if sw is not None and float(sw) <= 0:
            el.set("stroke-width", "1")  # a zero width means "hairline" to Qt only
    bg = ET.Element(f"{{{SVG_NS}}}rect", {"id": "background", "x": "0", "y": "0",
                                          "width": str(width), "height": str(height),
                                          "fill": background, "stroke": "none"})
    first = next((i for i, el in enumerate(root)
                  if el.tag.removeprefix(f"{{{SVG_NS}}}") not in ("title", "desc", "defs")), 0)
    root.insert(first, bg)
    return '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n' + ET.tostring(
        root, encoding="unicode")


# -- numbers ------------------------------------------------------------------------------------
def pane_numbers(state: ExplorerState) -> dict[str, dict]:
    """Each pane's numbers (``QuantReport.summary()``), its title and caption."""
    if not state.results:
        raise ExportError("no results to export yet (load a tensor and wait for the panes)")
    ov = state.overview
    try:
        caps = pane_captions(state.results, *(ov.min, ov.max) if ov is not None else ())
    except ValueError:
        caps = {}
    out = {}
    for pane in PANES:
        rep = state.results.get(pane)
        if rep is None:
            out[pane] = {"title": pane_title(pane, state.settings),
                         "error": state.errors.get(pane, "not computed")}
            continue
        out[pane] = {"title": pane_title(pane, state.settings),
                     "caption": caps[pane].text if pane in caps else "", **rep.summary()}
    return out


def numbers_document(state: ExplorerState, views: dict[str, dict] | None = None) -> dict:
    """Everything the JSON export holds: source, settings, panes and (optionally) view data."""
    doc = {"format": "quantscope-numbers", "version": 1,
           "source": state.source.to_dict() if state.source else None,
           "settings": state.settings.to_dict(), "panes": pane_numbers(state)}
    if views:
        doc["views"] = views
    return doc


def save_numbers_json(state: ExplorerState, path: str | Path,
                      views: dict[str, dict] | None = None) -> None:
    """Write :func:`numbers_document` as strict JSON (inf/nan as strings)."""
    path = Path(path)
    _check_dir(path)
    path.write_text(dumps(numbers_document(state, views), indent=2), encoding="utf-8")


def save_numbers_csv(state: ExplorerState, path: str | Path) -> None:
    """One row per pane, one column per number (spreadsheet-friendly)."""
    path = Path(path)
    _check_dir(path)
    rows = pane_numbers(state)
    keys: list[str] = []
    for row in rows.values():
        keys += [k for k in row if k not in keys]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["pane", *keys])
        writer.writeheader()
        for pane, row in rows.items():
            writer.writerow({"pane": pane, **{k: "" if v is None else v
                                              for k, v in row.items()}})


def save_numbers(state: ExplorerState, path: str | Path,
                 views: dict[str, dict] | None = None) -> None:
    """CSV or JSON by suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        save_numbers_json(state, path, views)
    elif suffix == ".csv":
        save_numbers_csv(state, path)
    else:
        raise ExportError(f"{path}: numbers can be saved as .csv or .json")


# -- the quantized tensor -------------------------------------------------------------------
def save_quantized(state: ExplorerState, pane: str, path: str | Path) -> None:
    """Codes, scales, zero points and the scheme of ``pane`` to .npz (``quantscope export``'s
    format: ``np.load(path, allow_pickle=False)`` reads it)."""
    if state.tensor is None:
        raise ExportError("no tensor to export")
    path = Path(path)
    if path.suffix.lower() != ".npz":
        raise ExportError(f"{path}: the quantized tensor is saved as .npz")
    params = state.params_for(pane)
    codes = params.quantize(state.tensor, nonfinite="saturate")
    report = state.results.get(pane) or analyze_with(state.tensor, state.prepared, params)
    label = state.source.label() if state.source else "array"
    tensor = (state.source.tensor or state.source.name) if state.source else "array"
    # the dtype the tensor was stored in (bf16, fp8...), as ``quantscope export`` writes it;
    # the state holds a float32 copy of every tensor, so its own dtype says nothing
    meta = build_metadata(params, source=label, tensor=tensor, source_dtype=state.stored_dtype,
                          shape=state.tensor.shape, report=report)
    meta["pane"] = pane
    members = None
    kind = getattr(params, "kind", None)
    if kind in ("gguf", "torchao"):  # their own arrays, as `export` writes them
        meta["scheme"] = params.scheme(state.tensor.size)  # type: ignore[union-attr]
        meta["dequantize"] = meta["scheme"].pop("dequantize")
        members = params.archive_members(codes)  # type: ignore[union-attr]
    write_archive(path, codes, params, meta, members)
