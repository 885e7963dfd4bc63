"""ONNX models built to hurt: external data outside the model's folder (``..``, absolute
paths, symlinks), offsets and lengths past the data file, dims that lie about the bytes
present, QDQ parameters whose shapes do not fit. Each gives one ``TensorFileError`` naming the
model; nothing outside the folder is read, memory and time stay bounded."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hostile_support import bounded

from oracles import need
from quantscope.io import TensorFileError, list_tensors, load_for_analysis

onnx = need("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _save(path, inits, nodes=()):
    graph = helper.make_graph(list(nodes), "g", [], [], initializer=list(inits))
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]),
                    str(path))
    return path


def _external(name: str, location: str, *, dims=(4,), offset=0, length=16):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(dims))
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)),
                       ("length", str(length))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def _refused(path, *fragments: str) -> None:
    for call in (lambda: list_tensors(path), lambda: load_for_analysis(path, "w")):
        with bounded(limit=64 << 20, seconds=20), pytest.raises(TensorFileError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith(os.fspath(path)) and "\n" not in message, message
        for fragment in fragments:
            assert fragment in message, message


@pytest.fixture
def model_dir(tmp_path):
    inside = tmp_path / "model"
    inside.mkdir()
    secret = tmp_path / "secret.bin"  # readable, and outside the model's folder
    secret.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    (inside / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    return inside, secret


@pytest.mark.parametrize(("location", "fragment"), [
    ("../secret.bin", "is not a file in the model's folder"),
    ("sub/../../secret.bin", "is not a file in the model's folder"),
    ("{secret}", "is not a file in the model's folder"),
    ("..\\secret.bin", "is not a file in the model's folder"),
    ("", "is not a file in the model's folder"),
    ("link.bin", "leads outside the model's folder (a symlink)"),
    ("missing.bin", "does not exist"),
])
def test_external_data_outside_the_folder_is_refused(model_dir, location, fragment):
    inside, secret = model_dir
    (inside / "link.bin").symlink_to(secret)
    path = _save(inside / "m.onnx", [_external("w", location.format(secret=secret))])
    _refused(path, fragment)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"offset": 8}, "past the end of its 16-byte file"),
    ({"length": 12}, "says 12 bytes at offset 0; dims (4,) need 16"),
    ({"offset": -4}, "says 16 bytes at offset -4"),
    ({"dims": (2**40, 2**40), "length": 2**82}, "to 4835703278458516698824704, past the end"),
])
def test_external_offsets_and_lengths_that_lie_are_refused(model_dir, kwargs, fragment):
    inside, _ = model_dir
    _refused(_save(inside / "m.onnx", [_external("w", "w.bin", **kwargs)]), fragment)


def test_dims_that_lie_about_the_data_are_refused(tmp_path):
    raw = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1000, 1000],
                      raw_data=bytes(16))
    _refused(_save(tmp_path / "raw.onnx", [raw]), "need 4000000 bytes but raw_data holds 16")
    typed = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**31, 2**31],
                        float_data=[1.0, 2.0])
    _refused(_save(tmp_path / "typed.onnx", [typed]), "values but the model holds 2")
    negative = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-1, 4])
    _refused(_save(tmp_path / "neg.onnx", [negative]), "has dims (-1, 4)")


@pytest.mark.parametrize(("scale", "zp", "attrs", "fragment"), [
    (np.ones(5, np.float32), None, {"axis": 0}, "scale has shape (5,) but codes (8, 6)"),
    (np.ones(8, np.float32), None, {"axis": 2}, "axis 2 is out of range"),
    (np.ones((8, 2), np.float32), None, {"axis": 1, "block_size": 2},
     "scale has shape (8, 2) but codes (8, 6) along axis 1 need (8, 3)"),
    (np.float32(0.1), np.int16(3), {}, "zero point (INT16 ()) does not match"),
    (np.int8(1), None, {}, "scale is INT8, not a float type"),
])
def test_qdq_parameters_that_do_not_fit_are_refused(tmp_path, scale, zp, attrs, fragment):
    inits = [numpy_helper.from_array(np.zeros((8, 6), np.int8), "w"),
             numpy_helper.from_array(np.asarray(scale), "s")]
    inputs = ["w", "s"]
    if zp is not None:
        inits.append(numpy_helper.from_array(np.asarray(zp), "z"))
        inputs.append("z")
    node = helper.make_node("DequantizeLinear", inputs, ["w_dq"], **attrs)
    _refused(_save(tmp_path / "qdq.onnx", inits, [node]), fragment)


def test_files_that_are_no_model_are_refused(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff" * 64)
    _refused(garbage, "is not a valid ONNX model")
    empty_graph = tmp_path / "nothing.onnx"
    empty_graph.write_bytes(onnx.ModelProto().SerializeToString() or b"\x08\x07")
    _refused(empty_graph, "ONNX model")


def test_names_that_are_not_utf8_are_escaped_not_fatal(tmp_path):
    """proto2 hands back bytes for a string that is not UTF-8: the name is shown escaped."""
    init = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w~~")
    path = _save(tmp_path / "names.onnx", [init])
    path.write_bytes(path.read_bytes().replace(b"~~", b"\xff\xfe"))
    with bounded(limit=64 << 20, seconds=20):
        names = [i.name for i in list_tensors(path)]
        assert names == ["w\\xff\\xfe"]
        assert load_for_analysis(path, names[0])[0].tolist() == [0, 1, 2, 3]
    node = helper.make_node("DequantizeLinear", ["w~~", "w~~"], ["o~~"])
    path = _save(tmp_path / "node.onnx", [init], [node])
    path.write_bytes(path.read_bytes().replace(b"~~", b"\xff\xfe"))
    with pytest.raises(TensorFileError, match=r"DequantizeLinear 'o\\\\xff\\\\xfe': its input is "
                                              "FLOAT, not quantized codes"):
        list_tensors(path)
