"""Exports: PNG at 2x, SVG that any viewer draws as on screen, numbers equal to the engine's,
and the quantized tensor in ``quantscope export``'s archive format."""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtGui import QImage

from quantscope.core import analyze, dequantize
from quantscope.gui.export import (
    ExportError,
    clean_svg,
    render_png,
    render_svg,
    save_image,
    save_numbers,
    save_quantized,
)
from quantscope.gui.theme import apply_theme
from quantscope.state import PANES, ExplorerState, Source

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def plot(qtbot):
    """A plot with a hairline (width 0, cosmetic) curve and a thick one over a small data range,
    so Qt's SVG carries a large scaling transform."""
    apply_theme(pg.PlotWidget(), dark=False, presentation=False)
    w = pg.PlotWidget()
    qtbot.addWidget(w)
    w.resize(400, 300)
    w.plot([0.0, 1e-3, 2e-3], [0.0, 2e-3, 1e-3], pen=pg.mkPen("r", width=0))
    w.plot([0.0, 1e-3, 2e-3], [1e-3, 0.0, 2e-3], pen=pg.mkPen("b", width=3))
    w.show()
    qtbot.waitExposed(w)
    return w


def test_png_has_twice_the_pixels(plot, tmp_path):
    out = tmp_path / "p.png"
    size = render_png(plot, out)
    img = QImage(str(out))
    assert (img.width(), img.height()) == (800, 600) == (size.width(), size.height())
    # the background is the theme's white, not transparent or black
    corner = img.pixelColor(2, 2)
    assert (corner.red(), corner.green(), corner.blue(), corner.alpha()) == (255, 255, 255, 255)


def test_svg_parses_has_a_background_and_no_hairlines(plot, tmp_path):
    out = tmp_path / "p.svg"
    save_image(plot, out)
    root = ET.parse(out).getroot()
    assert root.get("width") == "400" and root.get("height") == "300"
    first = next(el for el in root if el.tag not in (SVG + "title", SVG + "desc", SVG + "defs"))
    assert first.tag == SVG + "rect" and first.get("fill") == "#ffffff"
    assert (first.get("width"), first.get("height")) == ("400", "300")
    widths = [float(el.get("stroke-width")) for el in root.iter() if el.get("stroke-width")]
    assert widths and min(widths) >= 1.0
    # no scaling transform is left on the groups that draw curves: stroke widths are pixels
    for g in root.iter(SVG + "g"):
        m = re.fullmatch(r"matrix\(([^,]+),([^,]+),([^,]+),([^,]+),.*\)", g.get("transform", ""))
        if m and any(child.tag in (SVG + "path", SVG + "polyline") for child in g):
            assert tuple(float(v) for v in m.groups()) == (1.0, 0.0, 0.0, 1.0)
    assert 'stroke-width="3"' in out.read_text()  # the thick pen survived as 3 px


def test_clean_svg_folds_transforms_into_points():
    text = ('<svg xmlns="http://www.w3.org/2000/svg" width="10mm" height="5mm">'
            '<g transform="matrix(10,0,0,-20,5,100)" stroke-width="0">'
            '<polyline points="0,0 1,1 2,0.5"/><path d="M0,0 L1,2 Z"/></g>'
            '<g transform="matrix(1,0,0,1,3,4)"><text>kept</text></g></svg>')
    root = ET.fromstring(clean_svg(text, 50, 40))
    g = root.findall(SVG + "g")
    assert g[0].get("transform") is None
    assert g[0].find(SVG + "polyline").get("points") == "5,100 15,80 25,90"
    assert g[0].find(SVG + "path").get("d") == "M 5,100 L 15,60 Z"
    assert g[0].get("stroke-width") == "1"
    assert g[1].get("transform") == "matrix(1,0,0,1,3,4)"
    assert root[0].get("id") == "background"


def test_unsupported_picture_format(plot, tmp_path):
    with pytest.raises(ExportError, match=r"\.png or \.svg"):
        save_image(plot, tmp_path / "p.jpg")
    with pytest.raises(ExportError, match="does not exist"):
        render_svg(plot, tmp_path / "missing" / "p.svg")


@pytest.fixture
def state() -> ExplorerState:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 300)).astype(np.float32)
    x[2, 5] = 12.0
    st = ExplorerState()
    st.set_tensor(x, Source.generator("normal", (8, 300), 0))
    st.compute()
    return st


def test_numbers_json_are_the_engine_numbers(state, tmp_path):
    out = tmp_path / "n.json"
    save_numbers(state, out, views={"Bit width": {"x": [1.0, float("inf")]}})
    doc = json.loads(out.read_text())  # strict JSON: inf is written as a string
    assert doc["format"] == "quantscope-numbers" and doc["version"] == 1
    assert doc["settings"] == state.settings.to_dict()
    assert doc["source"]["name"] == "normal"
    assert doc["views"]["Bit width"]["x"] == [1.0, None]  # numbers stay numbers, or null
    assert doc["views"]["Bit width"]["nonfinite"] == {"x[1]": "inf"}
    for pane in PANES:
        rep = state.results[pane]
        got = doc["panes"][pane]
        assert got["mse"] == rep.mse and got["sqnr_db"] == rep.sqnr_db
        assert got["codes_used"] == rep.codes_used
        assert got["caption"]


def test_numbers_csv_has_one_row_per_pane(state, tmp_path):
    out = tmp_path / "n.csv"
    save_numbers(state, out)
    rows = list(csv.DictReader(out.open()))
    assert [r["pane"] for r in rows] == list(PANES)
    for row in rows:
        rep = state.results[row["pane"]]
        assert float(row["rounding_mse"]) == rep.rounding_mse
        assert int(row["clipped_above"]) == rep.clipped_above
    with pytest.raises(ExportError, match=r"\.csv or \.json"):
        save_numbers(state, tmp_path / "n.txt")


def test_numbers_need_results(tmp_path):
    with pytest.raises(ExportError, match="no results"):
        save_numbers(ExplorerState(), tmp_path / "n.json")


@pytest.mark.parametrize("pane", ["asymmetric/channel", "symmetric/tensor"])
def test_quantized_npz_round_trips_to_the_engine_values(state, tmp_path, pane):
    out = tmp_path / "q.npz"
    save_quantized(state, pane, out)
    params = state.params_for(pane)
    with np.load(out, allow_pickle=False) as z:
        codes, scale, zp = z["codes"], z["scale"], z["zero_point"]
        meta = json.loads(str(z["metadata"]))
    np.testing.assert_array_equal(codes, params.quantize(state.tensor))
    assert meta["pane"] == pane
    assert meta["scheme"]["granularity"] == params.granularity
    axis = meta["scheme"]["axis"]
    back = dequantize(codes, scale, zp, axis=axis)
    np.testing.assert_array_equal(back, params.dequantize(params.quantize(state.tensor)))
    assert meta["report"]["mse"] == pytest.approx(analyze(state.tensor, params).mse, rel=1e-12)
    with pytest.raises(ExportError, match=r"\.npz"):
        save_quantized(state, pane, tmp_path / "q.npy")


def test_quantized_npz_of_stored_block_formats(tmp_path):
    """A pane of torchao's int4 or a GGUF type saves its own arrays (float zeros; llama.cpp's
    bytes) with the scheme's dequantize rule, as ``quantscope export --format`` does."""
    x = np.random.default_rng(4).standard_normal((16, 256)).astype(np.float32)
    st = ExplorerState()
    assert st.set_tensor(x, settings=st.settings.__class__(
        formats=("torchao_int4_g64", "gguf_q4_k", "int4_g128", "nf4")))
    st.compute()
    for pane, members in (("symmetric/tensor", {"codes", "scale", "zero"}),
                          ("symmetric/channel", {"blocks", "codes", "scale", "block_scales"})):
        out = tmp_path / f"{pane.replace('/', '_')}.npz"
        save_quantized(st, pane, out)
        params = st.params_for(pane)
        with np.load(out, allow_pickle=False) as z:
            assert set(z.files) == members | {"metadata"}
            meta = json.loads(str(z["metadata"]))
            np.testing.assert_array_equal(z["codes"], params.quantize(x))
        assert meta["scheme"]["format"] == params.format
        assert "dequantize" in meta and "dequantize" not in meta["scheme"]


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_screenshot_command_honours_svg_and_png(qapp, tmp_path, suffix, capsys):
    from quantscope.cli import main

    out = tmp_path / f"shot{suffix}"
    code = main(["--generator", "outliers", "--shape", "64x256", "--size", "1200x800",
                 "--screenshot", str(out)])
    assert code == 0 and f"wrote {out}" in capsys.readouterr().out
    if suffix == ".svg":
        root = ET.parse(out).getroot()
        w, h = int(root.get("width")), int(root.get("height"))
        assert w >= 1200 and h >= 800
        assert next(el for el in root if el.tag == SVG + "rect").get("id") == "background"
    else:
        img = QImage(str(out))
        assert img.width() >= 2400 and img.height() == 1600  # 2x pixel density


def test_screenshot_refuses_other_formats(qapp, tmp_path, capsys):
    from quantscope.cli import main

    assert main(["--generator", "normal", "--screenshot", str(tmp_path / "x.jpg")]) == 2
    assert "write .png or .svg" in capsys.readouterr().err


def test_cached_items_are_written_as_vectors(plot, tmp_path):
    """The panes blit their axes and histogram from pixmap caches on screen; an export must
    draw them afresh, or the SVG holds bitmaps (and the 2x PNG 1x pixels scaled up)."""
    from PySide6.QtWidgets import QGraphicsItem

    cached = QGraphicsItem.CacheMode.DeviceCoordinateCache
    items = [plot.getPlotItem().getAxis("left"), plot.getPlotItem().listDataItems()[0].curve]
    plain = tmp_path / "plain.svg"
    save_image(plot, plain)
    for item in items:
        item.setCacheMode(cached)
    out = tmp_path / "cached.svg"
    save_image(plot, out)
    assert out.read_text().count("<image") == plain.read_text().count("<image")
    assert all(item.cacheMode() == cached for item in items)  # the screen keeps its cache


def test_quantized_npz_names_the_dtype_the_tensor_was_stored_in(tmp_path):
    """A bf16 checkpoint's tensor is held as float32 by the state; the archive says bf16."""
    from quantscope.state.source import load_source, overview, prepare_tensor

    source = Source("file", "/work/shared/data/minilm/layer0_bf16.safetensors",
                    tensor="encoder.layer.0.attention.self.query.weight")
    x, dtype = load_source(source)
    st = ExplorerState()
    prepared = prepare_tensor(x, st.settings)
    st.set_tensor(x, source, prepared=prepared, overview=overview(x, dtype, prepared))
    st.compute()
    out = tmp_path / "q.npz"
    save_quantized(st, "symmetric/channel", out)
    with np.load(out, allow_pickle=False) as z:
        meta = json.loads(str(z["metadata"]))
    assert dtype == "bfloat16"
    assert meta["source_dtype"] == "bfloat16"
