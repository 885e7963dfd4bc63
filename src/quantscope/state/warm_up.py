"""The launcher's warm-up: one load and its reports on a small tensor, run the way the
window runs them, so that every compiled loop the panes need is loaded before the window
shows (:func:`warm_up_engine`; the other loops are compiled ahead by
:mod:`quantscope.state.compile_ahead`)."""

from __future__ import annotations

import numpy as np

from quantscope.state.compute import compute_reports
from quantscope.state.explorer import ExplorerState
from quantscope.state.source import (
    Source,
    load_source,
    overview,
    prepare_tensor,
    working_tensor,
)

#: The settings changes :func:`warm_up_engine` runs after the defaults: each reaches compiled
#: loops the default panes do not (percentiles, a manual window, another runtime's rule).
WARM_UP_CHANGES: tuple[dict, ...] = (
    {"method": "percentile", "percentile": 99.9},
    {"method": "manual", "manual_clip": (-3.0, 3.0)},
    {"method": "minmax", "runtime": "onnxruntime"},
    {"runtime": None, "rounding": "half_away"},
)
#: The warm-up tensor: large enough that the engine splits its work across its threads
#: (those shares are compiled loops of their own array layouts) and that reports take the
#: prepared path (above ``compute.DIRECT_MAX``), small enough to take a few hundred
#: milliseconds.
WARM_UP_SHAPE = (512, 1024)
_warmed = False


def warm_up_engine() -> None:
    """Run a load and its reports once, on a small tensor, the way the window does (once per
    process; later calls return at once).

    Loading a compiled loop from Numba's cache runs inside LLVM for 10-300 ms (the first one
    initialises it), and much of that holds the GIL: done in the worker during the first
    load, it stalled the GUI thread for that long. The launcher calls this before the window
    shows, so no load in the window loads a compiled loop."""
    global _warmed
    if _warmed:
        return
    _warmed = True
    run_warm_up()


def skip_warm_up() -> None:
    """Make :func:`warm_up_engine` return at once from now on: NumPy stand-ins serve the
    panes while another process compiles the loops, which :func:`run_warm_up` then loads
    (see :func:`quantscope.state.compile_ahead.start_with_stand_ins`)."""
    global _warmed
    _warmed = True


def run_warm_up() -> None:
    """The warm-up's load and reports, whether or not they ran before."""
    state = ExplorerState(cache_reports=False)
    source = Source.generator("outliers", WARM_UP_SHAPE, 0, count=16, magnitude=25.0)
    x, dtype = load_source(source)
    x = working_tensor(x)
    prepared = prepare_tensor(x, state.settings, None)
    state.set_tensor(x, source, prepared=prepared, overview=overview(x, dtype, prepared),
                     checked=True)
    # a large tensor's overview bins its sorted values (this one is summarised by NumPy)
    prepared.layout(None, None).histogram(
        np.histogram_bin_edges(np.zeros(0, np.float32), bins=8, range=(-1.0, 1.0)))
    compute_reports(state.request())
    for changes in WARM_UP_CHANGES:
        state.update_settings(**changes)
        compute_reports(state.request())
