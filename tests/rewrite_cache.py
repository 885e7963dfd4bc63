"""Rewrite the test files' asserts once, before the xdist workers start, instead of once per
worker.

pytest rewrites each test module's ``assert`` statements when it imports it and caches the
result in ``__pycache__`` (a ``*-pytest-<version>.pyc``). A fresh clone (CI) has no such cache,
and every xdist worker collects every test file, so all the workers rewrote all the files at
the same time, each writing the same cache: measured on 2 cores, a worker's collection took
13.5 s of CPU without the cache and 7.1 s with it, three workers each paying the difference.
Here the controller writes the cache first (about 4.5 s of CPU for the 187 files), and the
workers read it.

It goes through the same functions the import hook uses (``_pytest.assertion.rewrite``), so
the cached code is what the hook itself would write; those are pytest's private functions,
and where a pytest release lacks them nothing is written and the workers rewrite as before.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


def _rewritten_files(config: pytest.Config, roots: list[Path]) -> list[Path]:
    """The test files and conftests under ``roots``."""
    files: set[Path] = set()
    for root in roots:
        root = root if root.is_absolute() else Path(config.invocation_params.dir, root)
        found = [root] if root.is_file() else root.rglob("*.py") if root.is_dir() else []
        files.update(f.resolve() for f in found
                     if f.name.startswith("test_") or f.name == "conftest.py")
    return sorted(files)


def write_ahead(config: pytest.Config, roots: list[Path] | None = None) -> int:
    """Write pytest's rewritten-assert cache for every test file under ``roots`` (the paths
    the run was given) that lacks one; how many were written."""
    if sys.dont_write_bytecode or config.getoption("assertmode") != "rewrite":
        return 0  # the import hook would write nothing either
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        steps = (rewrite.get_cache_dir, rewrite.try_makedirs, rewrite._read_pyc,
                 rewrite._rewrite_test, rewrite._write_pyc)
        tail = rewrite.PYC_TAIL
    except (ImportError, AttributeError, KeyError):
        return 0  # another pytest: its workers rewrite as before
    cache_dir_of, make_dirs, read_pyc, rewrite_test, write_pyc = steps
    written = 0
    if roots is None:
        roots = [Path(a.split("::")[0]) for a in config.args] or [Path(config.rootpath)]
    for fn in _rewritten_files(config, roots):
        cache_dir = cache_dir_of(fn)
        pyc = cache_dir / (fn.name[:-3] + tail)
        if read_pyc(fn, pyc) is not None or not make_dirs(cache_dir):
            continue
        source_hash, code = rewrite_test(fn, config)
        written += bool(write_pyc(state, code, source_hash, pyc))
    return written
