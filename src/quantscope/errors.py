"""Errors that describe a problem with the user's input rather than a bug.

The command line prints them as one line and exits with code 2; the window shows them in a
message and keeps its previous state. Anything else that escapes is a bug.
"""


class QuantscopeError(Exception):
    """Base of every user-facing error: its message names the input and the problem."""


class UserError(QuantscopeError):
    """A bad command-line request (unknown tensor name, conflicting options, ...)."""


def one_line(text: str) -> str:
    """``text`` with every unprintable character escaped (``\\n``, ``\\x1b``...).

    Messages name paths and tensors that come from outside: a newline would break the one-line
    promise and an escape sequence would reach (and rewrite) the user's terminal.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


class EngineValueError(QuantscopeError, ValueError):
    """A value the engine cannot work with (zero scale, NaN in the tensor, bad zero point...)."""


class EngineTypeError(QuantscopeError, TypeError):
    """An argument of the wrong type: a tensor whose dtype has no meaningful quantization
    (integers, bools, complex, objects), or ``bits=2.5``, ``axis="0"``, ``qmin=None``..."""


class Cancelled(QuantscopeError):
    """A computation stopped because its result is no longer wanted (a newer request came, or
    the user pressed Cancel); whoever asked for it drops it without a message."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it unwinds as after Ctrl-C: temporary
    files are removed, a scan hands in what it finished, and the program exits 143."""
