"""PyTorch checkpoints read without torch: every value equals what ``torch.load`` gives back
(torch is the oracle here, never imported by quantscope)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from oracles import need
from quantscope.cli import main
from quantscope.io import (
    detect_format,
    list_tensors,
    load_for_analysis,
    load_tensor,
)
from quantscope.io.checkpoint import RawTensor, list_checkpoint

torch = need("torch")
pytestmark = [pytest.mark.filterwarnings("ignore:.*quantized tensor creation"),
              pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")]

DTYPES = ("float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
          "int8", "uint8", "int16", "int32", "int64", "bool")


def _bits(t) -> np.ndarray:
    """A torch tensor's values as NumPy sees quantscope's (bf16/fp8 compared bit for bit)."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy()
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return t.view(torch.uint8).numpy()
    return t.numpy()


def _same(ours: np.ndarray, theirs) -> bool:
    ours = np.asarray(ours)
    if ours.dtype.name == "bfloat16":
        ours = ours.view(np.int16)
    elif ours.dtype.name.startswith("float8"):
        ours = ours.view(np.uint8)
    expect = _bits(theirs)
    return ours.shape == expect.shape and ours.dtype == expect.dtype and np.array_equal(
        ours, expect, equal_nan=True)


def _tensor(dtype: str, shape=(7, 13), seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 40
    if dtype == "bool":
        return x > 0
    if dtype.startswith(("int", "uint")):
        info = torch.iinfo(getattr(torch, dtype))
        return x.clamp(info.min, info.max).to(getattr(torch, dtype))
    return x.to(getattr(torch, dtype))


@pytest.fixture(params=["zip", "legacy"])
def fmt(request):
    return request.param


def _save(obj, path, fmt: str):
    torch.save(obj, path, _use_new_zipfile_serialization=fmt == "zip")
    return path


def test_every_dtype_equals_torch_load(tmp_path, fmt):
    sd = {f"t_{d}": _tensor(d, seed=i) for i, d in enumerate(DTYPES)}
    path = _save(sd, tmp_path / "all.pt", fmt)
    assert detect_format(path) == "pytorch"
    # torch 2.13 cannot load back its own legacy fp8 storages (UntypedStorage has no dtype):
    # there the tensors saved are the reference
    back = torch.load(path, weights_only=True) if fmt == "zip" else sd
    infos = {i.name: i for i in list_tensors(path)}
    assert list(infos) == list(sd)
    compared = 0
    for name, t in back.items():
        assert infos[name].shape == tuple(t.shape) and infos[name].format == "pytorch"
        assert infos[name].file_dtype == str(t.dtype)
        x = load_tensor(path, name)
        assert _same(x, t), name
        y, info = load_for_analysis(path, name)
        assert y.dtype == np.float32 and y.flags.c_contiguous and info == infos[name]
        assert np.array_equal(y, t.to(torch.float32).numpy()), name
        compared += 2 * t.numel()
    assert compared == 2 * len(DTYPES) * 7 * 13


def test_views_offsets_strides_and_shared_storages(tmp_path, fmt):
    base = _tensor("float32", (12, 10), seed=3)
    half = _tensor("bfloat16", (6, 8), seed=4)
    sd = {"base": base, "t": base.t(), "rows": base[3:9], "cols": base[:, 2:7],
          "step": base[::3, 1::2], "narrow": base.narrow(1, 4, 3), "one": base[5, 5],
          "half_t": half.t(), "half_slice": half[1:, 3:], "flat": base.view(-1)[17:80],
          "expanded": base[0].expand(12, 10)}
    path = _save(sd, tmp_path / "views.pt", fmt)
    back = torch.load(path, weights_only=True)
    assert back["t"].untyped_storage().data_ptr() == back["base"].untyped_storage().data_ptr()
    for name, t in back.items():
        assert _same(load_tensor(path, name), t), name
        y, _ = load_for_analysis(path, name)
        assert np.array_equal(y, t.float().numpy()) and y.flags.c_contiguous, name
    mapped = load_tensor(path, "rows")
    assert fmt != "zip" or isinstance(mapped, np.memmap)  # in place, lazily, where stored


def test_quantized_tensors_give_codes_scales_and_torchs_dequantized_values(tmp_path, fmt):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(16, 40, generator=g) * 3
    scales = torch.rand(16, generator=g, dtype=torch.float64) * 0.05 + 0.001
    zps = torch.randint(-4, 5, (16,), generator=g)
    sd = {
        "qint8": torch.quantize_per_tensor(x, 0.0123456789, 3, torch.qint8),
        "quint8": torch.quantize_per_tensor(x, 1 / 3, 128, torch.quint8),
        "qint32": torch.quantize_per_tensor(x, 0.001, -7, torch.qint32),
        "chan0": torch.quantize_per_channel(x, scales, zps, 0, torch.qint8),
        "chan1": torch.quantize_per_channel(x.t().contiguous(), scales, zps + 100, 1,
                                            torch.quint8),
    }
    path = _save(sd, tmp_path / "q.pt", fmt)
    back = torch.load(path, weights_only=True)
    names = {i.name: i for i in list_tensors(path)}
    compared = 0
    for name, q in back.items():
        values, info = load_for_analysis(path, name)
        assert info.dtype == "float32" and str(q.dtype) in info.file_dtype
        assert np.array_equal(values, q.dequantize().numpy()), name  # bit for bit
        assert np.array_equal(load_tensor(path, name), q.dequantize().numpy())
        codes = load_tensor(path, f"{name}.int_repr")
        assert np.array_equal(codes, q.int_repr().numpy()) and codes.dtype == \
            q.int_repr().numpy().dtype
        if q.qscheme() == torch.per_tensor_affine:
            assert load_tensor(path, f"{name}.scale") == q.q_scale()
            assert load_tensor(path, f"{name}.zero_point") == q.q_zero_point()
        else:
            assert np.array_equal(load_tensor(path, f"{name}.scale"),
                                  q.q_per_channel_scales().numpy())
            assert np.array_equal(load_tensor(path, f"{name}.zero_point"),
                                  q.q_per_channel_zero_points().numpy())
            assert names[f"{name}.scale"].shape == (q.shape[q.q_per_channel_axis()],)
        compared += q.numel()
    assert compared == 5 * 16 * 40


def test_nested_dicts_lists_parameters_and_module_state_dicts(tmp_path, fmt):
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.LayerNorm(4),
                                torch.nn.Linear(4, 2).to(torch.bfloat16))
    checkpoint = {
        "model": model.state_dict(), "epoch": 7, "lr": 1e-3, "tag": b"\x00\xffbytes",
        "history": [torch.arange(3.0), (torch.ones(2, dtype=torch.int64), None)],
        "param": torch.nn.Parameter(torch.full((3,), 2.5)), "ids": {1, 2},
        "nested": {"a": {"b": {"c": torch.eye(3)}}},
        "tied": model[0].weight, "best": np.float64(0.93), "step": np.int64(7),
        "flag": np.bool_(True), "half": np.float16(0.5),
    }
    path = _save(checkpoint, tmp_path / "ckpt.pth", fmt)
    names = [i.name for i in list_tensors(path)]
    assert names == ["model.0.weight", "model.0.bias", "model.1.weight", "model.1.bias",
                     "model.2.weight", "model.2.bias", "history.0", "history.1.0", "param",
                     "nested.a.b.c", "tied"]
    back = torch.load(path, weights_only=False)  # NumPy scalars: torch's allowlist refuses
    flat = {**{f"model.{k}": v for k, v in back["model"].items()},
            "history.0": back["history"][0], "history.1.0": back["history"][1][0],
            "param": back["param"], "nested.a.b.c": back["nested"]["a"]["b"]["c"],
            "tied": back["tied"]}
    for name, t in flat.items():
        assert _same(load_tensor(path, name), t), name
    module_only = _save(model.state_dict(), tmp_path / "pytorch_model.bin", fmt)
    assert [i.name for i in list_tensors(module_only)] == list(model.state_dict())
    bare = _save(torch.arange(5, dtype=torch.int16), tmp_path / "bare.pt", fmt)
    assert [i.name for i in list_tensors(bare)] == ["bare"]
    assert _same(load_tensor(bare), torch.arange(5, dtype=torch.int16))


def test_compressed_members_stream_and_big_endian_is_read(tmp_path):
    """A zip rewritten with deflate (some tools do) is read through the member stream."""
    x = _tensor("float32", (50, 30), seed=8)
    sd = {"w": x, "v": x[::2, 5:]}
    src = _save(sd, tmp_path / "plain.pt", "zip")
    packed = tmp_path / "packed.pt"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, zin.read(item))
    for name in sd:
        assert _same(load_tensor(packed, name), sd[name])
        assert np.array_equal(load_for_analysis(packed, name)[0], sd[name].numpy())
    big = tmp_path / "big.pt"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(big, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item)
            if item.filename.endswith("byteorder"):
                data = b"big"
            elif "/data/" in item.filename:
                data = np.frombuffer(data, "<f4").astype(">f4").tobytes()
            zout.writestr(item.filename, data)
    assert np.array_equal(load_for_analysis(big, "v")[0], sd["v"].numpy())


def test_entry_points_open_a_checkpoint_and_a_folder_of_bin_shards(tmp_path, capsys):
    w = _tensor("bfloat16", (64, 48), seed=9)
    path = _save({"layer.weight": w, "layer.bias": _tensor("float32", (64,))},
                 tmp_path / "model.pt", "zip")
    assert main(["report", str(path), "--tensor", "layer.weight", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    import quantscope as qs

    x = w.float().numpy()
    expected = qs.analyze(x, qs.choose_qparams(x, symmetric=True)).sqnr_db
    assert doc["schemes"]["symmetric/tensor"]["sqnr_db"] == pytest.approx(expected, rel=1e-9)
    assert main(["scan", str(path), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["tensors"]}
    assert set(rows) == {"layer.weight", "layer.bias"}
    folder = tmp_path / "hf"
    folder.mkdir()
    _save({"a.weight": w}, folder / "pytorch_model-00001-of-00002.bin", "zip")
    _save({"b.weight": w.t().contiguous()}, folder / "pytorch_model-00002-of-00002.bin", "zip")
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {
        "a.weight": "pytorch_model-00001-of-00002.bin",
        "b.weight": "pytorch_model-00002-of-00002.bin"}}))
    assert [t.name for t in list_checkpoint(folder).tensors] == ["a.weight", "b.weight"]
    assert np.array_equal(qs.load(folder, "b.weight"), w.t().float().numpy())
    for t in list_checkpoint(folder).tensors:
        with RawTensor(t.file, t.info) as raw:
            assert raw.layout_ok  # contiguous and stored: read in place, a chunk at a time
            out = np.empty(t.info.size, np.int16)  # bf16 bits, as the scan reads them
            raw.read_into(0, out)
            assert np.array_equal(out.reshape(t.info.shape),
                                  _bits(w if t.name == "a.weight" else w.t()))


def _save_tar(obj, path) -> None:
    """``torch.save``'s pre-1.0 tar format (torch.load still reads it): the object graph with
    tensors as persistent ids, a storage table and a tensor table."""
    import io
    import pickle
    import struct
    import tarfile

    tensors: dict[int, object] = {}

    class Pickler(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, torch.Tensor):
                tensors[len(tensors)] = o
                return str(len(tensors) - 1)
            return None

    graph, storages, table = io.BytesIO(), io.BytesIO(), io.BytesIO()
    Pickler(graph, protocol=2).dump(obj)
    pickle.dump(len(tensors), storages, protocol=2)
    pickle.dump(len(tensors), table, protocol=2)
    kinds = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
             torch.int64: "Long", torch.int8: "Char", torch.uint8: "Byte"}
    for key, t in tensors.items():
        data = bytes(t.untyped_storage())
        kind = kinds[t.dtype]
        pickle.dump((key, "cpu", getattr(torch, f"{kind}Storage")), storages, protocol=2)
        storages.write(struct.pack("<q", len(data) // t.element_size()) + data)
        pickle.dump((key, key, getattr(torch, f"{kind}Tensor")), table, protocol=2)
        table.write(struct.pack("<ii", t.dim(), 0) + struct.pack(f"<{t.dim()}q", *t.shape)
                    + struct.pack(f"<{t.dim()}q", *t.stride())
                    + struct.pack("<q", t.storage_offset()))
    pickle.dump([], storages, protocol=2)
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, buf in (("storages", storages), ("tensors", table), ("pickle", graph)):
            info = tarfile.TarInfo(name)
            info.size = len(buf.getvalue())
            tar.addfile(info, io.BytesIO(buf.getvalue()))


def test_pre_1_0_tar_checkpoints_equal_torch_load(tmp_path):
    base = _tensor("float32", (9, 7), seed=11)
    sd = {"w": base, "t": base.t(), "rows": base[2:6, 1:], "half": _tensor("float16", (5,)),
          "ids": _tensor("int64", (4,)), "codes": _tensor("int8", (3, 3)),
          "nested": {"d": _tensor("float64", (2, 2)), "list": [_tensor("uint8", (6,))]}}
    path = tmp_path / "old.pt"
    _save_tar(sd, path)
    back = torch.load(path, weights_only=False)  # torch reads the tar format only unsafely
    flat = {k: v for k, v in back.items() if k != "nested"}
    flat.update({"nested.d": back["nested"]["d"], "nested.list.0": back["nested"]["list"][0]})
    assert detect_format(path) == "pytorch"
    assert [i.name for i in list_tensors(path)] == list(flat)
    for name, t in flat.items():
        assert _same(load_tensor(path, name), t), name
        assert np.array_equal(load_for_analysis(path, name)[0], t.float().numpy()), name
