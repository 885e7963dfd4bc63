"""One plain sentence per pane that says what dominates its error, computed from the report.

The panes show *how much* error there is; a caption says *why*, in words a talk audience reads
in two seconds. Every caption is derived from numbers the engine already reports (the code
histogram, the clip counts, the error split, the per-channel statistics) plus the tensor's
finite range, so it is always true of the numbers on screen. The rules, first match wins:

1. ``empty``: no finite values;
2. ``exact``: zero error (every value sits on a code);
3. ``clipping``: clipping causes at least half of the error ("0.3% of values clipped cause
   80% of the error");
4. ``one_sided``: a symmetric scheme on values that are all >= 0 (or all <= 0) can only use
   the codes of one sign, about half of them;
5. ``channel``: per-channel / per-group, when the worst unit is at least 6 dB (one bit) below
   the median unit -- that unit, and how few codes its values use, is what to look at;
6. ``outlier``: 99% of the values share at most a quarter of the codes, because a few
   extreme values stretch the window;
7. ``rounding``: otherwise rounding inside a well-used window is all that is left ("rounding
   only"; "rounding dominates" with the count when a few values are clipped).

Clipped values are never counted as values that stretch the window, and a share below
0.001% is given as a count ("one value"), never as a percentage that rounds to zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantscope.core.stats.report import QuantReport
from quantscope.core.text.formatting import fmt_percent, fmt_value
from quantscope.errors import EngineValueError

#: Share of the values whose code span the ``outlier`` rule measures.
BULK_SHARE = 0.99
#: The bulk must use at most this fraction of the codes for the ``outlier`` caption.
CROWDED_FRACTION = 0.25
#: Worst unit this many dB below the median unit triggers the ``channel`` caption (one bit).
CHANNEL_GAP_DB = 6.0


@dataclass(frozen=True)
class Caption:
    """A pane's caption: ``kind`` names the rule that fired (for tests and styling), ``text``
    is the sentence shown."""

    kind: str
    text: str

    def __str__(self) -> str:
        return self.text


#: Below this share (0.001%) a count is clearer than a percentage ("1 value", not "0.000%").
COUNT_BELOW = 1e-5


def values_share(count: int, n: int) -> str:
    """``count`` of ``n`` values in words: ``"0.3% of values"``, or below 0.001% the count
    itself (``"one value"``, ``"12 values"``), so a non-zero count never reads as zero."""
    if count and n and count / n < COUNT_BELOW:
        return _count_words(int(count))
    return f"{fmt_percent(count / n if n else 0.0)} of values"


def _count_words(n: int, noun: str = "value") -> str:
    if n == 1:
        return f"one {noun}"
    return f"{n:,} {noun}s"


def bulk_code_span(code_histogram: np.ndarray, share: float = BULK_SHARE) -> tuple[int, int]:
    """Indices ``(lo, hi)`` into the histogram of the central codes holding ``share`` of the
    values: the tails left out hold at most ``(1 - share) / 2`` each."""
    hist = np.asarray(code_histogram, np.int64)
    total = int(hist.sum())
    cum = np.cumsum(hist)
    tail = (1.0 - share) / 2.0 * total
    lo = int(np.searchsorted(cum, tail, side="right"))
    hi = int(np.searchsorted(cum, total - tail, side="left"))
    return min(lo, hi), max(lo, hi)


def _clipping(report: QuantReport) -> Caption | None:
    if report.mse <= 0 or report.clipping_mse < 0.5 * report.mse:
        return None
    share = report.clipping_mse / report.mse
    clipped = report.clipped_below + report.clipped_above
    return Caption("clipping", f"clipping dominates: {values_share(clipped, report.n)} "
                               f"clipped cause {fmt_percent(share)} of the error")


def _one_sided(report: QuantReport, x_min: float, x_max: float) -> Caption | None:
    p = report.params
    if not p.symmetric or (x_min < 0 < x_max) or (x_min == 0 and x_max == 0):
        return None
    grid = getattr(p, "values", None)  # a format's representable values (ascending)
    if x_min >= 0:
        usable = p.qmax + 1 if grid is None else int(np.count_nonzero(grid >= 0))
        return Caption("one_sided", f"all values ≥ 0: symmetric can use only {usable} of "
                                    f"{p.levels} codes")
    usable = -p.qmin + 1 if grid is None else int(np.count_nonzero(grid <= 0))
    return Caption("one_sided", f"all values ≤ 0: symmetric can use only {usable} of "
                                f"{p.levels} codes")


def _channel(report: QuantReport) -> Caption | None:
    per = report.per_channel
    if per is None or per.sqnr_db.size < 2:
        return None
    sq = np.asarray(per.sqnr_db, np.float64)
    finite = np.isfinite(sq)
    if not finite.any():
        return None
    median = float(np.median(np.where(np.isnan(sq), np.inf, sq)))
    worst = int(np.argmin(np.where(np.isnan(sq), np.inf, sq)))
    if not np.isfinite(sq[worst]) or median - sq[worst] < CHANNEL_GAP_DB:
        return None
    unit = "group" if report.params.granularity == "group" else "channel"
    median_text = "exact" if not np.isfinite(median) else f"{median:.1f} dB"
    return Caption("channel", f"worst {unit} {worst}: {sq[worst]:.1f} dB vs median "
                              f"{median_text}; its values use {int(per.codes_used[worst])} of "
                              f"{report.params.levels} codes")


def _outlier(report: QuantReport, x_min: float, x_max: float) -> Caption | None:
    # clipped values sit on the edge codes but stretch nothing (the window ends before
    # them): leave them out, or "12 values stretch the window" would count the 12 clipped
    hist = np.array(report.code_histogram, np.int64)
    hist[0] -= report.clipped_below
    hist[-1] -= report.clipped_above
    used = np.flatnonzero(hist)
    if used.size < 2:
        return None
    lo, hi = bulk_code_span(hist)
    span = hi - lo + 1
    if span > CROWDED_FRACTION * report.params.levels:
        return None
    first, last = int(used[0]), int(used[-1])
    codes = np.arange(hist.size)
    # each side's stretch: codes between the bulk's edge and the extreme value; the values in
    # the outer half of a stretch are the ones doing the stretching
    sides = []
    for edge, extreme, value, clipped in ((lo, first, x_min, report.clipped_below),
                                          (hi, last, x_max, report.clipped_above)):
        stretch = abs(extreme - edge)
        mid = (edge + extreme) / 2.0
        far = int(hist[codes < mid].sum() if extreme < edge else hist[codes > mid].sum())
        # values stretch a side only if they reach its end of the window (a manual window
        # wider than the values is not their doing), and a side with clipped values has its
        # extreme value beyond the window, not in it
        reaches = extreme <= 1 if extreme < edge else extreme >= hist.size - 2
        sides.append((stretch, far if reaches and not clipped else 0, value))
    longest = max(st for st, _, _ in sides)
    active = [(far, value) for st, far, value in sides if st >= 0.5 * longest and far > 0]
    if not active:
        return None  # the window is wide for its own reasons (a manual window), not values'

    share = (f"the window: {fmt_percent(BULK_SHARE)} of values share {span} of "
             f"{report.params.levels} codes")
    if len(active) == 2:
        (n_lo, v_lo), (n_hi, v_hi) = active
        if n_lo == 1 and n_hi == 1:
            who = f"two values, at {fmt_value(v_lo)} and {fmt_value(v_hi)}, stretch"
        else:
            who = f"{n_lo + n_hi:,} values out to {fmt_value(v_lo)} and {fmt_value(v_hi)} stretch"
    else:
        far, value = active[0] if active else (1, sides[1][2])
        who = (f"one value at {fmt_value(value)} stretches" if far <= 1
               else f"{far:,} values up to {fmt_value(value)} stretch")
    return Caption("outlier", f"{who} {share}{_clipped_tail(report)}")


def _clipped_tail(report: QuantReport) -> str:
    """``"; 12 values clipped"`` when any are (clipping below the caption's threshold)."""
    clipped = report.clipped_below + report.clipped_above
    if not clipped:
        return ""
    share = report.clipping_mse / report.mse if report.mse > 0 else 0.0
    return (f"; {values_share(clipped, report.n).removesuffix(' of values')} clipped "
            f"({fmt_percent(share)} of the error)")


def _rounding(report: QuantReport) -> Caption:
    p = report.params
    if getattr(p, "format", None) is not None:  # a float grid: the step grows with |x|
        clipped = ""
        if report.clipping_mse > 0:
            clipped = (f"; {fmt_percent(report.clipped_fraction)} clipped cause "
                       f"{fmt_percent(report.clipping_mse / report.mse)} of the error")
        return Caption("rounding", f"rounding dominates: values use {report.codes_used} of "
                                   f"{p.levels} representable values{clipped}")
    step = np.asarray(p.scale, np.float64)
    if step.ndim == 0:
        tail = f"each error ≤ half a step ({fmt_value(float(step) / 2)})"
    else:
        tail = "each error ≤ half its unit's step"
    clipped = _clipped_tail(report)
    if clipped:  # not "only": a few values were clipped (e.g. past a rounded zero point)
        return Caption("rounding", f"rounding dominates: values use {report.codes_used} of "
                                   f"{p.levels} codes{clipped}")
    return Caption("rounding", f"rounding only: values use {report.codes_used} of {p.levels} "
                               f"codes, {tail}")


def caption(report: QuantReport, *, x_min: float, x_max: float) -> Caption:
    """The one-sentence explanation of ``report`` (see the module docstring for the rules).

    Parameters
    ----------
    report : QuantReport
        The pane's report.
    x_min, x_max : float
        The tensor's finite minimum and maximum (per-tensor reports do not carry them);
        see :func:`finite_range`.
    """
    if report.n == 0:
        return Caption("empty", "no finite values to quantize")
    if report.mse == 0:
        return Caption("exact", "every value sits exactly on a code: no error")
    return (_clipping(report) or _one_sided(report, x_min, x_max) or _channel(report)
            or _outlier(report, x_min, x_max) or _rounding(report))


def finite_range(x: np.ndarray) -> tuple[float, float]:
    """The finite minimum and maximum of ``x`` ((0, 0) when there is none)."""
    arr = np.asarray(x)
    if arr.size == 0:
        return 0.0, 0.0
    lo, hi = float(np.min(arr)), float(np.max(arr))
    if np.isfinite(lo) and np.isfinite(hi):
        return lo, hi
    fin = arr[np.isfinite(arr)]
    return (float(fin.min()), float(fin.max())) if fin.size else (0.0, 0.0)


def pane_captions(results: dict[str, QuantReport], x_min: float | None = None,
                  x_max: float | None = None) -> dict[str, Caption]:
    """Captions for every pane of ``results``.

    When the range is not given it is taken from a per-channel report (whose units cover the
    whole tensor), so no pass over the tensor is needed; pass it for per-tensor-only results.
    """
    if x_min is None or x_max is None:
        for rep in results.values():
            if rep.per_channel is not None and rep.per_channel.n.sum() > 0:
                has = rep.per_channel.n > 0
                x_min = float(np.min(rep.per_channel.x_min[has]))
                x_max = float(np.max(rep.per_channel.x_max[has]))
                break
        else:
            raise EngineValueError("pane_captions needs x_min/x_max when no per-channel report "
                                   "exists")
    return {pane: caption(rep, x_min=x_min, x_max=x_max) for pane, rep in results.items()}
