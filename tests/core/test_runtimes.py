"""Runtime presets pinned with hand-worked cases (see the rules in
quantscope.core.calibration.runtimes)."""

import numpy as np
import pytest

from oracles import need
from quantscope.core import analyze, choose_qparams
from quantscope.core.calibration.runtimes import PRESETS, RUNTIMES
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.stats.prepared import prepare
from quantscope.core.tensors.validate import EngineValueError

F32 = np.float32
X_TIE = F32(0.273939937)  # fbgemm's documented case: x / scale = 127.49999, x * (1/scale) = 127.5
S_TIE = F32(0.00214854861)


@pytest.mark.parametrize("arithmetic, code", [("divide", 127), ("multiply", 128), ("fma", 128)])
def test_multiply_and_divide_disagree_on_fbgemms_value(arithmetic, code):
    unsigned = QuantParams(S_TIE, 0, 0, 255, arithmetic=arithmetic, symmetric=False)
    assert unsigned.quantize(np.array([X_TIE]))[0] == code
    signed = QuantParams(S_TIE, 0, -128, 127, arithmetic=arithmetic)
    assert signed.quantize(np.array([-X_TIE]))[0] == -code


def test_pytorch_rules():
    x = np.array([-1.0, 3.0], F32)
    p = choose_qparams(x, symmetric=False, runtime="pytorch")
    # quint8: scale = float32(4) / 255 in float32; zp = 0 - round(-1 / scale) = round(63.75)
    assert (p.qmin, p.qmax, p.arithmetic, p.rounding) == (0, 255, "fma", "half_even")
    assert p.scale == F32(4.0) / F32(255.0)
    assert p.zero_point == 64
    s = choose_qparams(x, symmetric=True, runtime="pytorch")
    # qint8 symmetric: absmax / ((127 - -128) / 2) = 3 / 127.5, full range [-128, 127]
    assert (s.qmin, s.qmax) == (-128, 127)
    assert s.scale == F32(3.0) / F32(127.5)
    zeros = choose_qparams(np.zeros(5, F32), symmetric=False, runtime="pytorch")
    assert zeros.scale == F32(np.finfo(F32).eps) and zeros.zero_point == 0  # eps clamp
    # the zero point goes in before rounding (one fused step): with zp = 64 a product just
    # below .5 can tie after the addition; the codes are rint(float32(x * inv + zp))
    inv = np.float64(F32(1.0) / p.scale)
    vals = np.linspace(-1, 3, 20001, dtype=F32)
    want = np.clip(np.rint((vals.astype(np.float64) * inv + 64).astype(F32)), 0, 255)
    np.testing.assert_array_equal(p.quantize(vals), want)


def test_onnxruntime_rules():
    x = np.array([-1.5, 253.5], F32)
    p = choose_qparams(x, symmetric=False, runtime="onnxruntime")
    # uint8: scale = 255 / 255 = 1 (float64 then float32); zp = round(0 - (-1.5) / 1) = 2, even
    assert (p.qmin, p.qmax, p.arithmetic, p.rounding) == (0, 255, "divide", "half_even")
    assert p.scale == 1.0 and p.zero_point == 2
    np.testing.assert_array_equal(p.quantize(np.array([0.5, 1.5, 2.5], F32)), [2, 4, 4])
    s = choose_qparams(np.array([-1.0, 3.0], F32), symmetric=True, runtime="onnxruntime")
    # the parameters are narrow-range (scale = absmax / 127), QuantizeLinear saturates at int8's
    # own range: beyond -absmax a value reaches -128
    assert (s.qmin, s.qmax, s.zero_point) == (-128, 127, 0)
    assert s.scale == F32(6.0 / 254.0)
    np.testing.assert_array_equal(s.quantize(np.array([-3.0, -9.0, 9.0], F32)), [-127, -128, 127])
    for tiny in (np.zeros(3, F32), np.array([1e-40], F32)):  # scale below float32 tiny
        t = choose_qparams(tiny, symmetric=False, runtime="onnxruntime")
        assert t.scale == 1.0 and t.zero_point == 0


def test_tflite_rules():
    x = np.array([-1.5, 253.5], F32)
    p = choose_qparams(x, symmetric=False, runtime="tflite")
    # int8: scale = 255 / 255 = 1; zp_from_min = -128 + 1.5 = -126.5 -> half away: -127
    assert (p.qmin, p.qmax, p.arithmetic, p.rounding) == (-128, 127, "divide", "half_away")
    assert p.scale == 1.0 and p.zero_point == -127
    np.testing.assert_array_equal(p.quantize(np.array([0.5, 1.5, -0.5], F32)),
                                  [-126, -125, -128])  # halves away from zero, then + zp
    # nudging: an all-positive range puts the zero point at qmin, all-negative at qmax
    assert choose_qparams(np.array([1.0, 2.0], F32), symmetric=False,
                          runtime="tflite").zero_point == -128
    assert choose_qparams(np.array([-2.0, -1.0], F32), symmetric=False,
                          runtime="tflite").zero_point == 127
    w = np.array([[0.5, -1.0], [3.0, 0.25]], F32)
    pw = choose_qparams(w, symmetric=True, granularity="channel", axis=0, runtime="tflite")
    assert (pw.qmin, pw.qmax, pw.arithmetic) == (-127, 127, "multiply")
    np.testing.assert_array_equal(pw.scale, [F32(1.0) / F32(127), F32(3.0) / F32(127)])
    np.testing.assert_array_equal(pw.inv_scale, [F32(127) / F32(1.0), F32(127) / F32(3.0)])
    # 0.5 * 127 = 63.5 -> 64 (half away), 0.25 * 127 / 3 = 10.58 -> 11
    np.testing.assert_array_equal(pw.quantize(w), [[64, -127], [127, 11]])


def _trt_disagreement():
    """An amax whose TensorRT multiplier float32(127/amax) differs from float32(1/scale), and a
    value quantized differently by the two (searched, not assumed)."""
    rng = np.random.default_rng(0)
    for amax in rng.uniform(0.5, 8.0, 2000).astype(F32):
        m_trt = F32(127) / amax
        m_inv = F32(1) / (amax / F32(127))
        if m_trt == m_inv:
            continue
        k = np.arange(-126, 126, dtype=np.float64) + 0.5  # values right at the code midpoints
        for cand in (k / np.float64(m_trt)).astype(F32):
            for v in (np.nextafter(cand, F32(-9)), cand, np.nextafter(cand, F32(9))):
                if np.rint(v * m_trt) != np.rint(v * m_inv):
                    return amax, v
    raise AssertionError("no disagreement found")


def test_tensorrt_multiplies_by_127_over_amax():
    amax, v = _trt_disagreement()
    x = np.array([amax, -amax / F32(3), v], F32)
    p = choose_qparams(x, runtime="tensorrt")
    assert (p.qmin, p.qmax, p.arithmetic, p.rounding) == (-127, 127, "multiply", "half_even")
    assert p.inv_scale == F32(127) / amax and p.scale == amax / F32(127)
    codes = p.quantize(x)
    assert codes[2] == np.rint(v * (F32(127) / amax))
    assert codes[2] != np.rint(v * (F32(1) / p.scale))  # the plain reciprocal would differ
    # the statistics follow the same codes, on both paths
    rep = analyze(x, p)
    assert rep.code_histogram[int(codes[2]) + 127] >= 1
    np.testing.assert_array_equal(prepare(x).analyze(p).code_histogram, rep.code_histogram)
    with pytest.raises(EngineValueError):
        choose_qparams(x, symmetric=False, runtime="tensorrt")
    tiny = choose_qparams(np.full(4, 1e-9, F32), runtime="tensorrt")  # amax <= 2^-24: zeros
    assert tiny.scale == 1.0 and (tiny.quantize(np.full(4, 1e-9, F32)) == 0).all()


def test_presets_never_give_bad_scales_and_reject_unknown_names():
    cases = [np.zeros(0, F32), np.zeros(3, F32), np.float32(2.0), np.full(4, -7.0, F32),
             np.array([np.nan, np.inf, 1.0], F32)]
    for runtime in RUNTIMES:
        dynamic = runtime == "onnxruntime-dynamic"  # asymmetric only; refuses inf
        for x in cases:
            if dynamic and np.isinf(x).any():
                with pytest.raises(EngineValueError, match="infinite scale"):
                    choose_qparams(x, symmetric=False, runtime=runtime)
                continue
            p = choose_qparams(x, runtime=runtime, **({"symmetric": False} if dynamic else {}))
            assert np.isfinite(p.scale).all() and (p.scale > 0).all()
    x = np.array([np.nan, np.inf, -2.0, 1.0], F32)  # NaN/inf leave the range alone
    assert choose_qparams(x, runtime="onnxruntime").scale == F32(4.0 / 254.0)
    with pytest.raises(EngineValueError):
        choose_qparams(np.ones(3, F32), runtime="tensorflow")


def test_against_torch_when_installed():
    torch = need("torch")
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(100_000) * 3 + 0.7).astype(F32)
    obs = torch.ao.quantization.MinMaxObserver(dtype=torch.quint8)
    obs(torch.from_numpy(x))
    scale, zp = obs.calculate_qparams()
    p = choose_qparams(x, symmetric=False, runtime="pytorch")
    assert float(scale) == float(p.scale) and int(zp) == int(p.zero_point)
    # plus every half-way point and its float32 neighbours, where the zero point added inside
    # the fused step decides the code
    mids = ((np.arange(0, 255) - int(zp) + 0.5) * np.float64(p.scale)).astype(F32)
    x = np.concatenate([x, mids, np.nextafter(mids, F32(-99)), np.nextafter(mids, F32(99))])
    q = torch.quantize_per_tensor(torch.from_numpy(x), float(scale), int(zp), torch.quint8)
    np.testing.assert_array_equal(q.int_repr().numpy(), p.quantize(x))


def test_against_torch_observers_and_ties_when_installed():
    torch = need("torch")
    rng = np.random.default_rng(6)
    x = (rng.standard_normal(50_000) * 2).astype(F32)
    obs = torch.ao.quantization.MinMaxObserver(dtype=torch.qint8,
                                               qscheme=torch.per_tensor_symmetric)
    obs(torch.from_numpy(x))
    scale, zp = obs.calculate_qparams()
    p = choose_qparams(x, symmetric=True, runtime="pytorch")
    assert float(scale) == float(p.scale) and int(zp) == 0
    # values on and one ulp beside every half-way point: the fused step decides them
    mids = ((np.arange(-128, 127) + 0.5) * np.float64(p.scale)).astype(F32)
    ties = np.concatenate([mids, np.nextafter(mids, F32(-9)), np.nextafter(mids, F32(9)), x])
    q = torch.quantize_per_tensor(torch.from_numpy(ties), float(scale), 0, torch.qint8)
    np.testing.assert_array_equal(q.int_repr().numpy(), p.quantize(ties))
    w = (rng.standard_normal((16, 300)) * rng.uniform(0.1, 3, (16, 1))).astype(F32)
    pc_obs = torch.ao.quantization.PerChannelMinMaxObserver(
        ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    pc_obs(torch.from_numpy(w))
    scales, zps = pc_obs.calculate_qparams()
    pc = choose_qparams(w, symmetric=True, granularity="channel", axis=0, runtime="pytorch")
    np.testing.assert_array_equal(scales.numpy().astype(F32), pc.scale)
    qc = torch.quantize_per_channel(torch.from_numpy(w), scales, zps, 0, torch.qint8)
    np.testing.assert_array_equal(qc.int_repr().numpy(), pc.quantize(w))


def test_tensorrt_against_modelopts_formula_in_torch_when_installed():
    torch = need("torch")
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(50_000) * 1.7).astype(F32)
    amax = torch.tensor(float(np.abs(x).max()))
    scale = torch.tensor(127.0) / amax  # modelopt tensor_quant._tensor_quant, float32
    want = torch.clamp((torch.from_numpy(x) * scale).round_(), -127, 127).numpy()
    p = choose_qparams(x, runtime="tensorrt")
    assert float(p.inv_scale) == float(scale)
    np.testing.assert_array_equal(p.quantize(x), want)


def test_against_onnxruntime_when_installed():
    need("onnxruntime")
    from onnxruntime.quantization.quant_utils import compute_scale_zp

    x = np.array([-1.25, 0.3, 2.7], F32)
    zp, scale = compute_scale_zp(np.float32(x.min()), np.float32(x.max()), np.uint8(0),
                                 np.uint8(255))
    p = choose_qparams(x, symmetric=False, runtime="onnxruntime")
    assert float(scale) == float(p.scale) and int(zp) == int(p.zero_point)


def test_explicit_arguments_are_honoured_or_refused_never_dropped():
    x = np.array([-1.0, 3.0, 0.25], F32)

    def codes(**kw):
        p = choose_qparams(x, **kw)
        return p.qmin, p.qmax

    # None: the runtime's default; an explicit value the runtime has: honoured
    assert codes(symmetric=False, runtime="pytorch") == (0, 255)  # quint8 activations
    assert codes(symmetric=False, runtime="pytorch", signed=True) == (-128, 127)  # qint8 affine
    assert codes(symmetric=True, runtime="pytorch-fake", signed=False) == (0, 255)
    assert choose_qparams(x, runtime="pytorch", signed=False).zero_point == 128
    assert codes(symmetric=False, runtime="onnxruntime") == (0, 255)
    assert codes(symmetric=False, runtime="onnxruntime", signed=True) == (-128, 127)
    assert choose_qparams(x, runtime="onnxruntime", signed=False).zero_point == 128
    assert codes(symmetric=True, runtime="pytorch", narrow_range=True) == (-127, 127)
    assert codes(symmetric=True, runtime="tensorrt", narrow_range=False) == (-128, 127)
    assert choose_qparams(x, runtime="tflite", rounding="half_away").rounding == "half_away"
    assert choose_qparams(x, runtime="pytorch", granularity="channel", axis=0,
                          symmetric=False, arithmetic="multiply_add").arithmetic == "multiply_add"
    # a value that contradicts the preset: a clear error, never silently replaced
    refused = [dict(runtime="tflite", signed=False, symmetric=False),
               dict(runtime="tflite", narrow_range=False),
               dict(runtime="tflite", symmetric=False, narrow_range=True),
               dict(runtime="tflite", rounding="half_even"),
               dict(runtime="tflite-xnnpack", symmetric=False, rounding="half_away"),
               dict(runtime="pytorch", arithmetic="divide"),
               dict(runtime="pytorch-fake", arithmetic="fma"),
               dict(runtime="onnxruntime", narrow_range=False),
               dict(runtime="onnxruntime", symmetric=False, narrow_range=True),
               dict(runtime="onnxruntime", bits=6),
               dict(runtime="tensorrt", signed=False),
               dict(runtime="tensorrt", symmetric=False)]
    for kw in refused:
        with pytest.raises(EngineValueError, match=r"runtime|TensorRT|ONNX"):
            choose_qparams(x, **kw)
    # without a runtime, the engine's defaults and the explicit values as before
    assert codes(symmetric=False) == (-128, 127)
    assert codes(symmetric=False, signed=False) == (0, 255)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_preset_names_its_runtime_version_and_kernel(runtime):
    import quantscope.core.calibration.runtimes as rt

    assert any(ch.isdigit() for ch in PRESETS[runtime])  # a version
    assert f"``{runtime}`` --" in rt.__doc__


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("granularity", ["tensor", "channel"])
def test_prepared_statistics_follow_every_preset_bit_for_bit(runtime, symmetric, granularity,
                                                             gelu_activations):
    """The prepared (sorted) path gives the direct pass's report under each preset's rules,
    on real activations plus each unit's half-way points."""
    if runtime == "tensorrt" and not symmetric:
        return
    if runtime == "onnxruntime-dynamic" and (symmetric or granularity == "channel"):
        return  # DynamicQuantizeLinear is asymmetric and per tensor only
    x = gelu_activations[:64]
    p = choose_qparams(x, symmetric=symmetric, granularity=granularity, axis=1,
                       runtime=runtime)
    scale = np.atleast_1d(p.scale).astype(np.float64)
    zp = np.atleast_1d(p.zero_point)
    k = np.arange(p.qmin, p.qmax, dtype=np.float64) + 0.5
    mids = ((k[:, None] - zp[None, :]) * scale[None, :]).astype(F32)
    extra = np.concatenate([mids, np.nextafter(mids, F32(-9)), np.nextafter(mids, F32(9))])
    if granularity == "tensor":
        extra = np.resize(extra[:, 0], (extra.shape[0], x.shape[1]))
    xt = np.concatenate([x, extra])
    direct, fast = analyze(xt, p), prepare(xt).analyze(p)
    np.testing.assert_array_equal(direct.code_histogram, fast.code_histogram)
    assert (direct.clipped_below, direct.clipped_above) == (fast.clipped_below, fast.clipped_above)
    assert direct.max_abs_error == fast.max_abs_error
    assert fast.mse == pytest.approx(direct.mse, rel=1e-9)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("bits", [8, 4])
def test_what_a_preset_declares_it_fixes_is_what_it_computes(runtime, bits):
    """``preset_fixes`` is read from the rules, not measured: every scheme it declares is the
    one ``choose_qparams`` computes (codes, rounding, arithmetic), a refused one is refused,
    and a declared fixed code range is the one given whichever ``narrow_range`` is asked."""
    from quantscope.core.calibration.runtimes import preset_fixes
    from quantscope.errors import QuantscopeError

    x = np.linspace(-1.0, 2.0, 64, dtype=np.float32).reshape(4, 16)
    for per_channel in (False, True):
        fixes = preset_fixes(runtime, bits, per_channel)
        for name, fix in fixes.items():
            kw = dict(symmetric=name == "symmetric", bits=bits, runtime=runtime,
                      granularity="channel" if per_channel else "tensor", axis=0)
            if fix is None:
                with pytest.raises(QuantscopeError):
                    choose_qparams(x, **kw)
                continue
            try:
                p = choose_qparams(x, **kw)
            except QuantscopeError:  # bits this runtime refuses for every scheme
                assert all(f is None for f in fixes.values()) or bits != 8
                continue
            assert (p.qmin, p.qmax, p.rounding) == (fix["qmin"], fix["qmax"], fix["rounding"])
            assert p.arithmetic == fix["arithmetic"]
            if fix["narrow_range"] is not None:
                for narrow in (True, False):
                    try:
                        q = choose_qparams(x, narrow_range=narrow, **kw)
                    except QuantscopeError:
                        continue  # a contradicting range is refused, never taken
                    assert (q.qmin, q.qmax) == (p.qmin, p.qmax)
