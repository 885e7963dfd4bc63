"""Session files and remembered sessions under hostile content: a SessionError naming the
problem (or, for a remembered one, a fresh start) -- never a hang, a traceback or a setting
the controls cannot show."""

from __future__ import annotations

import json
import os

import pytest
from hostile_support import bounded, hostile_settings, record, run_isolated
from hypothesis import given
from hypothesis import strategies as st

from quantscope.gui.session import SessionError, load_session, parse_session


def doc(**changes) -> dict:
    base = {"format": "quantscope-session", "version": 1,
            "source": {"kind": "generator", "name": "normal", "shape": [8, 8], "seed": 0,
                       "params": {}},
            "settings": {"bits": 8}, "view": {"dark": False, "presentation": False}}
    for key, value in changes.items():
        if "." in key:
            outer, inner = key.split(".")
            base[outer] = {**base[outer], inner: value}
        else:
            base[key] = value
    return base


CORPUS = [
    ("5000-digit version", '{"format": "quantscope-session", "version": ' + "9" * 5000 + "}",
     "not valid JSON"),
    ("source name an int", json.dumps(doc(**{"source.name": 5})), "name must be a str"),
    ('"params": [1, 2]', json.dumps(doc(**{"source.params": [1, 2]})), "params must map"),
    ('"shape": [1e400]', json.dumps(doc(**{"source.shape": [1e400]})).replace(
        "Infinity", "1e400"), "shape must be a list of integers"),
    ('"shape": "64"', json.dumps(doc(**{"source.shape": "64"})), "shape must be a list"),
    ("axis: true", json.dumps(doc(**{"settings.axis": True})), "axis must be an integer"),
    ("group_size 10**30", json.dumps(doc(**{"settings.group_size": 10**30})),
     "group size must be None or an integer from 1 to 16777216"),
    ("bits: true", json.dumps(doc(**{"settings.bits": True})), "bits must be"),
    ("manual clip strings", json.dumps(doc(**{"settings.manual_clip": ["a", "b"]})),
     "manual clip"),
    ("version 0", json.dumps(doc(version=0)), "at least 1"),
]


@pytest.mark.parametrize(("name", "text", "match"), CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus_is_a_session_error(tmp_path, name, text, match):
    path = tmp_path / "s.json"
    path.write_text(text)
    with bounded(seconds=20), pytest.raises(SessionError, match=match) as caught:
        load_session(path, check_source=False)
    assert "\n" not in str(caught.value)
    record(refused=True)


def test_100k_deep_nesting_is_a_session_error(tmp_path):
    """In a child process: the RecursionError the decoder meets on the way can leave
    Python 3.11's AST recursion bookkeeping off, which breaks pytest's assertion rewriting of
    every module imported later in the same process."""
    path = tmp_path / "deep.json"
    path.write_text('{"format": "quantscope-session", "version": 1, "source": '
                    + "[" * 100_000 + "]" * 100_000 + "}")
    outcome = run_isolated(f"""
        from quantscope.gui.session import SessionError, load_session
        try:
            load_session({str(path)!r}, check_source=False)
        except SessionError as exc:
            print("refused:", exc)
        """, timeout=60)
    assert outcome.code == 0 and not outcome.err, outcome.describe()
    lines = outcome.out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("refused:"), outcome.out
    assert "nested too deeply" in lines[0], lines[0]
    record(refused=True)


def test_a_fifo_and_dev_zero_are_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    for path in (fifo, link, tmp_path):
        with bounded(seconds=5), pytest.raises(SessionError, match="not a regular file"):
            load_session(path)


def test_a_source_file_from_the_loader_findings_is_a_session_error(tmp_path):
    """A safetensors file holding a zero-size tensor of shape (0, 2**64)."""
    import struct

    head = json.dumps({"e": {"dtype": "F32", "shape": [0, 2**64], "data_offsets": [0, 0]}})
    path = tmp_path / "e.safetensors"
    path.write_bytes(struct.pack("<Q", len(head)) + head.encode())
    session = doc(source={"kind": "file", "name": str(path), "tensor": "e"})
    with pytest.raises(SessionError, match="too large for any array"):
        parse_session(session)


REMEMBERED = [
    ("5000-digit version", CORPUS[0][1]),
    ("100k-deep nesting", '{"format": "quantscope-session", "version": 1, "source": '
     + "[" * 100_000 + "]" * 100_000 + "}"),
    ('"params": [1, 2]', CORPUS[2][1]),
    ('"shape": [1e400]', CORPUS[3][1]),
    ("not JSON", "{broken"),
    ("2 MiB of spaces", " " * (2 << 20)),
]


@pytest.mark.parametrize(("name", "text"), REMEMBERED, ids=[r[0] for r in REMEMBERED])
def test_a_remembered_session_gone_hostile_is_a_fresh_start(tmp_path, name, text):
    """The session kept between runs is read at start-up, before any window: whatever it has
    become, the start-up sees no session and the app starts fresh -- it must not fail to start
    (in a child: the deep document meets a RecursionError, and the store is a temporary one,
    never the user's profile)."""
    (tmp_path / "text.json").write_text(json.dumps(text))
    outcome = run_isolated(f"""
        import json
        from PySide6.QtCore import QSettings
        QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope,
                          {str(tmp_path / "cfg")!r})
        from quantscope.gui.session import SETTINGS_KEY, startup_session, user_settings
        store = user_settings()
        store.setValue(SETTINGS_KEY, json.load(open({str(tmp_path / "text.json")!r})))
        store.sync()
        print(repr(startup_session(None, explicit_source=False, headless=False)))
        """, timeout=60)
    assert outcome.code == 0 and not outcome.err, outcome.describe()
    assert outcome.out.strip() == "None", outcome.out
    record(refused=True)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**80), 2**80) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                  max_size=4),
    max_leaves=12)
fields = st.sampled_from(["source.kind", "source.name", "source.shape", "source.seed",
                          "source.params", "source.tensor", "source.axis", "settings.bits",
                          "settings.axis", "settings.group_size", "settings.method",
                          "settings.percentile", "settings.manual_clip", "settings.rounding",
                          "settings.narrow_range", "settings.runtime", "view.dark", "version",
                          "view", "settings", "source"])


@hostile_settings(ci=200, long=5000)
@given(changes=st.dictionaries(fields, json_values, max_size=3))
def test_arbitrary_session_documents(changes):
    """Any document: a Session whose settings pass their own check, or a SessionError."""
    try:
        data = doc(**changes)
    except TypeError:  # an outer field replaced by a non-object, then an inner one set
        return
    try:
        session = parse_session(data, check_source=False)
    except SessionError as exc:
        assert "\n" not in str(exc)
        record(refused=True)
        return
    record(refused=False)
    session.settings.check()
    assert session.settings.group_size is None or session.settings.group_size <= 1 << 24
