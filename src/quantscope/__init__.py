"""quantscope: see, exactly, what int8 quantization does to a tensor.

``import quantscope`` gives the NumPy engine only; it never imports Qt, so the engine can be
used as a library on a server or in a notebook. The window lives in ``quantscope.gui``; from
Python, ``quantscope.view(x)`` opens it on a tensor, ``quantscope.run()`` keeps it open in a
script, and ``quantscope.figure(x)`` draws the panes for a notebook without a display. Those
three are looked up on first use, so Qt (and the explorer's state) load only when asked for.
"""

from quantscope.core import *  # noqa: F403
from quantscope.core import __all__ as _core_all
from quantscope.core.kernels import compiled as _compiled

#: Front-end names -> the module that defines them (imported on first access).
_FRONT_END = {"view": "quantscope.viewer", "run": "quantscope.viewer",
              "Viewer": "quantscope.viewer", "figure": "quantscope.figures",
              "Figure": "quantscope.figures", "load": "quantscope.io",
              "list_tensors": "quantscope.io", "scan": "quantscope.state.scan_api",
              "ModelTable": "quantscope.state.model_table",
              "observe": "quantscope.state.observe", "plan": "quantscope.state.plan",
              "widget": "quantscope.notebook"}

__all__ = [*_core_all, *_FRONT_END]
__version__ = "0.1.0"


def _twins_on_a_first_run() -> None:
    """The engine API's first compiled loop in a notebook or at a prompt: on a first run
    (Numba's cache lacks the loops) NumPy twins compute what they can at once while another
    process compiles (:func:`quantscope.state.compile_ahead.stand_in_for_engine`)."""
    import importlib

    # the state loads only here, when a loop is first needed at a prompt: `import quantscope`
    # stays the engine alone, and the modules of every layer that read this package (its
    # version) do not depend on the state, as the front ends below are looked up by name
    importlib.import_module("quantscope.state.compile_ahead").stand_in_for_engine()


_compiled.on_first_loop(_twins_on_a_first_run)


def __getattr__(name: str):
    module = _FRONT_END.get(name)
    if module is None:
        raise AttributeError(f"module 'quantscope' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FRONT_END))
