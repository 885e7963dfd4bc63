"""Fuzzing the PyTorch and ONNX readers: valid files (made by torch and onnx) corrupted at
random -- a checkpoint's pickle rewritten inside a well-formed zip (so the zip's checksums do
not catch the damage first), a legacy checkpoint and an ONNX model byte for byte. Only a
``TensorFileError`` or a success may come out, and a success returns what the listing
promised, never more than a bounded multiple of the bytes the file holds."""

from __future__ import annotations

import io
import tempfile
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from oracles import need
from quantscope.io import TensorFileError, list_tensors, load_for_analysis, load_tensor

torch = need("torch")
onnx = need("onnx")
from onnx import helper, numpy_helper  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*quantized tensor creation")


def _torch_bytes(zip_format: bool) -> bytes:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 5, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sd = {"w": base.to(torch.bfloat16), "t": base.t(), "rows": base[2:5], "i": torch.arange(
            7, dtype=torch.int16), "q": torch.quantize_per_tensor(base, 0.05, 2, torch.qint8),
            "meta": {"epoch": 3, "name": "x", "lr": [1e-3, (0.9, 0.99)]}}
    buffer = io.BytesIO()
    torch.save(sd, buffer, _use_new_zipfile_serialization=zip_format)
    return buffer.getvalue()


def _onnx_bytes() -> bytes:
    w = np.linspace(-3, 3, 48, dtype=np.float32).reshape(6, 8)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w.astype(np.float16), "h"),
             numpy_helper.from_array(np.arange(48, dtype=np.int8).reshape(6, 8), "q"),
             numpy_helper.from_array(np.full(6, 0.1, np.float32), "s")]
    node = helper.make_node("DequantizeLinear", ["q", "s"], ["q_dq"], axis=0)
    graph = helper.make_graph([node], "g", [], [], initializer=inits)
    return helper.make_model(graph).SerializeToString()


BASES = {"torch_zip": _torch_bytes(True), "torch_legacy": _torch_bytes(False),
         "onnx": _onnx_bytes()}
SUFFIX = {"torch_zip": ".pt", "torch_legacy": ".pt", "onnx": ".onnx"}

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 2**20), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 2**20)),
    st.tuples(st.just("insert"), st.integers(0, 2**20), st.binary(min_size=1, max_size=12)),
    st.tuples(st.just("delete"), st.integers(0, 2**20), st.integers(1, 12)),
)


def _mutate(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for kind, pos, *rest in ops:
        if not buf:
            break
        if kind == "flip":
            buf[pos % len(buf)] ^= rest[0]
        elif kind == "truncate":
            del buf[pos % len(buf):]
        elif kind == "insert":
            at = pos % (len(buf) + 1)
            buf[at:at] = rest[0]
        else:
            at = pos % len(buf)
            del buf[at:at + rest[0]]
    return bytes(buf)


def _corrupt(base: str, ops) -> bytes:
    data = BASES[base]
    if base != "torch_zip":
        return _mutate(data, ops)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for item in zin.infolist():
            content = zin.read(item)
            if item.filename.endswith("data.pkl"):
                content = _mutate(content, ops)
            zout.writestr(item.filename, content)
    return out.getvalue()


def _exercise(path: Path, size: int) -> None:
    try:
        infos = list_tensors(path)
    except TensorFileError:
        return
    for info in infos:
        try:
            array = load_tensor(path, info.name)
        except TensorFileError:
            continue
        assert array.shape == info.shape and array.dtype.name == info.dtype
        assert array.nbytes <= 16 * 4 * size + 64  # views repeat storage at most 16 times
        np.asarray(array).tobytes()
        if info.size == 0:
            continue
        values, again = load_for_analysis(path, info.name)
        assert values.dtype == np.float32 and values.shape == info.shape and again == info


@pytest.mark.parametrize("base", list(BASES))
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(mutation, min_size=1, max_size=3))
@example(ops=[("insert", 15, b"\\\x00")])  # a protocol-0 string with a bad escape: no warning
def test_corrupted_model_files_raise_only_documented_errors(base, ops):
    corrupted = _corrupt(base, ops)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("error")
        path = Path(tmp) / f"fuzzed{SUFFIX[base]}"
        path.write_bytes(corrupted)
        _exercise(path, len(corrupted))


@pytest.mark.parametrize("base", list(BASES))
def test_unmodified_bases_load_completely(base, tmp_path):
    path = tmp_path / f"valid{SUFFIX[base]}"
    path.write_bytes(BASES[base])
    infos = list_tensors(path)
    assert len(infos) >= 4
    _exercise(path, len(BASES[base]))
