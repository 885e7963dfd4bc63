"""The command line's conventions: --version, a top-level help naming every command with an
example, examples under each command's help, no reST markup, -q/-v, --preset = --runtime."""

from __future__ import annotations

import json

import pytest

import quantscope
from quantscope.cli import COMMANDS, EXAMPLES, main, plain


def test_version(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"quantscope {quantscope.__version__} (numpy ")
    with pytest.raises(SystemExit) as exc:
        main(["report", "--version"])
    assert exc.value.code == 0


def test_top_level_help_lists_every_command_with_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f"\n  {name} " in out and EXAMPLES[name][1][0] in out
    assert "``" not in out and ":func:" not in out and ":class:" not in out


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_help_has_examples_and_no_markup(capsys, name):
    with pytest.raises(SystemExit):
        main([name, "--help"])
    out = capsys.readouterr().out
    assert "examples:\n" in out and all(e in out for e in EXAMPLES[name][1])
    assert "``" not in out and ":func:`" not in out and ":class:`" not in out


def test_report_help_names_every_format_it_takes(capsys):
    """``report --format`` takes every format of the catalog; its help lists each one."""
    from quantscope.core.formats.catalog import FORMATS

    with pytest.raises(SystemExit):
        main(["report", "--help"])
    words = set(capsys.readouterr().out.replace(",", " ").split())
    assert [f for f in FORMATS if f not in words] == []


def test_plain_strips_roles():
    assert plain("see :func:`~quantscope.core.analyze` and ``--bits``") == "see analyze and --bits"
    assert plain(":class:`quantscope.state.ExplorerState`") == "quantscope.state.ExplorerState"


def test_preset_and_its_runtime_alias_agree(capsys):
    assert main(["report", "--sample", "query_weight", "--preset", "tflite", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main(["-q", "report", "--sample", "query_weight", "--runtime", "tflite",
                 "--json"]) == 0
    b = json.loads(capsys.readouterr().out)
    assert a == b and a["applied"]["preset"] == "tflite" and a["schema"] == "quantscope.report/1"


def test_verbose_prints_the_traceback_quiet_does_not(capsys):
    assert main(["report", "/no/such/file.npy", "-v"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith("quantscope: error:")
    assert main(["-q", "report", "/no/such/file.npy"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("quantscope: error:")
