"""quantscope starts wherever it is installed: read-only package folder, unwritable HOME, a
compiled-loop cache that is read-only, absent, prepared by someone else or corrupted.

Numba caches compiled loops as pickles (``*.nbi`` index, ``*.nbc`` data) and, left alone,
raises at import when no folder is writable and at every load once a file is damaged. Each
case runs the real command line (and the window, offscreen) in a child process on a copy of
the package, under the permissions of an ordinary user: when the tests run as root the child
runs without the capabilities that let root write into read-only folders (``setpriv``).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # fresh interpreters: the last tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "quantscope"

#: What root must give up to be refused by a read-only folder like anybody else.
_DAC = "-dac_override,-dac_read_search,-fowner"


def _as_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: read-only folders cannot be simulated")
    return [setpriv, f"--bounding-set={_DAC}", f"--inh-caps={_DAC}", *argv]


def _run(args: list[str], *, pythonpath: Path, home: Path, tmpdir: Path,
         timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NUMBA_CACHE", "XDG_CACHE"))}
    env.update(PYTHONPATH=str(pythonpath), HOME=str(home), TMPDIR=str(tmpdir),
               QT_QPA_PLATFORM="offscreen")
    return subprocess.run(_as_user([sys.executable, *args]), env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=tmpdir)


def _read_only(path: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(path):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o444)
        os.chmod(dirpath, 0o555)


def _copy(to: Path, *, caches: bool) -> Path:
    """A copy of the package under ``to`` (with or without its compiled-loop caches)."""
    ignore = (shutil.ignore_patterns("*.nbi", "*.nbc") if not caches
              else shutil.ignore_patterns())
    shutil.copytree(PACKAGE, to / "quantscope", ignore=ignore)
    os.chmod(to, 0o755)
    return to


def _notices(err: str) -> list[str]:
    """The cache's notices on stderr; the compile notice and its progress lines, which any
    command that compiles prints (tests/core/test_compile_notice.py), are not among them."""
    return [line for line in err.splitlines() if line.startswith("quantscope: ")
            and not line.startswith("quantscope: compiling the engine's loops")
            and " loops compiled in " not in line]


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> dict[str, str]:
    """The report and the window's figures from the source tree itself, whose run leaves the
    loops they use compiled in its cache (as any test of them does), so copies start warm."""
    where = tmp_path_factory.mktemp("warm")
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent), "QT_QPA_PLATFORM": "offscreen"}
    report = subprocess.run([sys.executable, "-m", "quantscope", "report"], env=env,
                            capture_output=True, text=True, timeout=300, check=True)
    subprocess.run([sys.executable, "-m", "quantscope", "--screenshot", str(where / "w.png"),
                    "--metrics", str(where / "w.json")], env=env, capture_output=True,
                   text=True, timeout=300, check=True)
    return {"report": report.stdout, "metrics": (where / "w.json").read_text()}


def _locked_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    os.chmod(home, 0o555)
    return home


def test_read_only_install_and_home_start_the_report_and_the_window(tmp_path, warm):
    install = _copy(tmp_path / "site", caches=True)
    _read_only(install)
    home, scratch = _locked_home(tmp_path), tmp_path / "scratch"
    scratch.mkdir()
    report = _run(["-m", "quantscope", "report"], pythonpath=install, home=home,
                  tmpdir=scratch)
    assert report.returncode == 0, report.stderr
    assert report.stdout == warm["report"]
    shot = scratch / "shot.png"
    window = _run(["-m", "quantscope", "--screenshot", str(shot), "--metrics",
                   str(scratch / "m.json")], pythonpath=install, home=home, tmpdir=scratch)
    assert window.returncode == 0, window.stderr
    assert shot.stat().st_size > 10_000
    assert (scratch / "m.json").read_text() == warm["metrics"]
    assert "Traceback" not in report.stderr + window.stderr


_SORT = """
import numpy as np
from quantscope.core.kernels.radix_sort import sort_finite
x = np.random.default_rng(0).standard_normal(5000).astype(np.float32)
assert np.array_equal(sort_finite(x)[0], np.sort(x)), "wrong order"
print("sorted")
"""


def test_no_writable_folder_compiles_in_memory_and_says_so(tmp_path):
    install = _copy(tmp_path / "site", caches=False)
    _read_only(install)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # The per-user temporary folder exists already, writable by everyone: whoever made it
    # could have left pickles there, so it is not used either.
    planted = scratch / f"quantscope-numba-{os.geteuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    done = _run(["-c", _SORT], pythonpath=install, home=_locked_home(tmp_path),
                tmpdir=scratch)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "sorted"
    assert _notices(done.stderr) == [
        "quantscope: no writable folder for compiled loops (install, user cache and temporary "
        "folder are read-only); compiling them in memory"], done.stderr
    assert not list(planted.iterdir())


def test_read_only_install_without_cache_uses_a_private_temp_folder(tmp_path):
    install = _copy(tmp_path / "site", caches=False)
    _read_only(install)
    scratch, home = tmp_path / "scratch", _locked_home(tmp_path)
    scratch.mkdir()
    first = _run(["-c", _SORT], pythonpath=install, home=home, tmpdir=scratch)
    assert first.returncode == 0, first.stderr
    folder = scratch / f"quantscope-numba-{os.geteuid()}"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert list(folder.rglob("*.nbi"))
    [line] = _notices(first.stderr)
    assert line.startswith("quantscope: the install folder and the user cache are not "
                           f"writable; compiled loops are cached in {folder}/"), line
    again = _run(["-c", _SORT + "\nfrom quantscope.core.kernels.radix_sort import _count\n"
                  "assert sum(_count.stats.cache_hits.values()) == 1, 'not loaded'"],
                 pythonpath=install, home=home, tmpdir=scratch)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "sorted"


def _damage(install: Path) -> tuple[Path, Path]:
    """Garbage in one index, a truncated data file of another function: the two forms a
    killed write or a full disk leave."""
    from quantscope.core.kernels.block_sums import build_range
    from quantscope.core.kernels.sorted_kernel import evaluate_rows

    cache = install / "quantscope" / "core" / "kernels" / "__pycache__"
    version = f"py{sys.version_info[0]}{sys.version_info[1]}"
    # the files of the functions as they are now (older line numbers leave stale ones)
    index = cache / (f"sorted_kernel.evaluate_rows-{evaluate_rows.py_func.__code__.co_firstlineno}"
                     f".{version}.nbi")
    index.write_bytes(b"\x80\x05garbage, not a pickle")
    data = cache / (f"block_sums.build_range-{build_range.py_func.__code__.co_firstlineno}"
                    f".{version}.1.nbc")
    data.write_bytes(data.read_bytes()[:40])
    return index, data


def test_corrupted_cache_is_rebuilt_with_one_line(tmp_path, warm):
    install = _copy(tmp_path / "site", caches=True)
    index, _ = _damage(install)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    report = _run(["-m", "quantscope", "report"], pythonpath=install,
                  home=_locked_home(tmp_path), tmpdir=scratch)
    assert report.returncode == 0, report.stderr
    assert report.stdout == warm["report"]
    assert "Traceback" not in report.stderr
    lines = _notices(report.stderr)
    assert len(lines) == 1 and "could not be read (" in lines[0], lines
    assert index.read_bytes()[:2] == b"\x80\x05" and b"garbage" not in index.read_bytes()
    again_home = tmp_path / "again"
    again_home.mkdir()
    again = _run(["-m", "quantscope", "report"], pythonpath=install,
                 home=_locked_home(again_home), tmpdir=scratch)
    assert again.returncode == 0 and not _notices(again.stderr), again.stderr


def test_corrupted_read_only_cache_still_starts(tmp_path, warm):
    install = _copy(tmp_path / "site", caches=True)
    _damage(install)
    _read_only(install)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    report = _run(["-m", "quantscope", "report"], pythonpath=install,
                  home=_locked_home(tmp_path), tmpdir=scratch)
    assert report.returncode == 0, report.stderr
    assert report.stdout == warm["report"]
    assert "Traceback" not in report.stderr
    assert any("could not be read" in line for line in _notices(report.stderr))


def test_short_of_memory_while_reading_the_cache_is_not_a_corrupted_cache(tmp_path, monkeypatch):
    """A MemoryError while a cached loop is read (a process under ``ulimit -v``) says nothing of
    the cache's bytes: it reaches the caller (whose error says memory), and the index stays."""
    from numba.core import caching

    from quantscope.core.kernels import jit_cache

    def short_of_memory(self, sig, target_context):
        raise MemoryError

    monkeypatch.setattr(caching.FunctionCache, "load_overload", short_of_memory)
    cache = jit_cache._RepairingCache.__new__(jit_cache._RepairingCache)
    unlinked = []
    monkeypatch.setattr(jit_cache.os, "unlink", unlinked.append)
    with pytest.raises(MemoryError):
        cache.load_overload(None, None)
    assert unlinked == []
