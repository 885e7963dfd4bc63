"""An ONNX model with some float weights replaced by int8 codes and a DequantizeLinear each:
the QDQ form ONNX Runtime (and TensorRT) read as weight quantization.

Each weight to quantize is an initializer of the graph. It is replaced by three initializers --
``NAME_quantized`` (int8 codes), ``NAME_scale`` (float32, one per tensor or per channel) and
``NAME_zero_point`` (int8) -- and one ``DequantizeLinear`` node whose output keeps the old name,
so every consumer reads the same tensor as before, now ``(code - zero_point) * scale`` as ONNX
Runtime computes it. The codes and scales are the caller's (quantscope's own), never recomputed
here, so the model holds exactly the values quantscope reports.

Needs the ``onnx`` package (``pip install quantscope[onnx]``); it is imported only here, and
only when a model is written. ``onnx.load`` parses protobuf: no code in the file runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from quantscope.errors import UserError
from quantscope.io.tensor_info import TensorFileError
from quantscope.io.writing import write_atomically

#: Per-axis DequantizeLinear needs opset 13.
MIN_OPSET = 13


@dataclass(frozen=True)
class Int8Weight:
    """One weight's int8 codes, scale(s) and zero point(s), and the channel axis (None: per
    tensor)."""

    codes: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None


def _onnx():
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        raise UserError("writing an ONNX model needs the onnx package: pip install "
                        "'quantscope[onnx]'") from None
    return onnx, helper, numpy_helper


def initializers(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The float initializers of an ONNX model by name (its weights), as NumPy arrays."""
    onnx, _, numpy_helper = _onnx()
    model = _load(onnx, path)
    out = {}
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind == "f":
            out[init.name] = arr
    return out


def weight_axes(path: str | os.PathLike) -> dict[str, int]:
    """The output-channel axis of each initializer a MatMul, Gemm or Conv multiplies by: a
    MatMul's right operand ``[in, out]`` has it on the last axis, a Gemm's ``B`` on axis 0
    with ``transB`` and 1 without, a Conv's weight ``[out, in, k...]`` on axis 0."""
    onnx, helper, _ = _onnx()
    model = _load(onnx, path)
    names = {init.name for init in model.graph.initializer}
    axes: dict[str, int] = {}
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "MatMul" and len(node.input) > 1 and node.input[1] in names:
            axes[node.input[1]] = -1
        elif node.op_type == "Gemm" and len(node.input) > 1 and node.input[1] in names:
            axes[node.input[1]] = 0 if attrs.get("transB", 0) else 1
        elif node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in names:
            axes[node.input[1]] = 0
    return axes


def _load(onnx, path: str | os.PathLike):
    try:
        return onnx.load(os.fspath(path))
    except (OSError, ValueError, onnx.onnx_cpp2py_export.checker.ValidationError) as exc:
        raise TensorFileError(f"{path}: not a readable ONNX model ({exc})") from None
    except Exception as exc:  # protobuf's DecodeError has no common base to name here
        raise TensorFileError(f"{path}: not a readable ONNX model ({exc})") from None


def write_qdq(source: str | os.PathLike, weights: dict[str, Int8Weight],
              out: str | os.PathLike, option: str = "--onnx-out") -> list[str]:
    """Write ``source`` with each weight of ``weights`` in QDQ form to ``out``.

    Returns the names replaced. Raises UserError for a name that is not an initializer, a
    shape that differs from it, or a model below opset 13 with a per-channel weight.
    """
    onnx, helper, numpy_helper = _onnx()
    model = _load(onnx, source)
    graph = model.graph
    by_name = {init.name: init for init in graph.initializer}
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                default=0)
    taken = {init.name for init in graph.initializer} | {
        o for node in graph.node for o in node.output}
    nodes, replaced = [], []
    for name, w in weights.items():
        init = by_name.get(name)
        if init is None:
            raise UserError(f"{name!r} is not an initializer of {source}")
        if tuple(init.dims) != w.codes.shape:
            raise UserError(f"{name}: the plan's shape {w.codes.shape} is not the model's "
                            f"{tuple(init.dims)}")
        if w.axis is not None and opset < MIN_OPSET:
            raise UserError(f"{source} uses opset {opset}; per-channel DequantizeLinear "
                            f"needs opset {MIN_OPSET}")
        names = [f"{name}_quantized", f"{name}_scale", f"{name}_zero_point"]
        if taken & set(names):
            raise UserError(f"{source} already has a tensor named like {names}")
        graph.initializer.remove(init)
        codes = np.ascontiguousarray(w.codes, np.int8)
        scale = np.asarray(w.scale, np.float32).reshape(-1 if w.axis is not None else ())
        zp = np.asarray(w.zero_point, np.int8).reshape(scale.shape)
        graph.initializer.extend([numpy_helper.from_array(codes, names[0]),
                                  numpy_helper.from_array(scale, names[1]),
                                  numpy_helper.from_array(zp, names[2])])
        attrs = {} if w.axis is None else {"axis": int(w.axis)}
        nodes.append(helper.make_node("DequantizeLinear", names, [name],
                                      name=f"{name}_DequantizeLinear", **attrs))
        replaced.append(name)
    for node in reversed(nodes):  # before every consumer: the graph stays topologically sorted
        graph.node.insert(0, node)
    onnx.checker.check_model(model)
    data = model.SerializeToString()
    write_atomically(out, lambda fh: fh.write(data), option)
    return replaced
