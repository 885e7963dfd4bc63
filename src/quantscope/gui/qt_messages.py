"""Qt's messages that say nothing to a person, kept off stderr.

Qt's offscreen platform (what ``quantscope.figure`` and ``--screenshot`` draw on) answers every
top-level window's size hint with "This plugin does not support propagateSizeHints()": two to
five red lines under each figure cell of a notebook, about a call that has no meaning
offscreen. Only that exact message is dropped; every other one goes to the handler that was in
place before (Qt's default, or pytest-qt's, which fails a test on warnings).
"""

from __future__ import annotations

#: Messages dropped, exactly as Qt writes them.
DROPPED = frozenset({"This plugin does not support propagateSizeHints()"})

_installed = False


def drop_offscreen_noise() -> None:
    """Install the filter once per process (chained to the previous handler)."""
    global _installed
    if _installed:
        return
    _installed = True
    from PySide6.QtCore import qInstallMessageHandler

    previous = None

    def handler(kind, context, message: str) -> None:
        if message in DROPPED:
            return
        if previous is not None:
            previous(kind, context, message)
        else:
            import sys

            print(message, file=sys.stderr)

    previous = qInstallMessageHandler(handler)
