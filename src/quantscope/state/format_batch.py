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
Formats whose parameters look at the whole tensor (NVFP4's FP32 tensor scale) take each
tensor's own parameters, stacked; the integer passes sum each row in one order whatever the
rows beside it and whether it clipped (:func:`quantscope.core.stats.analyze.analyze`); settings
other than the scan's min/max are evaluated one tensor at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from quantscope.core import QuantParams, analyze
from quantscope.core.formats.catalog import bits_per_element
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
#: depend on the whole tensor (an FP32 tensor scale over the blocks).
_ONE_AT_A_TIME = frozenset({"nvfp4", "nvfp4_modelopt"})


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


@dataclasses.dataclass(frozen=True)
class Sums:
    """Each tensor's totals over its units, as :func:`build_report` adds them alone: finite
    values, rounding and clipping squared error, signal, clipped values (arrays, one entry
    per tensor)."""

    n: np.ndarray
    rnd: np.ndarray
    clip: np.ndarray
    sig: np.ndarray
    clipped: np.ndarray

    def sqnr_db(self) -> np.ndarray:
        return np.asarray(sqnr_db(self.sig, self.rnd + self.clip))


def tensor_sums(xs: Sequence[np.ndarray], gran: str, alone, together,
                axis: int | None = None) -> Sums:
    """Each tensor's :class:`Sums` under a scheme of granularity ``gran`` ("tensor",
    "channel" along the engine ``axis``, or anything else for blocks and groups along the
    last axis), from one analysis of the tensors laid out as units of one array.

    ``alone(x)`` gives one tensor's parameters; ``together(stacked)`` the stacked array's
    (None: each tensor's own, stacked).
    """
    if gran == "tensor":
        stacked, units = np.stack([x.reshape(-1) for x in xs]), 1
    elif gran == "channel":
        assert axis is not None  # a per-channel scheme has one
        stacked = np.concatenate([np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
                                  for x in xs])
        units = xs[0].shape[axis]
    else:
        stacked = np.concatenate([x.reshape(-1, x.shape[-1]) for x in xs])
        units = 0
    params = together(stacked)
    if params is None:
        params = _stacked_params([alone(x) for x in xs])
    if not units:
        units = int(np.asarray(params.scale).size) // len(xs)
    tot = analyze(stacked, params).unit_totals
    assert tot is not None and tot.n.size == units * len(xs)  # built from unit sums
    k = len(xs)
    clipped = (tot.below + tot.above).reshape(k, units).sum(axis=1)
    # each tensor's units are one row of [K, units]: a row sum adds in the order the sum of
    # a lone tensor's units does (the equality test holds it to that)
    return Sums(tot.n.reshape(k, units).sum(axis=1),
                np.ascontiguousarray(tot.round_err).reshape(k, units).sum(axis=1),
                np.ascontiguousarray(tot.clip_err).reshape(k, units).sum(axis=1),
                np.ascontiguousarray(tot.sig).reshape(k, units).sum(axis=1), clipped)


def _points(xs: Sequence[np.ndarray], spec: str, settings) -> list[FormatPoint]:
    """Format ``spec`` on every tensor of ``xs``: one parameter choice, one report."""
    spec = FormatChoice(spec)
    name, gran = spec.name, spec.granularity
    first = format_pane_params(xs[0], spec, settings)
    bits = bits_per_element(first, xs[0].size)  # a function of the shape alone

    def alone(x):
        return first if x is xs[0] else format_pane_params(x, spec, settings)

    if name in _ONE_AT_A_TIME:  # each tensor's own parameters, analysed as one array
        sums = tensor_sums(xs, "blocks", alone, lambda stacked: None)
    elif gran == "tensor":
        at = dataclasses.replace(settings, axis=0)
        sums = tensor_sums(xs, "tensor", alone,
                           lambda y: format_pane_params(y, FormatChoice.of(name, "channel"), at))
    elif gran == "channel":
        at = dataclasses.replace(settings, axis=0)
        sums = tensor_sums(xs, "channel", alone, lambda y: format_pane_params(y, spec, at),
                           axis=first.axis)
    else:  # blocks and groups along the last axis
        sums = tensor_sums(xs, "blocks", alone,
                           lambda y: format_pane_params(y, spec, settings))
    db = sums.sqnr_db()
    n = sums.n
    return [FormatPoint(spec, bits, float(db[i]) if n[i] else float("nan"),
                        float(sums.rnd[i] / n[i]) if n[i] else 0.0,
                        float(sums.clip[i] / n[i]) if n[i] else 0.0) for i in range(len(xs))]


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
