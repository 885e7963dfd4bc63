"""Talk files: validated as a whole with clear errors, round-tripped as JSON, and the built-in
talk's five scenes with captions computed from the engine's reports."""

from __future__ import annotations

import json

import pytest

from quantscope.state import ExplorerState
from quantscope.state.talk import (
    TalkError,
    builtin_talk,
    load_talk,
    save_talk,
    scene_caption,
    talk_from_dict,
)


def test_builtin_talk_round_trips_and_walks_the_five_questions(tmp_path):
    talk = builtin_talk()
    assert len(talk.scenes) == 5
    path = tmp_path / "t.json"
    save_talk(talk, path)
    assert load_talk(path) == talk
    assert [s.caption for s in talk.scenes] == ["zero_point", "symmetric_limits", "derive",
                                                "clipping", "outliers"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(format="x"), "not a talk file"),
    (lambda d: d.update(version=9), "version 9"),
    (lambda d: d.update(scenes=[]), "non-empty"),
    (lambda d: d["scenes"][1].update(tab="Nope"), "scene 2: tab must be one of"),
    (lambda d: d["scenes"][0].update(pair="7"), "scene 1: pair"),
    (lambda d: d["scenes"][0].update(zoom=[3, 1]), "scene 1: zoom"),
    (lambda d: d["scenes"][0].update(extra=1), "scene 1: unknown key"),
    (lambda d: d["scenes"][0]["settings"].update(bits=99), "scene 1: bad settings"),
    (lambda d: d["scenes"][0]["source"].update(name="nope"), "scene 1: unknown sample"),
])
def test_bad_talks_say_what_is_wrong(change, message):
    doc = json.loads(json.dumps(builtin_talk().to_dict()))
    change(doc)
    with pytest.raises(TalkError, match=message):
        talk_from_dict(doc)


def test_unreadable_files(tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text("{nope")
    with pytest.raises(TalkError, match="not valid JSON"):
        load_talk(bad)
    with pytest.raises(TalkError, match="cannot read"):
        load_talk(tmp_path / "missing.json")
    with pytest.raises(TalkError, match="scene 6 does not exist"):
        builtin_talk().scene(6)


def test_captions_are_the_reports_numbers():
    from quantscope.core.text.formatting import fmt_db
    from quantscope.state.source import load_source

    talk = builtin_talk()
    scene = talk.scene(1)
    st = ExplorerState(scene.settings)
    x, _ = load_source(scene.source)
    st.set_tensor(x, scene.source)
    st.compute()
    text = scene_caption(scene, st.results)
    s, a = st.results["symmetric/tensor"], st.results["asymmetric/tensor"]
    assert fmt_db(s.sqnr_db) in text and fmt_db(a.sqnr_db) in text
    assert f"{s.codes_used} of" in text
    assert scene_caption(scene, {}) == ""  # nothing said before the numbers exist
    assert "4/255" in scene_caption(talk.scene(3), {})
