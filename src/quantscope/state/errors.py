"""The state's one error type (its own module so every state module can raise it)."""

from quantscope.errors import QuantscopeError


class SettingsError(QuantscopeError, ValueError):
    """A setting outside what the engine accepts (bits 9, an axis the tensor lacks, ...)."""
