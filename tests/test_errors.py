"""Every error type of the package derives from the one root, ``QuantscopeError``: the command
line and the window each catch that root alone to show a refusal as one line."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import quantscope
from quantscope.errors import QuantscopeError

#: Exceptions used as signals inside one module (or its package), never shown to anyone: each
#: is caught and turned into a quantscope error, or is the interruption itself (SIGTERM unwinds
#: as Ctrl-C does).
SIGNALS = {"quantscope.state.load_job._Several", "quantscope.commands.scan._Interrupted",
           "quantscope.errors.Terminated", "quantscope.io.stored.compressed._Misfit",
           "quantscope.io.torch_globals.PickleRefused"}


def test_every_error_type_derives_from_the_root():
    seen, strays = [], []
    for info in pkgutil.walk_packages(quantscope.__path__, "quantscope."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__):
                qualified = f"{module.__name__}.{name}"
                seen.append(qualified)
                if not issubclass(obj, QuantscopeError) and qualified not in SIGNALS:
                    strays.append(qualified)
    assert strays == []
    assert "quantscope.errors.Cancelled" in seen and len(seen) >= 10, seen
