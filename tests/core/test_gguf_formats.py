"""The GGUF types as engine formats: reports, codes, bits per element, refusals."""

from __future__ import annotations

import numpy as np
import pytest

import quantscope as qs
from quantscope.core.formats.catalog import FORMATS, bits_per_element, format_kind
from quantscope.core.formats.gguf import GGUF_TYPES, GgufParams, decode, encode, from_blocks
from quantscope.core.stats.prepared import prepare
from quantscope.core.tensors.validate import EngineValueError
from quantscope.io.samples import sample_path

BPE = {"gguf_q8_0": 8.5, "gguf_q4_0": 4.5, "gguf_q4_1": 5.0, "gguf_q5_0": 5.5,
       "gguf_q5_1": 6.0, "gguf_q2_k": 2.625, "gguf_q3_k": 3.4375, "gguf_q4_k": 4.5,
       "gguf_q5_k": 5.5, "gguf_q6_k": 6.5625}


@pytest.fixture(scope="module")
def gelu():
    return np.load(sample_path("gelu_activations")).astype(np.float32)  # 197 x 1536


def test_registered_in_the_catalog():
    for name in BPE:
        assert name in FORMATS
        assert format_kind(name) == "gguf"


@pytest.mark.parametrize("name", sorted(BPE))
def test_report_equals_a_direct_computation(gelu, name):
    p = qs.choose_qparams(gelu, format=name)
    assert isinstance(p, GgufParams)
    assert bits_per_element(p, gelu.size) == BPE[name]
    r = qs.analyze(gelu, p)
    x64 = gelu.astype(np.float64)
    xhat = p.dequantize()
    err = (x64 - xhat) ** 2
    assert r.n == gelu.size and r.n_nonfinite == 0
    assert np.isclose(r.mse, err.mean(), rtol=1e-12)
    assert np.isclose(r.sqnr_db, 10 * np.log10((x64 ** 2).sum() / err.sum()), rtol=1e-12)
    assert r.max_abs_error == np.abs(x64 - xhat).max()
    codes = p.stored_codes()
    assert np.array_equal(r.code_histogram, np.bincount(codes.ravel(), minlength=p.levels))
    assert r.codes_used == np.unique(codes).size
    assert np.isclose(r.rounding_mse + r.clipping_mse, r.mse, rtol=1e-12)
    # the prepared path gives the same report
    r2 = prepare(gelu).analyze(p)
    assert (r2.sqnr_db, r2.clipped_below, r2.clipped_above) == (
        r.sqnr_db, r.clipped_below, r.clipped_above)
    assert r.per_channel is not None and r.per_channel.n.size == gelu.size // p.group_size


def test_clipping_split_follows_the_block_range():
    """Q4_0's d = max/-8 represents -8d..7d: a block [-8, ..., +8] has +8 one step
    beyond 7·|d| = 7, more than half a step out: clipped above, error 1."""
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = -8.0
    x[0, 1] = 8.0  # the first of largest magnitude is -8: d = -8 / -8 = 1, codes -8..7
    x[0, 2] = 7.4  # rounds to 7: rounding error
    p = qs.choose_qparams(x, format="gguf_q4_0")
    assert float(p.block_scales.ravel()[0]) == 1.0
    r = qs.analyze(x, p)
    assert (r.clipped_below, r.clipped_above) == (0, 1)
    assert r.clipping_mse * 32 == pytest.approx(1.0)
    assert r.rounding_mse * 32 == pytest.approx(0.4 ** 2, rel=1e-6)


def test_quantize_gives_the_stored_codes_and_refuses_another_shape(gelu):
    p = qs.choose_qparams(gelu, format="gguf_q4_k")
    assert np.array_equal(p.quantize(gelu), p.stored_codes())
    assert p.quantize(gelu).dtype == np.uint8 and p.stored_codes().max() <= 15
    with pytest.raises(EngineValueError, match="shape"):
        p.quantize(gelu[:, :512])
    with pytest.raises(EngineValueError, match="stored blocks"):
        p.dequantize(np.zeros(gelu.shape, np.uint8))


@pytest.mark.parametrize("shape,match", [((100,), "multiple of 32"), ((), "axis"),
                                         ((4, 0), "multiple")])
def test_shapes_without_whole_blocks_are_refused(shape, match):
    with pytest.raises(EngineValueError, match=match):
        encode(np.zeros(shape, np.float32), "gguf_q8_0")


def test_k_quants_need_256_along_the_last_axis():
    with pytest.raises(EngineValueError, match="blocks of 256"):
        qs.choose_qparams(np.ones((2, 384), np.float32), format="gguf_q6_k")


def test_nonfinite_and_unknown_names_are_refused():
    x = np.ones(64, np.float32)
    x[3] = np.nan
    with pytest.raises(EngineValueError, match=r"NaN|non-finite|nan"):
        encode(x, "gguf_q8_0")
    p = qs.choose_qparams(np.ones(64, np.float32), format="gguf_q8_0")
    with pytest.raises(EngineValueError, match=r"NaN|non-finite|nan"):
        p.quantize(x, nonfinite="saturate")  # llama.cpp has no value to saturate NaN to
    with pytest.raises(EngineValueError, match=r"NaN|non-finite|nan"):
        qs.analyze(x, p)
    with pytest.raises(EngineValueError, match="gguf_q4_k"):
        encode(np.ones(64, np.float32), "gguf_q4_z")
    with pytest.raises(EngineValueError, match="method"):
        qs.choose_qparams(np.ones(64, np.float32), format="gguf_q8_0", method="mse")


def test_blocks_of_the_wrong_size_are_refused():
    b = encode(np.ones(64, np.float32), "gguf_q8_0")
    with pytest.raises(EngineValueError, match="bytes"):
        from_blocks(b[:-1], "gguf_q8_0", (64,))
    with pytest.raises(EngineValueError, match="bytes"):
        decode(b, "gguf_q8_0", (96,))


def test_rows_are_independent_and_the_layout_is_llama_cpps():
    """Each row is its blocks' bytes one after another: quantizing rows apart gives the
    same bytes as the whole tensor, whatever the number of threads' shares."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((37, 512)).astype(np.float32)
    for name in GGUF_TYPES:
        whole = encode(x, name)
        t = GGUF_TYPES[name]
        assert whole.shape == (37, 512 // t.block * t.type_size)
        for r in (0, 17, 36):
            assert np.array_equal(whole[r], encode(x[r], name))


@pytest.mark.parametrize("name", ["gguf_q2_k", "gguf_q4_k", "gguf_q5_k", "gguf_q6_k"])
def test_a_blocks_bytes_do_not_depend_on_its_chunk(name):
    """The k-quants' searches run on the sub-blocks of a chunk of super-blocks at once
    (vector lanes); each block's bytes must still be its own: a tensor of 150 super-blocks
    (two whole chunks of 64 and a partial one, with zero, constant and one-signed blocks)
    encodes to the bytes of its blocks encoded one at a time."""
    rng = np.random.default_rng(11)
    x = (rng.standard_t(3, (150, 256)) * rng.uniform(1e-3, 10, (150, 1))).astype(np.float32)
    x[3] = 0.0
    x[70] = 0.25
    x[140] = np.abs(x[140])
    x[141, :32] = -1.0
    whole = encode(x, name)
    one_by_one = np.stack([encode(x[i], name) for i in range(x.shape[0])])
    assert np.array_equal(whole, one_by_one)


@pytest.mark.parametrize("name", sorted(BPE))
def test_choosing_for_a_prepared_tensor_measures_the_blocks_while_encoding(gelu, name):
    from quantscope.core.stats.gguf_stats import analyze_gguf

    x = gelu[:, :1536].copy()
    x[7, 300] = 25.0  # an outlier in one block
    prep = prepare(x)
    p = qs.choose_qparams(x, format=name, prepared=prep)
    assert np.array_equal(p.blocks, qs.choose_qparams(x, format=name).blocks)
    kept = prep.__dict__["_kept_reports"]
    assert len(kept) == 1  # the report measured in the encoding pass, kept for these bytes
    r = prep.analyze(p)
    assert len(kept) == 1 and next(iter(kept.values()))[1] is r
    ref = analyze_gguf(x, p)  # a second pass over the tensor and the stored bytes
    for k in ("round_err", "clip_err", "max_abs", "sig", "n", "x_min", "x_max", "below",
              "above", "codes", "hist"):
        assert np.array_equal(getattr(r.unit_totals, k), getattr(ref.unit_totals, k)), k
    assert r.sqnr_db == ref.sqnr_db
    other = x + np.float32(1e-3)  # another tensor than the prepared one: no report kept
    qs.choose_qparams(other, format=name, prepared=prep)
    assert len(kept) == 1
