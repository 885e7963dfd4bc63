"""One-op LiteRT models built in memory (flatbuffers, LiteRT's own schema) and run with its
interpreter: the reference kernels (``BUILTIN_REF``), the optimized builtin kernels
(``BUILTIN_WITHOUT_DEFAULT_DELEGATES``) or the default interpreter, whose XNNPACK delegate
takes the ops it supports (``BUILTIN``)."""

from __future__ import annotations

import numpy as np

from oracles import need

flatbuffers = need("flatbuffers")
litert = need("ai_edge_litert.interpreter")
schema = need("ai_edge_litert.schema_py_generated")
calibration = need("ai_edge_litert._pywrap_tensorflow_lite_calibration_wrapper")

RESOLVERS = {"reference": "BUILTIN_REF", "builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
             "xnnpack": "BUILTIN"}


class _Graph:
    def __init__(self) -> None:
        self.buffers = [schema.BufferT()]
        self.tensors: list = []

    def tensor(self, name, shape, ttype, scale=None, zp=None, data=None, axis=0) -> int:
        t = schema.TensorT()
        t.name, t.shape, t.type, t.buffer = name, list(shape), ttype, 0
        if data is not None:
            buf = schema.BufferT()
            buf.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
            self.buffers.append(buf)
            t.buffer = len(self.buffers) - 1
        if scale is not None:
            q = schema.QuantizationParametersT()
            q.scale = [float(v) for v in np.atleast_1d(scale)]
            q.zeroPoint = [int(v) for v in np.atleast_1d(zp)]
            q.quantizedDimension = axis
            t.quantization = q
        self.tensors.append(t)
        return len(self.tensors) - 1

    def model(self, op_code: int, version: int, inputs, outputs, options_type=None,
              options=None) -> bytes:
        graph = schema.SubGraphT()
        graph.tensors = self.tensors
        graph.inputs, graph.outputs = [inputs[0]], list(outputs)
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = 0, list(inputs), list(outputs)
        if options_type is not None:
            op.builtinOptionsType, op.builtinOptions = options_type, options
        graph.operators = [op]
        code = schema.OperatorCodeT()
        code.builtinCode = code.deprecatedBuiltinCode = op_code
        code.version = version
        model = schema.ModelT()
        model.version, model.operatorCodes, model.subgraphs = 3, [code], [graph]
        model.buffers = self.buffers
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())

    def run(self, op_code: int, version: int, inputs, outputs, options_type, options, feed,
            resolver: str) -> np.ndarray:
        content = self.model(op_code, version, inputs, outputs, options_type, options)
        kind = getattr(litert.OpResolverType, RESOLVERS[resolver])
        interp = litert.Interpreter(model_content=content, experimental_op_resolver_type=kind)
        interp.allocate_tensors()
        interp.set_tensor(interp.get_input_details()[0]["index"], feed)
        interp.invoke()
        return interp.get_tensor(interp.get_output_details()[0]["index"])


def quantize(x: np.ndarray, scale: float, zp: int, resolver: str) -> np.ndarray:
    """LiteRT's QUANTIZE of float32 ``x`` to int8 with one scale and zero point."""
    g = _Graph()
    tt = schema.TensorType
    i = g.tensor("x", x.shape, tt.FLOAT32)
    o = g.tensor("q", x.shape, tt.INT8, np.float32(scale), zp)
    return g.run(schema.BuiltinOperator.QUANTIZE, 1, [i], [o], None, None,
                 np.ascontiguousarray(x, np.float32), resolver)


def fully_connected(a_q, w_nk, sa, za, sb, so, zo, bias, resolver: str) -> np.ndarray:
    """LiteRT's int8 FULLY_CONNECTED: activations ``a_q`` [M, K] (scale ``sa``, zero point
    ``za``), per-channel weights ``w_nk`` [N, K] (scales ``sb``), int32 bias, output scale
    ``so`` and zero point ``zo``."""
    g = _Graph()
    tt = schema.TensorType
    n, k = w_nk.shape
    zeros = np.zeros(np.size(sb), np.int64)
    i = g.tensor("in", a_q.shape, tt.INT8, sa, za)
    w = g.tensor("w", (n, k), tt.INT8, sb, zeros, w_nk.astype(np.int8))
    b = g.tensor("b", (n,), tt.INT32, (np.float32(sa) * sb).astype(np.float32), zeros,
                 bias.astype(np.int32))
    o = g.tensor("out", (a_q.shape[0], n), tt.INT8, so, zo)
    return g.run(schema.BuiltinOperator.FULLY_CONNECTED, 4, [i, w, b], [o],
                 schema.BuiltinOptions.FullyConnectedOptions,
                 schema.FullyConnectedOptionsT(), a_q, resolver)


def quantizer(x: np.ndarray, w: np.ndarray) -> dict:
    """LiteRT's own post-training quantizer (its calibration wrapper, as
    ``tf.lite.TFLiteConverter`` with a representative dataset uses it) on a float
    FULLY_CONNECTED model with input ``x`` [M, K] (calibrated on ``x`` itself) and weights
    ``w`` [N, K]. Returns the int8 input's scale and zero point and the weights' per-channel
    scales and codes."""
    g = _Graph()
    tt = schema.TensorType
    i = g.tensor("in", x.shape, tt.FLOAT32)
    wi = g.tensor("w", w.shape, tt.FLOAT32, data=w.astype(np.float32))
    bi = g.tensor("b", (w.shape[0],), tt.FLOAT32, data=np.zeros(w.shape[0], np.float32))
    o = g.tensor("out", (x.shape[0], w.shape[0]), tt.FLOAT32)
    content = g.model(schema.BuiltinOperator.FULLY_CONNECTED, 1, [i, wi, bi], [o],
                      schema.BuiltinOptions.FullyConnectedOptions,
                      schema.FullyConnectedOptionsT())
    cal = calibration.CalibrationWrapper(content, [], [])
    cal.Prepare()
    cal.FeedTensor([np.ascontiguousarray(x, np.float32)])
    f32, i8, i32 = (np.dtype(t).num for t in (np.float32, np.int8, np.int32))
    out = cal.QuantizeModel(f32, f32, False, i8, i32, False, False)
    model = schema.ModelT.InitFromPackedBuf(out, 0)
    tensors = {t.name.decode(): t for t in model.subgraphs[0].tensors}
    xq, wq = tensors["in_int8"].quantization, tensors["w"]
    codes = np.frombuffer(bytes(model.buffers[wq.buffer].data), np.int8).reshape(w.shape)
    return {"scale": np.float32(xq.scale[0]), "zero_point": int(xq.zeroPoint[0]),
            "w_scale": np.asarray(wq.quantization.scale, np.float32), "w_codes": codes}
