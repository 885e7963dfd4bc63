"""The model scan: listing whole checkpoints, rows equal to ``report``, bad shards, cancel."""

from __future__ import annotations

import dataclasses
import json
import os

import ml_dtypes
import numpy as np
import pytest
from io_file_builders import raw_safetensors, safetensors_bytes, write

import quantscope as qs
from quantscope.cli import main
from quantscope.core import analyze
from quantscope.errors import UserError
from quantscope.io import load_for_analysis
from quantscope.io.checkpoint import is_checkpoint, list_checkpoint
from quantscope.state import Settings, pane_params
from quantscope.state.model_scan import (
    ERROR,
    OK,
    PENDING,
    SKIPPED,
    ModelScan,
    layer_and_kind,
    model_rows,
    reset,
    scan_checkpoint,
)

REAL = "/work/shared/data/minilm/layer0_bf16.safetensors"
SQNR_DB = 10 * np.log10(1 + 2e-9)  # the prepared path's standard (tests/core/test_prepared.py)
RNG = np.random.default_rng(1717)


def _close(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= SQNR_DB


def _report(capsys, path, name: str) -> dict:
    assert main(["report", str(path), "--tensor", name, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["schemes"]


def _sharded(folder, index=True, shards=3) -> dict[str, np.ndarray]:
    """A Llama-like folder: layered weights in bf16/f16/f32 over shards, ids and a norm."""
    tensors = {"model.embed_tokens.weight": (RNG.standard_normal((50, 16)) * 0.1).astype(
        ml_dtypes.bfloat16)}
    for i in range(4):
        w = RNG.standard_normal((24, 16)) * 0.05
        w[RNG.integers(0, 24)] *= 150  # a loud channel: per-tensor suffers
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = w.astype(ml_dtypes.bfloat16)
        tensors[f"model.layers.{i}.mlp.down_proj.weight"] = (
            RNG.standard_normal((16, 24)) * 0.05).astype(np.float16 if i % 2 else np.float32)
        tensors[f"model.layers.{i}.input_layernorm.weight"] = np.ones(16, ml_dtypes.bfloat16)
    tensors["token_ids"] = np.arange(7, dtype=np.int64)
    names = list(tensors)
    split = np.array_split(np.arange(len(names)), shards)
    weight_map = {}
    for k, idx in enumerate(split, 1):
        file = f"model-{k:05d}-of-{shards:05d}.safetensors"
        write(folder / file, safetensors_bytes({names[i]: tensors[names[i]] for i in idx}))
        weight_map.update({names[i]: file for i in idx})
    if index:
        (folder / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {}, "weight_map": weight_map}))
    return tensors


def test_real_checkpoint_rows_equal_report_for_every_tensor(capsys):
    """The table's numbers are ``quantscope report``'s, tensor by tensor."""
    assert main(["scan", REAL, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["count"] == 16 and not doc["skipped"] and not doc["errors"]
    for row in doc["tensors"]:
        schemes = _report(capsys, REAL, row["name"])
        tensor, channel = schemes["symmetric/tensor"], schemes.get("symmetric/channel")
        assert _close(row["per_tensor_sqnr_db"], tensor["sqnr_db"])
        assert row["clipped_percent"] == 100 * tensor["clipped_fraction"]
        assert row["n_nonfinite"] == tensor["n_nonfinite"]
        if len(row["shape"]) >= 2:
            assert _close(row["per_channel_sqnr_db"], channel["sqnr_db"])
        x, _ = load_for_analysis(REAL, row["name"])
        assert row["max_abs"] == float(np.abs(x).max())


@pytest.mark.parametrize("via", ["index", "folder", "folder-no-index"])
def test_sharded_folder_lists_in_order_and_scans_every_tensor(tmp_path, via):
    tensors = _sharded(tmp_path, index=via != "folder-no-index")
    path = tmp_path / "model.safetensors.index.json" if via == "index" else tmp_path
    ckpt = list_checkpoint(path)
    assert is_checkpoint(path) and ckpt.sharded and not ckpt.problems
    rows = scan_checkpoint(ckpt)
    assert [r.name for r in rows] == list(tensors)  # shard order, then file order
    status = {r.name: r.status for r in rows}
    assert status["token_ids"] == SKIPPED
    assert all(s == OK for n, s in status.items() if n != "token_ids")
    for r in rows:
        if r.status != OK:
            continue
        x, _ = load_for_analysis(r.path, r.name)
        s = Settings()
        pt = analyze(x, pane_params(x, "symmetric/tensor", s))
        assert _close(r.figures.per_tensor_db, pt.sqnr_db)
        if x.ndim == 2:
            pc = analyze(x, pane_params(x, "symmetric/channel", s))
            assert _close(r.figures.per_channel_db, pc.sqnr_db)
    q = next(r for r in rows if r.kind == "self_attn.q_proj.weight")
    assert q.layer == 0 and q.figures.suggested == "per-channel"


def test_other_settings_go_through_the_panes_mapping(tmp_path):
    _sharded(tmp_path)
    for settings, axis in ((Settings(method="percentile", percentile=99.0), None),
                           (Settings(runtime="pytorch"), None), (Settings(bits=4), -1),
                           (Settings(rounding="half_away", bits=6), None)):
        rows = scan_checkpoint(list_checkpoint(tmp_path), settings, axis=axis)
        for r in rows:
            if r.status != OK:
                continue
            x, _ = load_for_analysis(r.path, r.name)
            pt = analyze(x, pane_params(x, "symmetric/tensor", settings))
            assert _close(r.figures.per_tensor_db, pt.sqnr_db), (settings, r.name)
            assert r.figures.clipped_fraction == pt.clipped_fraction
            if x.ndim == 2:
                assert r.axis == (0 if axis is None else axis)  # names say "weight"
                chan = dataclasses.replace(settings, axis=r.axis)
                pc = analyze(x, pane_params(x, "symmetric/channel", chan))
                assert _close(r.figures.per_channel_db, pc.sqnr_db), (settings, r.name)


def test_a_method_that_works_per_tensor_only_is_refused_once(tmp_path, capsys):
    """Entropy calibration has no per-channel form: a scan refuses it up front instead of
    listing every tensor of a readable file as one it "could not read"."""
    _sharded(tmp_path)
    with pytest.raises(UserError, match="entropy calibration is per tensor only"):
        qs.scan(tmp_path, method="entropy")
    with pytest.raises(SystemExit) as stop:
        main(["scan", str(tmp_path), "--method", "entropy"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'entropy'" in err and "could not read" not in err


def test_each_tensor_gets_the_axis_the_window_gives_it(tmp_path, capsys):
    """Weights split along their output channels, activations along their features (the
    names say which), others by shape; ``--axis`` overrides all; rows equal ``report``."""
    acts = RNG.standard_normal((64, 16)).astype(np.float32)
    acts[:, 3] *= 40  # one loud feature: per-feature scales fix it, per-token ones do not
    np.savez(tmp_path / "dump.npz", **{"block0_activations": acts,
                                       "proj.weight": RNG.standard_normal((8, 16)),
                                       "conv": RNG.standard_normal((4, 3, 3, 3))})
    path = tmp_path / "dump.npz"
    rows = {r.name: r for r in scan_checkpoint(list_checkpoint(path))}
    assert {n: r.axis for n, r in rows.items()} == {
        "block0_activations": -1, "proj.weight": 0, "conv": 0}
    for name, row in rows.items():
        report = _report(capsys, path, name)
        assert _close(row.figures.per_channel_db, report["symmetric/channel"]["sqnr_db"]), name
        assert _close(row.figures.per_tensor_db, report["symmetric/tensor"]["sqnr_db"]), name
    given = {r.name: r.axis for r in scan_checkpoint(list_checkpoint(path), axis=1)}
    assert given == {"block0_activations": 1, "proj.weight": 1, "conv": 1}
    assert main(["scan", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["scheme"]["per_channel_axis"] == "each tensor's own"
    assert {t["name"]: t["axis"] for t in doc["tensors"]}["block0_activations"] == -1


def test_layers_and_kinds_from_names():
    assert layer_and_kind("model.layers.12.mlp.up_proj.weight") == (12, "mlp.up_proj.weight")
    assert layer_and_kind("encoder.layer.3.attention.self.query.weight") == (
        3, "attention.self.query.weight")
    assert layer_and_kind("transformer.h.0.attn.c_attn.weight") == (0, "attn.c_attn.weight")
    assert layer_and_kind("blocks.7.norm1.bias") == (7, "norm1.bias")
    assert layer_and_kind("lm_head.weight") == (None, "lm_head.weight")
    assert layer_and_kind("heads.3.weight") == (None, "heads.3.weight")


def test_missing_truncated_outside_and_lying_shards_are_named_others_still_scan(tmp_path,
                                                                                  capsys):
    _sharded(tmp_path, shards=4)
    index = tmp_path / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    files = sorted(set(doc["weight_map"].values()))
    os.remove(tmp_path / files[0])  # missing
    second = tmp_path / files[1]
    second.write_bytes(second.read_bytes()[:-10])  # truncated
    third = next(n for n, f in doc["weight_map"].items() if f == files[2])
    doc["weight_map"][third] = "../elsewhere.safetensors"  # outside its folder
    index.write_text(json.dumps(doc))
    ckpt = list_checkpoint(index)
    rows = scan_checkpoint(ckpt)
    by_status = {s: [r for r in rows if r.status == s] for s in (OK, ERROR, SKIPPED)}
    assert by_status[OK] and len(rows) == len(doc["weight_map"])
    reasons = " | ".join(r.reason for r in by_status[ERROR])
    assert f"'{files[0]}', which does not exist" in reasons
    assert f"{second}: " in reasons and "truncated" in reasons
    assert "'../elsewhere.safetensors', which is not a plain file name" in reasons
    assert all(r.figures is None for r in by_status[ERROR])
    code = main(["scan", str(index), "--json"])
    out, err = capsys.readouterr()
    assert code == 1 and json.loads(out)["errors"] and "quantscope: warning:" in err
    assert "does not exist" in err and "Traceback" not in err


def test_a_lying_header_and_a_file_that_shrinks_after_listing(tmp_path):
    good = write(tmp_path / "a.safetensors", safetensors_bytes(
        {"w": RNG.standard_normal((8, 8)).astype(np.float32)}))
    lie = {"v": {"dtype": "F32", "shape": [8, 8], "data_offsets": [0, 200]}}
    write(tmp_path / "b.safetensors", raw_safetensors(lie, bytes(200)))
    ckpt = list_checkpoint(tmp_path)
    rows = {r.name: r for r in scan_checkpoint(ckpt)}
    assert rows["w"].status == OK
    bad = rows["b.safetensors"]
    assert bad.status == ERROR and "header lies" in bad.reason and "b.safetensors" in bad.reason
    listed = model_rows(list_checkpoint(good))
    good.write_bytes(good.read_bytes()[:-64])  # the data vanishes between listing and reading
    done = ModelScan(listed, Settings()).run()
    assert done[0].status == ERROR and "a.safetensors" in done[0].reason


def test_cancel_then_resume_scans_only_what_is_left(tmp_path):
    _sharded(tmp_path)
    rows = model_rows(list_checkpoint(tmp_path))
    seen = []
    partial = ModelScan(rows, Settings(), workers=1).run(
        on_row=seen.append, should_stop=lambda: len(seen) >= 3)
    assert 3 <= len([r for r in partial if r.status == OK]) < len(rows) - 1
    assert any(r.status == PENDING for r in partial)
    again = []
    full = ModelScan(partial, Settings()).run(on_row=again.append)
    assert {r.name for r in again} == {r.name for r in partial if r.status == PENDING}
    whole = scan_checkpoint(list_checkpoint(tmp_path))
    assert [(r.name, r.status, r.figures) for r in full] == [
        (r.name, r.status, r.figures) for r in whole]
    assert all(r.status in (PENDING, SKIPPED) for r in reset(full))


def test_progress_reaches_the_total_bytes(tmp_path):
    _sharded(tmp_path)
    rows = model_rows(list_checkpoint(tmp_path))
    seen = []
    ModelScan(rows, Settings()).run(on_progress=lambda d, t, n: seen.append((d, t)))
    total = sum(r.nbytes for r in rows if r.status == PENDING)
    assert seen and seen[-1][1] == total and max(d for d, _ in seen) == total


def test_folder_of_npy_and_an_npz(tmp_path):
    for i in (0, 2, 10):  # natural order: 0, 2, 10
        np.save(tmp_path / f"layer_{i}.npy", RNG.standard_normal((5, 6)).astype(np.float32))
    rows = scan_checkpoint(list_checkpoint(tmp_path), axis=-1)
    assert [r.name for r in rows] == ["layer_0", "layer_2", "layer_10"]
    assert [r.layer for r in rows] == [0, 2, 10] and all(r.status == OK for r in rows)
    np.savez_compressed(tmp_path / "acts.npz", a=RNG.standard_normal((4, 3)),
                        b=np.arange(3))
    rows = scan_checkpoint(list_checkpoint(tmp_path / "acts.npz"))
    assert [(r.name, r.status) for r in rows] == [("a", OK), ("b", SKIPPED)]
    assert not is_checkpoint(tmp_path / "layer_0.npy")
