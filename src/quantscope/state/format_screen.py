"""A large tensor's best formats with an exact report only for the formats that may win.

Why: :func:`quantscope.state.formats.best_formats` compared some thirty formats by their full
exact reports, 15-50 ns per element each, so ``scan --formats`` on a 4096×4096 weight cost
tens of seconds where the plain scan takes a fraction of one.

How: each format's parameters are chosen as before (the panes' own rules). A format the error
screen bounds (:func:`quantscope.core.stats.format_sweep.screenable`: element formats, MX,
NVFP4, NF4) gets an interval certain to hold its exact report's SQNR, at a fraction of the
report's cost; every other format gets its exact report. A screened format whose interval
reaches the best lower end (or exact SQNR) of all gets its exact report too; one whose
interval lies wholly below cannot be the best, nor tie with it. The best is then taken among
the exact reports, in the candidates' order with the same key, so the point is the one
comparing every format's exact report gives, to the bit.
"""

from __future__ import annotations

from quantscope.core.stats.format_sweep import screen_sqnr, screenable, signal_sum
from quantscope.state.formats import (
    BestFormats,
    FormatPoint,
    best_key,
    candidates,
    format_pane_params,
    format_point,
    format_points,
    point_specs,
)


def screened_best(x, settings, per_channel: bool) -> BestFormats:
    """:func:`~quantscope.state.formats.best_formats` of a tensor not prepared, equal to it
    (see the module docstring)."""
    signal = signal_sum(x)
    if signal == 0:  # every finite value 0 (or none): every format's error is 0, all tie
        def plain(bits: int) -> FormatPoint:
            return max(format_points(x, None, settings, candidates(bits, per_channel),
                                     curve=False), key=best_key)

        return BestFormats(plain(8), plain(4))
    return BestFormats(*(best_of(x, settings, candidates(bits, per_channel), signal)[0]
                         for bits in (8, 4)))


def best_of(x, settings, specs, signal: float) -> tuple[FormatPoint, list[FormatPoint]]:
    """The best point among ``specs`` on ``x`` and every exact point computed for it
    (``signal``: Σx² of the finite values, non-zero)."""
    exact: dict[int, FormatPoint] = {}
    screened = []
    for i, spec in enumerate(point_specs(x, specs)):
        params = format_pane_params(x, spec, settings)
        if screenable(params):
            screened.append((i, spec, params, screen_sqnr(x, params, signal, x.size)))
        else:
            exact[i] = format_point(x, None, spec, params)
    floor = max([b.low for *_, b in screened] + [p.sqnr_db for p in exact.values()])
    for i, spec, params, b in screened:
        if b.high >= floor:  # it may reach the best: its exact report decides
            exact[i] = format_point(x, None, spec, params)
    points = [exact[i] for i in sorted(exact)]
    return max(points, key=best_key), points
