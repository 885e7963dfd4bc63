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
