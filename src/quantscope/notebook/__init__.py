"""Live panes in a Jupyter notebook without Qt: :func:`quantscope.widget` (ipywidgets).

The widget subscribes to the same Qt-free :class:`~quantscope.state.ExplorerState` as the
window and ``quantscope report``; it draws each pane with NumPy into a small palette PNG, so it
runs wherever Jupyter widgets run (JupyterLab, Notebook 7, VS Code, a remote kernel) with
nothing but ``ipywidgets`` installed (``pip install 'quantscope[notebook]'``).
"""

from quantscope.notebook.widget import QuantWidget, widget

__all__ = ["QuantWidget", "widget"]
