"""LLM.int8() decomposition, SmoothQuant smoothing and the whole quantized matmul path."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantscope.core import choose_qparams
from quantscope.core.labs.matmul import int8_matmul
from quantscope.core.labs.outliers import (
    outlier_columns,
    quantized_matmul,
    smooth,
    smoothquant_scales,
)
from quantscope.errors import QuantscopeError

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources" / "samples"


def planted(seed: int = 0, m: int = 64, k: int = 96, n: int = 48, big: float = 60.0):
    """Gaussian activations with two feature columns ``big`` times larger (the LLM pattern)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(m, k)).astype(np.float32)
    a[:, [5, 70]] *= big
    w = (rng.normal(size=(k, n)) * 0.05).astype(np.float32)
    return a, w


# ----------------------------------------------------------------- the two transforms


@settings(max_examples=60, deadline=None)
@given(
    threshold=st.floats(0.0, 10.0),
    values=st.lists(st.floats(-12, 12, width=32), min_size=12, max_size=12),
)
def test_outlier_columns_is_any_abs_at_least_threshold(threshold: float, values) -> None:
    a = np.array(values, np.float32).reshape(3, 4)
    got = outlier_columns(a, threshold)
    expected = [j for j in range(4) if any(abs(float(a[i, j])) >= threshold for i in range(3))]
    assert got.tolist() == expected


def test_outlier_threshold_is_inclusive() -> None:
    a = np.array([[6.0, 5.999, -6.0, 0.0]], np.float32)
    assert outlier_columns(a).tolist() == [0, 2]


@pytest.mark.parametrize("alpha", [0.0, 0.25, 0.5, 0.85, 1.0])
def test_smoothquant_scales_follow_the_formula(alpha: float) -> None:
    a, w = planted(1)
    a[:, 3] = 0.0  # a dead feature: max|X_j| = 0, clamped to 1e-5 unless alpha = 0
    s = smoothquant_scales(a, w, alpha)
    for j in range(a.shape[1]):
        act = max(abs(float(v)) for v in a[:, j])
        wmax = max(max(abs(float(v)) for v in w[j, :]), 1e-5)
        assert s[j] == pytest.approx(max(act**alpha / wmax ** (1 - alpha), 1e-5), rel=1e-12)
    a_s, w_s = smooth(a, w, s)
    if alpha == 1.0:  # every live activation column ends with max |x| = 1
        live = np.abs(a).max(axis=0) > 0
        np.testing.assert_allclose(np.abs(a_s).max(axis=0)[live], 1.0, rtol=1e-6)
    if alpha == 0.0:  # every weight row ends with max |w| = 1
        np.testing.assert_allclose(np.abs(w_s).max(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(
        a_s.astype(np.float64) @ w_s, a.astype(np.float64) @ w, rtol=1e-5, atol=1e-4
    )


# ----------------------------------------------------------------- the whole path


def test_plain_path_equals_manual_composition() -> None:
    a, w = planted(2)
    y = a.astype(np.float64) @ w
    r = quantized_matmul(a, w)
    a_p = choose_qparams(a, symmetric=False, rounding="half_away")
    w_p = choose_qparams(w, symmetric=True, granularity="channel", axis=1, rounding="half_away")
    o_p = choose_qparams(y, symmetric=False, rounding="half_away")
    assert a_p.zero_point != 0 and w_p.qmin == -127  # TFLite: asymmetric in, narrow weights
    codes, report = int8_matmul(
        a_p.quantize(a),
        w_p.quantize(w),
        a_params=a_p,
        b_params=w_p,
        out_params=o_p,
        float_reference=y,
    )
    np.testing.assert_array_equal(r.codes, codes)
    assert r.vs_float.sqnr_db == report.vs_float.sqnr_db
    assert r.outlier_columns.size == 0 and r.smoothing_scales is None
    # a threshold above every |x| changes nothing
    r_hi = quantized_matmul(a, w, threshold=1e6)
    np.testing.assert_array_equal(r_hi.codes, codes)


def test_decomposition_is_int8_part_plus_float16_part() -> None:
    a, w = planted(3)
    r = quantized_matmul(a, w, threshold=6.0, out_scheme=None)
    cols = r.outlier_columns
    assert set(cols.tolist()) >= {5, 70}
    keep = np.setdiff1d(np.arange(a.shape[1]), cols)
    a_p = choose_qparams(a[:, keep], symmetric=False, rounding="half_away")
    w_p = choose_qparams(
        w[keep], symmetric=True, granularity="channel", axis=1, rounding="half_away"
    )
    int_part, _ = int8_matmul(
        a_p.quantize(a[:, keep]), w_p.quantize(w[keep]), a_params=a_p, b_params=w_p, out_params=None
    )
    f16 = a[:, cols].astype(np.float16).astype(np.float32) @ w[cols].astype(np.float16).astype(
        np.float32
    )
    np.testing.assert_array_equal(r.output, int_part + f16.astype(np.float64))
    assert r.int8.k == keep.size and r.outlier_fraction == cols.size / a.shape[1]


def test_fixes_beat_plain_int8_on_planted_outliers() -> None:
    """With two features 60x the rest, one activation scale wastes the codes; both fixes
    recover the small features. (The output itself stays float here so that the comparison
    is about the inputs' quantization.)"""
    a, w = planted(4)
    plain = quantized_matmul(a, w, out_scheme=None).vs_float.sqnr_db
    decomposed = quantized_matmul(a, w, threshold=6.0, out_scheme=None).vs_float.sqnr_db
    smoothed = quantized_matmul(a, w, alpha=0.5, out_scheme=None).vs_float.sqnr_db
    assert decomposed > plain + 10
    assert smoothed > plain + 3


def test_vector_wise_scheme_and_all_columns_in_float() -> None:
    a, w = planted(5)
    per_row = {"symmetric": True, "granularity": "channel", "axis": 0}
    r = quantized_matmul(a, w, a_scheme=per_row, out_scheme=None)
    assert r.a_params.scale.shape == (a.shape[0],)
    per_column = {"symmetric": False, "granularity": "channel", "axis": 1}
    for threshold in (None, 6.0):  # requantized by the kernel, and after the float add
        r = quantized_matmul(a, w, out_scheme=per_column, threshold=threshold)
        assert r.out_params.scale.shape == (w.shape[1],)
        zp = r.out_params.zero_point.astype(np.float64)
        expected = (r.codes - zp) * r.out_params.scale.astype(np.float64)
        np.testing.assert_array_equal(r.output, expected)
        assert np.isfinite(r.vs_float.sqnr_db)
    everything = quantized_matmul(a, w, threshold=0.0)
    assert everything.int8.k == 0 and everything.outlier_columns.size == a.shape[1]
    assert everything.codes.shape == (a.shape[0], w.shape[1])


def test_bad_input() -> None:
    a, w = planted(6)
    with pytest.raises(QuantscopeError, match="same K"):
        quantized_matmul(a, w[:-1])
    with pytest.raises(QuantscopeError, match="alpha"):
        smoothquant_scales(a, w, 1.5)
    with pytest.raises(QuantscopeError, match="threshold"):
        outlier_columns(a, -1.0)
    bad = a.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        quantized_matmul(bad, w)
    with pytest.raises(TypeError):
        quantized_matmul(a.astype(np.int32), w)
    with pytest.raises(QuantscopeError, match="float_reference"):
        quantized_matmul(a, w, float_reference=np.zeros((2, 2)))


def test_real_pair_report(capsys) -> None:
    a = np.load(SAMPLES / "layer0_output_activations.npy")
    w = np.load(SAMPLES / "layer0_intermediate_dense_weight.npy").T
    y = a.astype(np.float64) @ w.astype(np.float64)
    lines = []
    results = {}
    for label, kw in [
        ("plain int8", {}),
        ("SmoothQuant a=0.5", {"alpha": 0.5}),
        ("LLM.int8() t=6", {"threshold": 6.0}),
        ("int8 in, float out", {"out_scheme": None}),
        ("SmoothQuant a=0.5, float out", {"alpha": 0.5, "out_scheme": None}),
        ("LLM.int8() t=6, float out", {"threshold": 6.0, "out_scheme": None}),
    ]:
        start = time.perf_counter()
        r = quantized_matmul(a, w, float_reference=y, **kw)
        ms = (time.perf_counter() - start) * 1e3
        results[label] = r
        lines.append(
            f"  {label:30s} SQNR {r.vs_float.sqnr_db:6.2f} dB (worst channel "
            f"{r.vs_float.sqnr_db_per_channel.min():6.2f}), outlier cols "
            f"{r.outlier_columns.size}, {ms:5.1f} ms"
        )
    assert results["LLM.int8() t=6"].outlier_columns.size >= 1
    for r in results.values():
        assert r.int8.accumulator_overflows == 0
        assert np.isfinite(r.vs_float.sqnr_db) and r.vs_float.sqnr_db > 20
    with capsys.disabled():
        print("\n[real pair, quantized_matmul]\n" + "\n".join(lines))
