"""The explorer window (PySide6 + pyqtgraph): the only package that imports Qt.

``quantscope.gui.launch`` is what ``quantscope [FILE]`` runs; :class:`MainWindow` can also be
built from Python over an :class:`quantscope.state.ExplorerState`. Import
:func:`configure_pyqtgraph` effects happen before any plot widget exists.
"""

from __future__ import annotations

import ctypes
import sys


def _pin_singletons() -> None:
    """Work around PySide6 6.12's abi3 wheels dropping a reference to ``None``, ``True`` and
    ``False`` on calls that return them (``QLabel.setText``, ``processEvents``...) under
    Python < 3.12.

    From 3.12 these singletons are immortal and the missing ``Py_INCREF`` is harmless; on 3.11
    ``None``'s refcount (about 5,000 at start-up) reaches zero after a few thousand Qt calls and
    the interpreter aborts with "none_dealloc: deallocating None" (measured: -1 reference per
    ``QLabel.setText``; "bool_dealloc" likewise). Adding 2^40 references makes them immortal in
    practice, as on 3.12. Every GUI module imports this package first, so the pin is in place
    before Qt runs.
    """
    if sys.version_info < (3, 12) and sys.implementation.name == "cpython":
        for obj in (None, True, False, NotImplemented, Ellipsis):
            ctypes.c_ssize_t.from_address(id(obj)).value += 1 << 40


_pin_singletons()


def configure_pyqtgraph() -> None:
    """White background, black foreground, antialiasing: set before any plot is created."""
    import pyqtgraph as pg

    pg.setConfigOptions(background="w", foreground="k", antialias=True)


def create_window(state=None, *, install_views: bool = True):
    """Configure pyqtgraph and build a :class:`~quantscope.gui.window.MainWindow`."""
    configure_pyqtgraph()
    from quantscope.gui.window import MainWindow

    return MainWindow(state, install_views=install_views)
