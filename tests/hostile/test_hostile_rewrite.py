"""A loaded file rewritten in place (``np.save`` to the same path truncates it first) must not
crash anything that still holds the tensor: the library, the command line or the window.

Each case runs in a child process, since the failure it guards against is SIGBUS: a read of a
memory-mapped page that the truncation removed kills the interpreter outright. One child runs
a case for every format in turn (starting the engine and Qt once), each on a file of its own.
"""

from __future__ import annotations

import textwrap

import pytest
from hostile_support import run_isolated

#: Writes ``path`` as a 256x4096 float32 tensor of ones in ``fmt``, and rewrites it smaller.
WRITERS = """
import sys, zipfile
import numpy as np

def write(path, fmt, array):
    if fmt == "npy":
        np.save(path, array)
    elif fmt == "npz":
        np.savez(path, w=array)  # stored members: memory-mappable
    else:
        import json, struct
        data = np.ascontiguousarray(array, "<f4").tobytes()
        head = json.dumps({"w": {"dtype": "F32", "shape": list(array.shape),
                                 "data_offsets": [0, len(data)]}}).encode()
        head += b" " * (-len(head) % 8)
        with open(path, "wb") as fh:  # truncates in place, as np.save does
            fh.write(struct.pack("<Q", len(head)) + head + data)
"""


def _suffix(fmt: str) -> str:
    return {"npy": ".npy", "npz": ".npz", "safetensors": ".safetensors"}[fmt]


FORMATS = ("npy", "npz", "safetensors")


def each_format(folder, setup: str, body: str, timeout: float) -> tuple[object, dict]:
    """Run ``body`` for each format in turn in one child process (one start of the engine,
    and of Qt where ``setup`` imports it), on its own file ``path`` of that format; ``body``
    prints ``@@ <fmt> <result>`` as it ends. A crash stops the child there: the formats after
    it print nothing. Returns the child's outcome and each format's result."""
    paths = {fmt: str(folder / f"w{_suffix(fmt)}") for fmt in FORMATS}
    loop = f"for fmt, path in {paths!r}.items():\n" + textwrap.indent(
        textwrap.dedent(body), "    ")
    outcome = run_isolated(WRITERS + textwrap.dedent(setup) + loop, timeout=timeout)
    printed = dict(line.split(" ", 2)[1:] for line in outcome.out.splitlines()
                   if line.startswith("@@ "))
    return outcome, printed


def assert_each_format(run: tuple[object, dict], fmt: str, want: str) -> None:
    """``fmt``'s result in ``run`` (:func:`each_format`) is ``want``, and the child ended
    well once the last format's had."""
    outcome, printed = run
    assert printed.get(fmt) == want, (printed, outcome.describe())
    if fmt == FORMATS[-1]:
        assert outcome.code == 0, outcome.describe()


@pytest.fixture(scope="module")
def library_runs(tmp_path_factory):
    return each_format(tmp_path_factory.mktemp("library"), """
        import quantscope as qs
        from quantscope.io import load_for_analysis
        """, """
        write(path, fmt, np.ones((256, 4096), np.float32))
        x, _ = load_for_analysis(path, "w" if fmt != "npy" else None)
        p = qs.prepare(x)
        write(path, fmt, np.ones(4, np.float32))
        p.layout(1, None).build_sums()  # the per-channel rows read the tensor again
        r = p.analyze(qs.choose_qparams(x, granularity="channel", axis=1))
        print("@@", fmt, r.n, flush=True)
        """, timeout=120)


@pytest.mark.parametrize("fmt", FORMATS)
def test_library_survives_a_rewrite_in_place(library_runs, fmt):
    """What ``load_for_analysis`` returns is the library's own (``prepare`` keeps a memory
    map a caller hands it, as documented: the caller owns that file)."""
    assert_each_format(library_runs, fmt, str(256 * 4096))


@pytest.fixture(scope="module")
def command_line_runs(tmp_path_factory):
    return each_format(tmp_path_factory.mktemp("command"), """
        import contextlib, io
        from quantscope.cli import main
        from quantscope.state import ExplorerState
        original = ExplorerState.compute
        """, """
        write(path, fmt, np.ones((256, 4096), np.float32))
        def rewrite_then_compute(self, *args, path=path, fmt=fmt, **kwargs):
            write(path, fmt, np.ones(4, np.float32))  # another program saves over the file
            return original(self, *args, **kwargs)
        ExplorerState.compute = rewrite_then_compute
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["report", path, "--axis", "1", "--json"])
        ExplorerState.compute = original
        print("@@", fmt, code, '"symmetric/channel"' in out.getvalue(), flush=True)
        """, timeout=120)


@pytest.mark.parametrize("fmt", FORMATS)
def test_command_line_survives_a_rewrite_between_load_and_analysis(command_line_runs, fmt):
    assert_each_format(command_line_runs, fmt, "0 True")


@pytest.fixture(scope="module")
def window_runs(tmp_path_factory):
    return each_format(tmp_path_factory.mktemp("window"), """
        import time
        from PySide6.QtWidgets import QApplication
        from quantscope.gui.window import MainWindow
        from quantscope.state import Source
        app = QApplication([])

        def wait(cond, what):
            deadline = time.monotonic() + 120
            while not cond():
                app.processEvents()
                time.sleep(0.005)
                if time.monotonic() > deadline:
                    sys.exit(f"timed out waiting for {what}")
        """, """
        write(path, fmt, np.ones((256, 4096), np.float32))
        win = MainWindow(install_views=False)
        win.show()
        win.load(Source("file", path, tensor="w" if fmt != "npy" else None))
        wait(lambda: win.state.tensor is not None and win.all_shown(), "the load")
        write(path, fmt, np.ones(4, np.float32))
        win.state.update_settings(axis=1)
        wait(win.all_shown, "the per-channel reports")
        print("@@", fmt, win.state.results["symmetric/channel"].n, flush=True)
        win.shutdown()
        win.close()
        """, timeout=360)


@pytest.mark.parametrize("fmt", FORMATS)
def test_window_keeps_its_session_when_the_file_is_rewritten(window_runs, fmt):
    """Load in the window, rewrite the file, change the channel axis: the new per-channel
    layout is built from the tensor the window holds, and the window lives on."""
    assert_each_format(window_runs, fmt, str(256 * 4096))


@pytest.mark.parametrize("fmt", ["npz", "safetensors"])
def test_scan_survives_a_rewrite_after_listing(tmp_path, fmt):
    """``scan`` reads each tensor's stored bytes after listing them all; the file shrinking
    in between is a warning and a failed row (exit 1: scan's "some tensors failed"), never a
    crash."""
    path = tmp_path / f"w{_suffix(fmt)}"
    code = WRITERS + f"""
from quantscope.cli import main
from quantscope.io import checkpoint
path = {str(path)!r}
write(path, {fmt!r}, np.ones((256, 4096), np.float32))
original = checkpoint.RawTensor.__init__
def open_then_rewrite(self, *args, **kwargs):
    original(self, *args, **kwargs)
    write(path, {fmt!r}, np.ones(4, np.float32))
checkpoint.RawTensor.__init__ = open_then_rewrite
sys.exit(main(["scan", path, "--json"]))
"""
    outcome = run_isolated(code)
    assert outcome.code in (0, 1, 2), outcome.describe()
    assert "Traceback" not in outcome.err
