"""The state's one error type (its own module so every state module can raise it)."""

from quantscope.errors import QuantscopeError


class SettingsError(QuantscopeError, ValueError):
    """A setting outside what the engine accepts (bits 9, an axis the tensor lacks, ...)."""


def short_repr(value: object) -> str:
    """``repr`` for a message: short, and safe for ints beyond Python's 4300-digit ``str``
    limit (a session file may hold a 5000-digit number)."""
    try:
        text = repr(value)
    except ValueError:
        return "<a number too long to print>"
    return text if len(text) <= 60 else text[:57] + "..."
