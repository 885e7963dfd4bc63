"""A command says so when Numba compiles the engine's loops (the first run on a machine: up to a
minute of silence otherwise), and says nothing when they load from the cache."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from quantscope.cli import main
from quantscope.core.kernels import compile_notice
from quantscope.core.schemes.quantize import COMPILED_MIN

pytestmark = pytest.mark.slow  # fresh interpreters: the last tier (tests/conftest.py)

_RUN_A_LOOP = """
import numpy as np
from quantscope.core.kernels.compile_notice import announce_compiles
from quantscope.core.kernels import direct_kernel
announce_compiles(lambda line: print("NOTICE", line))
announce_compiles(lambda line: print("SECOND", line))  # one listener per process
q, out = np.zeros(64, np.int8), np.zeros(64, np.float32)
for _ in range(2):
    direct_kernel.dequantize_range(q, 0, 64, np.float32(1), np.int32(0), out, False)
print("done")
"""


def _run(cache_dir) -> list[str]:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", _RUN_A_LOOP], capture_output=True, text=True,
                         check=True, env=env)
    return out.stdout.splitlines()


def test_the_line_appears_once_when_a_loop_compiles_and_not_when_it_loads(tmp_path):
    first = _run(tmp_path)  # an empty cache: the loop compiles
    assert first[0].startswith("NOTICE quantscope: compiling the engine's loops")
    assert str(tmp_path) in first[0] and first[-1] == "done" and len(first) == 2
    assert _run(tmp_path) == ["done"]  # loaded from the cache it just wrote: silent


def test_report_announces_only_where_a_compiled_loop_runs(tmp_path, monkeypatch, capsys):
    calls: list[str] = []
    monkeypatch.setattr(compile_notice, "announce_compiles", lambda: calls.append("called"))
    rng = np.random.default_rng(0)
    small, large = tmp_path / "small.npy", tmp_path / "large.npy"
    np.save(small, rng.standard_normal(COMPILED_MIN, dtype=np.float32))
    np.save(large, rng.standard_normal(COMPILED_MIN + 1, dtype=np.float32))
    assert main(["report", str(small)]) == 0 and calls == []
    assert main(["report", str(small), "--method", "percentile"]) == 0 and calls == ["called"]
    assert main(["report", str(large)]) == 0 and calls == ["called"] * 2
    capsys.readouterr()


_DEFAULT_NOTICE = """
import sys
import numpy as np
from quantscope.core.kernels.compile_notice import announce_compiles, set_verbosity
from quantscope.core.kernels import direct_kernel
set_verbosity(int(sys.argv[1]))
announce_compiles()
q, out = np.zeros(64, np.int8), np.zeros(64, np.float32)
direct_kernel.dequantize_range(q, 0, 64, np.float32(1), np.int32(0), out, False)
print("done")
"""


def test_a_pipe_hears_of_it_and_quiet_silences_it(tmp_path):
    """stderr is a pipe here, as in a notebook or under ``| tee``: the line still comes, on
    stderr only (stdout, what a script reads, stays clean); verbosity 0 (-q) silences it."""
    def run(level: int, cache) -> subprocess.CompletedProcess:
        env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
        return subprocess.run([sys.executable, "-c", _DEFAULT_NOTICE, str(level)],
                              capture_output=True, text=True, check=True, env=env)

    loud = run(1, tmp_path / "a")
    assert loud.stdout == "done\n"
    assert loud.stderr.startswith("quantscope: compiling the engine's loops")
    quiet = run(0, tmp_path / "b")  # its own empty cache: the loop compiles here too
    assert quiet.stdout == "done\n" and quiet.stderr == ""
