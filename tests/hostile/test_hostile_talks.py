"""Talk files get the reader sessions have: a regular file of bounded size, JSON whose
nesting and numbers are refused with a TalkError, zooms that are finite and drawable, and
options a talk cannot honour refused on the command line rather than dropped."""

from __future__ import annotations

import json
import os
import re

import pytest
from hostile_support import assert_one_line_error, record

from quantscope.cli import main
from quantscope.state.talk import TalkError, builtin_talk, load_talk


def _talk_text(zoom) -> str:
    doc = builtin_talk().to_dict()
    doc["scenes"][0]["zoom"] = zoom
    return json.dumps(doc)


CORPUS = [
    ("deep", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("digits", '{"format": "quantscope-talk", "version": ' + "9" * 5000 + "}",
     "not valid JSON"),
    ("zoom-huge", _talk_text([-1e308, 1e308]), "zoom must be finite numbers within"),
    ("zoom-inf", _talk_text([-1e999, 1e999]).replace("-Infinity", "-Infinity"),
     "zoom must be finite"),
    ("zoom-nan", _talk_text([0, 1]).replace('"zoom": [0, 1]', '"zoom": [NaN, 1]'),
     "zoom must be finite"),
    ("zoom-bigint", _talk_text([0, 1]).replace('"zoom": [0, 1]',
                                                '"zoom": [0, 1' + "0" * 400 + "]"),
     "zoom must be finite"),
    ("zoom-flat", _talk_text([1.0, 1.0 + 1e-12]), "wide enough to draw"),
    ("zoom-text", _talk_text(["0", "1"]), "zoom must be [lo, hi], two numbers"),
    ("zoom-bool", _talk_text([False, True]), "two numbers"),
    ("title-type", json.dumps({**builtin_talk().to_dict(), "scenes": [
        {**builtin_talk().to_dict()["scenes"][0], "title": {"a": 1}}]}), "'title' must be text"),
    ("not-utf8", b"\xff\xfe{}", "not a text (UTF-8) file"),
    ("too-big", " " * (1 << 20) + "{}", "too big for a talk"),
]


@pytest.mark.parametrize(("name", "text", "message"), CORPUS, ids=[c[0] for c in CORPUS])
def test_hostile_talk_files_are_refused_with_a_talk_error(tmp_path, name, text, message):
    path = tmp_path / f"{name}.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(TalkError, match=re.escape(message)):
        load_talk(path)
    record(refused=True)


def test_a_fifo_is_not_read(tmp_path):
    fifo = tmp_path / "talk.json"
    os.mkfifo(fifo)
    with pytest.raises(TalkError, match="not a regular file"):
        load_talk(fifo)
    record(refused=True)


def test_a_normal_zoom_still_loads(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(_talk_text([-0.5, 2.5]))
    assert load_talk(path).scenes[0].zoom == (-0.5, 2.5)
    record(refused=False)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_window_refuses_an_infinite_zoom_before_drawing(tmp_path, capsys):
    talk = tmp_path / "t.json"
    talk.write_text(_talk_text([-1e999, 1e999]))
    shot = tmp_path / "shot.png"
    code, out, err = _run(capsys, "--talk", str(talk), "--screenshot", str(shot))
    assert_one_line_error(code, out, err, "scene 1: zoom must be finite")
    assert not shot.exists()
    record(refused=True)


def test_compare_under_talk_is_refused_not_dropped(tmp_path, capsys):
    code, out, err = _run(capsys, "--talk", "--compare", "int8/channel,mxfp4",
                          "--screenshot", str(tmp_path / "s.png"))
    assert_one_line_error(code, out, err, "give it without --compare")
    record(refused=True)
