"""Formats beyond int8: names, parameters, codes, and exact reports (direct pass, prepared
statistics and a plain NumPy recomputation agree)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from quantscope.core import EngineValueError, QuantParams, analyze, choose_qparams, prepare
from quantscope.core.formats.catalog import FORMATS, FormatParams, bits_per_element, format_kind

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources" / "samples"
FORMAT_NAMES = ("int8 int4_g32 int4_g64 int4_g128 gptq_int4_g128 gptq_int4_g128_asym "
                "awq_int4_g128 torchao_int4_g32 torchao_int4_g64 torchao_int4_g128 "
                "fp8_e4m3 fp8_e5m2 fp8_e4m3fnuz fp8_e5m2fnuz "
                "fp6_e2m3 fp6_e3m2 fp4_e2m1 mxfp8_e4m3 mxfp8_e5m2 mxfp6_e2m3 mxfp6_e3m2 mxfp4 "
                "mxint8 nvfp4 nvfp4_modelopt nf4 gguf_q8_0 gguf_q4_0 gguf_q4_1 gguf_q5_0 "
                "gguf_q5_1 gguf_q2_k gguf_q3_k gguf_q4_k gguf_q5_k gguf_q6_k").split()
#: The formats made of a grid and scales; the GGUF types (stored blocks, a 256-element
#: super-block the 384-wide samples do not fill) and torchao's int4 (bfloat16 arithmetic, a
#: float zero point) have tests of their own (test_gguf_*.py, test_torchao_int4.py).
GRID_FORMATS = tuple(n for n in FORMATS if format_kind(n) not in ("gguf", "torchao"))


def numpy_report(x: np.ndarray, p) -> dict:
    """The report's numbers recomputed in NumPy from quantize/dequantize."""
    codes = p.quantize(x)
    xhat = p.dequantize(codes).astype(np.float64)
    err = (x.astype(np.float64) - xhat) ** 2
    return {"sse": err.sum(), "max_abs": float(np.sqrt(err.max()))}


@pytest.fixture(scope="module")
def weight():
    return np.load(SAMPLES / "layer0_query_weight.npy")


@pytest.fixture(scope="module")
def gelu():
    return np.load(SAMPLES / "layer0_ffn_gelu_activations.npy")


def test_every_documented_name_is_a_format():
    assert tuple(FORMAT_NAMES) == FORMATS


def test_unknown_format_is_refused_with_the_list():
    with pytest.raises(EngineValueError, match="mxfp4"):
        choose_qparams(np.ones(4, np.float32), format="fp3")


@pytest.mark.parametrize("name", GRID_FORMATS[1:])
@pytest.mark.parametrize("tensor", ["weight", "gelu"])
def test_direct_prepared_and_numpy_agree(name, tensor, request):
    x = request.getfixturevalue(tensor)
    grans = ("tensor", "channel") if format_kind(name) == "element" else ("tensor",)
    prep = prepare(x)
    for gran in grans:
        p = choose_qparams(x, format=name, granularity=gran, axis=0)
        direct, fast, ref = analyze(x, p), prep.analyze(p), numpy_report(x, p)
        assert direct.mse * direct.n == pytest.approx(ref["sse"], rel=1e-9)
        assert fast.mse * fast.n == pytest.approx(ref["sse"], rel=1e-9)
        assert fast.rounding_mse == pytest.approx(direct.rounding_mse, rel=1e-9)
        assert fast.clipping_mse == pytest.approx(direct.clipping_mse, rel=1e-9, abs=1e-300)
        assert np.array_equal(fast.code_histogram, direct.code_histogram)
        assert (fast.codes_used, fast.clipped_below, fast.clipped_above) == (
            direct.codes_used, direct.clipped_below, direct.clipped_above)
        assert direct.max_abs_error == ref["max_abs"] == fast.max_abs_error
        assert direct.code_histogram.sum() == x.size


def test_codes_used_counts_representable_values_hit():
    x = np.array([0.0, -0.0, 1.0, 1.0, -448.0, 2.0], np.float32)
    p = FormatParams("fp8_e4m3", np.float32(1.0))
    r = analyze(x, p)
    assert r.codes_used == 4  # 0 (both signs), 1, 2, -448
    assert p.values[np.flatnonzero(r.code_histogram)].tolist() == [-448.0, 0.0, 1.0, 2.0]


def test_clipping_is_rounding_beyond_the_largest_finite_value():
    # scale 1: 464 is the e4m3 tie that rounds down to 448 (not clipped); 465 rounds beyond
    x = np.array([464.0, 465.0, -1000.0, 3.0], np.float32)
    p = FormatParams("fp8_e4m3", np.float32(1.0))
    for r in (analyze(x, p), prepare(x).analyze(p)):
        assert (r.clipped_below, r.clipped_above) == (1, 1)
        assert r.clipping_mse * r.n == pytest.approx((465 - 448) ** 2 + (1000 - 448) ** 2)
        assert r.rounding_mse * r.n == pytest.approx(16.0 ** 2)


def test_non_saturating_cast_is_named_and_reports_infinite_error():
    x = np.array([1e4, 1.0], np.float32)
    sat = FormatParams("fp8_e5m2", np.float32(0.01))
    raw = FormatParams("fp8_e5m2", np.float32(0.01), saturate=False)
    assert np.isinf(raw.quantize(x).astype(np.float32)[0])
    assert sat.quantize(x).astype(np.float32)[0] == 57344.0
    assert analyze(x, raw).sqnr_db == -np.inf
    assert np.isfinite(analyze(x, sat).sqnr_db)
    assert choose_qparams(x, format="fp8_e5m2", saturate=False).saturate is False


def test_quantize_returns_the_element_bits(weight):
    p = choose_qparams(weight, format="fp8_e4m3")
    codes = p.quantize(weight)
    assert codes.dtype == ml_dtypes.float8_e4m3fn
    assert np.array_equal(p.dequantize(codes),
                          codes.astype(np.float32) * np.float32(p.scale))
    assert choose_qparams(weight, format="mxint8").quantize(weight).dtype == np.int8
    assert choose_qparams(weight, format="nf4").quantize(weight).max() <= 15
    assert choose_qparams(weight, format="mxfp4").block_scales.dtype == ml_dtypes.float8_e8m0fnu
    assert choose_qparams(weight, format="nvfp4").block_scales.dtype == ml_dtypes.float8_e4m3fn


def test_element_scale_is_amax_over_max_finite(weight):
    amax = float(np.abs(weight).max())
    assert float(choose_qparams(weight, format="fp8_e4m3").scale) == np.float32(amax / 448)
    ch = choose_qparams(weight, format="fp4_e2m1", granularity="channel", axis=0)
    assert np.array_equal(ch.scale, (np.abs(weight).max(axis=1) / 6.0).astype(np.float32))
    with pytest.raises(EngineValueError, match="symmetric"):
        choose_qparams(weight, format="fp8_e4m3", symmetric=False)


def test_mx_scale_is_the_spec_power_of_two():
    x = np.zeros((1, 64), np.float32)
    x[0, :32] = np.linspace(-3.0, 5.0, 32)  # amax 5: floor(log2 5) = 2; e2m1 emax 2 -> 2^0
    p = choose_qparams(x, format="mxfp4")
    assert p.scale.tolist() == [[1.0, 2.0 ** -127]]  # the zero block: the smallest scale
    assert analyze(x, p).clipped_above == 0
    p8 = choose_qparams(x, format="mxfp8_e4m3")  # emax 8: 2^(2-8)
    assert p8.scale[0, 0] == 2.0 ** -6


@pytest.mark.parametrize("method", ["percentile", "mse", "entropy"])
def test_element_calibration_methods(gelu, method):
    base = analyze(gelu, choose_qparams(gelu, format="fp8_e4m3"))
    p = choose_qparams(gelu, format="fp8_e4m3", method=method)
    assert p.method == method
    r = analyze(gelu, p)
    if method == "mse":  # never worse than min/max (one of its candidates)
        assert r.mse <= base.mse
    assert np.isfinite(r.sqnr_db)


def test_mse_is_no_worse_than_a_grid_of_clips(weight):
    p = choose_qparams(weight, format="fp4_e2m1", method="mse")
    amax = float(np.abs(weight).max())
    best = analyze(weight, p).mse
    for f in np.geomspace(1.0, 0.05, 12):
        q = FormatParams("fp4_e2m1", np.float32(amax * f / 6.0))
        assert analyze(weight, q).mse >= best


def test_int4_groups_as_gptq_stores_them(weight):
    p = choose_qparams(weight, format="int4_g128")
    assert isinstance(p, QuantParams)
    assert p.group_size == 128 and p.axis == -1 and p.bits == 4
    assert p.scale.shape == (384, 3)
    assert np.array_equal(p.scale, p.scale.astype(np.float16).astype(np.float32))
    asym = choose_qparams(weight, format="int4_g32", symmetric=False)
    assert (asym.qmin, asym.qmax) == (0, 15)
    xhat = asym.dequantize(asym.quantize(weight))
    assert np.abs(xhat - weight).max() <= asym.scale.max() * 0.5 * (1 + 1e-6)


def test_bits_per_element(weight):
    def bpe(name, **kw):
        x = np.zeros((4096, 4096), np.float32)
        return bits_per_element(choose_qparams(x, format=name, **kw), x.size)

    assert bpe("mxfp4") == 4.25
    assert bpe("mxfp8_e4m3") == 8.25
    assert bpe("nvfp4") == pytest.approx(4.5, abs=1e-5)
    assert bpe("int4_g128") == 4.125
    assert bpe("int4_g128", symmetric=False) == 4.125 + 4 / 128
    assert bpe("nf4") == 4.5
    assert bpe("fp8_e4m3") == pytest.approx(8.0, abs=1e-5)


@pytest.mark.parametrize("name", ["mxfp4", "nvfp4"])
def test_a_block_report_is_kept_for_its_exact_scales_only(name, weight):
    """A repeat with the same scales returns the kept report; a scale array changed in place
    (same object, one bit different) or an equal copy are told apart by their bytes."""
    prep = prepare(weight)
    p = choose_qparams(weight, format=name)
    first = prep.analyze(p)
    assert prep.analyze(p) is first
    same = FormatParams(p.format, p.scale.copy(), axis=p.axis, group_size=p.group_size,
                        inv_scale=None if p.inv_scale is None else p.inv_scale.copy(),
                        block_scales=p.block_scales, tensor_scale=p.tensor_scale)
    assert prep.analyze(same) is first
    p.scale.reshape(-1)[3] = np.nextafter(p.scale.reshape(-1)[3], np.float32(np.inf))
    if p.inv_scale is not None:
        p.inv_scale.reshape(-1)[3] = np.float32(1) / p.scale.reshape(-1)[3]
    changed = prep.analyze(p)
    assert changed is not first
    direct = analyze(weight, p)
    assert changed.mse == direct.mse and changed.max_abs_error == direct.max_abs_error
    assert np.array_equal(changed.code_histogram, direct.code_histogram)


def _walk_rows_by_the_reference(x2d, s, inv, use_inv, args):
    """Every row through ``format_kernel._walk``, the one-loop element walk (saturating)."""
    from quantscope.core.formats.format_kernel import _walk

    kind, mbits, emin, step, mx, overflow, signed_zero, _, lut_mid, lut_val, grid = args
    hist = np.zeros(grid.size, np.int64)
    stamp = np.full(grid.size, -1, np.int64)
    out_f = np.zeros((x2d.shape[0], 6))
    out_i = np.zeros((x2d.shape[0], 4), np.int64)
    for r in range(x2d.shape[0]):
        _walk(x2d[r], s[r], inv[r], use_inv, kind, mbits, emin, step, mx, overflow,
              signed_zero, True, lut_mid, lut_val, grid, hist, stamp, r, out_f, out_i, r)
    return hist, out_f, out_i


@pytest.mark.compiles("the one-loop reference walk: inlined in the app, on its own only here")
@pytest.mark.parametrize("name", [n for n in GRID_FORMATS[1:] if format_kind(n) != "int"])
@pytest.mark.parametrize("source", ["edge", "gelu", "weight"])
def test_the_split_saturating_walk_equals_the_one_loop_walk_bit_for_bit(name, source, gelu,
                                                                        weight):
    """The direct pass of a saturating cast (three short loops per chunk of a row, one copy
    per element kind) gives every total of the one-loop walk exactly: sums in the same order,
    counts, codes used, min/max, on ties, subnormals, overflow, ±0, NaN and inf, with rows
    longer than a chunk and a scale that clips."""
    from quantscope.core.formats.format_kernel import CHUNK, direct_rows
    from quantscope.core.kernels.read_only import read_only
    from quantscope.core.kernels.unit_columns import unit_columns
    from quantscope.core.stats.format_stats import _kernel_args

    rng = np.random.default_rng(7)
    if source == "edge":
        x = rng.standard_t(2, (6, CHUNK + 320)).astype(np.float32)
        x.reshape(-1)[:30] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-40, 3e38, -3e38,
                              448, 464, 465, -465, 6, 7, -7, 5, 0.25, 0.75, 1.25, -0.25, 240,
                              57344, 61440, 1.5, 2.5, -3.5, 1 / 128, 3 / 256, 127 / 64]
    else:
        x = {"gelu": gelu, "weight": weight}[source][:, :256].copy()
    p = choose_qparams(np.nan_to_num(x, nan=0, posinf=0, neginf=0), format=name,
                       granularity="channel" if format_kind(name) == "element" else "tensor",
                       axis=0)
    args = _kernel_args(p)
    rows = x.reshape(-1, 64) if p.group_size else x  # blocks or channels as rows
    for shrink in (1.0, 0.3):  # the second: many clipped elements
        s = np.resize(np.asarray(p.scale, np.float32) * np.float32(shrink), rows.shape[0])
        inv = s if p.inv_scale is None else np.resize(
            np.asarray(p.inv_scale, np.float32) / np.float32(shrink), rows.shape[0])
        use_inv = p.inv_scale is not None
        hist = np.zeros(p.levels + 1, np.int64)
        # as the report hands them (read-only rows, its unit columns): the loop the
        # compile-ahead made, not one compiled for other layouts here
        out_f = unit_columns(rows.shape[0], 6)
        out_i = unit_columns(rows.shape[0], 4, np.int64)
        direct_rows(read_only(np.ascontiguousarray(rows)), s, inv, use_inv, *args[:7], True,
                    *args[8:], hist, out_f, out_i)
        ref_hist, ref_f, ref_i = _walk_rows_by_the_reference(rows, s, inv, use_inv, args)
        np.testing.assert_array_equal(hist[:-1], ref_hist)
        np.testing.assert_array_equal(out_i, ref_i)
        assert np.array_equal(out_f, ref_f, equal_nan=True), np.argwhere(out_f != ref_f)[:5]


@pytest.mark.parametrize("name", [n for n in GRID_FORMATS[1:] if format_kind(n) == "element"])
def test_a_searched_row_places_values_on_and_beside_each_boundary_as_the_cast_does(name):
    """A searched sorted row is split where the cast changes interval: with scaled values on
    every boundary (the midpoints between representable values, where ties are decided, and
    the overflow thresholds) and on both float32 neighbours of each, the searched split
    counts exactly what walking the row element by element counts."""
    from quantscope.core.formats.format_kernel import sorted_rows
    from quantscope.core.kernels.read_only import read_only
    from quantscope.core.stats.format_stats import _kernel_args, element_edges
    from quantscope.core.stats.sorted_stats import SortedRows

    p = FormatParams(name, np.float32(1.0))
    et = p.element
    edges = element_edges(et).astype(np.float32)
    near = np.concatenate([edges, np.nextafter(edges, np.float32(np.inf)),
                           np.nextafter(edges, np.float32(-np.inf)), et.values.astype(np.float32)])
    rng = np.random.default_rng(11)
    fill = rng.uniform(-1.2, 1.2, 8 * (et.levels + 2)).astype(np.float32) * np.float32(
        et.max_finite)
    base = np.sort(np.concatenate([near, fill]))
    powers = np.float32(2.0) ** np.arange(-3, 3, dtype=np.float32)
    rows = SortedRows.from_rows([(np.arange(powers.size), base[None, :] * powers[:, None])],
                                powers.size)
    scales = read_only(powers)  # as the report hands them: no version compiled for this test
    args = _kernel_args(p)[:-1]
    counts = []
    for walk_below in (0, 1 << 30):  # every row searched, then every row walked
        hist = np.zeros(et.levels, np.int64)
        out_f = np.zeros((powers.size, 6))
        out_i = np.zeros((powers.size, 4), np.int64)
        sorted_rows(rows.values, rows.starts, rows.records, rows.rec_starts, rows.bound1,
                    rows.bound2, np.arange(powers.size), scales, scales, False, *args,
                    et.values, element_edges(et), walk_below, np.inf, hist, out_f, out_i)
        counts.append((hist, out_i.copy(), out_f[:, 2].copy()))
    (h_s, i_s, worst_s), (h_w, i_w, worst_w) = counts
    np.testing.assert_array_equal(h_s, h_w)
    np.testing.assert_array_equal(i_s, i_w)  # elements, clipped below / above, codes used
    np.testing.assert_array_equal(worst_s, worst_w)
