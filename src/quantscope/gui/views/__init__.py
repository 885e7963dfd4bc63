"""The explanatory views (Trade-off, Channels, Bit width, Formats, Matmul, Mapping), one module
each, and their window integration, :mod:`~quantscope.gui.views.controller`: the window calls
its one entry point, :func:`install_views`, once while it is built.
"""

from __future__ import annotations

from quantscope.gui.views.bitwidth import BitwidthView
from quantscope.gui.views.channels import ChannelsView
from quantscope.gui.views.controller import ViewsController, install_views
from quantscope.gui.views.formats import FormatsView
from quantscope.gui.views.tradeoff import TradeoffView

__all__ = ["BitwidthView", "ChannelsView", "FormatsView", "TradeoffView", "ViewsController",
           "install_views"]
