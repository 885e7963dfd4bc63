"""A plan exported for real tools, each config loaded (and applied) by the tool's own code."""

from __future__ import annotations

import json

import numpy as np
import pytest

import quantscope as qs
from oracles import need
from quantscope.cli import main
from quantscope.state.plan import plan
from quantscope.state.plan_export import (
    PLAN_SCHEMA,
    chosen_params,
    compressed_tensors_config,
    modelopt_config,
    onnx_qdq,
    plan_json,
)
from tiny_models import tiny_lm

torch = need("torch")

MIXED = ["int8/channel", "int8/tensor", "fp8_e4m3/tensor", "fp8_e4m3/channel", "int4_g32",
         "int4_g64", "nvfp4", "mxfp4", "mxfp8_e4m3", "fp4_e2m1/tensor"]


@pytest.fixture(scope="module")
def model_and_plan():
    model = tiny_lm(torch)
    # every expressible kind at least once, and one row no tool expresses
    pins = {"conv.weight": "int8/channel", "layers.0.q_proj.weight": "int8/channel",
            "layers.0.up_proj.weight": "nvfp4", "layers.0.down_proj.weight": "fp8_e4m3/tensor",
            "layers.1.q_proj.weight": "mxfp4", "layers.1.up_proj.weight": "int4_g64",
            "layers.1.down_proj.weight": "fp4_e2m1/tensor"}
    return model, plan(qs.scan(model), 6.5, formats=MIXED, pins=pins)


def test_compressed_tensors_config_parsed_and_applied(model_and_plan):
    ct = need("compressed_tensors.quantization")
    _, p = model_and_plan
    export = compressed_tensors_config(p)
    config = ct.QuantizationConfig.model_validate(json.loads(export.to_json()))
    assert sorted(config.ignore) == ["embed_tokens", "final_norm", "layers.0.norm",
                                     "layers.1.norm", "lm_head"]
    fresh = tiny_lm(torch)
    ct.apply_quantization_config(fresh, config)
    schemes = {n: m.quantization_scheme for n, m in fresh.named_modules()
               if getattr(m, "quantization_scheme", None) is not None}
    assert set(schemes) == {"layers.0.q_proj", "layers.0.up_proj", "layers.0.down_proj",
                            "layers.1.q_proj", "layers.1.up_proj"}
    w = {n: s.weights for n, s in schemes.items()}
    assert (w["layers.0.q_proj"].num_bits, w["layers.0.q_proj"].type,
            w["layers.0.q_proj"].strategy) == (8, "int", "channel")
    assert (w["layers.0.up_proj"].strategy, w["layers.0.up_proj"].group_size,
            str(w["layers.0.up_proj"].scale_dtype)) == ("tensor_group", 16,
                                                         "torch.float8_e4m3fn")
    assert (w["layers.0.down_proj"].type, w["layers.0.down_proj"].strategy) == ("float",
                                                                                 "tensor")
    assert (w["layers.1.q_proj"].num_bits, w["layers.1.q_proj"].group_size) == (4, 32)
    assert (w["layers.1.up_proj"].type, w["layers.1.up_proj"].group_size) == ("int", 64)
    assert all(s.input_activations is None for s in schemes.values())
    unexpressed = {name: spec for name, spec, _ in export.unexpressed}
    assert unexpressed["layers.1.down_proj.weight"] == "fp4_e2m1/tensor"
    assert unexpressed["conv.weight"] == "int8/channel"  # a 3-D conv weight: Linear only
    assert any("layers.1.down_proj.weight as fp4_e2m1/tensor" in n for n in export.notes())


def test_modelopt_config_loaded_and_applied(model_and_plan, tmp_path):
    mtq = need("modelopt.torch.quantization")
    from modelopt.torch.quantization.config import load_config

    _, p = model_and_plan
    export = modelopt_config(p)
    path = tmp_path / "plan.yaml"
    path.write_text(export.to_yaml())
    config = load_config(path)  # ModelOpt's own YAML loader
    fresh = tiny_lm(torch)
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(0))
    mtq.quantize(fresh, config, lambda m: m(ids))
    enabled = {n: m.weight_quantizer for n, m in fresh.named_modules()
               if getattr(m, "weight_quantizer", None) is not None
               and m.weight_quantizer.is_enabled}
    planned = {r.name.removesuffix(".weight") for r in p.planned} - {
        n.removesuffix(".weight") for n, _, _ in export.unexpressed}
    assert set(enabled) == planned
    q = enabled["layers.0.q_proj"]
    assert (q.num_bits, q.axis) == (8, 0)
    nv = enabled["layers.0.up_proj"]
    assert nv.num_bits == (2, 1) and nv.block_sizes == {-1: 16, "type": "dynamic",
                                                        "scale_bits": (4, 3)}
    assert enabled["layers.0.down_proj"].num_bits == (4, 3)
    assert (enabled["conv"].num_bits, enabled["conv"].axis) == (8, 0)  # ModelOpt's QuantConv1d
    assert enabled["layers.1.q_proj"].block_sizes["scale_bits"] == (8, 0)
    assert enabled["layers.1.up_proj"].block_sizes == {-1: 64, "type": "static"}
    assert not any(m.input_quantizer.is_enabled for m in fresh.modules()
                   if getattr(m, "input_quantizer", None) is not None)
    assert [n for n, _, _ in export.unexpressed] == ["layers.1.down_proj.weight"]


def test_plan_json_schema_and_scales(model_and_plan):
    _, p = model_and_plan
    doc = json.loads(plan_json(p).to_json())
    assert doc["schema"] == PLAN_SCHEMA and doc["budget_bits"] == 6.5
    rows = {t["name"]: t for t in doc["tensors"]}
    assert rows["lm_head.weight"]["format"] is None and rows["lm_head.weight"]["kept"]
    row = p["layers.0.q_proj.weight"]
    q = rows[row.name]["quantization"]
    assert q["kind"] == "int" and q["granularity"] == "channel" and q["axis"] == 0
    x, params = chosen_params(p, row)
    scale = np.asarray(q["scale"], np.float32)
    codes = params.quantize(x)
    # what a reader of the file computes equals quantscope's dequantization, bit for bit
    mine = (codes.astype(np.float32) - np.asarray(q["zero_point"], np.float32)[:, None]) \
        * scale[:, None]
    np.testing.assert_array_equal(mine, params.dequantize(codes))
    nv = rows["layers.0.up_proj.weight"]["quantization"]
    assert nv["kind"] == "nvfp4" and nv["tensor_scale"] > 0
    assert np.asarray(nv["block_scales"]).size == p["layers.0.up_proj.weight"].params // 16


def _onnx_model(path, onnx):
    """A two-layer graph: MatMul with W1 [64, 32], Gemm with W2 [16, 32] (transB), both
    initializers; opset 17."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((64, 32)) * 0.1).astype(np.float32)
    w1[:, 5] *= 30  # an outlier column: per-channel and per-tensor differ
    w2 = (rng.standard_normal((16, 32)) * 0.2).astype(np.float32)
    b2 = rng.standard_normal(16).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W1"], ["h"]),
         helper.make_node("Gemm", ["h", "W2", "B2"], ["y"], transB=1)],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
        [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2"),
         numpy_helper.from_array(b2, "B2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return w1, w2


def test_onnx_qdq_weights_dequantize_exactly_in_onnxruntime(tmp_path):
    onnx = need("onnx")
    ort = need("onnxruntime")
    from onnx import helper

    from quantscope.io.onnx_qdq import initializers, weight_axes

    src, out = tmp_path / "tiny.onnx", tmp_path / "tiny_qdq.onnx"
    _onnx_model(str(src), onnx)
    axes = weight_axes(src)  # MatMul's W1 [in, out]: outputs last; Gemm's W2 with transB: 0
    assert axes == {"W1": -1, "W2": 0}
    table = qs.scan(initializers(src), axes=axes)
    p = plan(table, 9.5, formats=["int8/tensor", "int8/channel", "int4_g32"], keep=())
    p = p.with_pins({"W1": "int8/channel", "W2": "int8/tensor", "B2": None})
    export = onnx_qdq(p, src, out)
    assert export.config["replaced"] == ["W1", "W2"] and not export.unexpressed
    model = onnx.load(str(out))
    onnx.checker.check_model(model)
    # expose each DequantizeLinear's output and let ONNX Runtime compute it
    for name in ("W1", "W2"):
        model.graph.output.append(helper.make_tensor_value_info(name, 1, None))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    _, w1, w2 = sess.run(None, {"x": x})
    compared = 0
    for name, got in (("W1", w1), ("W2", w2)):
        xw, params = chosen_params(p, p[name])
        expect = params.dequantize(params.quantize(xw))
        np.testing.assert_array_equal(got, expect)
        assert np.count_nonzero(got != expect) == 0
        compared += got.size
    assert compared == 64 * 32 + 16 * 32
    assert [a.i for n in model.graph.node if n.name == "W1_DequantizeLinear"
            for a in n.attribute] == [-1]  # one scale per output column of the MatMul
    # an int4 decision is named, never written as something else
    p4 = p.choose("W2", "int4_g32")
    export4 = onnx_qdq(p4, src, tmp_path / "int4.onnx")
    assert export4.config["replaced"] == ["W1"]
    assert export4.unexpressed[0][:2] == ("W2", "int4_g32")


def test_cli_writes_every_export(tmp_path, capsys):
    need("compressed_tensors")
    safetensors_torch = need("safetensors.torch")
    model = tiny_lm(torch)
    path = tmp_path / "tiny.safetensors"
    safetensors_torch.save_file(model.state_dict(), str(path))
    ct, mo, pj = tmp_path / "ct.json", tmp_path / "mo.yaml", tmp_path / "plan.json"
    assert main(["plan", str(path), "--budget", "5.5", "--formats", ",".join(MIXED),
                 "--compressed-tensors", str(ct), "--modelopt", str(mo),
                 "--plan-json", str(pj)]) == 0
    err = capsys.readouterr().err
    assert f"wrote compressed-tensors to {ct}" in err and "cannot express conv.weight" in err
    from compressed_tensors.quantization import QuantizationConfig

    QuantizationConfig.model_validate(json.loads(ct.read_text()))
    assert json.loads(pj.read_text())["schema"] == PLAN_SCHEMA
    assert "weight_quantizer" in mo.read_text()


def test_cli_onnx_qdq(tmp_path, capsys):
    onnx = need("onnx")
    src, out = tmp_path / "tiny.onnx", tmp_path / "q.onnx"
    _onnx_model(str(src), onnx)
    assert main(["plan", str(src), "--budget", "9.5", "--target", "onnx", "--no-default-keep",
                 "--onnx-out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {t["name"]: t["format"] for t in doc["tensors"]}["W1"].startswith("int8/")
    kinds = [n.op_type for n in onnx.load(str(out)).graph.node]
    assert kinds.count("DequantizeLinear") == 2
