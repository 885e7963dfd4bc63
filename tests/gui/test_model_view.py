"""The model view in the window: a checkpoint opens as a table and chart whose numbers are the
scan's (so ``report``'s), rows stream in and can be cancelled and resumed, a tensor opens in the
panes and the view comes back in one click, bad shards are named and the rest still works."""

from __future__ import annotations

import json
import os
import threading

import ml_dtypes
import numpy as np
import pytest

from quantscope.io.checkpoint import list_checkpoint
from quantscope.state import Settings
from quantscope.state.model_scan import ERROR, OK, PENDING, SKIPPED, scan_checkpoint

RNG = np.random.default_rng(4242)
REAL = "/work/shared/data/minilm/layer0_bf16.safetensors"


def _write_st(path, tensors):
    import struct

    header, chunks, offset = {}, [], 0
    names = {np.dtype(np.float32): "F32", np.dtype(ml_dtypes.bfloat16): "BF16",
             np.dtype(np.int64): "I64", np.dtype(np.float16): "F16"}
    for name, a in tensors.items():
        data = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def _sharded(folder, layers=6, shards=3):
    tensors = {"model.embed_tokens.weight": (RNG.standard_normal((64, 32)) * 0.1).astype(
        ml_dtypes.bfloat16)}
    for i in range(layers):
        for proj in ("q_proj", "o_proj"):
            w = RNG.standard_normal((32, 32)) * 0.05
            w[RNG.integers(0, 32)] *= 80
            tensors[f"model.layers.{i}.self_attn.{proj}.weight"] = w.astype(ml_dtypes.bfloat16)
        tensors[f"model.layers.{i}.mlp.down_proj.weight"] = (
            RNG.standard_normal((32, 48)) * 0.05).astype(np.float32)
        tensors[f"model.layers.{i}.input_layernorm.weight"] = np.ones(32, ml_dtypes.bfloat16)
    tensors["position_ids"] = np.arange(16, dtype=np.int64)
    names = list(tensors)
    weight_map = {}
    for k, idx in enumerate(np.array_split(np.arange(len(names)), shards), 1):
        file = f"model-{k:05d}-of-{shards:05d}.safetensors"
        _write_st(folder / file, {names[i]: tensors[names[i]] for i in idx})
        weight_map.update({names[i]: file for i in idx})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return tensors


def _open(win, qtbot, path):
    win.open_path(path)
    qtbot.waitUntil(win.model_active, timeout=30_000)  # a file is listed in the worker
    qtbot.waitUntil(win.model_view.is_complete, timeout=60_000)
    return win.model_view


def _figures(view):
    return {r.name: (r.status, r.figures) for r in view.rows}


def test_checkpoint_opens_the_model_view_with_the_scans_numbers(make_window, qtbot, tmp_path):
    tensors = _sharded(tmp_path)
    win = make_window()
    view = _open(win, qtbot, tmp_path)
    assert win.ready_to_render() and not win.splitter.isVisible()
    expected = scan_checkpoint(list_checkpoint(tmp_path))
    assert _figures(view) == {r.name: (r.status, r.figures) for r in expected}
    assert view.model.rowCount() == len(tensors)
    texts = {view.model.data(view.model.index(i, 0)): view.model.data(view.model.index(i, 10))
             for i in range(view.model.rowCount())}
    assert texts["position_ids"] == "not analysed (int64)"
    assert all(texts[n] in ("per-tensor", "per-channel") for n in tensors if n != "position_ids")
    assert "6 tensors to go" not in view.progress_label.text()
    # the chart: one series per kind over the six layers, matrices only
    kinds = set(view.chart.points)
    assert {"self_attn.q_proj.weight", "self_attn.o_proj.weight", "mlp.down_proj.weight"} <= kinds
    assert "input_layernorm.weight" not in kinds
    assert sorted(x for x, _ in view.chart.points["self_attn.q_proj.weight"]) == list(range(6))
    doc = win.metrics()
    assert {t["name"] for t in doc["tensors"]} == set(tensors)
    assert doc["settings"] == Settings().to_dict()


def test_sorting_filter_and_click_through_and_back(make_window, qtbot, wait_results, tmp_path):
    tensors = _sharded(tmp_path)
    win = make_window()
    view = _open(win, qtbot, tmp_path)
    view.table.sortByColumn(4, __import__("PySide6.QtCore").QtCore.Qt.SortOrder.AscendingOrder)
    first = view.model.row_at(0)
    analysed = [r for r in view.rows if r.status == OK]
    assert first.figures.per_tensor_db == min(r.figures.per_tensor_db for r in analysed)
    view.filter.setText("down_proj")
    assert view.model.rowCount() == 6
    view.filter.setText("")
    index = view.model.index(0, 0)
    view.table.clicked.emit(index)
    wait_results(win)
    assert not win.model_active() and win.splitter.isVisible()
    assert win.model_back_bar.isVisible()
    assert "four ways" in win.headline.text()  # the headline says what is on screen
    np.testing.assert_array_equal(win.state.tensor, np.asarray(tensors[first.name], np.float32))
    assert win.state.source.tensor == first.name
    report = win.state.results["symmetric/tensor"]
    assert abs(report.sqnr_db - first.figures.per_tensor_db) <= 10 * np.log10(1 + 2e-9)
    win.model_back_button.click()
    assert win.model_active() and view.model.row_at(0).name == first.name  # kept its place
    assert win.headline.text().startswith("every tensor quantized to int8")
    # a chart point opens its tensor too
    name = "model.layers.3.mlp.down_proj.weight"
    view.chart.tensor_clicked.emit(name)
    qtbot.waitUntil(lambda: win.state.source.tensor == name and win.all_shown(),
                    timeout=30_000)
    assert not win.model_active()


def test_cancel_resume_and_new_settings(make_window, qtbot, tmp_path, monkeypatch):
    from quantscope.gui import model_view

    # each scan thread waits after its first tensor until the test has cancelled, so the
    # cancel always lands midway (a fast machine finished the scan before it)
    cancelled = threading.Event()

    class HeldScan(model_view.ModelScan):
        def run(self, on_row=None, **kwargs):
            def held(row):
                on_row(row)
                cancelled.wait(30)
            return super().run(on_row=held, **kwargs)

    monkeypatch.setattr(model_view, "ModelScan", HeldScan)
    _sharded(tmp_path, layers=30)
    win = make_window()
    view = win._ensure_model_view()
    win.open_path(tmp_path)
    qtbot.waitUntil(lambda: any(r.status == OK for r in view.rows), timeout=60_000)
    view.cancel()
    cancelled.set()
    assert view.resume_button.isVisible() and not view.cancel_button.isVisible()
    qtbot.waitUntil(lambda: not view.job.busy, timeout=60_000)
    done = {r.name for r in view.rows if r.status == OK}
    pending = [r for r in view.rows if r.status == PENDING]
    assert done and pending and "cancelled" in view.progress_label.text()
    view.resume_button.click()
    qtbot.waitUntil(view.is_complete, timeout=60_000)
    expected = scan_checkpoint(list_checkpoint(tmp_path))
    assert _figures(view) == {r.name: (r.status, r.figures) for r in expected}
    win.state.update_settings(bits=4)
    qtbot.waitUntil(lambda: view.is_complete() and view.settings.bits == 4, timeout=60_000)
    four = scan_checkpoint(list_checkpoint(tmp_path), Settings(bits=4))
    assert _figures(view) == {r.name: (r.status, r.figures) for r in four}
    assert "int4" in view.settings_label.text()


def test_bad_shards_are_named_and_the_window_keeps_working(make_window, qtbot, wait_results,
                                                           tmp_path):
    _sharded(tmp_path)
    index = tmp_path / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    files = sorted(set(doc["weight_map"].values()))
    os.remove(tmp_path / files[1])
    doc["weight_map"]["model.embed_tokens.weight"] = "../../etc/passwd"
    index.write_text(json.dumps(doc))
    win = make_window()
    view = _open(win, qtbot, index)
    assert view.problems_label.isVisible()
    assert f"'{files[1]}', which does not exist" in view.problems_label.text()
    assert "not a plain file name" in view.problems_label.text()
    status = {r.name: r.status for r in view.rows}
    assert status["model.embed_tokens.weight"] == ERROR
    assert list(status.values()).count(OK) > 5 and SKIPPED in status.values()
    row = next(r for r in view.rows if r.status == OK)
    view.tensor_chosen.emit(row)
    wait_results(win)
    assert win.state.source.tensor == row.name


def test_single_tensor_file_still_opens_in_the_panes(make_window, wait_results, tmp_path):
    path = tmp_path / "one.safetensors"
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    _write_st(path, {"w": x})
    win = make_window()
    win.open_path(path)
    wait_results(win)
    assert not win.model_active() and win.model_view is None
    np.testing.assert_array_equal(win.state.tensor, x)


def test_export_table(make_window, qtbot, tmp_path):
    _sharded(tmp_path / "m" if (tmp_path / "m").mkdir() is None else tmp_path)
    win = make_window()
    view = _open(win, qtbot, tmp_path / "m")
    view.save(tmp_path / "t.csv")
    view.save(tmp_path / "t.json")
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[0].startswith("name,shape,dtype,params,per_tensor_sqnr_db")
    assert len(lines) == 1 + len(view.rows)
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["count"] == sum(r.status == OK for r in view.rows)


@pytest.mark.parametrize("flag", ["--metrics", "--screenshot"])
def test_command_line_renders_the_model_view(qapp, tmp_path, flag):
    from quantscope.cli import main

    out = tmp_path / ("m.json" if flag == "--metrics" else "m.png")
    assert main([REAL, flag, str(out), "--size", "1280x720"]) == 0
    assert out.stat().st_size > 0
    if flag == "--metrics":
        doc = json.loads(out.read_text())
        assert len(doc["tensors"]) == 16 and all(t["status"] == "ok" for t in doc["tensors"])


def test_shared_prefix_is_the_dotted_start_every_name_has():
    from quantscope.gui.model_table import shared_prefix

    assert shared_prefix(["encoder.layer.0.a.weight", "encoder.layer.0.b.bias"]) == (
        "encoder.layer.0.")
    assert shared_prefix(["encoder.layer.0.a", "encoder.layer.01.b"]) == "encoder.layer."
    assert shared_prefix(["model.x", "position_ids"]) == ""
    assert shared_prefix(["layer.a", "layer.a"]) == "layer."
    assert shared_prefix(["only.one"]) == ""


def _placeholder_room(edit) -> int:
    """Pixels a line edit has for its text: its contents less the text margins and the clear
    button (shown as text is typed; its room is kept while empty)."""
    from PySide6.QtWidgets import QStyle, QStyleOptionFrame

    option = QStyleOptionFrame()
    edit.initStyleOption(option)
    rect = edit.style().subElementRect(QStyle.SubElement.SE_LineEditContents, option, edit)
    margins = edit.textMargins()
    clear = edit.sizeHint().height() * 0.8  # Qt's clear button: the icon and its margins
    return int(rect.width() - margins.left() - margins.right() - clear)


def _check_talk_fits(win, view, qtbot, qapp) -> None:
    """A talk's text is larger than the desk's: the suggestions stay in view beside the names,
    the filter shows its whole placeholder, the settings line wraps instead of being cut, the
    chart's hint reads whole and its plot is no shorter than its legend -- with each font
    set, at 1280x720 and 1366x768 (one window: the talk's text follows its size and the
    application's font)."""
    from font_sets import FONT_SETS, font_set
    from gui_measure import settle
    from PySide6.QtGui import QFont

    from quantscope.gui.model_table import COLUMNS

    win.presentation_action.setChecked(True)
    base = QFont(qapp.font())
    try:
        for fonts in FONT_SETS:
            qapp.setFont(font_set(fonts, base))
            for size in ((1280, 720), (1366, 768)):
                win.resize(*size)
                qtbot.waitUntil(lambda size=size: (win.width(), win.height()) == size,
                                timeout=5000)
                settle(win, qtbot)
                where = f"{fonts} {size}"
                header, visible = view.table.horizontalHeader(), view.table.viewport().width()
                for title in ("tensor dB", "channel dB", "gain dB", "suggested"):
                    col = COLUMNS.index(title)
                    fm = view.table.fontMetrics()
                    assert header.sectionViewportPosition(col) + header.sectionSize(col) \
                        <= visible, (where, title)
                    assert header.sectionSize(col) >= fm.horizontalAdvance("per-channel") \
                        or title != "suggested", where
                edit = view.filter
                text = edit.fontMetrics().horizontalAdvance(edit.placeholderText())
                assert text <= _placeholder_room(edit), (where, text, _placeholder_room(edit))
                label = view.settings_label
                assert label.heightForWidth(label.width()) <= label.height(), where
                assert label.geometry().right() <= view.width(), where
                chart = view.chart
                plot = chart.plot.vb.sceneBoundingRect().height()
                legend = chart.legend.sceneBoundingRect().height()
                assert plot >= legend, (where, plot, legend)
                assert "…" not in chart.hover.text(), (where, chart.hover.text())
    finally:
        qapp.setFont(base)
        win.presentation_action.setChecked(False)


def test_at_1280x720_the_figures_sit_beside_the_names_at_a_desk_and_in_a_talk(
        make_window, qtbot, qapp):
    """The names shown without their shared prefix and the figures beside them in view at a
    desk; then in a talk, as :func:`_check_talk_fits` says."""
    from PySide6.QtCore import Qt

    from quantscope.gui.model_table import COLUMNS

    win = make_window()
    win.resize(1280, 720)
    view = _open(win, qtbot, REAL)
    qtbot.wait(50)
    header, model = view.table.horizontalHeader(), view.model
    names = [model.data(model.index(i, 0)) for i in range(model.rowCount())]
    assert "attention.self.query.weight" in names  # shown without "encoder.layer.0."
    assert model.headerData(0, Qt.Orientation.Horizontal) == "tensor\nencoder.layer.0.…"
    row = next(i for i, n in enumerate(names) if n == "attention.self.query.weight")
    assert model.data(model.index(row, 0), Qt.ItemDataRole.ToolTipRole).startswith(
        "encoder.layer.0.attention.self.query.weight")
    visible = view.table.viewport().width()
    for title in ("tensor dB", "channel dB", "gain dB"):
        col = COLUMNS.index(title)
        assert header.visualIndex(col) <= 3
        assert header.sectionViewportPosition(col) + header.sectionSize(col) <= visible, title
    view.filter.setText("encoder attention")  # the filter still sees the whole name
    assert model.rowCount() == 10
    view.filter.setText("")
    for size in ((1280, 720), (1366, 768)):
        win.resize(*size)
        qtbot.waitUntil(lambda size=size: (win.width(), win.height()) == size, timeout=5000)
        qtbot.wait(50)
        _check_every_column_reads(win, view, str(size))
    _check_talk_fits(win, view, qtbot, qapp)


def _check_every_column_reads(win, view, where: str) -> None:
    """With the side panel open, no column scrolls out of view or is cut: each header line
    and each cell's text fits its section, and the names as drawn tell every row apart."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QStyleOptionViewItem

    from quantscope.gui.model_table import COLUMNS

    assert win.side_dock.isVisible(), where
    table, model = view.table, view.model
    header, fm = table.horizontalHeader(), table.fontMetrics()
    assert table.horizontalScrollBar().maximum() == 0, where
    for col in range(len(COLUMNS)):
        right = header.sectionViewportPosition(col) + header.sectionSize(col)
        assert header.sectionViewportPosition(col) >= 0 and right <= \
            table.viewport().width(), (where, COLUMNS[col])
        lines = model.headerData(col, Qt.Orientation.Horizontal).split("\n")
        arrow = 12 if header.sortIndicatorSection() == col else 0
        assert max(map(fm.horizontalAdvance, lines)) + 8 + arrow <= header.sectionSize(col), \
            (where, lines)
        if col == 0:
            continue
        widest = max(fm.horizontalAdvance(model.data(model.index(r, col)))
                     for r in range(model.rowCount()))
        assert widest + 8 <= header.sectionSize(col), (where, COLUMNS[col])
    shown = []
    for r in range(model.rowCount()):
        option = QStyleOptionViewItem()
        table.initViewItemOption(option)
        index = model.index(r, 0)
        option.rect = table.visualRect(index)
        opt, _ = view.name_delegate.shown(option, index)
        assert fm.horizontalAdvance(opt.text) <= option.rect.width() - 4, (where, opt.text)
        assert not opt.text.startswith("…"), (where, opt.text)  # at least their initials
        shown.append(opt.text)
    assert len(set(shown)) == len(shown), (where, shown)


def test_every_label_names_the_tensor_on_screen(make_window, qtbot, wait_results, tmp_path):
    """Clicking a tensor shows the panes only once they hold it (the headline, the status bar
    and the Tensor box never show the previous tensor's name over them); the bar back to the
    model view names the tensor and leaves once the panes show a tensor from elsewhere."""
    from quantscope.state import Source

    _sharded(tmp_path)
    win = make_window()
    view = _open(win, qtbot, tmp_path)
    assert win.source_status.text() == str(tmp_path)  # the model view's checkpoint
    seen = []

    def record():  # what the labels say whenever the panes are on screen
        if not win.model_active():
            seen.append((win.state.source.tensor if win.state.source else None,
                         win.source_status.text(), win.source_panel.source_label.text(),
                         win.model_back_label.text()))
    win.state.tensor_changed.connect(record)
    for name in ("model.layers.1.self_attn.q_proj.weight", "model.layers.4.mlp.down_proj.weight"):
        view.chart.tensor_clicked.emit(name)
        assert win.model_active()  # until the tensor is in place
        qtbot.waitUntil(lambda n=name: not win.model_active() and win.state.source.tensor == n,
                        timeout=30_000)
        wait_results(win)
        label = win.state.source.label()
        assert name in label
        assert win.source_status.text() == label
        assert win.source_panel.source_label.text() == label
        assert win.model_back_bar.isVisible()
        assert win.model_back_label.text().endswith(f"showing {name}")
        assert name in win.headline.text()
        win.model_back_button.click()
        assert win.model_active() and win.source_status.text() == str(tmp_path)
    assert all(tensor in status and tensor in box and back.endswith(tensor)
               for tensor, status, box, back in seen), seen
    win.show_panes()
    win.load(Source.generator("normal", (16, 32), 0))
    qtbot.waitUntil(lambda: win.state.source.kind == "generator", timeout=30_000)
    assert not win.model_back_bar.isVisible()
    assert win.source_status.text() == win.state.source.label()


def test_a_refused_index_after_a_model_leaves_a_chart_that_paints(make_window, qtbot,
                                                                 tmp_path):
    """The floor band's legend sample outlived the band: painting it read the
    ``LinearRegionItem``'s missing ``opts`` on this and every later load."""
    model = tmp_path / "model"
    model.mkdir()
    _sharded(model)
    win = make_window()
    view = _open(win, qtbot, model)
    chart = view.chart
    assert chart.floor.isVisible()
    bad = tmp_path / "bad" / "model.safetensors.index.json"
    bad.parent.mkdir()
    bad.write_text('{"weight_map": {"a": "../outside.safetensors"}}')
    win.open_path(bad)
    qtbot.waitUntil(lambda: not chart.floor.isVisible() or view.problems, timeout=30_000)
    for _ in range(2):  # this load and the next: every paint of the legend works
        win.grab()
        chart.widget.grab()
    again = _open(win, qtbot, model)
    again.chart.widget.grab()
    assert again.chart.floor.isVisible()
