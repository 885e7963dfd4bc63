"""Sessions: a saved session reopens exactly; a malformed one is refused with a clear message
and changes nothing; the last session is remembered in a (temporary, never the user's)
QSettings."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from PySide6.QtCore import QSettings

from quantscope.gui.session import (
    SESSION_FORMAT,
    Session,
    SessionError,
    capture,
    load_session,
    parse_session,
    recall,
    remember,
    save_session,
    user_settings,
)
from quantscope.state import ExplorerState, Settings, Source


@pytest.fixture(autouse=True)
def temporary_user_settings(tmp_path):
    """Point the user-scope INI settings at a temporary directory for every test here."""
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "cfg"))
    yield
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope,
                      str(tmp_path / "cfg-after"))


def doc(**over) -> dict:
    base = Session(Source.generator("outliers", (64, 128), 3, count=4),
                   Settings(method="manual", manual_clip=(-2.0, 3.0), bits=6, axis=1),
                   dark=True).to_dict()
    base.update(over)
    return base


def test_round_trip(tmp_path):
    path = tmp_path / "talk.json"
    save_session(parse_session(doc()), path)
    text = path.read_text()
    assert json.loads(text)["format"] == SESSION_FORMAT
    s = load_session(path)
    assert s.settings == Settings(method="manual", manual_clip=(-2.0, 3.0), bits=6, axis=1)
    assert s.source == Source.generator("outliers", (64, 128), 3, count=4)
    assert s.dark is True and s.presentation is False


@pytest.mark.parametrize(("change", "message"), [
    ({"format": "something-else"}, "not a quantscope session"),
    ({"version": 99}, "newer than this quantscope"),
    ({"version": "1"}, "version must be an integer"),
    ({"extra": 1}, "unknown session field"),
    ({"settings": {"bits": 12}}, "bits"),
    ({"settings": {"bitz": 8}}, "unknown setting"),
    ({"settings": "fast"}, "must be a JSON object"),
    ({"settings": {"axis": 2}}, "axis 2 is out of range"),
    ({"view": {"dark": "yes"}}, "booleans"),
    ({"source": {"kind": "generator", "name": "nope", "shape": [4]}}, "unknown generator"),
    ({"source": {"kind": "file", "name": "/no/such/file.npy"}}, "cannot be opened"),
    ({"source": {"kind": "ftp", "name": "x"}}, "source kind"),
    ({"source": {"kind": "array", "name": "x"}}, "cannot be reopened"),
])
def test_malformed_sessions_say_why(change, message):
    with pytest.raises(SessionError, match=message):
        parse_session(doc(**change))


@pytest.mark.parametrize(("content", "message"), [
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe\x00", "not a text"),
    (b"[1, 2]", "JSON object"),
])
def test_unreadable_files(tmp_path, content, message):
    path = tmp_path / "s.json"
    path.write_bytes(content)
    with pytest.raises(SessionError, match=message):
        load_session(path)
    with pytest.raises(SessionError, match="cannot read"):
        load_session(tmp_path / "missing.json")


def test_file_sources_are_checked_against_their_header(tmp_path):
    f = tmp_path / "w.npy"
    np.save(f, np.ones((3, 5), np.float32))
    ok = doc(source=Source("file", str(f)).to_dict(),
             settings=Settings(axis=1).to_dict())
    assert parse_session(ok).source.name == str(f)
    bad = doc(source=Source("file", str(f), tensor="other").to_dict())
    with pytest.raises(SessionError, match="no tensor named 'other'"):
        parse_session(bad)


def test_capture_makes_file_paths_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "w.npy", np.ones((2, 3), np.float32))
    st = ExplorerState()
    st.set_tensor(np.ones((2, 3), np.float32), Source("file", "w.npy"))
    assert capture(st).source.name == str(tmp_path / "w.npy")


def test_capture_skips_in_memory_arrays():
    st = ExplorerState()
    st.set_tensor(np.ones(4, np.float32))
    s = capture(st, presentation=True)
    assert s.source is None and s.presentation
    assert parse_session(s.to_dict()).settings == st.settings


def test_remembered_between_runs_in_a_temporary_store(tmp_path):
    store = user_settings()
    assert str(tmp_path) in store.fileName()  # never the real profile
    assert recall() is None
    session = parse_session(doc())
    remember(session)
    assert recall() == session
    store.setValue("session/last", "{broken")  # a corrupt store: start fresh, do not fail
    assert recall() is None
    explicit = QSettings(str(tmp_path / "other.ini"), QSettings.Format.IniFormat)
    remember(session, explicit)
    assert recall(explicit) == session


def test_window_open_session_applies_all_or_nothing(qtbot, tmp_path):
    from quantscope.gui import create_window

    win = create_window()
    qtbot.addWidget(win)
    x = np.random.default_rng(0).normal(size=(16, 32)).astype(np.float32)
    win.state.set_tensor(x, Source("array", "x"))
    before_settings, before_tensor = win.state.settings, win.state.tensor
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc(settings={"bits": 99})))
    with pytest.raises(SessionError, match="bits"):
        win.views_controller.open_session(bad)
    assert win.state.settings is before_settings and win.state.tensor is before_tensor

    good = tmp_path / "good.json"
    good.write_text(json.dumps(doc()))
    win.views_controller.open_session(good)
    qtbot.waitUntil(lambda: win.state.source is not None and win.state.source.name == "outliers",
                    timeout=20_000)
    assert win.state.tensor.shape == (64, 128)
    assert win.state.settings == Settings(method="manual", manual_clip=(-2.0, 3.0), bits=6,
                                          axis=1)
    assert win.dark is True
    # and saving it again gives the same session
    again = tmp_path / "again.json"
    win.views_controller.save_session(again)
    saved, original = load_session(again), load_session(good)
    assert saved.settings == original.settings and saved.dark == original.dark
    # the source now also records the channel axis it was opened with
    assert dataclasses.replace(saved.source, axis=None) == original.source
    win.shutdown()


@pytest.mark.parametrize(("flags", "dark", "presentation"), [
    ([], True, False),  # the session's look
    (["--theme", "light"], False, False),
    (["--theme", "dark", "--presentation"], True, True),
])
def test_the_command_line_look_wins_over_the_session(qapp, tmp_path, monkeypatch, flags, dark,
                                                     presentation):
    """The session's look is applied once its source has loaded, after the command line was
    read: ``--theme`` and ``--presentation`` must still win."""
    from quantscope.cli import main
    from quantscope.gui import launch

    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc()))  # dark, not presenting
    seen = {}
    dispose = launch._dispose

    def record_look(app, window):
        seen.update(dark=window.dark, presentation=window.presentation,
                    source=window.state.source.name)
        dispose(app, window)

    monkeypatch.setattr(launch, "_dispose", record_look)
    assert main(["--session", str(path), *flags, "--metrics", str(tmp_path / "m.json")]) == 0
    assert seen == {"dark": dark, "presentation": presentation, "source": "outliers"}
