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

from quantscope.commands import export, report, scan
from quantscope.errors import QuantscopeError

#: Subcommand name -> its module (``add_parser(subparsers)``, ``run(args) -> int``).
COMMANDS = {"report": report, "scan": scan, "export": export}


def main(argv: Sequence[str] | None = None) -> int:
    """Run quantscope with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = COMMANDS
    if argv and argv[0] in commands:
        parser = argparse.ArgumentParser(prog="quantscope")
        sub = parser.add_subparsers(dest="command", required=True)
        for module in commands.values():
            module.add_parser(sub)
        args = parser.parse_args(argv)
        module = commands[args.command]
    else:
        from quantscope.gui import launch  # Qt is loaded only for the window, not for a report

        module = launch
        parser = argparse.ArgumentParser(prog="quantscope", description=module.__doc__)
        module.add_arguments(parser)
        args = parser.parse_args(argv)
    try:
        return int(module.run(args))
    except QuantscopeError as exc:
        print(f"quantscope: error: {exc}", file=sys.stderr)
        return 2
