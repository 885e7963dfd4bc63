"""A loaded file rewritten in place (``np.save`` to the same path truncates it first) must not
crash anything that still holds the tensor: the library, the command line or the window.

Each case runs in a child process, since the failure it guards against is SIGBUS: a read of a
memory-mapped page that the truncation removed kills the interpreter outright.
"""

from __future__ import annotations

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


@pytest.mark.parametrize("fmt", ["npy", "npz", "safetensors"])
def test_library_survives_a_rewrite_in_place(tmp_path, fmt):
    """What ``load_for_analysis`` returns is the library's own (``prepare`` keeps a memory
    map a caller hands it, as documented: the caller owns that file)."""
    path = tmp_path / f"w{_suffix(fmt)}"
    code = WRITERS + f"""
import quantscope as qs
from quantscope.io import load_for_analysis
path = {str(path)!r}
write(path, {fmt!r}, np.ones((256, 4096), np.float32))
x, _ = load_for_analysis(path, "w" if {fmt!r} != "npy" else None)
p = qs.prepare(x)
write(path, {fmt!r}, np.ones(4, np.float32))
p.layout(1, None).build_sums()  # the per-channel rows read the tensor again
r = p.analyze(qs.choose_qparams(x, granularity="channel", axis=1))
print(r.n)
"""
    outcome = run_isolated(code)
    assert outcome.code == 0, outcome.describe()
    assert outcome.out.split() == [str(256 * 4096)]


@pytest.mark.parametrize("fmt", ["npy", "npz", "safetensors"])
def test_command_line_survives_a_rewrite_between_load_and_analysis(tmp_path, fmt):
    path = tmp_path / f"w{_suffix(fmt)}"
    code = WRITERS + f"""
from quantscope.cli import main
from quantscope.state import ExplorerState
path = {str(path)!r}
write(path, {fmt!r}, np.ones((256, 4096), np.float32))
original = ExplorerState.compute
def rewrite_then_compute(self, *args, **kwargs):
    write(path, {fmt!r}, np.ones(4, np.float32))  # another program saves over the file
    return original(self, *args, **kwargs)
ExplorerState.compute = rewrite_then_compute
sys.exit(main(["report", path, "--axis", "1", "--json"]))
"""
    outcome = run_isolated(code)
    assert outcome.code == 0, outcome.describe()
    assert '"symmetric/channel"' in outcome.out


@pytest.mark.parametrize("fmt", ["npy", "npz", "safetensors"])
def test_window_keeps_its_session_when_the_file_is_rewritten(tmp_path, fmt):
    """Load in the window, rewrite the file, change the channel axis: the new per-channel
    layout is built from the tensor the window holds, and the window lives on."""
    path = tmp_path / f"w{_suffix(fmt)}"
    code = WRITERS + f"""
import time
from PySide6.QtWidgets import QApplication
from quantscope.gui.window import MainWindow
from quantscope.state import Source
path = {str(path)!r}
write(path, {fmt!r}, np.ones((256, 4096), np.float32))
app = QApplication([])
win = MainWindow(install_views=False)
win.show()

def wait(cond, what):
    deadline = time.monotonic() + 120
    while not cond():
        app.processEvents()
        time.sleep(0.005)
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {{what}}")

win.load(Source("file", path, tensor="w" if {fmt!r} != "npy" else None))
wait(lambda: win.state.tensor is not None and win.all_shown(), "the load")
write(path, {fmt!r}, np.ones(4, np.float32))
win.state.update_settings(axis=1)
wait(win.all_shown, "the per-channel reports")
print(win.state.results["symmetric/channel"].n)
win.shutdown()
"""
    outcome = run_isolated(code, timeout=180)
    assert outcome.code == 0, outcome.describe()
    assert outcome.out.split() == [str(256 * 4096)]


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
