"""The engine's compiled loops, each imported on its first use.

Importing a kernel module imports Numba (0.5-2 s) and llvmlite, which ``import quantscope``
and a min/max report on a small tensor never need. Callers therefore import this module at
the top (it imports nothing) and write ``compiled.evaluate_rows(...)``: the first time a
name is asked for, :func:`__getattr__` imports the module that defines it and keeps the
object here, so later look-ups are a plain module attribute. This is the one place that
knows which module holds which loop; a name it does not list raises AttributeError.

:func:`stand_in` puts other objects behind some names for a while: the NumPy twins of
:mod:`quantscope.core.stats.loop_twins`, which give the same outputs bit for bit, serve the
window's first reports on a machine whose loops are still being compiled in another process.

In a Jupyter kernel, the first look-up of a loop registers the compile notice
(:mod:`quantscope.core.kernels.compile_notice`): the engine called from a notebook cell says
when it compiles, as the front ends do. There, and in an interactive interpreter, the first
look-up also calls the hook set by :func:`on_first_loop` (``import quantscope`` sets one that
puts the twins in place on a first run): ``qs.analyze`` as a kernel's first call is then
computed at once by the twins instead of after half a minute of compiling.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

#: Each name served here -> the kernel module (in this package, or a full module name) that
#: defines it.
HOMES: dict[str, str] = {
    "block_abs_max": "block_max",
    "block_min_max": "block_max",
    "BLOCK": "block_sums",
    "bin_counts": "block_sums",
    "build_range": "block_sums",
    "build_rows": "block_sums",
    "interval_sums": "block_sums",
    "n_records": "block_sums",
    "analyze_flat": "direct_kernel",
    "dequantize_into": "direct_kernel",
    "quantize_flat": "direct_kernel",
    "group_rows": "group_kernel",
    "sort_finite": "radix_sort",
    "rows_optimum": "mse_bound",
    "ARITHMETIC_CODES": "sorted_kernel",
    "LINE_ARITHMETIC": "sorted_kernel",
    "abs_order_stats": "sorted_kernel",
    "evaluate_rows": "sorted_kernel",
    "row_sums_of_squares": "sorted_kernel",
    "direct_rows": "quantscope.core.formats.format_kernel",
    "float_block_rows": "quantscope.core.formats.float_blocks",
    "sorted_rows": "quantscope.core.formats.format_kernel",
    "decode_blocks": "quantscope.core.formats.gguf_kernel",
    "encode_blocks": "quantscope.core.formats.gguf_kernel",
    "encode_report_blocks": "quantscope.core.formats.gguf_kernel",
    "report_blocks": "quantscope.core.formats.gguf_kernel",
    "value_span": "quantscope.core.formats.gguf_kernel",
    "group_codes": "quantscope.core.formats.torchao_kernel",
    "group_params": "quantscope.core.formats.torchao_kernel",
    "group_report": "quantscope.core.formats.torchao_kernel",
    "group_values": "quantscope.core.formats.torchao_kernel",
}


#: The names served by stand-ins now (see :func:`stand_in`).
_standing_in: set[str] = set()
#: Called before a loop without a stand-in is imported while stand-ins serve (see stand_in).
_until: Callable[[], object] | None = None
#: Called once, at the first look-up of a loop in an interactive session (see on_first_loop).
_first_loop: Callable[[], object] | None = None


def on_first_loop(hook: Callable[[], object] | None) -> None:
    """Have ``hook()`` called once, just before the first compiled loop of this process is
    looked up, when the process is a Jupyter kernel or an interactive interpreter and no
    stand-ins serve yet (None: no hook). The hook may put stand-ins in place (the twins, on a
    cache that lacks the loops): the look-up then serves them.

    Only where a person waits at a prompt: a script, a command or a test process keeps the
    loops it asks for (the commands choose for themselves), and the process that compiles
    the loops ahead must never stand them in."""
    global _first_loop
    _first_loop = hook


def _interactive() -> bool:
    """A Jupyter kernel, or an interpreter reading its prompt (``python``, ``python -i``)."""
    return "ipykernel" in sys.modules or hasattr(sys, "ps1")


def waits_for_another_process() -> bool:
    """Whether a loop without a stand-in would wait now for another process to compile it
    (stand-ins serve with an ``until``): work that can do without such a loop for a while
    does the rest first."""
    return _until is not None


def stand_in(objects: dict[str, Any], until: Callable[[], object] | None = None) -> None:
    """Serve ``objects`` (name -> object, names of :data:`HOMES`) instead of the compiled loops
    from now on; the names served by earlier stand-ins and not in ``objects`` go back to the
    compiled loops (imported on their next use). ``stand_in({})`` ends every stand-in.

    ``until``, while stand-ins serve, is called before a loop that has none is imported: it
    returns once another process has compiled the loops (compiling one here would hold the
    interpreter for seconds, stalling every other thread, the window's included)."""
    global _until
    unknown = set(objects) - set(HOMES)
    if unknown:
        raise AttributeError(f"{__name__} has no compiled loop {sorted(unknown)[0]!r}")
    for name in _standing_in - set(objects):
        globals().pop(name, None)
    globals().update(objects)
    _standing_in.clear()
    _standing_in.update(objects)
    _until = until if objects else None


def standing_in() -> bool:
    """Whether stand-ins serve some of the loops now."""
    return bool(_standing_in)


def __getattr__(name: str) -> Any:
    home = HOMES.get(name)
    if home is None:
        raise AttributeError(f"{__name__} has no compiled loop {name!r}")
    _announce_in_notebook()
    hook = _first_loop
    if hook is not None and _interactive():
        on_first_loop(None)  # once: a hook that looks up loops itself finds none here
        if not _standing_in:
            hook()
            if name in _standing_in:
                return globals()[name]
    until = _until
    if until is not None and name not in _standing_in:
        until()
    value = _import(home, name)
    if name not in _standing_in:  # a stand-in set meanwhile stays in place
        globals()[name] = value  # found without __getattr__ from now on
    return value


def _import(home: str, name: str) -> Any:
    module = home if "." in home else f"quantscope.core.kernels.{home}"
    return getattr(importlib.import_module(module), name)


def loop(name: str) -> Any:
    """The compiled loop ``name`` itself, even while a stand-in serves that name: what a twin
    calls with work it is not written for. It waits for another process's compile first, as
    a loop without a stand-in does (``until`` of :func:`stand_in`)."""
    home = HOMES.get(name)
    if home is None:
        raise AttributeError(f"{__name__} has no compiled loop {name!r}")
    _announce_in_notebook()
    until = _until
    if until is not None:
        until()
    return _import(home, name)


def _announce_in_notebook() -> None:
    """A notebook cell that calls the engine (qs.analyze, qs.quantize) on a first run would sit
    silent while a loop compiles (30 s on two busy cores): in a Jupyter kernel the engine says
    so as the front ends do; a script's process stays silent."""
    if "ipykernel" in sys.modules:
        from quantscope.core.kernels.compile_notice import announce_compiles

        announce_compiles()


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(HOMES))
