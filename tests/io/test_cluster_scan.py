"""The model scan on a real Dask cluster (a local scheduler and two worker processes on the
loopback): the same rows as the local scan, figure for figure, through lost workers,
unreadable shards and cancel; and the exact merge of a fused pass's partial results."""

from __future__ import annotations

import json
import os
import random
import signal
import threading

import ml_dtypes
import numpy as np
import pytest
from io_file_builders import safetensors_bytes, write

from quantscope.cli import main
from quantscope.core.stats import fused as fused_module
from quantscope.core.stats.fused import FusedPass, FusedRules, figures_of
from quantscope.errors import UserError
from quantscope.io.checkpoint import list_checkpoint
from quantscope.state import Settings
from quantscope.state.cluster_scan import ClusterScan, _error_of
from quantscope.state.model_scan import ModelScan, model_rows

RNG = np.random.default_rng(36)
#: Elements per fused-pass chunk in these tests (the local and the cluster scan alike), so the
#: "large" tensors below are three chunks of a few KB.
CHUNK = 4096
#: Task size: one chunk of a large tensor per task, a handful of small tensors per batch.
TASK = 8 << 10


# -- the exact merge, without a cluster -------------------------------------------------------

@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_partial_passes_merged_in_any_order_equal_one_pass(monkeypatch, dtype, axis):
    monkeypatch.setattr(fused_module, "CHUNK_ELEMENTS", 300)  # many chunks of a small tensor
    # (figures_of takes the module's default; the parts below are made the same way)
    x = RNG.standard_normal((97, 40)) * 0.05
    x[RNG.integers(0, 97), :] *= 300  # one loud row
    x[:, 7] *= 80  # and a loud column
    x[3, 5] = np.nan
    x = x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    rules = FusedRules(bits=6, rounding="half_away")
    local = figures_of(x, axis, rules)
    flat = np.ascontiguousarray(x).reshape(-1)
    owner = FusedPass(x.shape, dtype, axis, rules)
    assert len(owner.chunks) > 5 or axis is None  # per tensor only: the tensor is one row
    ids = list(range(len(owner.chunks)))
    random.Random(0).shuffle(ids)
    groups = [ids[i::3] for i in range(3)]  # three "workers", chunks out of order

    def worker(group, scales=None):
        p = FusedPass(x.shape, dtype, axis, rules)
        if scales is not None:
            p.use_second_scales(scales)
        for i in group:
            a, b = p.chunks[i]
            (p.first if scales is None else p.second)(i, flat[a:b].view(p.raw_dtype))
        return p.first_part(group) if scales is None else p.second_part(group)

    for part in reversed([worker(g) for g in groups]):
        owner.merge_first(part)
    if owner.needs_second_pass:
        owner.prepare_second()
        for part in [worker(g, owner.second_scales()) for g in groups]:
            owner.merge_second(part)
    assert owner.result() == local  # every figure, bit for bit


# -- on a cluster ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    # imported here, not at the top: every xdist worker collects this file, one runs it
    import distributed

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0")
    c = distributed.Client(cluster, set_as_default=False)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def _folder(folder, big=True):
    """A sharded Llama-like folder: small layered tensors and, with ``big``, tensors of several
    fused-pass chunks (bf16 rows, float32, channels on the last axis via an activation name)."""
    tensors = {}
    for i in range(6):
        w = RNG.standard_normal((48, 32)) * 0.05
        w[RNG.integers(0, 48)] *= 150
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = w.astype(ml_dtypes.bfloat16)
        tensors[f"model.layers.{i}.mlp.down_proj.weight"] = (
            RNG.standard_normal((32, 48)) * 0.05).astype(np.float16 if i % 2 else np.float32)
        tensors[f"model.layers.{i}.input_layernorm.weight"] = np.ones(32, ml_dtypes.bfloat16)
    if big:
        e = RNG.standard_normal((2 * CHUNK // 64 + 30, 64)).astype(np.float32) * 0.02
        e[5, :] = 3.0
        tensors["model.embed_tokens.weight"] = e.astype(ml_dtypes.bfloat16)
        tensors["lm_head.weight"] = e[::-1].copy()
        tensors["layer.0.mlp.activations"] = (e[:, ::-1] * 7).astype(ml_dtypes.bfloat16)
    tensors["token_ids"] = np.arange(7, dtype=np.int64)
    names = list(tensors)
    weight_map = {}
    for k, idx in enumerate(np.array_split(np.arange(len(names)), 3), 1):
        file = f"model-{k:05d}-of-00003.safetensors"
        write(folder / file, safetensors_bytes({names[i]: tensors[names[i]] for i in idx}))
        weight_map.update({names[i]: file for i in idx})
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    return _folder(tmp_path_factory.mktemp("sharded"))


@pytest.mark.parametrize("settings", [Settings(), Settings(bits=4, rounding="half_away"),
                                      Settings(method="percentile")])
def test_cluster_scan_equals_local_scan_figure_for_figure(client, sharded, settings):
    rows = model_rows(list_checkpoint(sharded))
    # direct_max=0: tensors small enough for a test are read by the fused pass too (by default
    # they take report's direct pass), so its chunk tasks run on the cluster
    local = ModelScan(rows, settings, chunk_elements=CHUNK, direct_max=0).run()
    seen = []
    scan = ClusterScan(rows, settings, client, task_bytes=TASK, chunk_elements=CHUNK,
                       direct_max=0)
    remote = scan.run(on_row=lambda r: seen.append(r.index))
    assert remote == local
    assert sorted(seen) == sorted(r.index for r in rows if r.status == "pending")
    big = [r for r in remote if r.nbytes > TASK]
    assert len(big) == 3 and all(r.status == "ok" for r in big)
    if settings.method == "minmax":  # the fused pass's settings: large tensors in chunk tasks
        assert scan.tasks >= 3 * len(big)


def test_formats_on_the_cluster_equal_local(client, tmp_path):
    rows = model_rows(list_checkpoint(_folder(tmp_path, big=False)))
    local = ModelScan(rows, Settings(), formats=True).run()
    assert ClusterScan(rows, Settings(), client, formats=True).run() == local


def test_a_worker_killed_mid_scan_loses_no_row_and_repeats_none(client, sharded):
    rows = model_rows(list_checkpoint(sharded))
    local = ModelScan(rows, Settings(), chunk_elements=CHUNK).run()
    pids = client.run(os.getpid)
    seen: list[int] = []
    killed = threading.Event()

    def on_row(row):
        seen.append(row.index)
        if not killed.is_set():
            killed.set()
            os.kill(next(iter(pids.values())), signal.SIGKILL)

    remote = ClusterScan(rows, Settings(), client, task_bytes=TASK,
                         chunk_elements=CHUNK).run(on_row=on_row)
    assert killed.is_set()
    assert remote == local
    assert sorted(seen) == sorted(set(seen))  # each row arrived once
    assert len(seen) == sum(r.status == "pending" for r in rows)
    client.wait_for_workers(2, timeout=60)  # the nanny restarts the worker for later tests


class _LostThenComputed:
    """A future whose result was lost with its worker after ``as_completed`` handed it over:
    "lost" until waited on, then finished again (as distributed's ``Future`` is)."""

    status = "lost"

    def exception(self):
        self.status = "finished"
        return None


class _LostAfterTheWait:
    """A future finished when ``as_completed`` handed it over and at the first wait, whose
    result is lost with its worker just after that wait returns: "lost" when its status is
    read then, finished again at the next wait."""

    def __init__(self) -> None:
        self.waits = 0

    @property
    def status(self) -> str:
        return "lost" if self.waits == 1 else "finished"

    def exception(self):
        self.waits += 1
        return None


class _Failed:
    status = "error"

    def exception(self):
        return ValueError("bad shard")


def test_a_result_lost_after_it_finished_is_waited_for_not_reported_as_a_failure():
    assert _error_of(_LostThenComputed()) is None
    assert _error_of(_LostAfterTheWait()) is None
    assert _error_of(_Failed()) == "failed on the cluster: ValueError: bad shard"


def test_an_unreadable_shard_is_reported_for_its_tensors_the_rest_scans(client, tmp_path):
    folder = _folder(tmp_path, big=False)
    rows = model_rows(list_checkpoint(folder))
    shard = folder / "model-00002-of-00003.safetensors"
    shard.write_bytes(shard.read_bytes()[:100])  # truncated after listing
    remote = ClusterScan(rows, Settings(), client, task_bytes=1).run()
    in_shard = [r for r in remote if r.file == shard.name and r.info is not None
                and r.info.is_floating]
    assert in_shard and all(r.status == "error" and shard.name in r.reason for r in in_shard)
    others = [r for r in remote if r.file != shard.name and r.info is not None
              and r.info.is_floating and r.info.ndim]
    assert others and all(r.status == "ok" for r in others)


def test_cancel_stops_the_tasks_and_keeps_what_finished(client, sharded):
    rows = model_rows(list_checkpoint(sharded))
    done: list[int] = []
    remote = ClusterScan(rows, Settings(), client, task_bytes=1, chunk_elements=CHUNK).run(
        on_row=lambda r: done.append(r.index), should_stop=lambda: len(done) >= 2)
    assert 2 <= sum(r.status == "ok" for r in remote) < sum(r.status == "pending" for r in rows)
    assert any(r.status == "pending" for r in remote)


def test_cli_scan_on_the_cluster_prints_the_local_json(capsys, sharded, tmp_path):
    assert main(["scan", str(sharded), "--json", "--no-progress"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main(["scan", str(sharded), "--json", "--no-progress", "--dask", "local:2"]) == 0
    assert json.loads(capsys.readouterr().out) == local


def test_cli_scans_several_models_into_one_table_grouped_by_model(capsys, tmp_path):
    zoo = tmp_path / "zoo"
    for name in ("alpha", "beta"):
        (zoo / name).mkdir(parents=True)
        _folder(zoo / name, big=False)
    assert main(["scan", str(zoo), "--json", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [m["source"] for m in doc["models"]] == [str(zoo / "alpha"), str(zoo / "beta")]
    assert all(m["count"] == 18 for m in doc["models"])
    assert main(["scan", str(zoo / "alpha"), str(zoo / "beta"), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert text.index("alpha") < text.index("beta")


def test_a_bad_dask_address_is_one_clear_error(capsys, sharded):
    assert main(["scan", str(sharded), "--dask", "local:zero"]) == 2
    assert "local:N" in capsys.readouterr().err


def test_qs_scan_with_a_client_equals_the_local_table(client, sharded):
    import quantscope as qs

    assert qs.scan(sharded, client=client).to_json() == qs.scan(sharded).to_json()
    with pytest.raises(UserError, match="Dask cluster scans files"):
        qs.scan({"w": np.ones((4, 4), np.float32)}, client=client)


def test_a_quantized_checkpoint_is_not_scanned_on_a_cluster_nor_among_others(capsys, sharded,
                                                                             tmp_path):
    from stored_builders import compress_checkpoint

    original = tmp_path / "original.safetensors"
    write(original, safetensors_bytes({"layer.0.dense.weight": (
        RNG.standard_normal((16, 128)) * 0.05).astype(np.float32)}))
    quantized = compress_checkpoint(original, tmp_path / "w4")
    assert main(["scan", str(quantized), "--dask", "local:1"]) == 2
    assert "drop --dask" in capsys.readouterr().err
    assert main(["scan", str(sharded), str(quantized)]) == 2
    assert "is a quantized checkpoint: scan it on its own" in capsys.readouterr().err
