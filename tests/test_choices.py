"""Panes and format choices are typed values that read and write exactly the text they
always had: one parser (the constructor), one printer (``str``), the parts as attributes,
and sessions, talks and JSON keys unchanged."""

from __future__ import annotations

import json
import pickle

import pytest

from quantscope.state import PANES, FormatChoice, PaneKey, Settings, SettingsError
from quantscope.state.formats import CHOICES, DEFAULT_COMPARISON, format_title, pane_specs
from quantscope.state.session import parse_session

#: A session as quantscope wrote it before panes and formats were typed (every setting,
#: the comparison layout on): it must load, and save back to the same document.
OLD_SESSION = """{
  "format": "quantscope-session",
  "version": 1,
  "source": {"kind": "generator", "name": "normal", "tensor": null, "shape": [16, 64],
             "seed": 3, "params": {}, "axis": null, "role": null},
  "settings": {"method": "percentile", "percentile": 99.9, "manual_clip": null,
               "rounding": "half_away", "narrow_range": true, "bits": 6, "axis": -1,
               "group_size": null, "runtime": null,
               "formats": ["int8/channel", "fp8_e5m2/tensor", "nvfp4", "int4_g128"]},
  "view": {"dark": true, "presentation": false}
}"""


def test_panes_parse_and_print_their_old_text():
    assert [str(p) for p in PANES] == ["symmetric/tensor", "symmetric/channel",
                                       "asymmetric/tensor", "asymmetric/channel"]
    for pane in PANES:
        assert PaneKey.parse(str(pane)) is pane
        assert PaneKey.of(pane.symmetric, pane.granularity) is pane
        assert pane.scheme + "/" + pane.granularity == pane
    assert [p.per_tensor for p in PANES] == [True, False, True, False]
    assert {"symmetric/channel": 1}[PaneKey.SYMMETRIC_CHANNEL] == 1  # plain-text keys work
    assert json.dumps({PaneKey.ASYMMETRIC_TENSOR: 1}) == '{"asymmetric/tensor": 1}'


@pytest.mark.parametrize("text", ["symmetric/group", "symmetric", "", None, 3,
                                  "Symmetric/tensor"])
def test_an_unknown_pane_is_refused_by_name(text):
    with pytest.raises(SettingsError, match="unknown pane"):
        PaneKey.parse(text)


def test_format_choices_carry_their_parts():
    c = FormatChoice("fp8_e4m3/channel")
    assert (c.name, c.granularity, c.per_channel, c.blocked) == ("fp8_e4m3", "channel", True,
                                                                  False)
    b = FormatChoice("mxfp4")
    assert (b.name, b.granularity, b.blocked) == ("mxfp4", None, True)
    assert FormatChoice.of("int8", "tensor") == "int8/tensor"
    assert FormatChoice(c) is c
    for choice in CHOICES:  # the window's every choice prints as it parses
        assert FormatChoice.of(choice.name, choice.granularity) == choice
        assert type(choice) is FormatChoice
    assert pickle.loads(pickle.dumps(c)).granularity == "channel"
    assert json.dumps([c, b]) == '["fp8_e4m3/channel", "mxfp4"]'


@pytest.mark.parametrize("text", ["", "/tensor", "int8/group", "int8/", 8, None])
def test_a_malformed_format_choice_is_refused(text):
    with pytest.raises(SettingsError, match="pane format"):
        FormatChoice(text)


def test_settings_hold_typed_formats_and_write_text():
    s = Settings(formats=("int8/channel", "nvfp4", "mxfp4", "fp8_e4m3/tensor")).check()
    assert all(type(f) is FormatChoice for f in s.formats)
    assert s.to_dict()["formats"] == ["int8/channel", "nvfp4", "mxfp4", "fp8_e4m3/tensor"]
    assert Settings.from_dict(s.to_dict()) == s
    with pytest.raises(SettingsError, match="unknown pane format"):
        Settings(formats=("int8/channel", "nvfp5", "mxfp4", "fp8_e4m3/tensor")).check()
    with pytest.raises(SettingsError, match="four pane formats"):
        Settings.from_dict({"formats": ["int8/channel", "nvfp4"]})


def test_an_old_session_loads_and_saves_back_unchanged():
    doc = json.loads(OLD_SESSION)
    session = parse_session(doc)
    assert session.settings.formats == tuple(doc["settings"]["formats"])
    assert [f.name for f in session.settings.formats] == ["int8", "fp8_e5m2", "nvfp4",
                                                          "int4_g128"]
    saved = session.to_dict()
    assert saved["settings"] == doc["settings"] and saved["source"] == doc["source"]


def test_titles_and_specs_read_the_parts():
    assert format_title("fp8_e4m3/tensor") == "FP8 E4M3 · per-tensor"
    assert format_title("mxfp4") == "MXFP4 · blocks of 32 · E8M0 scales"
    assert pane_specs(["int8", "nvfp4"]) == ["int8/tensor", "int8/channel", "nvfp4"]
    assert DEFAULT_COMPARISON == ("int8/channel", "fp8_e4m3/tensor", "mxfp4", "int4_g128")
