"""ONNX models: initializers of every type equal ``onnx.numpy_helper``'s values, external data
is read from the model's folder, and QDQ weights equal what ONNX Runtime's DequantizeLinear
computes (onnx and onnxruntime are the oracles here)."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from oracles import need
from quantscope.cli import main
from quantscope.io import detect_format, list_tensors, load_for_analysis, load_tensor

onnx = need("onnx")
ort = need("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(32)


def _initializers() -> dict[str, np.ndarray]:
    w = RNG.standard_normal((24, 40)).astype(np.float32) * 3
    return {
        "w_f32": w, "w_f16": w.astype(np.float16), "w_bf16": w.astype(ml_dtypes.bfloat16),
        "w_e4m3": w.astype(ml_dtypes.float8_e4m3fn), "w_e5m2": w.astype(ml_dtypes.float8_e5m2),
        "w_f64": w.astype(np.float64), "codes_i8": RNG.integers(-128, 128, (8, 9), np.int8),
        "codes_u8": RNG.integers(0, 256, (8, 9), np.uint8),
        "ids": RNG.integers(-2**40, 2**40, (5,), np.int64), "scalar": np.array(0.5, np.float32),
    }


def _model(tensors: dict[str, np.ndarray], nodes=(), outputs=(), opset=21):
    inits = [numpy_helper.from_array(v, name=k) for k, v in tensors.items()]
    graph = helper.make_graph(list(nodes), "g", [], list(outputs), initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _oracle(path, name):
    model = onnx.load(str(path))
    for t in model.graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t, base_dir=str(path.parent))
    raise KeyError(name)


@pytest.mark.parametrize("external", [False, True])
def test_initializers_of_every_type_equal_onnxs(tmp_path, external):
    tensors = _initializers()
    model = _model(tensors)
    path = tmp_path / "m.onnx"
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True,
                        all_tensors_to_one_file=True, location="m.onnx.data",
                        size_threshold=0)
        assert (tmp_path / "m.onnx.data").stat().st_size > 0
    else:
        onnx.save_model(model, str(path))
    assert detect_format(path) == "onnx"
    infos = {i.name: i for i in list_tensors(path)}
    assert list(infos) == list(tensors)
    compared = 0
    for name, value in tensors.items():
        ours = load_tensor(path, name)
        theirs = _oracle(path, name)
        assert ours.shape == value.shape and ours.dtype == value.dtype, name
        assert np.asarray(ours).tobytes() == value.tobytes(), name  # bit for bit
        assert np.array_equal(np.asarray(ours, np.float64), np.asarray(theirs, np.float64),
                              equal_nan=True), name
        assert isinstance(ours, np.memmap) == external  # external data: mapped, lazily
        if value.ndim:
            y, info = load_for_analysis(path, name)
            assert info == infos[name] and y.dtype == np.float32
            assert np.array_equal(y, value.astype(np.float32))
        compared += value.size
    assert compared == sum(v.size for v in tensors.values())


def _qdq_case(codes: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, *, axis=None,
              block=None, name="w"):
    inputs = [f"{name}_q", f"{name}_scale"] + ([f"{name}_zp"] if zp is not None else [])
    attrs = {}
    if axis is not None:
        attrs["axis"] = axis
    if block is not None:
        attrs["block_size"] = block
    node = helper.make_node("DequantizeLinear", inputs, [f"{name}_dq"], **attrs)
    tensors = {f"{name}_q": codes, f"{name}_scale": scale}
    if zp is not None:
        tensors[f"{name}_zp"] = zp
    out = helper.make_tensor_value_info(f"{name}_dq", helper.np_dtype_to_tensor_dtype(
        scale.dtype), None)
    return tensors, node, out


def _int4(values: np.ndarray, signed: bool):
    """A numpy int4/uint4 array as onnx's helper takes it (ml_dtypes' 4-bit types)."""
    return values.astype(ml_dtypes.int4 if signed else ml_dtypes.uint4)


def test_qdq_weights_equal_onnxruntime_dequantize_linear(tmp_path):
    w_i8 = RNG.integers(-128, 128, (32, 48), np.int8)
    w_u8 = RNG.integers(0, 256, (32, 48), np.uint8)
    ch_scale = (RNG.random(32) * 0.02 + 1e-3).astype(np.float32)
    cases = [
        _qdq_case(w_i8, np.array(0.0123, np.float32), np.array(3, np.int8), name="tensor_i8"),
        _qdq_case(w_u8, np.array(1 / 3, np.float32), np.array(128, np.uint8), name="tensor_u8"),
        _qdq_case(w_i8, np.array(0.5, np.float32), None, name="nozp"),
        _qdq_case(w_i8, ch_scale, RNG.integers(-5, 5, 32).astype(np.int8), axis=0,
                  name="axis0"),
        _qdq_case(w_u8.T.copy(), ch_scale, RNG.integers(100, 150, 32).astype(np.uint8),
                  axis=1, name="axis1"),
        _qdq_case(w_i8, (RNG.random((32, 3)) * 0.1).astype(np.float32),
                  RNG.integers(-3, 3, (32, 3)).astype(np.int8), axis=1, block=16,
                  name="blocked"),
        _qdq_case(RNG.integers(-2**15, 2**15, (16, 20)).astype(np.int16),
                  np.array(1e-4, np.float32), np.array(-7, np.int16), name="i16"),
        _qdq_case(_int4(RNG.integers(-8, 8, (32, 48)), True), ch_scale,
                  _int4(RNG.integers(-2, 2, 32), True), axis=0, name="i4"),
        _qdq_case(_int4(RNG.integers(0, 16, (32, 47)), False),
                  (RNG.random((32, 3)) * 0.1).astype(np.float32),
                  _int4(RNG.integers(6, 10, (32, 3)), False), axis=1, block=16, name="u4"),
        _qdq_case((RNG.standard_normal((32, 48)) * 50).astype(ml_dtypes.float8_e4m3fn),
                  ch_scale, None, axis=0, name="fp8"),
        _qdq_case(w_i8, np.array(0.037, np.float16), np.array(-2, np.int8), name="half"),
    ]
    tensors, nodes, outputs = {}, [], []
    for t, node, out in cases:
        tensors.update(t)
        nodes.append(node)
        outputs.append(out)
    path = tmp_path / "qdq.onnx"
    onnx.save_model(_model(tensors, nodes, outputs), str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    results = dict(zip([o.name for o in outputs], session.run(None, {}), strict=True))
    infos = {i.name: i for i in list_tensors(path)}
    compared = 0
    for name, expected in results.items():
        assert name in infos and "DequantizeLinear" in infos[name].file_dtype
        ours = load_tensor(path, name)
        assert ours.dtype == expected.dtype and ours.shape == expected.shape, name
        assert np.array_equal(ours, expected), (name, np.count_nonzero(ours != expected))
        compared += expected.size
    assert compared == sum(r.size for r in results.values())
    codes = load_tensor(path, "i4_q")  # the stored 4-bit codes, unpacked
    assert codes.dtype == np.int8 and codes.min() >= -8 and codes.max() <= 7


def test_report_and_scan_open_a_model(tmp_path, capsys):
    w = (RNG.standard_normal((64, 32)) * 0.1).astype(np.float32)
    path = tmp_path / "model.onnx"
    onnx.save_model(_model({"fc.weight": w, "fc.bias": w[0]}), str(path))
    assert main(["report", str(path), "--tensor", "fc.weight", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    import quantscope as qs

    expected = qs.analyze(w, qs.choose_qparams(w, symmetric=True)).sqnr_db
    assert doc["schemes"]["symmetric/tensor"]["sqnr_db"] == pytest.approx(expected, rel=1e-9)
    assert main(["scan", str(path), "--json"]) == 0
    assert {r["name"] for r in json.loads(capsys.readouterr().out)["tensors"]} == {
        "fc.weight", "fc.bias"}


def test_without_the_onnx_package_the_error_names_the_extra(tmp_path, monkeypatch):
    from quantscope.io import TensorFileError, onnx_model

    path = tmp_path / "m.onnx"
    onnx.save_model(_model({"w": np.ones(3, np.float32)}), str(path))
    monkeypatch.setattr(onnx_model, "_onnx", lambda: None)
    with pytest.raises(TensorFileError, match=r"needs the onnx package: pip install "
                                              r"'quantscope\[onnx\]'"):
        list_tensors(path)


def test_constant_nodes_are_listed_and_feed_a_dequantize(tmp_path):
    """Weights kept in Constant nodes (some exporters do) open under the output's name, and a
    DequantizeLinear reading them decodes as ONNX Runtime's does."""
    codes = RNG.integers(-128, 128, (16, 12), np.int8)
    scale = (RNG.random(16) * 0.05 + 1e-3).astype(np.float32)
    nodes = [helper.make_node("Constant", [], ["c_codes"],
                              value=numpy_helper.from_array(codes, "")),
             helper.make_node("Constant", [], ["c_scale"],
                              value=numpy_helper.from_array(scale, "")),
             helper.make_node("DequantizeLinear", ["c_codes", "c_scale"], ["c_dq"], axis=0)]
    out = helper.make_tensor_value_info("c_dq", TensorProto.FLOAT, None)
    path = tmp_path / "const.onnx"
    onnx.save_model(_model({}, nodes, [out]), str(path))
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {})[0]
    assert [i.name for i in list_tensors(path)] == ["c_codes", "c_scale", "c_dq"]
    assert np.array_equal(load_tensor(path, "c_codes"), codes)
    assert np.array_equal(load_tensor(path, "c_dq"), expected) and expected.size == 192
