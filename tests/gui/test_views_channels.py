"""Per-channel / per-group detail: the table and plots are the per-channel report's numbers, a
click selects a unit and shows that unit's own code histogram."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QFontMetricsF

from quantscope.gui.views.channels import WORST_ROWS, ChannelsView
from quantscope.state import ExplorerState, Source


def weights() -> np.ndarray:
    """[32 out, 128 in] with channel 5 holding one 9.0 (an outlier channel), channel 20 tiny."""
    rng = np.random.default_rng(4)
    w = rng.normal(scale=0.5, size=(32, 128)).astype(np.float32)
    w[5, 17] = 9.0
    w[20] *= 0.001
    return w


@pytest.fixture
def state() -> ExplorerState:
    st = ExplorerState()
    st.set_tensor(weights(), Source("array", "weights", axis=0))
    st.compute()
    return st


@pytest.fixture
def view(qtbot, state) -> ChannelsView:
    v = ChannelsView(state)
    qtbot.addWidget(v)
    v.resize(1100, 600)
    v.show()
    return v


def test_table_lists_the_worst_channels_of_the_report(view, state):
    rep = state.results["symmetric/channel"]
    worst = rep.per_channel.worst(WORST_ROWS)
    shown = [int(view.table.item(r, 0).text()) for r in range(view.table.rowCount())]
    assert shown == worst.tolist()
    assert shown[0] == 5  # the outlier stretches its own channel's window
    assert view.table.item(0, 6).text() == "yes"
    assert view.table.item(0, 1).text() == f"{rep.per_channel.sqnr_db[5]:.2f}"
    assert view.table_data.outliers.tolist() == [5]
    assert "1 outlier channel (|x| ≥ 6)" in view.summary.text()


def test_plots_hold_the_per_channel_numbers(view, state):
    rep = state.results["symmetric/channel"]
    xs, ys = view.scales.getData()
    np.testing.assert_array_equal(xs, np.arange(32))
    np.testing.assert_array_equal(ys, rep.params.scale.astype(np.float64))
    _, ry = view.ranges.getData()
    np.testing.assert_array_equal(ry[0::2], rep.per_channel.x_min)
    np.testing.assert_array_equal(ry[1::2], rep.per_channel.x_max)
    ox, oy = view.outlier_ranges.getData()
    assert ox.tolist() == [5.0, 5.0] and oy[1] == 9.0
    _, sq = view.sqnrs.getData()
    np.testing.assert_array_equal(sq, rep.per_channel.sqnr_db)


def test_threshold_and_scheme_controls(view, state):
    view.threshold.setValue(1.0)
    assert len(view.table_data.outliers) > 1
    view.scheme.setCurrentText("asymmetric")
    rep = state.results["asymmetric/channel"]
    assert view.report() is rep
    assert view.table_data.zero_point.tolist() == np.asarray(rep.params.zero_point).tolist()


def test_clicking_a_table_row_shows_that_channels_own_buckets(view, state):
    rep = state.results["symmetric/channel"]
    view.table.selectRow(3)
    unit = int(view.table.item(3, 0).text())
    assert view.selected == unit
    h = view.unit_hist
    assert h.unit == unit and h.counts.sum() == 128
    assert h.codes_used == rep.per_channel.codes_used[unit]
    assert h.scale == float(rep.params.scale[unit])
    xs, _ = view.bucket_hist.getData()
    np.testing.assert_allclose(np.diff(xs), h.scale, rtol=1e-12)  # its own bucket width
    assert f"channel {unit}</b>: {h.codes_used} of 255 codes" in view.unit_label.text()
    assert view.cursors[0].value() == unit


def test_clicking_a_plot_selects_the_channel_under_the_mouse(view, qtbot):
    vb = view.sqnr_plot.getViewBox()
    y = float(np.mean(vb.viewRange()[1]))
    scene = vb.mapViewToScene(QPointF(20.0, y))
    pos = view.graphics.mapFromScene(scene)
    qtbot.mouseClick(view.graphics.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert view.selected == 20
    assert view.unit_hist.unit == 20


def test_per_group_units(view, state):
    state.update_settings(group_size=32, axis=1)
    state.compute()
    rep = state.results["symmetric/channel"]
    assert rep.params.granularity == "group"
    assert len(view.table_data) == 32 * 4
    assert view.table_data.kind == "group"
    assert view.selected == int(view.table_data.worst[0])  # the worst group, not channel 5
    assert view.sqnr_plot.getAxis("bottom").labelText == "group"
    # row 5, block 0 (x[5, 0:32]) holds the 9.0: unit 5*4 + 0
    assert 20 in view.table_data.outliers.tolist()
    view.select_unit(20)
    assert view.unit_hist.codes_used == rep.per_channel.codes_used[20]
    assert view.unit_hist.counts.sum() == 32


def test_hidden_view_waits_until_shown(qtbot, state):
    v = ChannelsView(state)
    qtbot.addWidget(v)
    state.update_settings(bits=6)
    state.compute()
    assert v.table_data is None  # nothing computed for a view nobody sees
    v.show()
    qtbot.waitExposed(v)
    assert v.table_data is not None and v.report().params.bits == 6


@pytest.mark.parametrize("size", [(1260, 600), (1900, 900), (560, 900)])
def test_the_plots_take_the_height_the_summary_does_not_need(view, qtbot, size):
    """Full width at a projector's text size the summary is one line: the rows kept for a
    narrow tab's wrapped summary were an empty band above the plots."""
    from quantscope.gui.caption_label import line_count
    from quantscope.gui.theme import resolve

    view.apply_theme(resolve(False, True, 720))
    view.summary.setStyleSheet("font-size: 18px")
    view.resize(*size)
    qtbot.wait(50)
    view.refresh()
    qtbot.wait(50)
    metrics = QFontMetricsF(view.summary.font())
    lines = line_count(metrics, view.summary.text(), view.summary.contentsRect().width())
    assert view.summary.height() <= (lines + 1) * metrics.lineSpacing(), (lines, size)
    # and every line of the text has its room
    assert view.summary.height() >= view.summary.heightForWidth(view.summary.width()) - 1


def test_axes_draw_only_readable_ticks(view, qtbot):
    """Every tick an axis of the view draws is a labelled one, at least a label's height
    apart: the minor ticks between them drew a comb along the short axes."""
    from quantscope.gui.theme import resolve

    view.apply_theme(resolve(False, True, 720))
    view.resize(1260, 600)
    qtbot.wait(50)
    view.grab()
    for plot in (view.range_plot, view.scale_plot, view.sqnr_plot, view.hist_plot):
        for side in ("left", "bottom"):
            axis = plot.getAxis(side)
            lo, hi = axis.range
            length = axis.width() if side == "bottom" else axis.height()
            levels = axis.tickSpacing(lo, hi, length)[:axis.style["maxTickLevel"] + 1]
            for spacing, _ in levels:
                px = spacing / (hi - lo) * length
                assert px >= QFontMetricsF(axis.style["tickFont"]).height(), (side, spacing, px)


def test_summary_counts_outlier_channels_along_every_axis(qtbot):
    """A 60x input channel of a weight quantized per output channel: no output channel is an
    outlier (each holds one of its values), and the summary names axis 1's channel 17."""
    from quantscope.state.source import overview

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, 256)) * 0.02).astype(np.float32)
    w[:, 17] *= 60
    st = ExplorerState()
    st.set_tensor(w, Source("array", "w", axis=0), overview=overview(w))
    st.compute()
    v = ChannelsView(st)
    qtbot.addWidget(v)
    v.resize(1100, 600)
    v.show()
    qtbot.waitUntil(lambda: "by axis" in v.summary.text())
    text = v.summary.text()
    assert "0 outlier channels (|x| ≥ 6)" in text
    assert "outlier channels by axis: 0: 0/64, 1: 1/256 (#17, " in text
