"""The explorer window (PySide6 + pyqtgraph): the only package that imports Qt.

``quantscope.gui.launch`` is what ``quantscope [FILE]`` runs; :class:`MainWindow` can also be
built from Python over an :class:`quantscope.state.ExplorerState`. Import
:func:`configure_pyqtgraph` effects happen before any plot widget exists.
"""

from __future__ import annotations


def configure_pyqtgraph() -> None:
    """White background, black foreground, antialiasing: set before any plot is created."""
    import pyqtgraph as pg

    pg.setConfigOptions(background="w", foreground="k", antialias=True)


def create_window(state=None, *, install_views: bool = True):
    """Configure pyqtgraph and build a :class:`~quantscope.gui.window.MainWindow`, once the
    engine's compiled loops are loaded (:func:`quantscope.state.warm_up.warm_up_engine`, once
    per process; ``quantscope`` runs it before importing Qt): loaded during a load, they held
    the GIL in the worker and stalled the window for 60-300 ms."""
    # ``import quantscope.gui`` (pyqtgraph's configuration) must not build the explorer's
    # state nor the window's modules: they are imported when a window is made
    from quantscope.state.warm_up import warm_up_engine

    warm_up_engine()
    configure_pyqtgraph()
    from quantscope.gui.window import MainWindow

    return MainWindow(state, install_views=install_views)
