"""Every runtime preset against its real runtime, bit for bit: scales, zero points and codes,
per tensor and per channel, int8 and uint8, on the bundled real tensors (MiniLM activations,
weights and the 16 tensors of its bf16 checkpoint) and on constructed ties: every half-way
point between two codes, its neighbours 1 and 2 ulps away, the clip edges and values beyond
them. The runtimes are the ``oracles`` extra; under CI a missing one fails (tests/oracles.py).

``COUNTS`` keeps, per path, how many values were compared and how many differed; run with
``-s`` to see the table.
"""

from __future__ import annotations

import numpy as np
import pytest

from oracles import need
from quantscope.core import choose_qparams
from quantscope.core.schemes.qparams import QuantParams
from quantscope.io import list_tensors, load_tensor, samples

torch = need("torch")
need("torch.ao.quantization.fx._decomposed")  # registers torch.ops.quantized_decomposed
ort = need("onnxruntime")
onnx = need("onnx")
quant_utils = need("onnxruntime.quantization.quant_utils")

F32 = np.float32
COUNTS: dict[str, list[int]] = {}


def _real_tensors() -> dict[str, np.ndarray]:
    out = {}
    for name in ("gelu_activations", "output_activations", "query_weight", "ffn_weight"):
        out[name] = np.load(samples.sample_path(name)).astype(F32)
    ckpt = samples.sample_path("bf16_checkpoint")
    for info in list_tensors(ckpt):
        out[info.name.replace("encoder.layer.0.", "bf16:")] = load_tensor(
            ckpt, info.name).astype(F32)
    return out


REAL = _real_tensors()
#: 2-D tensors and the channel axis their per-channel quantization uses.
CHANNELS = {name: (0 if "weight" in name and "LayerNorm" not in name else 1)
            for name, x in REAL.items() if x.ndim == 2}


@pytest.fixture(scope="module", autouse=True)
def _print_counts():
    yield
    print("\npath: values compared, mismatches")
    for path, (n, bad) in sorted(COUNTS.items()):
        print(f"  {path}: {n:,}, {bad}")


def same(path: str, ours, theirs) -> None:
    """Record and assert that ``ours`` equals ``theirs`` element for element (bit patterns for
    floats)."""
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape, (path, a.shape, b.shape)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        a, b = a.astype(F32).view(np.int32), b.astype(F32).view(np.int32)
    else:
        a, b = a.astype(np.int64), b.astype(np.int64)
    bad = int(np.count_nonzero(a != b))
    entry = COUNTS.setdefault(path, [0, 0])
    entry[0] += a.size
    entry[1] += bad
    assert bad == 0, f"{path}: {bad} of {a.size} differ"


def ties(scale: float, zp: int, qmin: int, qmax: int) -> np.ndarray:
    """Half-way points of every pair of codes, the clip edges and values beyond them, each with
    its float32 neighbours 1 and 2 ulps away."""
    k = np.arange(qmin, qmax + 1, dtype=np.float64) - zp
    base = np.concatenate([(k[:-1] + 0.5) * scale, k[[0, -1]] * scale,
                           (k[[0, -1]] + [-0.5, 0.5]) * scale, (k[[0, -1]] * 3.0) * scale])
    b = base.astype(F32)
    down1, up1 = np.nextafter(b, F32(-np.inf)), np.nextafter(b, F32(np.inf))
    down2, up2 = np.nextafter(down1, F32(-np.inf)), np.nextafter(up1, F32(np.inf))
    return np.concatenate([b, down1, up1, down2, up2])


def with_ties(x: np.ndarray, p: QuantParams) -> np.ndarray:
    """``x`` and, per unit of ``p`` (the tensor or each channel), its tie values."""
    if p.axis is None:
        return np.concatenate([x.ravel(), ties(float(p.scale), int(p.zero_point), p.qmin,
                                               p.qmax)])
    xt = np.moveaxis(x, p.axis, 0)
    extra = np.stack([ties(float(s), int(z), p.qmin, p.qmax)
                      for s, z in zip(p.scale, p.zero_point, strict=True)])
    return np.moveaxis(np.concatenate([xt, extra], axis=1), 0, p.axis)


# --------------------------------------------------------------------------------- PyTorch

#: (symmetric, signed) -> torch dtype and qscheme suffix; None = the preset's default.
TORCH_SCHEMES = {
    (False, None): (torch.quint8, "affine"),  # eager activations
    (False, True): (torch.qint8, "affine"),  # PT2E / XNNPACK / ExecuTorch activations
    (True, None): (torch.qint8, "symmetric"),  # weights
    (True, False): (torch.quint8, "symmetric"),  # zero point 128
}


def _torch_observer(x: np.ndarray, symmetric: bool, signed, axis):
    dtype, kind = TORCH_SCHEMES[(symmetric, signed)]
    q = torch.ao.quantization
    if axis is None:
        obs = q.MinMaxObserver(dtype=dtype, qscheme=getattr(torch, f"per_tensor_{kind}"))
    else:
        obs = q.PerChannelMinMaxObserver(ch_axis=axis, dtype=dtype,
                                         qscheme=getattr(torch, f"per_channel_{kind}"))
    obs(torch.from_numpy(x))
    scale, zp = obs.calculate_qparams()
    return dtype, scale, zp


@pytest.mark.parametrize("granularity", ["tensor", "channel"])
@pytest.mark.parametrize("symmetric, signed", list(TORCH_SCHEMES))
def test_pytorch_eager_fake_and_pt2e(symmetric, signed, granularity):
    label = f"{'sym' if symmetric else 'affine'} {'int8' if TORCH_SCHEMES[(symmetric, signed)][0] == torch.qint8 else 'uint8'} per {granularity}"  # noqa: E501
    for name, x in REAL.items():
        if granularity == "channel" and name not in CHANNELS:
            continue
        axis = CHANNELS.get(name) if granularity == "channel" else None
        dtype, scale, zp = _torch_observer(x, symmetric, signed, axis)
        kw = dict(symmetric=symmetric, signed=signed, granularity=granularity,
                  axis=axis or 0)
        eager = choose_qparams(x, runtime="pytorch", **kw)
        fake = choose_qparams(x, runtime="pytorch-fake", **kw)
        same(f"pytorch observer scale, {label}", eager.scale, scale.numpy().reshape(
            eager.scale.shape))
        same(f"pytorch observer zero point, {label}", eager.zero_point,
             zp.numpy().reshape(eager.zero_point.shape))
        np.testing.assert_array_equal(fake.scale, eager.scale)
        np.testing.assert_array_equal(fake.zero_point, eager.zero_point)
        xt = torch.from_numpy(with_ties(x, eager))
        qmin, qmax = eager.qmin, eager.qmax
        int_dtype = torch.int8 if qmin < 0 else torch.uint8
        if axis is None:
            s, z = float(scale), int(zp)
            got = torch.quantize_per_tensor(xt, s, z, dtype).int_repr()
            fq = torch.fake_quantize_per_tensor_affine(xt, s, z, qmin, qmax)
            fq_t = torch.fake_quantize_per_tensor_affine(xt, scale, zp.to(torch.int32),
                                                         qmin, qmax)
            pt2e = torch.ops.quantized_decomposed.quantize_per_tensor(xt, s, z, qmin, qmax,
                                                                      int_dtype)
        else:
            got = torch.quantize_per_channel(xt, scale, zp, axis, dtype).int_repr()
            fq = fq_t = torch.fake_quantize_per_channel_affine(xt, scale, zp.to(torch.int32),
                                                               axis, qmin, qmax)
            pt2e = torch.ops.quantized_decomposed.quantize_per_channel(
                xt, scale, zp, axis, qmin, qmax, int_dtype)
        xn = xt.numpy()
        same(f"pytorch quantize_per_{granularity}, {label}", eager.quantize(xn), got.numpy())
        fake_codes = fake.quantize(xn)
        same(f"pytorch-fake fake_quantize (scalar qparams), {label}",
             fake.dequantize(fake_codes), fq.numpy())
        same(f"pytorch-fake fake_quantize (tensor qparams), {label}",
             fake.dequantize(fake_codes), fq_t.numpy())
        same(f"pytorch-fake quantized_decomposed, {label}", fake_codes, pt2e.numpy())


def test_pytorch_reproducers():
    """Per-channel affine rounds twice; fake quant adds the zero point after rounding."""
    x = np.array([[-0.5], [2.0], [-0.49509802]], F32)
    p = choose_qparams(x, symmetric=False, granularity="channel", axis=1, runtime="pytorch")
    assert p.arithmetic == "multiply_add" and p.quantize(x)[2, 0] == 0
    x = np.array([-1, 3, -0.9803922], F32)
    assert choose_qparams(x, symmetric=False, runtime="pytorch-fake").quantize(x)[2] == 2
    p = choose_qparams(x, symmetric=False, runtime="pytorch", signed=True)
    assert (p.qmin, p.qmax) == (-128, 127)


# ----------------------------------------------------------------------------- ONNX Runtime

def _ort_quantize_linear(x: np.ndarray, scale, zp, axis) -> np.ndarray:
    """Run one QuantizeLinear node in an ONNX Runtime session (CPU)."""
    h, tp = onnx.helper, onnx.TensorProto
    zp = np.asarray(zp)
    qtype = tp.INT8 if zp.dtype == np.int8 else tp.UINT8
    node = h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"],
                       **({} if axis is None else {"axis": axis}))
    graph = h.make_graph(
        [node], "q", [h.make_tensor_value_info("x", tp.FLOAT, list(x.shape))],
        [h.make_tensor_value_info("y", qtype, list(x.shape))],
        initializer=[onnx.numpy_helper.from_array(np.asarray(scale, F32), "s"),
                     onnx.numpy_helper.from_array(zp, "z")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
    model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("granularity", ["tensor", "channel"])
@pytest.mark.parametrize("symmetric, signed", [(False, None), (False, True), (True, None),
                                               (True, False)])
def test_onnxruntime(symmetric, signed, granularity):
    tp = onnx.TensorProto
    unsigned = signed is False or (signed is None and not symmetric)
    qtype = tp.UINT8 if unsigned else tp.INT8
    label = (f"{'sym' if symmetric else 'affine'} {'uint8' if unsigned else 'int8'} "
             f"per {granularity}")
    qmin, qmax = quant_utils.get_qmin_qmax_for_qType(qtype, symmetric=symmetric)
    for name, x in REAL.items():
        if granularity == "channel" and name not in CHANNELS:
            continue
        axis = CHANNELS.get(name) if granularity == "channel" else None
        p = choose_qparams(x, symmetric=symmetric, signed=signed, granularity=granularity,
                           axis=axis or 0, runtime="onnxruntime")
        if axis is None:
            lo, hi = x.min().reshape(1), x.max().reshape(1)
        else:
            lo, hi = x.min(axis=1 - axis), x.max(axis=1 - axis)
        pairs = [quant_utils.compute_scale_zp(lo[i], hi[i], qmin, qmax, symmetric=symmetric)
                 for i in range(lo.size)]
        zps = np.array([z for z, _ in pairs]).astype(qmin.dtype)
        scales = np.array([s for _, s in pairs], F32)
        same(f"onnxruntime compute_scale_zp scale, {label}", p.scale.reshape(-1), scales)
        same(f"onnxruntime compute_scale_zp zero point, {label}", p.zero_point.reshape(-1), zps)
        xq = with_ties(x, p)
        shape = () if axis is None else (-1,)
        got = _ort_quantize_linear(xq, scales.reshape(shape), zps.reshape(shape), axis)
        same(f"onnxruntime QuantizeLinear, {label}", p.quantize(xq), got)
        if axis is None:  # the quantization tool's own weight quantizer
            tool = quant_utils.quantize_nparray(qtype, xq, scales[0], zps[0])
            same(f"onnxruntime quantize_nparray, {label}", p.quantize(xq), tool)


def test_onnxruntime_reproducers():
    """1.32 subtracts the range in float64; QuantizeLinear saturates at int8's -128."""
    x = np.array([-0.13251084, 0.15858345], F32)
    assert choose_qparams(x, symmetric=False, runtime="onnxruntime").scale == F32(0.0011415462)
    p = choose_qparams(np.array([-1.0, 1.0], F32), runtime="onnxruntime")
    assert p.quantize(np.array([-3.0], F32))[0] == -128


def _ort_dynamic_quantize_linear(x: np.ndarray):
    """Run one DynamicQuantizeLinear node: codes, scale and zero point."""
    h, tp = onnx.helper, onnx.TensorProto
    node = h.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    graph = h.make_graph([node], "dq", [h.make_tensor_value_info("x", tp.FLOAT, None)],
                         [h.make_tensor_value_info("y", tp.UINT8, None),
                          h.make_tensor_value_info("s", tp.FLOAT, None),
                          h.make_tensor_value_info("z", tp.UINT8, None)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
    model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def _dynamic_cases() -> dict[str, np.ndarray]:
    """The real tensors, each with its own ties added (they stay inside its range), ranges on
    one side of 0 and degenerate ones, and NaN (left out of the range by the op)."""
    rng = np.random.default_rng(3)
    out = {}
    for name, x in REAL.items():
        p = choose_qparams(x, symmetric=False, runtime="onnxruntime-dynamic")
        t = ties(float(p.scale), int(p.zero_point), 0, 255)
        out[name] = np.concatenate([x.ravel(), t[(t >= x.min()) & (t <= x.max())]])
    out["positive"] = rng.uniform(0.5, 3.0, 1000).astype(F32)
    out["negative"] = -rng.uniform(0.5, 3.0, 1000).astype(F32)
    out["zeros"] = np.zeros(16, F32)
    out["one value"] = np.full(7, F32(0.3))
    out["nan"] = np.array([np.nan, 1.0, -2.0, 0.37, np.nan], F32)
    return out


def test_onnxruntime_dynamic_quantize_linear():
    """DynamicQuantizeLinear's own scale and zero point (float32 throughout) and codes; where
    the quantization tool's float64 subtraction gives another scale, the op is followed."""
    tool_differs = 0
    for name, x in _dynamic_cases().items():
        y, s, z = _ort_dynamic_quantize_linear(x)
        p = choose_qparams(x, symmetric=False, runtime="onnxruntime-dynamic")
        same("onnxruntime DynamicQuantizeLinear scale", p.scale, s)
        same("onnxruntime DynamicQuantizeLinear zero point", p.zero_point, z)
        same("onnxruntime DynamicQuantizeLinear codes", p.quantize(x, nonfinite="runtime"), y)
        if name in REAL:
            tool = choose_qparams(x, symmetric=False, runtime="onnxruntime")
            tool_differs += int(tool.scale != p.scale)
    assert tool_differs >= 1  # the op and the tool differ on real tensors: two presets
    with pytest.raises(ValueError, match="infinite scale"):
        choose_qparams(np.array([1.0, np.inf], F32), symmetric=False,
                       runtime="onnxruntime-dynamic")
    with pytest.raises(ValueError, match="asymmetric, per tensor"):
        choose_qparams(np.ones(4, F32), symmetric=True, runtime="onnxruntime-dynamic")


# ---------------------------------------------------------------------------------- LiteRT

def _as_matrix(x: np.ndarray) -> np.ndarray:
    return x if x.ndim == 2 else x.reshape(1, -1)


def _in_range_ties(p: QuantParams) -> np.ndarray:
    """Per channel of symmetric weights, the half-way points (and 1-2 ulps beside them) that
    lie strictly inside ``±amax``, so adding them leaves every channel's range unchanged."""
    rows = []
    for s in np.atleast_1d(p.scale):
        k = np.arange(p.qmin, p.qmax, dtype=np.float64) + 0.5
        b = (k * np.float64(s)).astype(F32)[1:-1]
        d1, u1 = np.nextafter(b, F32(-1)), np.nextafter(b, F32(1))
        rows.append(np.concatenate([b, d1, u1, np.nextafter(d1, F32(-1)),
                                    np.nextafter(u1, F32(1))]))
    return np.stack(rows)


def test_tflite_quantizer():
    """LiteRT's post-training quantizer: activations int8 affine (nudged zero point), weights
    symmetric per output channel, multiplied by float32(127 / amax) and rounded half away."""
    models = need("litert_models")
    for x in REAL.values():
        xm = _as_matrix(x)
        pw = choose_qparams(xm, symmetric=True, granularity="channel", axis=0,
                            runtime="tflite")
        w = np.concatenate([xm, _in_range_ties(pw)], axis=1)
        got = models.quantizer(w, w)  # the tensor is the input and the weights
        for runtime in ("tflite", "tflite-xnnpack", "tflite-optimized"):
            pa = choose_qparams(w, symmetric=False, runtime=runtime)
            same(f"{runtime} quantizer activation scale", pa.scale, got["scale"])
            same(f"{runtime} quantizer activation zero point", pa.zero_point,
                 got["zero_point"])
            pw = choose_qparams(w, symmetric=True, granularity="channel", axis=0,
                                runtime=runtime)
            same(f"{runtime} quantizer weight scales", pw.scale, got["w_scale"])
            same(f"{runtime} quantizer weight codes", pw.quantize(w), got["w_codes"])


@pytest.mark.parametrize("runtime, resolver", [("tflite", "reference"),
                                               ("tflite-xnnpack", "xnnpack"),
                                               ("tflite-optimized", "builtin")])
def test_tflite_quantize_op(runtime, resolver):
    """QUANTIZE: the reference kernel divides and rounds half away; the default interpreter's
    XNNPACK delegate and the optimized builtin kernels multiply by float32(1 / scale) and round
    half to even."""
    models = need("litert_models")
    for x in REAL.values():
        p = choose_qparams(x, symmetric=False, runtime=runtime)
        xq = with_ties(x, p)
        got = models.quantize(xq, float(p.scale), int(p.zero_point), resolver)
        same(f"{runtime} QUANTIZE ({resolver} kernels), affine int8 per tensor", p.quantize(xq),
             got)


def test_tflite_reproducer():
    models = need("litert_models")
    x = np.array([1.25], F32)
    p = QuantParams(F32(0.5), 0, -128, 127, rounding="half_away")
    assert models.quantize(x, 0.5, 0, "reference")[0] == p.quantize(x)[0] == 3
    q = choose_qparams(np.array([-1.0, 1.0], F32), symmetric=False, runtime="tflite-xnnpack")
    assert models.quantize(x, 0.5, 0, "xnnpack")[0] == q.with_(scale=F32(0.5),
                                                               zero_point=0).quantize(x)[0] == 2
