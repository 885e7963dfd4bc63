"""How many test workers ``pytest -n auto`` starts: one and a half per core, as many as memory
holds, instead of pytest-xdist's one per core (tests/conftest.py hands it to pytest-xdist).

The window tests spend much of their time waiting -- on Qt timers, debounces, the scheduler's
threads, fresh interpreters -- with their core idle: in a measured run with two workers on two
cores the window test files took 1.6 to 3.6 times their CPU time in wall-clock time
(``tests/gui/test_window.py``: 126 s for 72 s of CPU). A third worker runs in those gaps.
"""

from __future__ import annotations

import os

#: Test workers per core.
WORKERS_PER_CORE = 1.5
#: Memory set aside for each worker (one that loaded torch and built windows holds 1-1.5 GB).
WORKER_MEMORY = 2 << 30


def auto_workers() -> int | None:
    """The number of workers for ``-n auto``; None when ``PYTEST_XDIST_AUTO_NUM_WORKERS`` is
    set (pytest-xdist reads it itself). Never fewer than one per core; one per core when the
    machine's memory is unknown."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return cores
    wanted = max(1, round(cores * WORKERS_PER_CORE))
    return min(wanted, max(cores, memory // WORKER_MEMORY))
