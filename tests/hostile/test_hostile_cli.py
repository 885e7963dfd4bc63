"""The command line under hostile arguments: exit 0, or exit 2 with one escaped line on
stderr -- never a traceback, a replaced device, a 0600 file or a terminal escape.

The corpus holds the cases found so far; hypothesis then throws arbitrary argument lists
(options, numbers, paths with control characters) at every subcommand.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
from hostile_support import (
    assert_one_line_error,
    bounded,
    hostile_settings,
    record,
    run_isolated,
)
from hypothesis import given
from hypothesis import strategies as st

from quantscope.cli import main
from quantscope.io.samples import sample_path

QW = str(sample_path("query_weight"))


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's refusals
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def small(tmp_path) -> Path:
    path = tmp_path / "w.npy"
    np.save(path, np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32))
    return path


CORPUS = [
    (["report", QW, "--bits", "x"], "--bits: invalid int value"),
    (["report", QW, "--axis", "1.5"], "--axis: invalid int value"),
    (["report", "--nope"], "unrecognized arguments"),
    (["scan", "--sample", "query_weight", "--bits", "99"], "bits must be between 2 and 8"),
    (["export", QW, "-o", "/dev/null"], "not a regular file"),
    (["export", QW, "--granularity", "group", "--group-size", "0", "-o", "{tmp}/o.npz"],
     "group_size must be >= 1"),
    (["export", QW, "-o", "{tmp}/missing/o.npz"], "does not exist"),
    (["export", QW, "-o", "{tmp}"], "it is a directory"),
    (["report", "{tmp}/a\nb\x1b[2J.npy"], r"a\nb\x1b[2J.npy': no such file"),
    (["scan", "{tmp}/\x1b]0;pwned\x07.safetensors"], r"\x1b]0;pwned\x07"),
]


@pytest.mark.parametrize(("argv", "fragment"), CORPUS, ids=[str(i) for i in range(len(CORPUS))])
def test_corpus_exits_2_with_one_escaped_line(capsys, tmp_path, argv, fragment):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with bounded(seconds=30):
        code, out, err = _run(capsys, *argv)
    assert_one_line_error(code, out, err, fragment)
    record(refused=True)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "deep", "5000 digits"])
def test_report_session_is_read_as_the_window_reads_it(tmp_path, kind):
    """``report --session``: a FIFO or /dev/zero neither blocks nor reads without end, a
    hostile document is one line (in a child: deep nesting meets a RecursionError)."""
    path = tmp_path / "s.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path = tmp_path
    elif kind == "deep":
        path.write_text('{"format": "quantscope-session", "version": 1, "source": '
                        + "[" * 100_000 + "]" * 100_000 + "}")
    else:
        path.write_text('{"format": "quantscope-session", "version": ' + "9" * 5000 + "}")
    outcome = run_isolated(f"""
        import sys
        from quantscope.cli import main
        sys.exit(main(["report", "--session", {str(path)!r}]))
        """, timeout=30)
    assert_one_line_error(outcome.code, outcome.out, outcome.err, "--session")
    record(refused=True)


def test_export_never_replaces_a_fifo(capsys, tmp_path):
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    assert_one_line_error(*_run(capsys, "export", QW, "-o", str(fifo)), "not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_export_keeps_the_umask_and_an_existing_files_mode(capsys, tmp_path):
    old = os.umask(0o027)
    try:
        code, _, _ = _run(capsys, "export", QW, "-o", str(tmp_path / "new.npz"))
    finally:
        os.umask(old)
    assert code == 0 and stat.S_IMODE(os.stat(tmp_path / "new.npz").st_mode) == 0o640
    existing = tmp_path / "old.npz"
    existing.write_bytes(b"")
    existing.chmod(0o604)
    assert _run(capsys, "export", QW, "-o", str(existing))[0] == 0
    assert stat.S_IMODE(os.stat(existing).st_mode) == 0o604
    assert np.load(existing)["codes"].shape == (384, 384)


def test_export_through_a_symlink_writes_its_target(capsys, tmp_path):
    target = tmp_path / "target.npz"
    target.write_bytes(b"old")
    link = tmp_path / "link.npz"
    link.symlink_to(target)
    assert _run(capsys, "export", QW, "-o", str(link))[0] == 0
    assert link.is_symlink() and np.load(target)["codes"].dtype == np.int8


def test_memory_error_anywhere_is_one_line(capsys, monkeypatch):
    from quantscope.state import ExplorerState

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(ExplorerState, "compute", no_memory)  # deep inside report
    assert_one_line_error(*_run(capsys, "report", QW), "not enough memory")


@pytest.mark.parametrize("target", ["missing-dir/out.{ext}", "", "/dev/full"])
@pytest.mark.parametrize("option", ["--metrics", "--screenshot"])
def test_window_outputs_that_cannot_be_written(tmp_path, option, target):
    """--metrics / --screenshot into a missing directory, a directory or a full device: one
    line and exit 2 (in a child: the window starts Qt)."""
    ext = "json" if option == "--metrics" else "png"
    out = target.format(ext=ext) if target.startswith("/") else str(tmp_path / target.format(
        ext=ext))
    if not target:
        out = str(tmp_path)
        if option == "--screenshot":
            (tmp_path / "dir.png").mkdir()
            out = str(tmp_path / "dir.png")
    outcome = run_isolated(f"""
import sys
from quantscope.cli import main
sys.exit(main(["--generator", "normal", "--shape", "8x8", {option!r}, {out!r}]))
""", timeout=120)
    assert_one_line_error(outcome.code, outcome.out, outcome.err)


@pytest.mark.parametrize("shape", ["3x", "x4", "3xx4"])
def test_window_shape_typos_are_refused_not_guessed(tmp_path, shape):
    """``quantscope --generator normal --shape 3x``: a separator without a number on both
    sides is a typo, refused in one line before any window opens -- not the shape (3,)
    rendered as if asked for (in a child: a window that did open would start Qt)."""
    out = str(tmp_path / "m.json")
    outcome = run_isolated(f"""
import sys
from quantscope.cli import main
sys.exit(main(["--generator", "normal", "--shape", {shape!r}, "--metrics", {out!r}]))
""", timeout=120)
    assert_one_line_error(outcome.code, outcome.out, outcome.err, f"shape {shape!r}")
    assert not os.path.exists(out)
    record(refused=True)


def test_a_full_disk_is_one_line(capsys, tmp_path, monkeypatch):
    """ENOSPC while the archive is written: one line, and no temporary file left behind."""
    import quantscope.commands.export as export

    def full(fh, **members):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export.np, "savez", full)
    assert_one_line_error(*_run(capsys, "export", QW, "-o", str(tmp_path / "o.npz")),
                          "No space left on device")
    assert list(tmp_path.iterdir()) == []


# -- hypothesis ---------------------------------------------------------------------------------
hostile_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
number = st.one_of(st.integers(-(2**70), 2**70).map(str), st.sampled_from(
    ["nan", "inf", "-1", "0", "1e400", "3x", "", " 8", "0x10", "9" * 5000]))
option = st.sampled_from(["--bits", "--axis", "--tensor", "--top", "--group-size",
                          "--granularity", "--method", "--rounding", "--sort", "--json"])


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> None:
    """Each subcommand run once before the timed examples: the compiled loops a fresh checkout
    builds on first use (over a minute on a busy two-core machine) are not an input's cost."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("warm") / "o.npz"
    for argv in (["report", "--sample=query_weight"], ["scan", "--sample=query_weight"],
                 ["export", "--sample=query_weight", "-o", str(out)]):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(argv)


@hostile_settings(ci=60, long=1500)
@given(command=st.sampled_from(["report", "scan", "export"]),
       pairs=st.lists(st.tuples(option, st.one_of(number, hostile_text)), max_size=4),
       use_file=st.booleans())
def test_arbitrary_arguments_keep_the_promise(warm, capsys, tmp_path_factory, command, pairs,
                                              use_file):
    tmp = tmp_path_factory.mktemp("cli")
    argv = [command, QW if use_file else "--sample=query_weight"]
    for name, value in pairs:
        argv += [name] if name == "--json" else [name, value]
    if command == "export":
        argv += ["-o", str(tmp / "o.npz")]
    with bounded(limit=256 << 20, seconds=60):
        code, out, err = _run(capsys, *argv)
    if code != 0:
        assert_one_line_error(code, out, err)
    else:
        assert "Traceback" not in err
    record(refused=code != 0)


@pytest.mark.parametrize(("options", "refused"), [
    (["--format", "mxfp4", "--bits", "4"], "--bits"),
    (["--format", "nvfp4", "--group-size", "32", "--granularity", "group"],
     "--group-size, --granularity"),
    (["--format", "fp8_e4m3", "--unsigned"], "--unsigned"),
    (["--format", "fp8_e4m3", "--runtime", "pytorch"], "--runtime"),
    (["--format", "int4_g128", "--rounding", "half_away", "--full-range"],
     "--narrow-range/--full-range, --rounding"),
    (["--format", "mxfp4", "--axis", "1", "--asymmetric"], "--axis, --asymmetric"),
    (["--format", "nf4", "--arithmetic", "multiply"], "--arithmetic"),
])
def test_export_format_refuses_the_options_it_cannot_honour(tmp_path, capsys, small, options,
                                                           refused):
    out = tmp_path / "o.npz"
    code, stdout, err = _run(capsys, "export", str(small), "-o", str(out), *options)
    assert_one_line_error(code, stdout, err, f"does not take {refused}")
    assert not out.exists()
    record(refused=True)


def test_export_format_with_only_its_own_options_writes(tmp_path, capsys, small):
    out = tmp_path / "o.npz"
    code, stdout, err = _run(capsys, "export", str(small), "-o", str(out), "--format", "mxfp4")
    assert code == 0, err
    assert out.exists() and "mxfp4" in stdout
    record(refused=False)
