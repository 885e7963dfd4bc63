"""NaN, +inf, -inf and values beyond a runtime's integer conversion: each preset's
``quantize(x, nonfinite="runtime")`` against its real runtime, bit for bit -- PyTorch 2.13 on
the CPU, ONNX Runtime and LiteRT here, PyTorch on CUDA and PyTorch 2.11's CPU kernels through
their records (tests/data/pytorch_cuda/). The engine's own default is unchanged: NaN and inf
raise, or with ``nonfinite="saturate"`` NaN goes to the zero point.

``COUNTS`` keeps, per path, the values compared and the mismatches (``-s`` prints them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oracles import need
from quantscope.core.calibration.runtimes import runtime_scheme
from quantscope.core.schemes.qparams import QuantParams

torch = need("torch")
ort = need("onnxruntime")
onnx = need("onnx")

F32 = np.float32
RECORDS = Path(__file__).resolve().parent.parent / "data" / "pytorch_cuda"
COUNTS: dict[str, list[int]] = {}
SCALE = F32(0.5)
#: Zero points tried: both signs, the ends of int8 and uint8, and 0.
ZPS_S8 = (0, -100, 100, -128, 127, -1, 1)
ZPS_U8 = (0, 7, 127, 128, 255)


def _specials() -> np.ndarray:
    """NaN, ±inf, ±FLT_MAX, ±1e30, and values at and beside 2^30, 2^31 and 2^63 scales (where
    int32 and int64 conversions give out), with ordinary values between them; 3 rows of 37, so
    every value also falls in a vector loop's tail."""
    k = [2.0**30, 2.0**31 - 128, 2.0**31, 2.0**31 + 256, 2.0**63 - 2.0**39, 2.0**63, 2.0**64]
    big = [v * float(SCALE) for v in k]
    vals = [np.nan, np.inf, -np.inf, 3.4028235e38, -3.4028235e38, 1e30, -1e30, 0.0, -0.0,
            1.0, -1.0, 2.5, -2.5, 63.0, -64.0, *big, *(-v for v in big), 1e-45]
    row = np.array(vals, F32)
    rows = [row, np.roll(row, 11), np.roll(row[::-1], 5)]
    return np.stack([r[:37] if r.size >= 37 else np.resize(r, 37) for r in rows])


X = _specials()


@pytest.fixture(scope="module", autouse=True)
def _print_counts():
    yield
    print("\npath: values compared (NaN, inf and huge among them), mismatches")
    for path, (n, bad) in sorted(COUNTS.items()):
        print(f"  {path}: {n:,}, {bad}")


def same(path: str, ours, theirs) -> None:
    a, b = np.asarray(ours, np.int64), np.asarray(theirs, np.int64)
    assert a.shape == b.shape, (path, a.shape, b.shape)
    bad = int(np.count_nonzero(a != b))
    entry = COUNTS.setdefault(path, [0, 0])
    entry[0] += a.size
    entry[1] += bad
    assert bad == 0, f"{path}: {bad} of {a.size} differ\nours   {a}\ntheirs {b}"


def params(runtime: str, zp, *, signed: bool, axis: int | None) -> QuantParams:
    """Explicit scale and zero point(s) under ``runtime``'s arithmetic and overflow rule."""
    sc = runtime_scheme(runtime, symmetric=False, signed=signed, per_channel=axis is not None)
    z = np.asarray(zp, np.int32)
    return QuantParams(scale=np.full(z.shape, SCALE, F32) if z.ndim else SCALE, zero_point=z,
                       qmin=sc.sat_min, qmax=sc.sat_max, axis=axis, symmetric=False,
                       rounding=sc.rounding, arithmetic=sc.arithmetic, runtime=runtime,
                       overflow=sc.overflow)


def _fake_codes(out, zp) -> np.ndarray:
    return np.rint(np.asarray(out, np.float64) / float(SCALE)) + np.asarray(zp, np.float64)


@pytest.mark.parametrize("signed", [True, False])
def test_pytorch_cpu(signed):
    """PyTorch 2.13's CPU kernels: quantize_per_tensor / _per_channel (``pytorch``) and
    fake_quantize_per_tensor / _per_channel_affine (``pytorch-fake``)."""
    dtype = torch.qint8 if signed else torch.quint8
    zps = ZPS_S8 if signed else ZPS_U8
    qmin, qmax = (-128, 127) if signed else (0, 255)
    xt = torch.from_numpy(X)
    for zp in zps:
        got = torch.quantize_per_tensor(xt, float(SCALE), zp, dtype).int_repr().numpy()
        same("pytorch quantize_per_tensor", params("pytorch", zp, signed=signed,
                                                   axis=None).quantize(X, nonfinite="runtime"),
             got)
        fq = torch.fake_quantize_per_tensor_affine(xt, float(SCALE), zp, qmin, qmax)
        fake = params("pytorch-fake", zp, signed=signed, axis=None)
        same("pytorch-fake fake_quantize_per_tensor_affine",
             fake.quantize(X, nonfinite="runtime"), _fake_codes(fq, zp))
        fq_t = torch.fake_quantize_per_tensor_affine(
            xt, torch.tensor([float(SCALE)]), torch.tensor([zp], dtype=torch.int32), qmin, qmax)
        same("pytorch-fake fake_quantize_per_tensor_affine, tensor qparams",
             fake.quantize(X, nonfinite="runtime"), _fake_codes(fq_t, zp))
    for axis in (0, 1):
        z = np.resize(np.array(zps, np.int32), X.shape[axis])
        s = torch.full((X.shape[axis],), float(SCALE), dtype=torch.float64)
        got = torch.quantize_per_channel(xt, s, torch.from_numpy(z.astype(np.int64)), axis,
                                         dtype).int_repr().numpy()
        same("pytorch quantize_per_channel", params("pytorch", z, signed=signed, axis=axis)
             .quantize(X, nonfinite="runtime"), got)
        fq = torch.fake_quantize_per_channel_affine(xt, s.float(), torch.from_numpy(z), axis,
                                                    qmin, qmax)
        shape = [1, 1]
        shape[axis] = -1
        same("pytorch-fake fake_quantize_per_channel_affine",
             params("pytorch-fake", z, signed=signed, axis=axis).quantize(X, nonfinite="runtime"),
             _fake_codes(fq, z.reshape(shape)))


def _ort_quantize_linear(x, zp, axis) -> np.ndarray:
    h, tp = onnx.helper, onnx.TensorProto
    zp = np.asarray(zp)
    qtype = tp.INT8 if zp.dtype == np.int8 else tp.UINT8
    node = h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"],
                       **({} if axis is None else {"axis": axis}))
    graph = h.make_graph(
        [node], "q", [h.make_tensor_value_info("x", tp.FLOAT, list(x.shape))],
        [h.make_tensor_value_info("y", qtype, list(x.shape))],
        initializer=[onnx.numpy_helper.from_array(np.full(zp.shape, SCALE, F32), "s"),
                     onnx.numpy_helper.from_array(zp, "z")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
    model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("signed", [True, False])
def test_onnxruntime_quantize_linear(signed):
    """ONNX Runtime's QuantizeLinear: NaN gives the type's minimum, inf saturates."""
    zps = ZPS_S8 if signed else ZPS_U8
    ztype = np.int8 if signed else np.uint8
    for zp in zps:
        got = _ort_quantize_linear(X, np.array(zp, ztype), None)
        same("onnxruntime QuantizeLinear per tensor", params(
            "onnxruntime", zp, signed=signed, axis=None).quantize(X, nonfinite="runtime"), got)
    for axis in (0, 1):
        z = np.resize(np.array(zps, ztype), X.shape[axis])
        got = _ort_quantize_linear(X, z, axis)
        same("onnxruntime QuantizeLinear per axis", params(
            "onnxruntime", z.astype(np.int32), signed=signed, axis=axis).quantize(
                X, nonfinite="runtime"), got)


@pytest.mark.parametrize("runtime, resolver", [("tflite", "reference"),
                                               ("tflite-xnnpack", "xnnpack"),
                                               ("tflite-optimized", "builtin")])
def test_litert_quantize(runtime, resolver):
    """LiteRT's QUANTIZE: the reference and optimized builtin kernels' int32 conversion sends
    NaN, inf and huge values to one end by the zero point's sign; XNNPACK clamps first (NaN
    gives qmax)."""
    models = need("litert_models")
    for zp in ZPS_S8:
        got = models.quantize(X, float(SCALE), zp, resolver)
        same(f"{runtime} QUANTIZE ({resolver} kernels)",
             params(runtime, zp, signed=True, axis=None).quantize(X, nonfinite="runtime"), got)


def _special_record(name: str):
    rec = np.load(RECORDS / name)
    x = np.load(RECORDS / "further_inputs.npz")["special"]
    cases = sorted({k.split("/")[1] for k in rec.files if k.startswith("special/")
                    and k.count("/") == 2 and "_zp" in k})
    return rec, x, cases


@pytest.mark.parametrize("record, runtimes", [
    ("cuda_further.npz", ("pytorch-cuda", "pytorch-cuda-fake")),
    ("cpu211_avx512.npz", ("pytorch-2.11", "pytorch-fake"))])
def test_recorded_runtimes(record, runtimes):
    """PyTorch 2.11 on CUDA (H200) and on the CPU, recorded: quantize and fake quant of NaN,
    ±inf, ±1e30 and ±FLT_MAX under int8 and uint8 zero points of both signs."""
    rec, x, cases = _special_record(record)
    assert len(cases) == 9
    for case in cases:
        dname, zp = case.split("_zp")
        zp, signed = int(zp), dname == "qint8"
        key = f"special/{case}/"
        for axis, tag in ((None, "tensor"), (0, "channel")):
            xx = x if axis is None else x.reshape(1, -1)
            z = zp if axis is None else np.array([zp], np.int32)
            p = params(runtimes[0], z, signed=signed, axis=axis)
            same(f"{runtimes[0]} ({record}) quantize per {tag}",
                 p.quantize(xx, nonfinite="runtime"), rec[key + f"{tag}_codes"])
            f = params(runtimes[1], z, signed=signed, axis=axis)
            fakes = [f"{tag}_fake"] + (["tensor_fake_t"] if axis is None else [])
            for k in fakes:
                same(f"{runtimes[1]} ({record}) fake quant per {tag}",
                     f.quantize(xx, nonfinite="runtime"), _fake_codes(rec[key + k], zp))


def test_engine_default_is_unchanged():
    """Without a runtime's rule: NaN and inf raise, or saturate with NaN at the zero point;
    asking for the runtime's codes where no rule was measured is a clear error."""
    x = np.array([np.nan, np.inf, -np.inf, 1.0], F32)
    p = QuantParams(SCALE, 7, 0, 255, symmetric=False)
    with pytest.raises(ValueError, match="non-finite"):
        p.quantize(x)
    assert p.quantize(x, nonfinite="saturate").tolist() == [7, 255, 0, 9]
    with pytest.raises(ValueError, match="parameters name none"):
        p.quantize(x, nonfinite="runtime")
    cuda = p.with_(overflow="int64_wrap")
    assert cuda.quantize(x, nonfinite="saturate").tolist() == [7, 255, 0, 9]
    assert cuda.quantize(x, nonfinite="runtime").tolist() == [0, 0, 0, 9]
    with pytest.raises(ValueError, match="overflow must be"):
        p.with_(overflow="wrap")


def check_special_record(rec, runtimes: tuple[str, str], where: str) -> None:
    """A ``record_specials.py`` record: every zero point, per tensor and per channel along
    both axes, quantize by ``runtimes[0]`` and fake quant by ``runtimes[1]``."""
    x = rec["x"]
    for dname, zps in (("qint8", ZPS_S8), ("quint8", ZPS_U8)):
        signed = dname == "qint8"
        for zp in zps:
            key = f"{dname}_zp{zp}/"
            same(f"{where}: {runtimes[0]} quantize per tensor",
                 params(runtimes[0], zp, signed=signed, axis=None).quantize(
                     x, nonfinite="runtime"), rec[key + "tensor_codes"])
            fake = params(runtimes[1], zp, signed=signed, axis=None).quantize(
                x, nonfinite="runtime")
            for k in ("tensor_fake", "tensor_fake_t"):
                same(f"{where}: {runtimes[1]} fake quant per tensor", fake,
                     _fake_codes(rec[key + k], zp))
        for axis in (0, 1):
            z = np.resize(np.array(zps, np.int32), x.shape[axis])
            shape = [1, 1]
            shape[axis] = -1
            same(f"{where}: {runtimes[0]} quantize per channel",
                 params(runtimes[0], z, signed=signed, axis=axis).quantize(
                     x, nonfinite="runtime"), rec[f"{dname}/axis{axis}/codes"])
            same(f"{where}: {runtimes[1]} fake quant per channel",
                 params(runtimes[1], z, signed=signed, axis=axis).quantize(
                     x, nonfinite="runtime"),
                 _fake_codes(rec[f"{dname}/axis{axis}/fake"], z.reshape(shape)))


@pytest.mark.parametrize("record, runtimes", [
    ("specials_cuda.npz", ("pytorch-cuda", "pytorch-cuda-fake")),
    ("specials_cpu211_avx512.npz", ("pytorch-2.11", "pytorch-fake")),
    ("specials_cpu211_avx2.npz", ("pytorch-2.11", "pytorch-fake")),
    ("specials_cpu211_default.npz", ("pytorch-2.11", "pytorch-fake"))])
def test_recorded_special_values_in_loop_bodies_and_tails(record, runtimes):
    """``record_specials.py`` on the H200 machine: PyTorch 2.11 on CUDA and its CPU kernels
    under AVX512, AVX2 and DEFAULT, every special value in a vector body and in a tail."""
    rec = np.load(RECORDS / record)
    np.testing.assert_array_equal(rec["x"], X)
    check_special_record(rec, runtimes, record.removesuffix(".npz"))


@pytest.mark.parametrize("capability", ["default", "avx2", "avx512"])
def test_pytorch_cpu_kernel_paths(capability, tmp_path):
    """PyTorch 2.13 here under each ``ATEN_CPU_CAPABILITY`` the machine has (a child process
    each, since PyTorch reads it once): the same rules on every kernel path."""
    import os
    import subprocess
    import sys

    if capability == "avx512" and torch.backends.cpu.get_cpu_capability() != "AVX512":
        pytest.skip("this machine has no AVX-512")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    script = RECORDS / "record_specials.py"
    subprocess.run([sys.executable, str(script), str(tmp_path), "cpu"], env=env, check=True,
                   capture_output=True)
    (path,) = tmp_path.glob("specials_cpu_*.npz")
    assert path.name == f"specials_cpu_{capability}.npz"
    check_special_record(np.load(path), ("pytorch", "pytorch-fake"), f"CPU 2.13 {capability}")
