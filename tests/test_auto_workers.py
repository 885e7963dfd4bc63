"""``-n auto`` starts one and a half test workers per core where memory holds them
(tests/auto_workers.py): the window tests leave a core idle while they wait on timers."""

from __future__ import annotations

import os

import pytest

from auto_workers import auto_workers


def _machine(monkeypatch, cores: int, memory_gib: float | None) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    if memory_gib is None:
        def sysconf(name):
            raise ValueError(name)
    else:
        def sysconf(name):
            return {"SC_PAGE_SIZE": 4096,
                    "SC_PHYS_PAGES": int(memory_gib * (1 << 30)) // 4096}[name]
    monkeypatch.setattr(os, "sysconf", sysconf)


@pytest.mark.parametrize(("cores", "memory_gib", "workers"), [
    (2, 23, 3),     # this project's CI machine: a third worker fills the waits
    (16, 128, 24),
    (1, 8, 2),
    (16, 16, 16),   # 2 GiB a worker: eight would fit, never fewer than one per core
    (4, 10, 5),     # five fit in 10 GiB, six are wanted
    (2, None, 2),   # memory unknown: one per core
])
def test_auto_starts_half_again_as_many_workers_as_cores_where_memory_holds_them(
        monkeypatch, cores, memory_gib, workers):
    _machine(monkeypatch, cores, memory_gib)
    assert auto_workers() == workers


def test_the_environment_variable_still_decides(monkeypatch):
    _machine(monkeypatch, 2, 23)
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "7")
    assert auto_workers() is None  # left to pytest-xdist
