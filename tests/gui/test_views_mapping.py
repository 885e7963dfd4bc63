"""The Mapping view draws the engine's numbers: the seed example's codes, scales and zero
points beside each scheme, the codes symmetric never uses shaded, and the cast without clamp
with its count of wrapped values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gui_measure import font_px, project, rich_text_lines, settle

from quantscope.core.labs.mapping import map_values
from quantscope.gui.views.mapping import MappingView


@pytest.fixture
def view(qtbot):
    v = MappingView()
    qtbot.addWidget(v)
    v.resize(1200, 700)
    v.show()
    return v


def test_the_seed_example_is_what_the_view_shows(view):
    data = view.export_data()
    assert data["symmetric"]["codes"] == [-42, 0, 21, 127]
    assert data["asymmetric"]["codes"] == [-128, -64, -32, 127]
    assert data["asymmetric"]["zero_point"] == -64
    assert data["symmetric"]["unreachable"] == [[-128, -43]]
    sym, asym = map_values([-1, 0, 0.5, 3])
    text = view.info["symmetric"].text()
    assert f"s = {sym.scale:.6g}" in text and "z = 0" in text and "-128 … -43" in text
    assert f"max |error| = {sym.max_error:.3g}" in text
    assert f"z = {asym.zero_point}" in view.info["asymmetric"].text()


def test_cast_without_clamp_counts_the_wrapped_values(view):
    view.wrap_box.setChecked(True)
    cast = view.export_data()["cast_without_clamp"]
    assert 200 in cast["unclamped"]
    i = cast["unclamped"].index(200)
    assert cast["clamped"][i] == 127 and cast["wrapped"][i] == -56
    assert cast["wrap_count"] == 1
    text = view.info["cast"].text()
    assert "→ 200 → clamp 127 (12.7)" in text and "-56 (-5.6)" in text
    assert "1 of 5 would wrap" in text
    assert view.plots["cast"].isVisible() and not view.plots["symmetric"].isVisible()


def test_bad_values_are_said_and_the_figure_kept(view):
    before = view.export_data()
    view.set_values("1, two, 3")
    assert view.error.isVisible() and "'two' is not a number" in view.error.text()
    assert view.export_data() == before
    view.set_values(np.linspace(-2, 2, 64).tolist())
    assert not view.error.isVisible() and len(view.export_data()["symmetric"]["codes"]) == 64




def test_a_range_of_unused_codes_stays_on_one_line(view, qtbot):
    """Beside a narrow figure the range reads "-128 … -43", never "-128" / "… -43"."""
    label = view.info["symmetric"]
    label.setFixedWidth(label.fontMetrics().horizontalAdvance("codes never used: -128 …"))
    qtbot.wait(20)
    lines = rich_text_lines(label)
    assert any("-128 … -43" in line for line in lines), lines


def _drawn_labels(axis) -> list:
    """``(rect, flags, text)`` of every tick label the axis draws (rects in its own px)."""
    from PySide6.QtGui import QPainter, QPicture

    picture = QPicture()
    painter = QPainter(picture)
    try:
        painter.setFont(axis.style["tickFont"] or axis.font())
        _, _, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return texts


def _tick_label_rows(view, name: str, side: str) -> tuple[float, float]:
    """Top and bottom (in the view's pixels) of the tick labels ``side`` of a scheme's plot."""
    from PySide6.QtCore import QPoint

    widget = view.plots[name]
    axis = widget.getPlotItem().getAxis(side)
    texts = _drawn_labels(axis)
    assert texts
    tops, bottoms = [], []
    for rect, _, _ in texts:
        scene = axis.mapRectToScene(rect)
        box = widget.mapFromScene(scene).boundingRect()
        tops.append(widget.mapTo(view, QPoint(0, box.top())).y())
        bottoms.append(widget.mapTo(view, QPoint(0, box.bottom())).y())
    return min(tops), max(bottoms)


@pytest.mark.parametrize("presentation", [False, True])
def test_the_two_schemes_axes_read_apart(view, qtbot, presentation):
    """The symmetric plot's code labels (-64, 0, 64) and the asymmetric plot's value labels
    under them are a line apart: stacked, their two "0"s read as one column of numbers."""
    from quantscope.gui.theme import resolve

    view.apply_theme(resolve(True, presentation, 720))
    view.resize(1260, 560)
    qtbot.wait(50)
    view.grab()
    _, codes_bottom = _tick_label_rows(view, "symmetric", "bottom")
    values_top, _ = _tick_label_rows(view, "asymmetric", "top")
    line = view.plots["symmetric"].getPlotItem().getAxis("bottom").style["tickFont"]
    from PySide6.QtGui import QFontMetrics
    height = QFontMetrics(line).height() if line is not None else 12
    assert values_top - codes_bottom >= height, (codes_bottom, values_top, height)


def _assert_ends_labelled(axis, first: int, last: int) -> None:
    """The axis draws ``first`` and ``last``, inside its own width, no two labels touching."""
    texts = _drawn_labels(axis)
    shown = [text for _, _, text in texts]
    assert str(first) in shown and str(last) in shown, shown
    inner = axis.mapRectFromParent(axis.geometry())
    rects = sorted((rect for rect, _, _ in texts), key=lambda r: r.left())
    for rect in rects:
        assert inner.left() - 0.5 <= rect.left() and rect.right() <= inner.right() + 0.5
    for a, b in itertools.pairwise(rects):
        assert a.right() < b.left(), shown


@pytest.mark.parametrize("presentation", [False, True])
@pytest.mark.parametrize("size", [(1260, 560), (1900, 900), (700, 500)])
def test_the_code_axis_labels_its_ends(view, qtbot, presentation, size):
    """-128 and 127 are what a learner looks for; centred on their codes, a few codes from
    the axis's ends, pyqtgraph used to leave both out."""
    from quantscope.gui.theme import resolve

    view.apply_theme(resolve(False, presentation, size[1]))
    view.resize(*size)
    qtbot.wait(50)
    view.grab()
    for name in ("symmetric", "asymmetric"):
        _assert_ends_labelled(view.plots[name].getPlotItem().getAxis("bottom"), -128, 127)
    view.apply_theme(resolve(False, False, 1000))  # the views' theme is their own: reset


@pytest.mark.parametrize(("first", "last", "ticks"), [
    (-128, 127, [-128, -64, 0, 64, 127]),
    (-127, 127, [-127, -64, 0, 64, 127]),
    (0, 255, [0, 64, 128, 192, 255]),
    (-8, 7, [-8, -4, 0, 4, 7]),
    (0, 15, [0, 4, 8, 12, 15]),
    (-2, 1, [-2, -1, 0, 1]),
])
def test_code_ticks_are_the_ends_and_round_codes_between(first, last, ticks):
    from quantscope.gui.views._code_axis import code_ticks

    assert code_ticks(first, last) == ticks


@pytest.mark.parametrize(("first", "last"), [(0, 255), (-8, 7), (-128, 127)])
def test_any_code_range_has_its_ends_labelled(qtbot, first, last):
    """Unsigned and fewer bits too, in a narrow plot whose view ends half a code past them."""
    import pyqtgraph as pg

    from quantscope.gui.views._code_axis import CodeRangeAxis

    axis = CodeRangeAxis("bottom")
    plot = pg.PlotWidget(axisItems={"bottom": axis})
    qtbot.addWidget(plot)
    plot.hideAxis("left")
    plot.resize(260, 120)
    plot.show()
    axis.set_codes(first, last)
    plot.setXRange(first - 0.5, last + 0.5, padding=0)
    plot.grab()
    # a busy machine may lay the plot out after the first paint: the axis has no width (and
    # draws no label) until then
    qtbot.waitUntil(lambda: bool(_drawn_labels(axis)), timeout=10_000)
    _assert_ends_labelled(axis, first, last)


def _label_boxes(view, name: str):
    """(text's box without its item's margins, the code axis's line) of each label under the
    codes of ``name``'s plot, in scene pixels."""
    import pyqtgraph as pg

    item = view.plots[name].getPlotItem()
    axis_top = item.getAxis("bottom").mapToScene(0, 0).y()  # the line: the axis's top
    boxes = []
    for label in item.items:
        if isinstance(label, pg.TextItem) and "→" in label.textItem.toPlainText():
            margin = label.textItem.document().documentMargin()
            rect = label.textItem.boundingRect().adjusted(margin, margin, -margin, -margin)
            boxes.append(label.textItem.mapRectToScene(rect))
    return boxes, axis_top


@pytest.mark.parametrize("presentation", [False, True])
@pytest.mark.parametrize("size", [(1268, 560), (1354, 600)])
def test_the_labels_under_the_codes_stay_off_the_code_axis(view, qtbot, presentation, size):
    """Every row of "code → value (error)" labels is above the code axis and apart from the
    next: with rows a line and a quarter of the text's size apart, the third row's letters
    sat on the axis line in a talk's Mapping scene at 1280x720 (its tick through "21")."""
    from quantscope.gui.theme import resolve

    view.apply_theme(resolve(False, presentation, size[1] + 160))
    view.resize(*size)
    qtbot.wait(50)
    view.grab()
    qtbot.wait(10)
    view.grab()
    rows_seen = 0
    for name in ("symmetric", "asymmetric"):
        boxes, axis_top = _label_boxes(view, name)
        assert boxes, name
        tops = sorted({round(b.top(), 3) for b in boxes})
        rows_seen = max(rows_seen, len(tops))
        for box in boxes:
            assert box.bottom() <= axis_top, (name, box.bottom(), axis_top)
        for a, b in itertools.combinations(boxes, 2):
            assert not a.intersects(b), (name, a, b)
    assert rows_seen >= 2  # the seed example's labels need more than one row
    view.apply_theme(resolve(False, False, 1000))  # the views' theme is their own: reset


def _label_inks(item) -> tuple[list, float]:
    """The letters' tight box of each "code → value (error)" label under the codes of plot
    ``item``, in scene pixels (the font's tight box of the text, hung from the baseline of
    the item's first line), and the labels' font size in pixels."""
    import pyqtgraph as pg
    from PySide6.QtGui import QFontMetricsF

    inks, size = [], 0.0
    for label in item.items:
        text = label.textItem if isinstance(label, pg.TextItem) else None
        if text is None or "→" not in text.toPlainText():
            continue
        line = text.document().firstBlock().layout().lineAt(0)
        margin = text.document().documentMargin()
        ink = QFontMetricsF(text.font()).tightBoundingRect(text.toPlainText())
        inks.append(text.mapRectToScene(ink.translated(margin + line.x(),
                                                       margin + line.y() + line.ascent())))
        size = font_px(text.font())
    return inks, size


def test_a_talks_labels_under_the_codes_keep_clear_of_each_other_and_the_axis(
        fonts, app_window, qtbot):
    """Presenting at 1280x720, every font set: each scheme's four labels are all shown,
    whole inside the plot, and their letters keep a quarter of the font's size clear of each
    other's, of the cells above them and of the code axis's ticks below them, with no
    empty row left above the axis. Rows a line apart put a tall-line font's third row 0.2 px
    above the ticks' tips (and the default font's 2 px)."""
    import pyqtgraph as pg

    win = app_window(1000)
    project(win, qtbot)
    view = win.views_controller.tabs.page("Mapping")
    win.views.setCurrentWidget(view)
    win.stage.show_views(True)
    qtbot.waitUntil(view.is_ready, timeout=10_000)
    settle(win, qtbot)
    qtbot.wait(20)  # the labels' rows follow the plots' height: redrawn once it settles
    settle(win, qtbot)
    for name in ("symmetric", "asymmetric"):
        item = view.plots[name].getPlotItem()
        inks, size = _label_inks(item)
        assert len(inks) == 4, (fonts, name, len(inks))
        box = item.getViewBox()
        room = box.mapRectToScene(box.boundingRect())
        gap = size / 4
        cells = box.mapViewToScene(pg.Point(0, 0)).y()  # the cells' bottom edge
        axis = item.getAxis("bottom")
        tips = axis.mapToScene(0, 0).y() - max(0.0, -axis.style["tickLength"])
        for ink in inks:
            assert room.left() <= ink.left() and ink.right() <= room.right(), (fonts, ink)
            assert ink.top() - cells >= gap, (fonts, name, cells, ink.top(), gap)
            assert tips - ink.bottom() >= gap, (fonts, name, ink.bottom(), tips, gap)
        for a, b in itertools.combinations(inks, 2):
            assert not a.adjusted(-gap, -gap, gap, gap).intersects(b), (fonts, name, a, b)
        # and no empty row above the axis: the room the rows leave goes to the arrows
        lowest = max(inks, key=lambda ink: ink.bottom())
        assert tips - lowest.bottom() < lowest.height(), (fonts, name, lowest, tips)


def _boxes(widths):
    from quantscope.gui.views._code_labels import LabelBoxes

    return LabelBoxes(widths=list(widths), ink_offset=7.0, ink_height=18.0, gap=6.0)


def test_labels_centre_on_their_codes_and_stay_whole_in_the_plot():
    from quantscope.gui.views._code_labels import place

    placed = place([500.0, 10.0, 995.0], _boxes([100, 100, 100]), 1000.0, 3)
    assert placed == [(0, 450.0), (0, 0.0), (0, 900.0)]  # the ends moved in, just whole


def test_a_label_that_would_touch_its_neighbour_takes_the_next_row_or_none():
    from quantscope.gui.views._code_labels import place

    # 100 px labels 103 px apart: a gap of 6 px is more than the 3 between them
    centres = [200.0, 303.0, 406.0, 700.0]
    assert place(centres, _boxes([100] * 4), 1000.0, 2) == [
        (0, 150.0), (1, 253.0), (0, 356.0), (0, 650.0)]
    assert place(centres, _boxes([100, 100, 320, 100]), 1000.0, 2) == [
        (0, 150.0), (1, 253.0), (-1, 0.0), (0, 650.0)]


def test_a_short_plot_shows_fewer_rows_and_the_band_holds_them():
    from quantscope.gui.views._code_labels import ARROWS_PX, band_px, item_top_px, rows_that_fit

    boxes = _boxes([100])
    # three rows: a gap, three rows of 18 px letters and a 6 px gap each, 5 px of ticks
    assert band_px(3, boxes, 5.0) == 6 + 3 * 24 + 5
    assert rows_that_fit(ARROWS_PX + 83, boxes, 5.0) == 3
    assert rows_that_fit(ARROWS_PX + 82, boxes, 5.0) == 2
    assert rows_that_fit(ARROWS_PX + 10, boxes, 5.0) == 0
    # a row's letters start a gap and the rows above it below the cells
    assert item_top_px(2, boxes) + boxes.ink_offset == 6 + 2 * 24


def test_a_cast_without_clamp_reads_its_values_and_its_wrapped_code(view, qtbot):
    """With the wrap example the values -1, 0 and 0.5 sit a few pixels apart on the real
    axis: their labels never touch ("0" and "0.5" read as "00.5"); the wrapped code's label
    is whole in the plot and clear of its marker and of the dashed arrow's end (centred over
    the end, the arrow ran through its words)."""
    import pyqtgraph as pg
    from PySide6.QtCore import QRectF

    view.wrap_box.setChecked(True)
    view.resize(900, 600)  # the plot ~620 px wide: "0" and "0.5" 9 px apart
    qtbot.wait(50)
    view.grab()
    item = view.plots["cast"].getPlotItem()
    rects = sorted((rect for rect, _, _ in _drawn_labels(item.getAxis("top"))),
                   key=lambda r: r.left())
    assert len(rects) >= 2
    for a, b in itertools.pairwise(rects):
        assert a.right() < b.left(), (a, b)
    box = item.getViewBox()
    room = box.mapRectToScene(box.boundingRect())
    labels = [t for t in item.items
              if isinstance(t, pg.TextItem) and "astype" in t.textItem.toPlainText()]
    assert len(labels) == 1
    wrapped = view.export_data()["cast_without_clamp"]["wrapped"]
    end = box.mapViewToScene(pg.Point(min(wrapped), 0.38))  # -56: the one wrapped code
    marker = QRectF(end.x() - 6, end.y() - 6, 12, 12)
    rect = labels[0].sceneBoundingRect()
    assert room.contains(rect), (room, rect)
    assert not rect.intersects(marker), (rect, marker)
