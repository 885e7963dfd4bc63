"""Command-line entry point: ``quantscope [FILE] [options]`` opens the window; subcommands
(``report``, ``scan``, ``export``) print or write results without a window.

Each subcommand lives in its own module under ``quantscope.commands`` and exposes
``add_parser(subparsers)`` and ``run(args) -> int``; this module only dispatches, so adding a
command never touches the others.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from quantscope.commands import export, plan, report, scan
from quantscope.errors import QuantscopeError, one_line

#: Subcommand name -> its module (``add_parser(subparsers)``, ``run(args) -> int``).
COMMANDS = {"report": report, "scan": scan, "export": export, "plan": plan}


class _Parser(argparse.ArgumentParser):
    """argparse with its refusals in the same one-line form as every other error."""

    def error(self, message: str):
        print(f"quantscope: error: {one_line(message)} (see {self.prog} --help)",
              file=sys.stderr)
        raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    """Run quantscope with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = COMMANDS
    if argv and argv[0] in commands:
        parser = _Parser(prog="quantscope")
        sub = parser.add_subparsers(dest="command", required=True)
        for module in commands.values():
            module.add_parser(sub)
        args = parser.parse_args(argv)
        module = commands[args.command]
    else:
        from quantscope.gui import launch  # Qt is loaded only for the window, not for a report

        module = launch
        parser = _Parser(prog="quantscope", description=module.__doc__)
        module.add_arguments(parser)
        args = parser.parse_args(argv)
    try:
        return int(module.run(args))
    except QuantscopeError as exc:
        print(f"quantscope: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except MemoryError:  # anywhere: a tensor or a request too big for this machine
        print("quantscope: error: not enough memory for this request (try a smaller tensor, "
              "or per-tensor instead of per-group)", file=sys.stderr)
        return 2
