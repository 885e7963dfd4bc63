"""What every hostile-input test asserts, in one place: the promise itself.

An input may succeed or be refused; a refusal is a typed error (the library) or one line on
stderr with exit code 2 (the command line), never a traceback, a crash, a hang or a memory
blowup. ``run_isolated`` runs a snippet in a child process so that a crash (SIGBUS, SIGSEGV,
the OOM killer) fails one test instead of the whole run, and measures the child's peak RSS
and wall time; ``bounded`` does the same for tracemalloc-visible allocations in process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Peak traced allocation (tracemalloc) any single hostile input may cost in process.
TRACED_LIMIT = 64 << 20


@dataclass
class Outcome:
    """What a child process did: exit code (negative: killed by that signal), output, peak
    RSS in bytes, wall seconds."""

    code: int
    out: str
    err: str
    peak_rss: int
    seconds: float

    @property
    def crashed(self) -> bool:
        return self.code < 0

    def describe(self) -> str:
        what = (f"killed by {signal.Signals(-self.code).name}" if self.crashed
                else f"exit {self.code}")
        return f"{what} after {self.seconds:.1f} s, peak {self.peak_rss >> 20} MiB\n{self.err}"


#: Prepended to every isolated snippet: at exit the child writes its own peak RSS (VmHWM,
#: which belongs to the interpreter exec'd, not to the forked test process).
_PEAK_PRELUDE = """
import atexit as _qs_atexit, os as _qs_os
def _qs_peak():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                with open(_qs_os.environ["QS_PEAK_FILE"], "w") as out:
                    out.write(line.split()[1])
_qs_atexit.register(_qs_peak)
"""


def _vm_hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run_isolated(code: str, *, timeout: float = 60, env: dict | None = None,
                 memory_limit: int | None = None) -> Outcome:
    """Run ``code`` in a fresh interpreter and measure its peak RSS.

    The peak is the child's own VmHWM, written at exit (and polled while it runs, for a
    child that dies): ``wait4``'s ``ru_maxrss`` would include the high-water mark of the
    test process the child was forked from, which a full suite grows past a gigabyte.
    ``memory_limit`` (bytes of address space) makes a blowup fail fast as a MemoryError
    instead of eating the machine. A run past ``timeout`` is killed and reported as a hang.
    """
    peak_file = tempfile.NamedTemporaryFile(prefix="qs-peak-", delete=False)
    peak_file.close()
    full_env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "QS_PEAK_FILE": peak_file.name,
                **(env or {})}

    def limit() -> None:  # in the child, before exec
        if memory_limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    start = time.monotonic()
    polled = 0
    try:
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", _PEAK_PRELUDE + textwrap.dedent(code)], cwd=ROOT,
                env=full_env, stdout=out, stderr=err, text=True, preexec_fn=limit)
            while True:
                pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                polled = max(polled, _vm_hwm_kib(proc.pid))
                if time.monotonic() - start > timeout:
                    proc.kill()
                    os.wait4(proc.pid, 0)
                    proc.returncode = -9
                    err.seek(0)
                    pytest.fail(f"hang: still running after {timeout} s\n{err.read()[-2000:]}")
                time.sleep(0.02)
            proc.returncode = code_ = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            with open(peak_file.name) as f:
                text = f.read().strip()
            peak = max(polled, int(text) if text.isdigit() else 0) * 1024
            return Outcome(code_, out.read(), err.read(), peak, time.monotonic() - start)
    finally:
        os.unlink(peak_file.name)


def assert_one_line_error(code: int, out: str, err: str, *fragments: str) -> None:
    """The command line's promise for a refused input: exit 2, one line, no traceback."""
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    lines = [line for line in err.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("quantscope: error: "), err
    assert "\x1b" not in err, err
    for fragment in fragments:
        assert fragment in err, err


class bounded:  # a context manager: ``with bounded(...)``
    """Assert that the block allocates at most ``limit`` bytes at its peak (tracemalloc, which
    NumPy reports its buffers to) and finishes within ``seconds``."""

    def __init__(self, limit: int = TRACED_LIMIT, seconds: float = 10.0) -> None:
        self.limit, self.seconds = limit, seconds

    def __enter__(self) -> bounded:
        self.was_tracing = tracemalloc.is_tracing()
        if not self.was_tracing:
            tracemalloc.start()
        tracemalloc.reset_peak()
        self.base = tracemalloc.get_traced_memory()[0]
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.elapsed = time.monotonic() - self.start
        self.peak = tracemalloc.get_traced_memory()[1] - self.base
        if not self.was_tracing:
            tracemalloc.stop()
        if exc[0] is None:
            assert self.peak <= self.limit, f"peak {self.peak >> 20} MiB > {self.limit >> 20}"
            assert self.elapsed <= self.seconds, f"took {self.elapsed:.1f} s"


#: Set by ``--hostile-long`` (tests/conftest.py), before any test module is imported.
LONG = os.environ.get("QUANTSCOPE_HOSTILE_LONG") == "1"


def hostile_settings(ci: int, long: int = 2000):
    """Hypothesis settings: ``ci`` examples in CI, ``long`` with ``--hostile-long``."""
    from hypothesis import HealthCheck, settings

    return settings(max_examples=long if LONG else ci, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


#: Outcomes of every hostile input tried in this run, printed at the end of the run (see
#: conftest.py): ``accepted`` (the promised result), ``refused`` (a typed or one-line error).
#: Crashes, tracebacks, hangs and blowups fail their test instead, so they show as failures.
TALLY: dict[str, int] = {"accepted": 0, "refused": 0}


def record(refused: bool) -> None:
    TALLY["refused" if refused else "accepted"] += 1
