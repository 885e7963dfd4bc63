"""Checkpoint indexes that name far more than they hold: the listing's memory, time and
warnings stay bounded by a constant, not by the count the index claims."""

from __future__ import annotations

import json

import numpy as np
from hostile_support import assert_one_line_error, record, run_isolated

SCAN = """
import sys
from quantscope.cli import main
sys.exit(main(["scan", {path!r}, "--no-progress"]))
"""


def _index(folder, weight_map: dict[str, str]) -> None:
    from safetensors.numpy import save_file

    save_file({"real.weight": np.ones((4, 8), np.float32)}, str(folder / "x.safetensors"))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "real.weight": "x.safetensors", **weight_map}}))


def test_index_naming_many_tensors_a_shard_lacks_warns_in_a_few_lines(tmp_path):
    count = 200_000
    _index(tmp_path, {f"model.layers.{i}.w": "x.safetensors" for i in range(count)})
    outcome = run_isolated(SCAN.format(path=str(tmp_path)), timeout=60)
    assert outcome.code == 1, outcome.describe()
    lines = outcome.err.splitlines()
    assert "Traceback" not in outcome.err
    assert len(lines) <= 22, len(lines)
    assert f"names {count} tensor(s) that shard 'x.safetensors' does not hold" in lines[0]
    assert lines[-1].startswith("quantscope: warning: ... and ")
    assert "real.weight" in outcome.out and "could not read 1000:" in outcome.out
    assert outcome.peak_rss < 600 << 20, outcome.describe()
    record(refused=False)


def test_index_naming_a_million_shards_is_refused_at_once(tmp_path):
    _index(tmp_path, {f"l.{i}": f"shard-{i}.safetensors" for i in range(20_000)})
    outcome = run_isolated(SCAN.format(path=str(tmp_path)), timeout=60)
    assert_one_line_error(outcome.code, outcome.out, outcome.err,
                          "names 20,001 shard files; an index of more than 10,000 is refused")
    record(refused=True)


def test_missing_shards_are_one_warning(tmp_path):
    _index(tmp_path, {f"l.{i}": f"shard-{i}.safetensors" for i in range(3000)})
    outcome = run_isolated(SCAN.format(path=str(tmp_path)), timeout=60)
    assert outcome.code == 1, outcome.describe()
    lines = outcome.err.splitlines()
    assert lines[0] == (f"quantscope: warning: {tmp_path}/model.safetensors.index.json: names "
                        "3,000 shard(s) (e.g. 'shard-0.safetensors'), which do not exist"), lines[0]
    assert len(lines) <= 22, len(lines)
    record(refused=False)


def test_formats_scan_reads_each_header_once_and_the_same_values(tmp_path, monkeypatch):
    """The engine's path of a scan (``--formats``) located each tensor by loading it by name,
    which validated the whole header again: quadratic in the tensors of a file."""
    import dataclasses

    import ml_dtypes
    from safetensors.numpy import save_file

    import quantscope.io.safetensors as st
    from quantscope.io import load_for_analysis
    from quantscope.io.checkpoint import list_checkpoint
    from quantscope.state import Settings
    from quantscope.state.formats import best_formats
    from quantscope.state.model_scan import OK, ModelScan, channel_axis, model_rows

    rng = np.random.default_rng(3)
    tensors = {f"l.{i}.weight": rng.standard_normal((8, 64)).astype(
        ml_dtypes.bfloat16 if i % 2 else np.float32) for i in range(40)}
    path = tmp_path / "m.safetensors"
    save_file(tensors, str(path))
    rows = model_rows(list_checkpoint(path))
    reads = []
    real = st.read_header
    monkeypatch.setattr(st, "read_header", lambda p: reads.append(p) or real(p))
    done = ModelScan(rows, Settings(), formats=True, workers=2).run()
    assert len(reads) <= 1, len(reads)
    assert [r.status for r in done] == [OK] * 40
    for row in done[:6]:
        x, _ = load_for_analysis(path, row.name)
        axis = channel_axis(row, None)
        at = dataclasses.replace(Settings(), axis=axis)
        want = best_formats(x, at, per_channel=axis is not None)
        assert row.formats == want, row.name
    record(refused=False)
