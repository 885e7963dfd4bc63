"""The engine's compiled loops, each imported on its first use.

Importing a kernel module imports Numba (0.5-2 s) and llvmlite, which ``import quantscope``
and a min/max report on a small tensor never need. Callers therefore import this module at
the top (it imports nothing) and write ``compiled.evaluate_rows(...)``: the first time a
name is asked for, :func:`__getattr__` imports the module that defines it and keeps the
object here, so later look-ups are a plain module attribute. This is the one place that
knows which module holds which loop; a name it does not list raises AttributeError.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each name served here -> the kernel module (in this package) that defines it.
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
}


def __getattr__(name: str) -> Any:
    home = HOMES.get(name)
    if home is None:
        raise AttributeError(f"{__name__} has no compiled loop {name!r}")
    value = getattr(importlib.import_module(f"quantscope.core.kernels.{home}"), name)
    globals()[name] = value  # found without __getattr__ from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(HOMES))
