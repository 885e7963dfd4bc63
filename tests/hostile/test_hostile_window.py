"""The window under hostile loads: an error in the banner and everything it had kept (tensor,
settings, theme), with listing and loading off the GUI thread -- or, for odd but valid
tensors, every pane with its numbers and no traceback on stderr."""

from __future__ import annotations

import json
import os
import time
import warnings

import numpy as np
import pytest
from hostile_support import hostile_settings, record
from hypothesis import given
from hypothesis import strategies as st

from quantscope.state import ExplorerState, Settings, Source

F = float(np.finfo(np.float32).max)


def _opened():
    from quantscope.gui import configure_pyqtgraph
    from quantscope.gui.window import MainWindow

    configure_pyqtgraph()
    win = MainWindow(ExplorerState(), install_views=True)
    win.resize(1280, 720)
    win.show()
    return win


def _load_normal(win, settings: Settings | None = None) -> None:
    x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    win.state.set_tensor(x, Source("array", "x"), settings=settings)


@pytest.fixture
def window(qtbot):
    win = _opened()
    qtbot.addWidget(win)
    _load_normal(win)
    qtbot.waitUntil(win.all_shown, timeout=60_000)
    yield win
    win.shutdown()
    win.close()


@pytest.fixture(scope="module")
def one_window(qapp):
    """One window for the tests whose hostile input changes nothing (each asserts so), and
    the settings a new window starts with."""
    win = _opened()
    yield win, win.state.settings
    win.shutdown()
    win.close()


@pytest.fixture
def kept_window(one_window, qtbot):
    """:func:`window` for a test that changes nothing: the one window, its message cleared
    and the same tensor loaded again on a new window's settings."""
    win, fresh = one_window
    win.clear_error()
    _load_normal(win, fresh)
    qtbot.waitUntil(win.all_shown, timeout=60_000)
    return win


def _kept(win, before) -> None:
    tensor, settings = before
    assert win.state.tensor is tensor and win.state.settings == settings


def _load_and_fail(qtbot, win, source: Source, fragment: str) -> None:
    before = (win.state.tensor, win.state.settings)
    with qtbot.waitSignal(win.error_shown, timeout=30_000) as blocker:
        win.load(source)
    assert fragment in blocker.args[0] and "\n" not in blocker.args[0], blocker.args[0]
    qtbot.waitUntil(lambda: win.jobs.is_idle(), timeout=30_000)
    _kept(win, before)
    record(refused=True)


def test_hostile_files_leave_the_window_as_it_was(qtbot, kept_window, tmp_path):
    import struct

    head = json.dumps({"e": {"dtype": "F32", "shape": [0, 2**64], "data_offsets": [0, 0]}})
    zero = tmp_path / "zero.safetensors"
    zero.write_bytes(struct.pack("<Q", len(head)) + head.encode())
    fifo = tmp_path / "pipe.npy"
    os.mkfifo(fifo)
    for path, fragment in ((zero, "too large for any array"), (fifo, "not a regular file"),
                           (tmp_path / "a\nb.npy", r"a\nb.npy")):
        _load_and_fail(qtbot, kept_window, Source("file", str(path)), fragment)


def test_an_axis_the_tensor_lacks_is_refused_not_replaced(qtbot, kept_window, tmp_path):
    """``quantscope w.npy --axis 7`` on a 2-D tensor: refused, as ``report`` refuses it."""
    path = tmp_path / "w.npy"
    np.save(path, np.ones((4, 4), np.float32))
    _load_and_fail(qtbot, kept_window, Source("file", str(path), axis=7), "axis 7 is out of range")


@pytest.mark.parametrize(("shape", "axis"), [((4, 4), 7), ((4, 4), -3), ((8,), 1)])
def test_the_state_refuses_an_axis_the_tensor_lacks(shape, axis):
    """The Qt-free state, where a source's axis enters: an axis the tensor lacks is refused
    with the reason and the previous tensor kept -- not silently replaced by the default."""
    state = ExplorerState()
    errors: list[str] = []
    state.error.connect(errors.append)
    before = np.ones((2, 3), np.float32)
    assert state.set_tensor(before, Source("array", "before"))
    settings = state.settings
    assert not state.set_tensor(np.ones(shape, np.float32), Source("array", "w", axis=axis))
    assert len(errors) == 1 and f"channel axis {axis} is out of range" in errors[0], errors
    assert state.tensor is not None and state.tensor.shape == (2, 3)
    assert state.settings == settings and state.source == Source("array", "before")
    record(refused=True)


def test_listing_runs_off_the_gui_thread(qtbot, window, tmp_path, monkeypatch):
    import quantscope.io as qio

    path = tmp_path / "two.npz"
    np.savez(path, a=np.ones(3, np.float32), b=np.zeros(3, np.float32))
    real = qio.list_tensors

    def slow(p):
        time.sleep(1.0)
        return real(p)

    monkeypatch.setattr(qio, "list_tensors", slow)
    start = time.monotonic()
    window.open_path(path)
    assert time.monotonic() - start < 0.5  # the window went on at once
    qtbot.waitUntil(window.model_active, timeout=30_000)  # several tensors: the model view


def test_a_fifo_session_does_not_block_and_keeps_everything(qtbot, kept_window, tmp_path):
    from quantscope.gui.session import SessionError

    fifo = tmp_path / "s.json"
    os.mkfifo(fifo)
    before = (kept_window.state.tensor, kept_window.state.settings)
    start = time.monotonic()
    with pytest.raises(SessionError, match="not a regular file"):
        kept_window.views_controller.open_session(fifo)
    assert time.monotonic() - start < 2
    _kept(kept_window, before)


def test_a_session_whose_source_fails_changes_nothing(qtbot, kept_window, tmp_path):
    session = {"format": "quantscope-session", "version": 1,
               "source": {"kind": "file", "name": str(tmp_path / "gone.npy")},
               "settings": {"bits": 4, "axis": 0}, "view": {"dark": True}}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(session))
    before = (kept_window.state.tensor, kept_window.state.settings)
    with qtbot.waitSignal(kept_window.error_shown, timeout=30_000):
        kept_window.views_controller.open_session(path)
    qtbot.waitUntil(lambda: kept_window.jobs.is_idle(), timeout=30_000)
    _kept(kept_window, before)
    assert not kept_window.dark


def test_a_remembered_session_gone_hostile_falls_back_to_the_demo(qtbot, window, tmp_path):
    from PySide6.QtCore import QSettings

    from quantscope.gui.session import apply_session, parse_session, recall, remember

    # a temporary store: the user's profile keeps its own remembered session
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "cfg"))
    fifo = tmp_path / "w.npy"
    os.mkfifo(fifo)
    doc = {"format": "quantscope-session", "version": 1,
           "source": {"kind": "file", "name": str(fifo)}, "settings": {}}
    remember(parse_session(doc, check_source=False))
    session = recall()  # at start-up, before any window: must not list or block
    assert session is not None
    demo = Source("sample", "gelu_activations", axis=-1)
    apply_session(window, session, fallback=demo)
    qtbot.waitUntil(lambda: window.state.source == demo, timeout=60_000)


def test_group_size_beyond_the_spin_box_is_refused_by_the_state(kept_window):
    assert not kept_window.state.update_settings(group_size=10**30)
    assert kept_window.state.settings.group_size is None
    assert kept_window.controls.group.maximum() == 1 << 24


#: Valid tensors that are hard to bin: nearly constant, subnormal, spanning +-FLT_MAX.
ODD_VALID = [
    ("1+k*eps", 1 + np.arange(64) * np.finfo(np.float32).eps),
    ("1e6 and 1e6+0.0625", [1e6, 1e6 + 0.0625] * 8),
    ("subnormal", [1e-45, 3e-45, 1e-40, 0.0] * 4), ("-F..F", [-F, F] * 8),
    ("F, F/2, 0, -F", [F, F * 0.5, 0.0, -F] * 4), ("F only", [F] * 16), ("constant", [3.0] * 16),
    ("0 and 1e-45", [0.0, 1e-45] * 8)]
near_constant = st.sampled_from([values for _, values in ODD_VALID])


@pytest.mark.parametrize("method", ["minmax", "entropy"])
@pytest.mark.parametrize(("name", "values"), ODD_VALID, ids=[v[0] for v in ODD_VALID])
def test_odd_valid_tensors_are_summarised_and_computed(name, values, method):
    """What the window's worker does with a new tensor -- prepare it, summarise it (the
    overview's histogram), compute the panes -- for every odd valid tensor: no exception, no
    RuntimeWarning, every value counted; entropy refuses only the schemes it does not have."""
    from quantscope.state import overview, prepare_tensor

    x = np.asarray(values, np.float32).reshape(1, -1)
    state = ExplorerState()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert state.update_settings(method=method) or method == "minmax"
        assert state.set_tensor(x, Source("array", "odd"))
        prepared = prepare_tensor(state.tensor, state.settings)
        summary = overview(state.tensor, prepared=prepared)
        state.set_prepared(state.tensor, prepared, summary)
        reports = state.compute()
    assert int(summary.hist_counts.sum()) == x.size
    assert summary.min == float(x.min()) and summary.max == float(x.max())
    assert "symmetric/tensor" in reports and reports["symmetric/tensor"].n == x.size
    for message in state.errors.values():
        assert method == "entropy" and "entropy calibration is per tensor" in message, message
    record(refused=False)


@hostile_settings(ci=8, long=60)
@given(values=st.one_of(near_constant,
                        st.lists(st.floats(-F, F, width=32), min_size=2, max_size=64)),
       method=st.sampled_from(["minmax", "entropy", "mse", "percentile"]))
def test_odd_valid_tensors_fill_every_pane(qtbot, capfd, window, values, method):
    """Nearly constant, subnormal and +-FLT_MAX tensors: the summary histogram, the entropy
    method and every pane work; nothing is printed to stderr (no traceback, no warning)."""
    x = np.asarray(values, np.float32).reshape(1, -1)
    with warnings.catch_warnings(record=True) as caught:  # every thread's, while it holds
        warnings.simplefilter("always")
        window.state.update_settings(method=method)
        window.state.set_tensor(x, Source("array", "odd"))
        qtbot.waitUntil(window.all_shown, timeout=60_000)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], \
        [str(w.message) for w in caught]
    assert window.state.overview is not None
    assert int(window.state.overview.hist_counts.sum()) == x.size
    for message in window.state.errors.values():  # entropy is per tensor and symmetric only
        assert method == "entropy" and "entropy calibration is per tensor" in message, message
    assert "Traceback" not in capfd.readouterr().err
    window.state.update_settings(method="minmax")
    assert isinstance(window.state.settings, Settings)
    record(refused=False)
