"""One source path: a file of any kind or a Hugging Face folder / index opens, with the same
tensor names and values, in ``report``, ``export``, ``scan``, ``qs.load`` and ``qs.figure``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from io_file_builders import write

import quantscope as qs
from quantscope.cli import main
from quantscope.io import (
    FileKind,
    TensorFileError,
    detect_format,
    kinds,
    list_tensors,
    load_for_analysis,
    load_tensor,
    register,
)
from quantscope.io.kinds import file_kind, unregister

QUERY = "encoder.layer.0.attention.self.query.weight"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_folder_and_index_list_the_same_names_as_the_shards(hf_folder):
    root, tensors = hf_folder
    for source in (root, root / "model.safetensors.index.json"):
        infos = list_tensors(source)
        assert sorted(i.name for i in infos) == sorted(tensors)
        assert all(i.format == "safetensors" for i in infos)
    x = load_tensor(root, QUERY)
    assert x.dtype == tensors[QUERY].dtype and np.array_equal(
        x.view(np.uint16), tensors[QUERY].view(np.uint16))
    y, info = load_for_analysis(root / "model.safetensors.index.json", QUERY)
    assert info.dtype == "bfloat16" and y.dtype == np.float32
    assert np.array_equal(y, tensors[QUERY].astype(np.float32))
    assert np.array_equal(qs.load(root, QUERY), y)


def test_folder_unknown_or_missing_name_lists_the_choices(hf_folder):
    root, _ = hf_folder
    with pytest.raises(TensorFileError, match="has no tensor named 'nope'; available: encoder"):
        load_for_analysis(root, "nope")
    with pytest.raises(TensorFileError, match="choose one with --tensor NAME"):
        qs.load(root)


def test_report_export_and_scan_open_a_folder_with_the_windows_numbers(hf_folder, capsys,
                                                                       tmp_path):
    root, tensors = hf_folder
    code, out, err = _run(capsys, "report", str(root), "--tensor", QUERY, "--json")
    assert code == 0, err
    by_folder = json.loads(out)
    shard = next(p for p in sorted(root.glob("*.safetensors"))
                 if QUERY in {i.name for i in list_tensors(p)})
    code, out, err = _run(capsys, "report", str(shard), "--tensor", QUERY, "--json")
    assert code == 0, err
    by_shard = json.loads(out)
    assert by_folder["schemes"] == by_shard["schemes"]
    x = tensors[QUERY].astype(np.float32)
    params = qs.choose_qparams(x, symmetric=True)
    assert by_folder["schemes"]["symmetric/tensor"]["sqnr_db"] == pytest.approx(
        qs.analyze(x, params).sqnr_db, rel=1e-9)
    out_path = tmp_path / "q.npz"
    code, out, err = _run(capsys, "export", str(root / "model.safetensors.index.json"),
                          "--tensor", QUERY, "-o", str(out_path))
    assert code == 0, err
    with np.load(out_path, allow_pickle=False) as saved:
        assert saved["codes"].shape == x.shape
    code, out, err = _run(capsys, "scan", str(root), "--json")
    assert code == 0, err
    rows = {r["name"] for r in json.loads(out)["tensors"]}
    assert rows == set(tensors)


def test_unknown_kind_names_every_supported_one(tmp_path):
    path = write(tmp_path / "weights.xyz", b"certainly not a tensor file at all")
    with pytest.raises(TensorFileError) as caught:
        list_tensors(path)
    message = str(caught.value)
    assert "unrecognised format: expected" in message
    for kind in kinds():
        assert kind.label in message
    assert "Hugging Face folder" in message


def test_a_registered_kind_opens_everywhere(tmp_path, capsys):
    """A parser added to the registry is reached by every entry point, sniffed before the
    kinds it names."""
    data = np.arange(12, dtype=np.float32).reshape(3, 4)

    def lister(path):
        from quantscope.io.tensor_info import TensorInfo

        return [TensorInfo("t", (3, 4), "float32", "F32", 48, "toy")]

    def loader(path, name=None, /, *, as_float32=False, progress=None):
        return data.copy(), lister(path)[0]

    kind = FileKind("toy", "toy file (.toy)", (".toy",), lambda p, h: h.startswith(b"TOY!"),
                    lister, loader)
    register(kind, before="npy")
    try:
        path = write(tmp_path / "m.toy", b"TOY!" + bytes(60))
        assert detect_format(path) == "toy" and file_kind(path) is kind
        assert np.array_equal(qs.load(path), data)
        code, out, err = _run(capsys, "report", str(path), "--json")
        assert code == 0, err
        assert json.loads(out)["schemes"]["symmetric/tensor"]["sqnr_db"] > 0
    finally:
        unregister("toy")
    assert "toy" not in {k.name for k in kinds()}
