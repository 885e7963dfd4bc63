"""Best formats of many small tensors of one shape at once, equal to one tensor at a time.

Why: :func:`quantscope.state.formats.best_formats` evaluates some thirty formats on a tensor,
each a few calls of Python around a kernel; on a tensor of a few thousand values that overhead
is the whole cost (about 10 ms a tensor), so a checkpoint of 10^5 small tensors took many
minutes where the plain scan takes seconds.

How: tensors of the same shape are laid out as the units of one array, one row per unit, so
each format's parameters and report are computed once for all of them:

* a per-tensor format becomes per channel over the tensors' flattened rows (``[K, N]``: one
  scale per tensor, from the same range rule);
* a per-channel format over the tensors' channels, each moved to the front as the engine
  itself lays a tensor out (``[K·C, M]``);
* a block or group format, which runs along the last axis, over the tensors' rows stacked
  (``[K·R, C]``): the same blocks.

Each tensor's figures are then the sums over its own units (the report's
:attr:`~quantscope.core.stats.report.QuantReport.unit_totals`), summed and turned into SQNR
and MSE exactly as :func:`~quantscope.core.stats.report.build_report` does for one tensor:
every row is summed in the same order as alone, so the points are equal bit for bit
(``tests/io/test_scan_formats_batch.py`` checks each format against the one-tensor path).
Formats whose parameters look at the whole tensor (NVFP4's FP32 tensor scale, the tools'
INT4 rules) take each tensor's own parameters, stacked; the integer passes sum a block of rows
in an order that depends on whether any of its elements clipped, so a batch with clipping is
evaluated again one tensor at a time for that format; settings other than the scan's min/max
are evaluated one tensor at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from quantscope.core import QuantParams, analyze
from quantscope.core.formats.catalog import bits_per_element
from quantscope.core.formats.int4_tools import TOOL_INT4
from quantscope.core.schemes.quantize import COMPILED_MIN
from quantscope.core.stats.report import sqnr_db
from quantscope.state.choices import FormatChoice
from quantscope.state.formats import (
    BestFormats,
    FormatPoint,
    best_formats,
    candidates,
    format_pane_params,
    whole_blocks_only,
)

#: Tensors of at most this many elements are batched; larger ones take compiled loops of
#: their own whose sums run in another order, and their Python overhead is small beside them.
BATCH_MAX_ELEMENTS = COMPILED_MIN - 1
#: Elements of one batch at most: its stacked copy and the kernels' temporaries stay small.
BATCH_ELEMENTS = 1 << 21
#: Formats whose parameters are chosen one tensor at a time (then analysed together): NVFP4's
#: depend on the whole tensor (an FP32 tensor scale over the blocks), the tools' INT4 rules
#: are their own.
_ONE_AT_A_TIME = frozenset({"nvfp4", "nvfp4_modelopt", *TOOL_INT4})


def batchable(shape: tuple[int, ...], settings) -> bool:
    """Whether tensors of ``shape`` under ``settings`` may be evaluated in batches: at least
    one axis, at most :data:`BATCH_MAX_ELEMENTS` values, min/max ranges, no preset."""
    size = int(np.prod(shape, dtype=np.int64))
    return (len(shape) >= 1 and 0 < size <= BATCH_MAX_ELEMENTS
            and settings.method == "minmax" and settings.runtime is None
            and settings.manual_clip is None)


def best_formats_many(xs: Sequence[np.ndarray], settings, *, per_channel: bool
                      ) -> list[BestFormats]:
    """``[best_formats(x, settings, per_channel=per_channel) for x in xs]``, equal to it,
    for float32 tensors of one shape, in batches (see the module docstring)."""
    if not xs:
        return []
    shape = xs[0].shape
    if any(x.shape != shape for x in xs):
        raise ValueError("best_formats_many takes tensors of one shape")
    if len(xs) == 1 or not batchable(shape, settings):
        return [best_formats(x, settings, per_channel=per_channel) for x in xs]
    per_batch = max(1, BATCH_ELEMENTS // xs[0].size)
    out: list[BestFormats] = []
    for start in range(0, len(xs), per_batch):
        out += _best_of_batch(xs[start:start + per_batch], settings, per_channel)
    return out


def _best_of_batch(xs: Sequence[np.ndarray], settings, per_channel: bool
                   ) -> list[BestFormats]:
    def best(bits: int) -> list[FormatPoint]:
        # a format whose blocks do not fit the rows has no point, as in format_points
        columns = [_points(xs, spec, settings) for spec in candidates(bits, per_channel)
                   if not (whole_blocks_only(spec) and xs[0].shape[-1] % whole_blocks_only(spec))]
        # max() keeps the first of equals, as best_formats does over the same order
        return [max((c[k] for c in columns), key=lambda p: (p.sqnr_db, -p.bits_per_element))
                for k in range(len(xs))]

    return [BestFormats(b8, b4) for b8, b4 in zip(best(8), best(4), strict=True)]


def _points(xs: Sequence[np.ndarray], spec: str, settings) -> list[FormatPoint]:
    """Format ``spec`` on every tensor of ``xs``: one parameter choice, one report."""
    spec = FormatChoice(spec)
    name, gran = spec.name, spec.granularity
    first = format_pane_params(xs[0], spec, settings)
    bits = bits_per_element(first, xs[0].size)  # a function of the shape alone
    params = None
    if name in _ONE_AT_A_TIME:  # each tensor's own parameters, analysed as one array
        params = _stacked_params([first] + [format_pane_params(x, spec, settings)
                                            for x in xs[1:]])
        stacked = np.concatenate([x.reshape(-1, x.shape[-1]) for x in xs])
        units = int(np.asarray(first.scale).size)
    elif gran == "tensor":
        rows = np.stack([x.reshape(-1) for x in xs])
        stacked, at, units = rows, FormatChoice.of(name, "channel"), 1
        at_settings = dataclasses.replace(settings, axis=0)
    elif gran == "channel":
        axis = first.axis  # the engine's axis, as the pane chose it on this shape
        assert axis is not None  # a per-channel pane has one
        rows = np.concatenate([np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
                               for x in xs])
        stacked, at, units = rows, spec, xs[0].shape[axis]
        at_settings = dataclasses.replace(settings, axis=0)
    else:  # blocks and groups along the last axis
        stacked = np.concatenate([x.reshape(-1, x.shape[-1]) for x in xs])
        at, at_settings = spec, settings
        units = int(np.asarray(first.scale).size)
    if params is None:
        params = format_pane_params(stacked, at, at_settings)
    report = analyze(stacked, params)
    tot = report.unit_totals
    assert tot is not None and tot.n.size == units * len(xs)  # built from unit sums
    if isinstance(params, QuantParams) and (tot.below.any() or tot.above.any()):
        # the integer passes sum a block of rows in one of two orders, chosen by whether any
        # element of the block clipped: with clipping somewhere, a tensor's rows were summed
        # as they would not have been alone, so each is evaluated alone
        return [_point(spec, bits, analyze(x, format_pane_params(x, spec, settings)))
                for x in xs]
    # each tensor's units are one row of [K, units]: a row sum adds in the order the sum of
    # a lone tensor's units does (the equality test holds it to that)
    k = len(xs)
    n = tot.n.reshape(k, units).sum(axis=1)
    rnd = np.ascontiguousarray(tot.round_err).reshape(k, units).sum(axis=1)
    clip = np.ascontiguousarray(tot.clip_err).reshape(k, units).sum(axis=1)
    sig = np.ascontiguousarray(tot.sig).reshape(k, units).sum(axis=1)
    db = np.asarray(sqnr_db(sig, rnd + clip))
    return [FormatPoint(spec, bits, float(db[i]) if n[i] else float("nan"),
                        float(rnd[i] / n[i]) if n[i] else 0.0,
                        float(clip[i] / n[i]) if n[i] else 0.0) for i in range(k)]


def _stacked_params(each: list):
    """One parameter set for the tensors' rows stacked, from each tensor's own (per block or
    group along the last axis: their arrays stacked the same way)."""
    first = each[0]

    def rows(name: str) -> np.ndarray:  # [rows of the tensor, groups per row], stacked
        parts = [np.asarray(getattr(p, name)) for p in each]
        return np.concatenate([a.reshape(-1, a.shape[-1]) for a in parts])

    if isinstance(first, QuantParams):
        return first.with_(scale=rows("scale"), zero_point=rows("zero_point"), axis=-1)
    arrays = {f: rows(f) for f in ("scale", "inv_scale", "block_scales")
              if getattr(first, f) is not None}
    return dataclasses.replace(first, axis=-1, **arrays)


def _point(spec: str, bits: float, report) -> FormatPoint:
    return FormatPoint(FormatChoice(spec), bits, report.sqnr_db, report.rounding_mse,
                       report.clipping_mse)
