"""The explorer's state: one tensor, the settings, and the four panes' reports. Qt-free.

The evented model itself is :class:`~quantscope.state.explorer.ExplorerState` (its module
docstring states the contract the window and the views rely on); this face re-exports it with
the value types and pure functions the front ends use.
"""

from __future__ import annotations

from quantscope.state.axes import ROLES, AxisChoice, choose_axis, units
from quantscope.state.choices import FormatChoice, PaneKey
from quantscope.state.compute import (
    ComputeRequest,
    ComputeResult,
    analyze_with,
    applied_settings,
    compute_reports,
    pane_params,
    params_key,
    preset_in_force,
    preset_rules,
    unit_range,
)
from quantscope.state.errors import SettingsError
from quantscope.state.explorer import ExplorerState
from quantscope.state.settings import (
    METHODS,
    PANES,
    RUNTIME_DESCRIPTIONS,
    RUNTIMES,
    Settings,
)
from quantscope.state.source import (
    Source,
    TensorOverview,
    load_source,
    overview,
    prepare_tensor,
    tensor_problem,
    working_tensor,
)
from quantscope.state.titles import pane_title

__all__ = [
    "METHODS",
    "PANES",
    "ROLES",
    "RUNTIMES",
    "RUNTIME_DESCRIPTIONS",
    "AxisChoice",
    "ComputeRequest",
    "ComputeResult",
    "ExplorerState",
    "FormatChoice",
    "PaneKey",
    "Settings",
    "SettingsError",
    "Source",
    "TensorOverview",
    "analyze_with",
    "applied_settings",
    "choose_axis",
    "compute_reports",
    "load_source",
    "overview",
    "pane_params",
    "pane_title",
    "params_key",
    "prepare_tensor",
    "preset_in_force",
    "preset_rules",
    "tensor_problem",
    "unit_range",
    "units",
    "working_tensor",
]
