"""int8_matmul against TFLite's reference FullyConnected loop, written here with Python ints.

The reference mirrors tensorflow/lite/kernels/internal/reference/integer_ops/fully_connected.h:
``acc += (filter + filter_offset) * (input + input_offset)`` in a wrapping int32, ``+ bias``,
``MultiplyByQuantizedMultiplier``, ``+ output_offset``, clamp. It never uses the expansion or a
float GEMM, so agreement checks both.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import need
from quantscope.core import QuantParams, choose_qparams
from quantscope.core.labs.matmul import accumulate_int32, int8_matmul
from quantscope.errors import QuantscopeError

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources" / "samples"
I32_MIN, I32_MAX = -(2**31), 2**31 - 1

# ----------------------------------------------------------------- reference (Python ints)


def to_int32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def ref_srdhm(a: int, b: int) -> int:
    if a == b == I32_MIN:
        return I32_MAX
    ab = a * b
    num = ab + ((1 << 30) if ab >= 0 else (1 - (1 << 30)))
    q = abs(num) // 2**31  # C++ division truncates toward zero
    return q if num >= 0 else -q


def ref_rdbpot(x: int, e: int) -> int:
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if (x & mask) > threshold else 0)


def ref_mbqm(x: int, m: int, shift: int, rule: str) -> int:
    """MultiplyByQuantizedMultiplier: ``"single"`` one rounding of x·m·2^(shift-31), ties away
    from zero (LiteRT's reference kernels); ``"double"`` gemmlowp's two roundings."""
    if rule == "single":
        total = 31 - shift
        p = x * m
        return to_int32((1 if p >= 0 else -1) * ((abs(p) + (1 << (total - 1))) >> total))
    left, right = max(shift, 0), max(-shift, 0)
    return ref_rdbpot(ref_srdhm(to_int32(x * (1 << left)), m), right)


def ref_fp32(acc: int, sa, sb, so) -> int:
    """XNNPACK: rint(float32(acc) * float32(float32(sa * sb) / so)), half to even."""
    f32 = np.float32
    scale = f32(f32(f32(sa) * f32(sb)) / f32(so))
    return int(np.rint(f32(f32(acc) * scale)))


def ref_quantize_multiplier(d: float) -> tuple[int, int]:
    if d == 0.0:
        return 0, 0
    q, shift = math.frexp(d)
    q_fixed = math.floor(q * 2**31 + 0.5)  # exact in float64 for q in [0.5, 1)
    if q_fixed == 2**31:
        q_fixed, shift = q_fixed // 2, shift + 1
    return (0, 0) if shift < -31 else (q_fixed, shift)


def ref_fully_connected(a, b, za, zb, sa, sb, so, zo, qmin, qmax, bias, rule="single"):
    """TFLite's loop; zb, sb per output column (lists), everything else scalars."""
    m_rows, k = len(a), len(a[0])
    n_cols = len(b[0])
    out = [[0] * n_cols for _ in range(m_rows)]
    for n in range(n_cols):
        mult, shift = ref_quantize_multiplier(float(sa) * float(sb[n]) / float(so))
        for i in range(m_rows):
            acc = 0
            for d in range(k):
                acc = to_int32(acc + (b[d][n] - zb[n]) * (a[i][d] - za))
            if bias is not None:
                acc = to_int32(acc + bias[n])
            scaled = (ref_fp32(acc, sa, sb[n], so) if rule == "fp32"
                      else ref_mbqm(acc, mult, shift, rule))
            v = to_int32(scaled + zo)
            out[i][n] = min(max(v, qmin), qmax)
    return out


# ----------------------------------------------------------------- random operands


@st.composite
def operands(draw):
    m = draw(st.integers(1, 4))
    k = draw(st.integers(1, 24))
    n = draw(st.integers(1, 5))
    a_unsigned = draw(st.booleans())
    a_lo, a_hi = (0, 255) if a_unsigned else (-128, 127)
    code = st.one_of(st.integers(a_lo, a_hi), st.sampled_from([a_lo, a_hi]))
    a = [[draw(code) for _ in range(k)] for _ in range(m)]
    wcode = st.one_of(st.integers(-128, 127), st.sampled_from([-128, 127]))
    b = [[draw(wcode) for _ in range(n)] for _ in range(k)]
    za = draw(st.integers(a_lo, a_hi))
    per_channel = draw(st.booleans())
    zb = (
        [draw(st.integers(-128, 127)) for _ in range(n)]
        if per_channel
        else [draw(st.integers(-128, 127))] * n
    )
    exp = st.integers(-12, 2)
    sa = np.float32(2.0 ** draw(exp) * draw(st.floats(1.0, 2.0)))
    sb = [np.float32(2.0 ** draw(exp) * draw(st.floats(1.0, 2.0))) for _ in range(n)]
    so = np.float32(2.0 ** draw(st.integers(-10, 8)) * draw(st.floats(1.0, 2.0)))
    out_unsigned = draw(st.booleans())
    qmin, qmax = (0, 255) if out_unsigned else (-128, 127)
    zo = draw(st.integers(qmin, qmax))
    big_bias = draw(st.booleans())
    bias = draw(
        st.none()
        | st.lists(
            st.integers(I32_MIN, I32_MAX) if big_bias else st.integers(-(2**16), 2**16),
            min_size=n,
            max_size=n,
        )
    )
    return dict(
        a=a,
        b=b,
        za=za,
        zb=zb,
        sa=sa,
        sb=sb,
        so=so,
        zo=zo,
        qmin=qmin,
        qmax=qmax,
        bias=bias,
        a_unsigned=a_unsigned,
        per_channel=per_channel,
    )


def build(op):
    a_range = (0, 255) if op["a_unsigned"] else (-128, 127)
    a_params = QuantParams(op["sa"], op["za"], *a_range, symmetric=False)
    if op["per_channel"]:
        b_params = QuantParams(
            np.array(op["sb"], np.float32), np.array(op["zb"]), -128, 127, axis=1, symmetric=False
        )
    else:
        b_params = QuantParams(op["sb"][0], op["zb"][0], -128, 127, symmetric=False)
    out_params = QuantParams(op["so"], op["zo"], op["qmin"], op["qmax"], symmetric=False)
    a_q = np.array(op["a"], np.uint8 if op["a_unsigned"] else np.int8)
    b_q = np.array(op["b"], np.int8)
    bias = None if op["bias"] is None else np.array(op["bias"], np.int32)
    return a_q, b_q, a_params, b_params, out_params, bias


@settings(max_examples=150, deadline=None)
@given(op=operands(), rule=st.sampled_from(["single", "double", "fp32"]))
def test_bit_exact_with_tflite_reference_loop(op, rule: str) -> None:
    a_q, b_q, a_p, b_p, o_p, bias = build(op)
    sb = op["sb"] if op["per_channel"] else [op["sb"][0]] * len(op["zb"])
    expected = ref_fully_connected(
        op["a"],
        op["b"],
        op["za"],
        op["zb"],
        op["sa"],
        sb,
        op["so"],
        op["zo"],
        op["qmin"],
        op["qmax"],
        op["bias"],
        rule,
    )
    out, report = int8_matmul(
        a_q, b_q, a_params=a_p, b_params=b_p, out_params=o_p, bias=bias, requantization=rule
    )
    assert out.dtype == (np.uint8 if op["qmin"] == 0 else np.int8)
    np.testing.assert_array_equal(out.astype(np.int64), np.array(expected))
    # the exact accumulator and the overflow count agree with Python ints
    exact = [
        [
            sum(
                (op["b"][d][n] - op["zb"][n]) * (op["a"][i][d] - op["za"])
                for d in range(len(op["b"]))
            )
            + (op["bias"][n] if op["bias"] else 0)
            for n in range(len(op["zb"]))
        ]
        for i in range(len(op["a"]))
    ]
    flat = [v for row in exact for v in row]
    assert report.accumulator_min == min(flat) and report.accumulator_max == max(flat)
    assert report.accumulator_overflows == sum(not I32_MIN <= v <= I32_MAX for v in flat)


@settings(max_examples=100, deadline=None)
@given(op=operands())
def test_zero_point_expansion_equals_widened_product(op) -> None:
    a = np.array(op["a"], np.uint8 if op["a_unsigned"] else np.int8)
    b = np.array(op["b"], np.int8)
    zb = np.array(op["zb"], np.int64)[None, :]
    acc, path = accumulate_int32(a, b, op["za"], zb)
    widened = [
        [
            sum(
                (int(a[i, d]) - op["za"]) * (int(b[d, n]) - int(zb[0, n]))
                for d in range(a.shape[1])
            )
            for n in range(b.shape[1])
        ]
        for i in range(a.shape[0])
    ]
    assert acc.dtype == np.int64
    assert acc.tolist() == widened
    assert "exact" in path


def test_per_row_activation_zero_points_expand_exactly() -> None:
    rng = np.random.default_rng(11)
    a = rng.integers(0, 256, (5, 33)).astype(np.uint8)
    b = rng.integers(-128, 128, (33, 4)).astype(np.int8)
    za = rng.integers(0, 256, (5, 1))
    zb = rng.integers(-128, 128, (1, 4))
    acc, _ = accumulate_int32(a, b, za, zb)
    widened = (a.astype(object) - za.astype(object)) @ (b.astype(object) - zb.astype(object))
    assert acc.tolist() == widened.tolist()


# ----------------------------------------------------------------- overflow boundaries


def _params(scale=1.0, zp=0, qmin=-128, qmax=127, axis=None):
    return QuantParams(np.float32(scale), zp, qmin, qmax, axis=axis, symmetric=zp == 0)


@pytest.mark.parametrize("k, overflows", [(131071, 0), (131072, 1)])
def test_overflow_boundary_of_int8_extremes(k: int, overflows: int) -> None:
    """(-128)·(-128) = 2^14, so 2^17 such products reach 2^31 = INT32_MAX + 1."""
    a = np.full((1, k), -128, np.int8)
    b = np.full((k, 1), -128, np.int8)
    p = _params()
    out, r = int8_matmul(a, b, a_params=p, b_params=p, out_params=_params(2.0**25))
    assert r.max_safe_k == 131071 == r.max_safe_k_codes
    assert r.accumulator_max == k * 2**14
    assert r.accumulator_overflows == overflows
    assert "float64" in r.gemm_path
    if overflows:  # the device wraps to INT32_MIN and the output flips sign
        assert int(out[0, 0]) == -64 and r.vs_dequantized.sqnr_db < 0
    else:
        assert int(out[0, 0]) == round(k * 2**14 / 2**25) == 64


def test_bias_moves_the_overflow_boundary_and_observed_ranges_are_tight() -> None:
    k = 131071
    a = np.full((1, k), -128, np.int8)
    b = np.full((k, 1), -128, np.int8)
    p = _params()
    _, r = int8_matmul(
        a, b, a_params=p, b_params=p, out_params=_params(2.0**17), bias=np.array([2**14], np.int32)
    )
    assert r.max_safe_k == 131070 and r.accumulator_overflows == 1
    # observed ranges smaller than the code range give a larger safe K, and it is tight:
    small = np.full((1, 8), 100, np.int8)
    _, r2 = int8_matmul(
        small, np.full((8, 1), -50, np.int8), a_params=p, b_params=p, out_params=_params(64.0)
    )
    assert r2.product_min == -5000 and r2.max_safe_k == (2**31) // 5000
    assert (r2.max_safe_k + 1) * -5000 < I32_MIN <= r2.max_safe_k * -5000
    assert r2.max_safe_k_codes == I32_MAX // 2**14  # 128·128 products upward


@pytest.mark.parametrize("m, k, n", [(0, 5, 3), (4, 0, 3), (4, 5, 0), (0, 0, 0)])
def test_empty_operands_give_empty_results(m: int, k: int, n: int) -> None:
    p = _params(0.1)
    out, r = int8_matmul(
        np.zeros((m, k), np.int8), np.zeros((k, n), np.int8), a_params=p, b_params=p, out_params=p
    )
    assert out.shape == (m, n) and r.saturated == 0 and r.accumulator_overflows == 0
    assert r.max_safe_k is None  # no observed values, so no overflow at any K


def test_zero_point_cost_terms() -> None:
    a = np.zeros((3, 7), np.int8)
    b = np.zeros((7, 2), np.int8)
    sym = _params(0.1)
    asym = _params(0.1, zp=5)
    for a_p, b_p, terms in [(sym, sym, 0), (asym, sym, 1), (sym, asym, 1), (asym, asym, 3)]:
        _, r = int8_matmul(a, b, a_params=a_p, b_params=b_p, out_params=_params(0.5))
        assert r.zero_point_terms_per_output == terms
        assert r.zero_point_ops == (21 if b_p is asym else 0) + 6 * terms
        assert r.zero_point_offline_ops == (14 if a_p is asym else 0)


def test_dequantized_output_and_reference_match_explicit_float_matmul() -> None:
    rng = np.random.default_rng(5)
    a_f = rng.normal(size=(9, 40)).astype(np.float32)
    w_f = rng.normal(size=(40, 6)).astype(np.float32)
    a_p = choose_qparams(a_f, symmetric=False)
    w_p = choose_qparams(w_f, symmetric=True, granularity="channel", axis=1)
    a_q, w_q = a_p.quantize(a_f), w_p.quantize(w_f)
    y, r = int8_matmul(a_q, w_q, a_params=a_p, b_params=w_p, out_params=None)
    deq = (
        (a_q.astype(np.float64) - int(a_p.zero_point))
        * float(a_p.scale)
        @ ((w_q.astype(np.float64) - w_p.zero_point) * w_p.scale.astype(np.float64))
    )
    np.testing.assert_allclose(y, deq, rtol=1e-12, atol=1e-12)
    assert r.saturated == 0 and r.multiplier_q31.size == 0
    y_float = a_f.astype(np.float64) @ w_f
    _, r2 = int8_matmul(
        a_q,
        w_q,
        a_params=a_p,
        b_params=w_p,
        out_params=choose_qparams(y_float, symmetric=False),
        float_reference=y_float,
    )
    err = r2.vs_dequantized.error
    expected = 10 * np.log10((deq**2).sum() / (err**2).sum())
    assert r2.vs_dequantized.sqnr_db == pytest.approx(expected, rel=1e-9)
    assert r2.vs_float.sqnr_db_per_channel.shape == (6,)


# ----------------------------------------------------------------- the real pair


def test_real_pair_bit_exact_and_sqnr(capsys) -> None:
    a_f = np.load(SAMPLES / "layer0_output_activations.npy")
    w_f = np.load(SAMPLES / "layer0_intermediate_dense_weight.npy").T
    assert a_f.shape == (197, 384) and w_f.shape == (384, 1536)
    y_float = a_f.astype(np.float64) @ w_f.astype(np.float64)
    a_p = choose_qparams(a_f, symmetric=False)
    w_p = choose_qparams(w_f, symmetric=True, granularity="channel", axis=1)
    o_p = choose_qparams(y_float, symmetric=False)
    a_q, w_q = a_p.quantize(a_f), w_p.quantize(w_f)
    start = time.perf_counter()
    out, r = int8_matmul(
        a_q, w_q, a_params=a_p, b_params=w_p, out_params=o_p, float_reference=y_float
    )
    elapsed = time.perf_counter() - start
    # bit-exact on a slice of rows against the Python-int loop
    rows = [0, 1, 98, 196]
    expected = ref_fully_connected(
        a_q[rows].tolist(),
        w_q.tolist(),
        int(a_p.zero_point),
        [0] * 1536,
        a_p.scale,
        w_p.scale.tolist(),
        o_p.scale,
        int(o_p.zero_point),
        -128,
        127,
        None,
    )
    np.testing.assert_array_equal(out[rows].astype(np.int64), np.array(expected))
    assert r.accumulator_overflows == 0 and r.max_safe_k > 384
    assert r.vs_float.sqnr_db_per_channel.shape == (1536,)
    assert np.isfinite(r.vs_float.sqnr_db) and r.vs_float.sqnr_db > 20
    with capsys.disabled():
        print(
            f"\n[real pair A[197,384] @ W^T[384,1536]] int8 path: SQNR vs float "
            f"{r.vs_float.sqnr_db:.2f} dB, vs dequantized inputs "
            f"{r.vs_dequantized.sqnr_db:.2f} dB, worst channel "
            f"{r.vs_float.sqnr_db_per_channel.min():.2f} dB, acc [{r.accumulator_min}, "
            f"{r.accumulator_max}], headroom {r.headroom_bits:.1f} bits, safe K "
            f"{r.max_safe_k}, saturated {r.saturated}, {elapsed * 1e3:.1f} ms"
        )


# ----------------------------------------------------------------- bad input


def test_bad_inputs_raise_precise_errors() -> None:
    p = _params()
    a = np.zeros((2, 3), np.int8)
    with pytest.raises(QuantscopeError, match="K differs"):
        int8_matmul(a, np.zeros((4, 2), np.int8), a_params=p, b_params=p, out_params=p)
    with pytest.raises(TypeError):
        int8_matmul(
            a.astype(np.float32), np.zeros((3, 2), np.int8), a_params=p, b_params=p, out_params=p
        )
    with pytest.raises(QuantscopeError, match="outside its parameters"):
        int8_matmul(
            np.full((2, 3), -128, np.int8),
            np.zeros((3, 2), np.int8),
            a_params=_params(qmin=-127),
            b_params=p,
            out_params=p,
        )
    grouped = QuantParams(np.ones((1, 2), np.float32), 0, axis=0, group_size=3)
    with pytest.raises(QuantscopeError, match="per-group"):
        int8_matmul(a, np.zeros((3, 2), np.int8), a_params=p, b_params=grouped, out_params=p)
    wrong_axis = QuantParams(np.ones(3, np.float32), 0, axis=0)
    with pytest.raises(QuantscopeError, match="axis"):
        int8_matmul(a, np.zeros((3, 2), np.int8), a_params=p, b_params=wrong_axis, out_params=p)
    with pytest.raises(QuantscopeError, match="far too small"):
        int8_matmul(
            a, np.zeros((3, 2), np.int8), a_params=p, b_params=p, out_params=_params(2.0**-40)
        )
    with pytest.raises(TypeError, match="QuantParams"):
        int8_matmul(a, np.zeros((3, 2), np.int8), a_params="x", b_params=p, out_params=p)
    with pytest.raises(TypeError, match="QuantParams"):
        int8_matmul(a, np.zeros((3, 2), np.int8), a_params=p, b_params=p, out_params=0.1)
    per_row = QuantParams(np.ones(2, np.float32), 0, axis=0)
    with pytest.raises(QuantscopeError, match="per-row"):
        int8_matmul(
            a,
            np.zeros((3, 2), np.int8),
            a_params=per_row,
            b_params=p,
            out_params=p,
            bias=np.zeros(2, np.int32),
        )
    with pytest.raises(QuantscopeError, match="bias"):
        int8_matmul(
            a,
            np.zeros((3, 2), np.int8),
            a_params=p,
            b_params=p,
            out_params=p,
            bias=np.zeros(3, np.int32),
        )


# -------------------------------------------------------- the real runtime (the oracles extra)


def _tie_operands(rng, n: int = 48):
    """FULLY_CONNECTED operands whose accumulators the bias sets (K = 1, a = za): per output
    channel one accumulator at or one step beside an exact tie of the Q31 product, and one
    where float32 requantization and the exact rounding part."""
    from quantscope.core.labs.requant import quantize_multiplier

    sa, so = np.float32(0.625), np.float32(1.0)
    sb = np.float32(2.0) ** -rng.integers(4, 14, n).astype(np.float32)  # exact multipliers
    sb[n // 2:] = rng.uniform(1e-4, 0.02, n - n // 2).astype(np.float32)  # arbitrary ones
    real = np.float64(sa) * sb.astype(np.float64) / np.float64(so)
    # with s_a = 0.625 and s_w = 2^-e, acc · M = (k + 0.5) exactly for k = 5j + 2
    k = np.where(np.arange(n) < n // 2, 5 * rng.integers(-20, 20, n) + 2,
                 rng.integers(-100, 100, n)) + 0.5
    acc = np.rint(k / real).astype(np.int64) + rng.integers(-1, 2, n) * (np.arange(n) % 2)
    m, shift = quantize_multiplier(real, single_rounding=True)
    exact = acc * m.astype(np.int64) / 2.0 ** (31 - shift.astype(np.int64))
    assert np.any(exact % 1 == 0.5)  # some exact ties among them
    a_q = np.zeros((1, 1), np.int8)
    return a_q, np.ones((n, 1), np.int8), sa, sb, so, acc.astype(np.int32)


@pytest.mark.parametrize("rule, resolver", [("single", "reference"), ("fp32", "xnnpack"),
                                            ("ruy", "builtin")])
def test_requantization_matches_the_litert_interpreter(rule: str, resolver: str) -> None:
    """LiteRT 2.3 (ai-edge-litert, x86-64): the reference kernels (BUILTIN_REF) round once with
    ties away from zero, the default interpreter's XNNPACK delegate requantizes in float32;
    each must match its rule bit for bit, on random operands and on constructed ties. The
    gemmlowp double rounding differs from the reference kernel on some of them."""
    models = need("litert_models")
    rng = np.random.default_rng(17)
    compared = double_diffs = 0
    cases = []
    for _ in range(60):
        m, k, n = (int(v) for v in rng.integers(1, [24, 300, 48]))
        a_q = rng.integers(-128, 128, (m, k)).astype(np.int8)
        w_nk = rng.integers(-127, 128, (n, k)).astype(np.int8)
        sa, so = np.float32(rng.uniform(1e-3, 0.2)), np.float32(rng.uniform(1e-2, 5.0))
        za, zo = (int(v) for v in rng.integers(-128, 128, 2))
        sb = rng.uniform(1e-4, 0.05, n).astype(np.float32)
        bias = rng.integers(-20000, 20000, n).astype(np.int32)
        cases.append((a_q, w_nk, sa, za, sb, so, zo, bias))
    for _ in range(20):
        a_q, w_nk, sa, sb, so, bias = _tie_operands(rng)
        cases.append((a_q, w_nk, sa, 0, sb, so, 0, bias))
    for a_q, w_nk, sa, za, sb, so, zo, bias in cases:
        got = models.fully_connected(a_q, w_nk, sa, za, sb, so, zo, bias, resolver)
        kw = dict(
            a_params=QuantParams(sa, za, -128, 127, symmetric=False),
            b_params=QuantParams(sb, 0, -127, 127, axis=1),
            out_params=QuantParams(so, zo, -128, 127, symmetric=False),
            bias=bias,
        )
        ours, _ = int8_matmul(a_q, w_nk.T, requantization=rule, **kw)
        np.testing.assert_array_equal(got, ours)
        double, _ = int8_matmul(a_q, w_nk.T, requantization="double", **kw)
        assert np.abs(got.astype(int) - double).max() <= 1
        compared += got.size
        double_diffs += int(np.count_nonzero(got != double))
    assert double_diffs > 0  # the rules are distinguishable on these operands
    print(f"\nLiteRT {resolver} FULLY_CONNECTED vs requantization={rule!r}: {compared} outputs, "
          f"0 mismatches (double rounding: {double_diffs})")


@pytest.mark.parametrize("rule, resolver", [("single", "reference"), ("fp32", "xnnpack"),
                                            ("ruy", "builtin")])
def test_requantization_on_real_layers_matches_the_litert_interpreter(rule, resolver) -> None:
    """MiniLM's layer-0 output activations through its query and intermediate dense weights,
    quantized as LiteRT's quantizer does (int8 affine activations, per-channel symmetric
    weights), output scale from the float result: 378,240 outputs per kernel path."""
    models = need("litert_models")
    x = np.load(SAMPLES / "layer0_output_activations.npy").astype(np.float32)
    pa = choose_qparams(x, symmetric=False, runtime="tflite")
    a_q = pa.quantize(x)
    compared = other = 0
    for name in ("layer0_query_weight.npy", "layer0_intermediate_dense_weight.npy"):
        w = np.load(SAMPLES / name).astype(np.float32)  # [N, K]
        pw = choose_qparams(w, symmetric=True, granularity="channel", axis=0,
                            runtime="tflite")
        w_q = pw.quantize(w)
        po = choose_qparams(x @ w.T, symmetric=False, runtime="tflite")
        bias = np.zeros(w.shape[0], np.int32)
        got = models.fully_connected(a_q, w_q, pa.scale, int(pa.zero_point), pw.scale,
                                     po.scale, int(po.zero_point), bias, resolver)
        kw = dict(a_params=pa, b_params=pw.with_(axis=1), out_params=po, bias=bias)
        ours, _ = int8_matmul(a_q, w_q.T, requantization=rule, **kw)
        np.testing.assert_array_equal(got, ours)
        compared += got.size
        for alt in ("single", "double", "fp32", "ruy"):
            if alt != rule:
                other += int(np.count_nonzero(
                    int8_matmul(a_q, w_q.T, requantization=alt, **kw)[0] != got))
    assert compared == 378_240 and other > 0
    print(f"\nLiteRT {resolver} FULLY_CONNECTED on MiniLM layers vs requantization={rule!r}: "
          f"{compared} outputs, 0 mismatches (the other three rules: {other} in all)")


def test_default_requantization_is_litert_reference_on_a_double_rounding_case() -> None:
    """s_a = 0.02, s_w = 0.0137, s_out = 0.05, acc = -22901: every LiteRT path gives -125,
    gemmlowp's double rounding -126."""
    a_q = np.zeros((1, 1), np.int8)
    kw = dict(a_params=QuantParams(np.float32(0.02), 0, -128, 127),
              b_params=QuantParams(np.array([0.0137], np.float32), 0, -127, 127, axis=1),
              out_params=QuantParams(np.float32(0.05), 0, -128, 127),
              bias=np.array([-22901], np.int32))
    w = np.ones((1, 1), np.int8)
    assert int8_matmul(a_q, w, **kw)[0][0, 0] == -125
    assert int8_matmul(a_q, w, requantization="fp32", **kw)[0][0, 0] == -125
    assert int8_matmul(a_q, w, requantization="double", **kw)[0][0, 0] == -126
    with pytest.raises(QuantscopeError, match="requantization"):
        int8_matmul(a_q, w, requantization="nearest", **kw)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_per_row_activation_scales_bit_exact(data) -> None:
    """LLM.int8()-style per-row activation scales: one multiplier per (row, column)."""
    m, k, n = (
        data.draw(st.integers(1, 4)),
        data.draw(st.integers(1, 16)),
        data.draw(st.integers(1, 4)),
    )
    code = st.integers(-127, 127)
    a = [[data.draw(code) for _ in range(k)] for _ in range(m)]
    b = [[data.draw(code) for _ in range(n)] for _ in range(k)]
    scale = st.floats(1e-3, 1.0).map(np.float32)
    sa = [data.draw(scale) for _ in range(m)]
    sb = [data.draw(scale) for _ in range(n)]
    so = np.float32(data.draw(st.floats(1e-3, 4.0)))
    rule = data.draw(st.sampled_from(["single", "double", "fp32"]))
    out, _ = int8_matmul(
        np.array(a, np.int8),
        np.array(b, np.int8),
        a_params=QuantParams(np.array(sa, np.float32), 0, -127, 127, axis=0),
        b_params=QuantParams(np.array(sb, np.float32), 0, -127, 127, axis=1),
        out_params=QuantParams(so, 0, -128, 127),
        requantization=rule,
    )
    for i in range(m):
        row = ref_fully_connected([a[i]], b, 0, [0] * n, sa[i], sb, so, 0, -128, 127, None, rule)
        assert out[i].tolist() == row[0]
