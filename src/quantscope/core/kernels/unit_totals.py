"""The row of statistics every report loop writes for one unit (a tensor, channel, block or
group), in the layout :class:`~quantscope.core.stats.report.UnitTotals` reads.

Format, GGUF and torchao report loops each accumulate the same ten figures and store them the
same way; one inlined helper keeps the column order in one place.
"""

from __future__ import annotations

from quantscope.core.kernels.jit_cache import njit


@njit(nogil=True, error_model="numpy", inline="always")
def store_unit(out_f, out_i, e, rnd, clip, worst, sig, lo, hi, n, below, above, used) -> None:
    """Unit ``e``'s totals: ``out_f[e]`` = (rounding error, clipping error, max |error|, Σx²,
    min, max), ``out_i[e]`` = (elements, clipped below, clipped above, codes used)."""
    out_f[e, 0] = rnd
    out_f[e, 1] = clip
    out_f[e, 2] = worst
    out_f[e, 3] = sig
    out_f[e, 4] = lo
    out_f[e, 5] = hi
    out_i[e, 0] = n
    out_i[e, 1] = below
    out_i[e, 2] = above
    out_i[e, 3] = used
