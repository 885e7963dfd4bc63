"""The controller's cache of rewritten asserts (:mod:`rewrite_cache`) is the one pytest's
import hook reads: a run on a file whose cache was written ahead rewrites nothing, and its
failing assert still explains itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rewrite_cache import write_ahead

TEST = """
def test_sums():
    left, right = 2 + 2, 5
    assert left == right
"""


def _cached(folder: Path) -> list[Path]:
    return sorted((folder / "__pycache__").glob("test_sums*-pytest-*.pyc"))


def test_a_cache_written_ahead_is_read_not_rewritten(tmp_path, request, monkeypatch):
    (tmp_path / "test_sums.py").write_text(TEST)
    (tmp_path / "helper.py").write_text("X = 1\n")  # not a test file: not rewritten
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # as PYTHONDONTWRITEBYTECODE=1
    assert write_ahead(request.config, [tmp_path]) == 0  # nor would the import hook write
    assert not (tmp_path / "__pycache__").exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert write_ahead(request.config, [tmp_path]) == 1
    [pyc] = _cached(tmp_path)
    assert [p.name for p in (tmp_path / "__pycache__").iterdir()] == [pyc.name]
    assert write_ahead(request.config, [tmp_path]) == 0  # already there
    before = pyc.stat().st_mtime_ns, pyc.read_bytes()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:randomly", str(tmp_path / "test_sums.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "assert 4 == 5" in run.stdout, run.stdout  # the rewritten assert's explanation
    assert _cached(tmp_path) == [pyc]
    assert (pyc.stat().st_mtime_ns, pyc.read_bytes()) == before  # read, not written again
