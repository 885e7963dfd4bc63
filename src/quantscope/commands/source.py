"""Where a command's file comes from: a path, or ``--sample NAME`` (one of the bundled ones).

Shared by ``scan`` and ``export`` so both accept the same spelling and give the same errors.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from quantscope.errors import UserError


def add_file_or_sample(parser: argparse.ArgumentParser, what: str) -> None:
    """Add the optional positional FILE and ``--sample NAME`` (exactly one is required)."""
    from quantscope.io.samples import list_samples

    names = ", ".join(name for name, _, _ in list_samples())
    parser.add_argument("file", nargs="?", metavar="FILE", help=what)
    parser.add_argument("--sample", metavar="NAME", help=f"a bundled sample instead: {names}")


def resolve_file_or_sample(args: argparse.Namespace, default_sample: str | None = None
                           ) -> tuple[Path, str]:
    """``(path, label)`` for the parsed arguments; the label is what output calls the source.

    With neither FILE nor ``--sample``, ``default_sample`` is used (``report`` shows the demo),
    or the request is refused when there is none.
    """
    from quantscope.io.samples import sample_path

    if args.file and args.sample:
        raise UserError("give either FILE or --sample NAME, not both")
    sample = args.sample or (None if args.file else default_sample)
    if sample:
        return sample_path(sample), f"sample {sample}"
    if not args.file:
        raise UserError("no input: give a FILE or --sample NAME")
    from quantscope.io.checks import show_path

    return Path(args.file), show_path(args.file)  # printed: escaped if it holds control codes
