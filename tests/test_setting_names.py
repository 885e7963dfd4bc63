"""One table of setting names (``quantscope.state.setting_names``) serves every way in: the
Python handle's keywords, the command line of the window and of ``report``, and session and
talk files. Each name and alias of the table is accepted by each of them, and none of them
accepts a name the table lacks."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from quantscope.cli import build_parser
from quantscope.state import Settings, SettingsError
from quantscope.state.session import SessionError, parse_session
from quantscope.state.setting_names import BY_FIELD, BY_KEYWORD, SETTING_NAMES, settings_changes
from quantscope.state.talk import TalkError, talk_from_dict

#: A value each keyword accepts, and the field change it makes.
KEYWORD_VALUES = {
    "method": ("mse", {"method": "mse"}),
    "percentile": (99.9, {"percentile": 99.9}),
    "manual_clip": ((-1.0, 2.0), {"manual_clip": (-1.0, 2.0)}),
    "clip": ((-1.0, 2.0), {"manual_clip": (-1.0, 2.0), "method": "manual"}),
    "rounding": ("half_away", {"rounding": "half_away"}),
    "narrow_range": (True, {"narrow_range": True}),
    "code_range": ("full", {"narrow_range": False}),
    "bits": (4, {"bits": 4}),
    "axis": (1, {"axis": 1}),
    "group_size": (32, {"group_size": 32}),
    "runtime": ("tflite", {"runtime": "tflite"}),
    "preset": ("tflite", {"runtime": "tflite"}),
    "formats": (("int8/channel", "nvfp4", "mxfp4", "fp8_e4m3/tensor"),
                {"formats": ("int8/channel", "nvfp4", "mxfp4", "fp8_e4m3/tensor")}),
}
#: Command-line words for each option (the window's and report's), and the field change.
OPTION_VALUES = {
    "--method": (["mse"], {"method": "mse"}),
    "--percentile": (["99.9"], {"percentile": 99.9}),
    "--clip": (["-1", "2"], {"manual_clip": (-1.0, 2.0), "method": "manual"}),
    "--rounding": (["half_away"], {"rounding": "half_away"}),
    "--code-range": (["full"], {"narrow_range": False}),
    "--bits": (["4"], {"bits": 4}),
    "--group-size": (["32"], {"group_size": 32}),
    "--preset": (["tflite"], {"runtime": "tflite"}),
    "--runtime": (["tflite"], {"runtime": "tflite"}),
    "--compare": (["nvfp4,mxfp4,int8/channel,fp8_e4m3/tensor"],
                  {"formats": ("nvfp4", "mxfp4", "int8/channel", "fp8_e4m3/tensor")}),
}


def test_the_table_names_every_setting_once():
    assert list(BY_FIELD) == [f.name for f in dataclasses.fields(Settings)]
    keywords = [k for row in SETTING_NAMES for k in row.keywords]
    flags = [f for row in SETTING_NAMES for f in row.flags]
    assert len(keywords) == len(set(keywords)) and len(flags) == len(set(flags))
    assert all(row.keywords[0] == row.field for row in SETTING_NAMES)
    assert set(KEYWORD_VALUES) == set(BY_KEYWORD)
    assert set(OPTION_VALUES) == {f for f in flags if f != "--axis"}  # --axis: the source's


@pytest.mark.parametrize("keyword", sorted(BY_KEYWORD))
def test_each_keyword_is_taken_by_the_python_handle(keyword):
    value, changes = KEYWORD_VALUES[keyword]
    assert settings_changes(Settings(), {keyword: value}, ndim=2) == changes


def test_the_python_handle_refuses_names_the_table_lacks():
    for name in ("clip_window", "narrow", "preset_name", "granularity", "code-range"):
        with pytest.raises(SettingsError, match="unknown setting"):
            settings_changes(Settings(), {name: 1})
    with pytest.raises(SettingsError, match="runtime and preset name the same setting"):
        settings_changes(Settings(), {"preset": "tflite", "runtime": "pytorch"})


def _parse(command, words):
    parser, _ = build_parser(command)
    argv = ([command] if command else []) + words
    return parser.parse_args(argv)


@pytest.mark.parametrize("flag", sorted(OPTION_VALUES))
@pytest.mark.parametrize("command", [None, "report"], ids=["window", "report"])
def test_each_option_is_taken_by_the_command_line(command, flag):
    from quantscope.state.options import settings_from_args

    words, changes = OPTION_VALUES[flag]
    if flag == "--compare" and command == "report":  # the comparison layout is the window's
        with pytest.raises(SystemExit):
            _parse(command, [flag, *words])
        return
    args = _parse(command, [flag, *words])
    got = settings_from_args(args, groups=("settings", "window"))
    assert {k: v for k, v in dataclasses.asdict(got).items()
            if v != getattr(Settings(), k)} == changes


def test_the_command_line_offers_no_setting_the_table_lacks():
    """Every option of the settings' own group is a row's, and the window and report read
    the --axis row with the source."""
    from quantscope.state.options import add_settings_arguments

    p = argparse.ArgumentParser()
    add_settings_arguments(p)
    offered = {s for a in p._actions for s in a.option_strings} - {"-h", "--help"}
    assert offered == {f for row in SETTING_NAMES if row.group == "settings" for f in row.flags}
    for command in (None, "report"):
        assert _parse(command, ["--axis", "1"]).axis == 1


def _session(settings: dict) -> dict:
    return {"format": "quantscope-session", "version": 1, "source": None,
            "settings": settings}


def _talk(settings: dict) -> dict:
    return {"format": "quantscope-talk", "version": 1, "scenes": [
        {"source": {"kind": "generator", "name": "normal", "shape": [16, 32], "seed": 0},
         "settings": settings}]}


@pytest.mark.parametrize("row", SETTING_NAMES, ids=lambda r: r.field)
def test_session_and_talk_files_store_each_setting_under_its_key(row):
    _, changes = KEYWORD_VALUES[row.field]
    stored = Settings(**changes).to_dict()[row.session_key]
    assert parse_session(_session({row.session_key: stored})).settings == Settings(**changes)
    assert talk_from_dict(_talk({row.session_key: stored})).scenes[0].settings == Settings(
        **changes)


@pytest.mark.parametrize("alias", sorted(set(BY_KEYWORD) - set(BY_FIELD)))
def test_files_keep_one_key_per_setting_and_refuse_aliases(alias):
    value, _ = KEYWORD_VALUES[alias]
    value = list(value) if isinstance(value, tuple) else value
    with pytest.raises(SessionError, match="unknown setting"):
        parse_session(_session({alias: value}))
    with pytest.raises(TalkError, match="unknown setting"):
        talk_from_dict(_talk({alias: value}))


@pytest.mark.parametrize("command", ["scan", "plan", "report", None],
                         ids=["scan", "plan", "report", "window"])
def test_every_command_spells_a_setting_as_the_table_does(command):
    """A command may take fewer settings or fewer values (``scan`` has no manual window),
    but an option that sets a setting has the table's flags, all of them, and no other."""
    parser, _ = build_parser(command)
    if command is not None:
        parser = parser._subparsers._group_actions[0].choices[command]
    by_flag = {f: row for row in SETTING_NAMES for f in row.flags}
    seen = set()
    for action in parser._actions:
        rows = {by_flag[f].field: by_flag[f] for f in action.option_strings if f in by_flag}
        if rows:
            (row,) = rows.values()
            assert tuple(action.option_strings) == row.flags, (command, action.dest)
            assert action.dest == row.dest, (command, action.dest)
            seen.add(row.field)
    assert seen >= {"method"}
