"""The model view's per-layer chart: one series per tensor kind and scheme, drawn by one item
that streamed rows update in place; hover names the tensor under the mouse and a click opens
it; the legend names the kinds and hides one when clicked; every point is painted where the
lookup says it is, on screen, in a 2x PNG and as vectors in an SVG."""

from __future__ import annotations

import dataclasses
import itertools
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QImage, QPainter

from quantscope.core.stats.fused import TensorFigures
from quantscope.io.tensor_info import TensorInfo
from quantscope.state.model_scan import OK, PENDING, ModelRow

KINDS = ("self_attn.q_proj.weight", "self_attn.o_proj.weight", "mlp.down_proj.weight",
         "input_layernorm.weight")


def _rows(layers: int = 6, seed: int = 0) -> list[ModelRow]:
    rng = np.random.default_rng(seed)
    rows = []

    def add(name, layer, kind, shape):
        info = TensorInfo(name, shape, "bfloat16", "BF16", 2 * int(np.prod(shape)),
                          "safetensors")
        db = float(rng.uniform(8, 30))
        figures = TensorFigures(n=info.size, n_nonfinite=0, per_tensor_db=db,
                                per_channel_db=None if len(shape) < 2 else
                                db + float(rng.uniform(5, 20)), clipped_fraction=0.0,
                                max_abs=1.0, outlier_channels=0,
                                channels=None if len(shape) < 2 else shape[0])
        rows.append(ModelRow(len(rows), name, "m.safetensors", info, layer, kind, status=OK,
                             figures=figures))

    add("model.embed_tokens.weight", None, "model.embed_tokens.weight", (64, 32))
    for layer in range(layers):
        for kind in KINDS:
            shape = (32,) if "norm" in kind else (32, 32)
            add(f"model.layers.{layer}.{kind}", layer, kind, shape)
    return rows


def _pending(rows):
    return [dataclasses.replace(r, status=PENDING, figures=None) for r in rows]


@pytest.fixture
def chart(qtbot):
    from quantscope.gui import configure_pyqtgraph
    from quantscope.gui.model_chart import ModelChart

    configure_pyqtgraph()
    c = ModelChart()
    qtbot.addWidget(c)
    c.resize(640, 520)
    c.show()
    qtbot.waitExposed(c)
    return c


def _viewport_pos(chart, scene_pos):
    return chart.widget.mapFromScene(scene_pos)


def _move(chart, pos) -> None:
    """A mouse move without buttons over the plot (QTest's moves do not reach an offscreen
    window's widgets), as the window system would deliver it."""
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtWidgets import QApplication

    viewport = chart.widget.viewport()
    event = QMouseEvent(QEvent.Type.MouseMove, QPointF(pos), QPointF(viewport.mapToGlobal(pos)),
                        Qt.MouseButton.NoButton, Qt.MouseButton.NoButton,
                        Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(viewport, event)


def _charted(rows):
    return [r for r in rows if r.status == OK and r.info.ndim >= 2]


def test_deliveries_update_the_one_series_item_in_place(chart, qtbot):
    done = _rows()
    listed = _pending(done)
    chart.set_rows(listed)
    item, items = chart.item, list(chart.plot.items)
    samples = [sample for sample, _ in chart.legend.items]
    # the listing settles the legend: every charted kind, none of the 1-D norms
    assert [label.text for _, label in chart.legend.items] == [
        "mlp.down_proj", "model.embed_tokens", "self_attn.o_proj", "self_attn.q_proj",
        "int8 floor (20 dB)"]
    assert chart.item.series == []
    for (sample, _), color in zip(chart.legend.items[:-1], chart._colors, strict=False):
        # each entry in its kind's colour: line and symbol
        assert sample.item.opts["pen"].color() == QColor(color)
        assert sample.item.opts["brush"].color() == QColor(color)
    shown = list(listed)
    for end in range(5, len(done) + 1, 5):
        shown[end - 5:end] = done[end - 5:end]
        chart.set_rows(list(shown))
        qtbot.wait(1)
        assert chart.item is item and list(chart.plot.items) == items
        assert [sample for sample, _ in chart.legend.items] == samples  # not rebuilt
        analysed = _charted(shown)
        assert len(chart._hit_rows) == 2 * len(analysed)  # per-tensor and per-channel
        assert {r.name for r in chart._hit_rows} == {r.name for r in analysed}
    shown[len(shown) // 5 * 5:] = done[len(shown) // 5 * 5:]
    chart.set_rows(shown)
    assert chart.item is item and list(chart.plot.items) == items


def test_series_per_kind_and_scheme(chart):
    from quantscope.gui.model_chart import MODES

    rows = _rows()
    chart.set_rows(rows)
    series = {(s.kind, s.scheme): s for s in chart.item.series}
    matrices = {"self_attn.q_proj.weight", "self_attn.o_proj.weight", "mlp.down_proj.weight",
                "model.embed_tokens.weight"}
    assert set(series) == {(k, s) for k in matrices for s in ("tensor", "channel")}
    for (kind, scheme), s in series.items():
        assert s.dashed == (scheme == "channel") and s.symbol == ("t" if s.dashed else "o")
        assert s.color == series[(kind, "tensor")].color  # a kind keeps its colour
        want = sorted((r.layer if r.layer is not None else -1, r.name) for r in rows
                      if r.kind == kind and r.info.ndim >= 2)
        assert list(s.x) == [x for x, _ in want]
        by_name = {r.name: r for r in rows}
        attr = "per_tensor_db" if scheme == "tensor" else "per_channel_db"
        assert list(s.y) == [getattr(by_name[n].figures, attr) for _, n in want]
    assert len({s.color for s in chart.item.series}) == len(matrices)
    # no exact point, no headroom for one: the y range ends at the next 5 dB above the top
    top = max(float(s.y.max()) for s in chart.item.series)
    assert chart._y_range[1] == 5 * math.ceil(top / 5)
    assert list(chart.points["self_attn.q_proj.weight"][i][0] for i in range(6)) == list(
        map(float, range(6)))
    chart.mode.setCurrentIndex(list(MODES).index("gain"))
    assert {(s.kind, s.scheme) for s in chart.item.series} == {(k, "gain") for k in matrices}
    assert not any(s.dashed for s in chart.item.series)
    assert chart.plot.getAxis("left").labelText == "gain (dB)"


def test_exact_points_sit_above_the_finite_ones(chart):
    from quantscope.gui.model_chart import EXACT_HEADROOM_DB

    rows = _rows()
    r = rows[1]
    rows[1] = dataclasses.replace(r, figures=dataclasses.replace(
        r.figures, per_tensor_db=math.inf, per_channel_db=math.inf))
    rows[2] = dataclasses.replace(rows[2], figures=dataclasses.replace(
        rows[2].figures, per_channel_db=math.nan))
    chart.set_rows(rows)
    finite = [y for s in chart.item.series for y, row in zip(s.y, s.rows, strict=True)
              if row.name != rows[1].name]
    exact = [y for s in chart.item.series for y, row in zip(s.y, s.rows, strict=True)
             if row.name == rows[1].name]
    assert exact == [max(finite) + EXACT_HEADROOM_DB] * 2
    assert chart._y_range[1] >= exact[0]  # in view
    nan_row = [row.name for s in chart.item.series if s.scheme == "channel" for row in s.rows]
    assert rows[2].name not in nan_row  # no figure, no point


def test_hover_names_the_tensor_under_the_mouse_and_click_opens_it(chart, qtbot):
    rows = _rows()
    chart.set_rows(rows)
    qtbot.wait(10)
    # every point: the lookup at its drawn position gives its own tensor
    for s in chart.item.series:
        for x, y, row in zip(s.x, s.y, s.rows, strict=True):
            at = chart.plot.vb.mapViewToScene(QPointF(x, y))
            assert chart.row_at(at) is row, (s.kind, s.scheme, x, y)
    vb = chart.plot.vb
    corner = vb.mapViewToScene(QPointF(vb.viewRange()[0][1], vb.viewRange()[1][1]))
    assert chart.row_at(corner + QPointF(-2, 2)) is None  # nothing drawn there
    # real mouse events through the scene, for a few tensors
    size = chart.size()
    for name in ("model.layers.2.self_attn.o_proj.weight", "model.embed_tokens.weight",
                 "model.layers.5.mlp.down_proj.weight"):
        qtbot.wait(20)
        pos = _viewport_pos(chart, chart.point_of(name))
        _move(chart, pos)
        assert chart.hover_line.startswith(name), (name, chart.hover_line)
        qtbot.wait(20)  # (pyqtgraph drops moves less than 10 ms apart)
        assert chart.hover_line.startswith(name)  # it stays
        row = next(r for r in rows if r.name == name)
        assert f"per-tensor {row.figures.per_tensor_db:.2f} dB" in chart.hover_line
        shown = chart.hover.text()  # all of it, or elided to the label's width
        assert shown == chart.hover_line or ("…" in shown and chart.hover.toolTip() ==
                                             chart.hover_line)
        assert chart.hover.fontMetrics().horizontalAdvance(shown) <= chart.hover.width()
        assert chart.marker.isVisible()
        with qtbot.waitSignal(chart.tensor_clicked) as got:
            qtbot.mouseClick(chart.widget.viewport(), Qt.MouseButton.LeftButton, pos=pos)
        assert got.args == [name]
        assert chart.size() == size  # a long name does not widen the chart
    # a click on empty plot opens nothing
    empty = _viewport_pos(chart, corner + QPointF(-3, 3))
    with qtbot.assertNotEmitted(chart.tensor_clicked, wait=50):
        qtbot.mouseClick(chart.widget.viewport(), Qt.MouseButton.LeftButton, pos=empty)


def test_a_legend_click_hides_its_kind(chart, qtbot):
    rows = _rows()
    chart.set_rows(rows)
    qtbot.wait(10)  # the legend's layout places its entries
    sample = next(s for s, lab in chart.legend.items
                         if lab.text == "self_attn.o_proj")
    pos = chart.widget.mapFromScene(sample.sceneBoundingRect().center())
    qtbot.mouseClick(chart.widget.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert chart.hidden == {"self_attn.o_proj.weight"}
    assert "self_attn.o_proj.weight" not in {s.kind for s in chart.item.series}
    assert not any(r.kind == "self_attn.o_proj.weight" for r in chart._hit_rows)
    chart.set_rows(list(rows))  # a delivery keeps it hidden
    assert "self_attn.o_proj.weight" not in {s.kind for s in chart.item.series}
    qtbot.mouseClick(chart.widget.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert chart.hidden == set()
    assert "self_attn.o_proj.weight" in {s.kind for s in chart.item.series}


def _grab(chart, ratio: float) -> QImage:
    """``chart`` rendered as the PNG export renders (``render`` into a QImage of ``ratio``)."""
    image = QImage(int(chart.width() * ratio), int(chart.height() * ratio),
                   QImage.Format.Format_ARGB32_Premultiplied)
    image.setDevicePixelRatio(ratio)
    image.fill(QColor("white"))
    p = QPainter(image)
    try:
        chart.render(p, QPoint(0, 0))
    finally:
        p.end()
    return image


@pytest.mark.parametrize("ratio", [1.0, 2.0])
def test_each_symbol_is_painted_where_hover_finds_it(chart, qtbot, ratio):
    rows = _rows()
    chart.set_rows(rows)
    qtbot.wait(10)
    image = _grab(chart, ratio)
    for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.3.mlp.down_proj.weight",
                 "model.embed_tokens.weight"):
        s = next(s for s in chart.item.series if s.scheme == "tensor"
                 and any(r.name == name for r in s.rows))
        scene = chart.point_of(name)
        at = chart.widget.mapTo(chart, chart.widget.mapFromScene(scene))
        px = image.pixelColor(int(at.x() * ratio), int(at.y() * ratio))
        want = QColor(s.color)
        # the symbol's centre is its colour, as drawn over any line
        assert max(abs(px.red() - want.red()), abs(px.green() - want.green()),
                   abs(px.blue() - want.blue())) <= 40, (name, px.name(), want.name())


def test_svg_export_draws_symbols_as_vectors(chart, tmp_path):
    from quantscope.gui.export import render_svg

    rows = _rows()
    chart.set_rows(rows)
    out = tmp_path / "chart.svg"
    _move(chart, _viewport_pos(chart, chart.point_of(rows[1].name)))  # the hover marker too
    assert chart.marker.isVisible()
    render_svg(chart, out, parts=[chart.widget])
    root = ET.parse(out).getroot()
    tags = [el.tag.rsplit("}", 1)[-1] for el in root.iter()]
    assert "image" not in tags  # no bitmap
    assert tags.count("path") + tags.count("polyline") >= len(chart._hit_rows)


def test_dashes_run_on_across_vertices():
    from quantscope.gui.model_chart import dash_segments

    # a straight line cut at odd places dashes exactly as the uncut line
    px, py = np.array([0.0, 100.0]), np.array([0.0, 0.0])
    whole = np.array(dash_segments(px, py, 6.0, 3.0)).T
    cut = np.array(dash_segments(np.array([0.0, 7.5, 13.0, 100.0]), np.zeros(4), 6.0, 3.0)).T
    merged = []  # a dash split at a vertex is two pieces end to end
    for seg in cut:
        if merged and math.isclose(merged[-1][2], seg[0]):
            merged[-1] = [merged[-1][0], 0.0, seg[2], 0.0]
        else:
            merged.append(list(seg))
    np.testing.assert_allclose(np.array(merged), whole)
    assert [tuple(s[[0, 2]]) for s in whole[:3]] == [(0.0, 6.0), (9.0, 15.0), (18.0, 24.0)]
    # on a zigzag the drawn length is the pattern's share of the length
    rng = np.random.default_rng(1)
    zx, zy = np.arange(50.0) * 7, rng.uniform(0, 300, 50)
    x0, y0, x1, y1 = dash_segments(zx, zy, 8.0, 4.0)
    drawn = np.hypot(x1 - x0, y1 - y0).sum()
    total = np.hypot(np.diff(zx), np.diff(zy)).sum()
    assert abs(drawn - total * 8 / 12) <= 8.0
    assert np.all(np.hypot(x1 - x0, y1 - y0) <= 8.0 + 1e-9)


def test_series_colours_keep_3_to_1_on_both_backgrounds():
    from quantscope.gui.model_chart import MARK_CONTRAST, PALETTE, series_colors
    from quantscope.gui.theme import contrast_ratio, resolve

    for dark in (False, True):
        theme = resolve(dark, False)
        colors = series_colors(theme)
        assert len(colors) == len(PALETTE)
        assert all(contrast_ratio(c, theme.background) >= MARK_CONTRAST for c in colors)
        assert len(set(colors)) == len(colors)
    light = series_colors(resolve(False, False))
    assert QColor(light[0]) == QColor(PALETTE[0])  # colours that pass stay as they are


def test_ticks_leave_room_for_their_labels():
    from quantscope.gui.model_chart import nice_ticks

    ticks = nice_ticks(-1.0, 32.0, 400.0, 20.0, {-1.0: "emb", 32.0: "out"})
    xs = [x for x, _ in ticks]
    assert ticks[0] == (-1.0, "emb") and ticks[-1] == (32.0, "out")
    per = 400.0 / 34
    assert all((b - a) * per >= 20.0 for a, b in itertools.pairwise(xs))
    assert nice_ticks(0.0, 5.0, 600.0, 20.0, {}) == [(float(v), str(v)) for v in range(6)]


def test_the_axis_draws_emb_and_the_layers(chart, qtbot):
    chart.resize(420, 520)
    chart.set_rows(_rows(layers=32))
    qtbot.wait(10)
    axis = chart.plot.getAxis("bottom")
    image = QImage(10, 10, QImage.Format.Format_ARGB32_Premultiplied)
    p = QPainter(image)
    try:
        _, _, texts = axis.generateDrawSpecs(p)
    finally:
        p.end()
    drawn = [text for _, _, text in texts]
    assert drawn[0] == "emb" and "5" in drawn and "30" in drawn
    rects = [rect for rect, _, _ in texts]
    assert all(a.right() <= b.left() for a, b in itertools.pairwise(rects))  # none overlap


def test_a_band_marks_where_the_engine_gives_up_on_int8(chart, qtbot):
    from quantscope.core.stats.fused import suggest_floor_db
    from quantscope.gui.model_chart import MODES

    rows = _rows()
    chart.set_rows(rows)
    assert chart.floor.isVisible() and chart.floor.getRegion()[1] == suggest_floor_db(8) == 20.0
    below = {r.name for r in _charted(rows) if max(r.figures.per_tensor_db,
                                                     r.figures.per_channel_db) < 20.0}
    assert below == {r.name for r in _charted(rows) if r.figures.suggested in
                     ("keep 16-bit", "fp16 outliers")}  # what the band says: the table's word
    chart.bits = 4
    chart.set_rows(list(rows))
    assert chart.floor.getRegion()[1] == suggest_floor_db(4)
    assert chart.legend.items[-1][1].text == f"int4 floor ({suggest_floor_db(4):.0f} dB)"
    chart.mode.setCurrentIndex(list(MODES).index("gain"))  # gains have no floor
    assert not chart.floor.isVisible()
    assert all(lab.text != "int4 floor (8 dB)" for _, lab in chart.legend.items)
