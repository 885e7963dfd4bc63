"""A whole checkpoint's int8 story: every tensor's figures, streamed, on every core. Qt-free.

One engine for ``quantscope scan`` and the window's model view. :func:`model_rows` lists a
checkpoint (:func:`quantscope.io.checkpoint.list_checkpoint`) as rows -- analysable tensors
pending, the others marked with why -- and :class:`ModelScan` fills them in:

* under the window's settings with min/max ranges and no runtime preset (what the panes show
  first), each tensor above :data:`~quantscope.state.pane_rules.DIRECT_MAX` elements goes
  through :class:`quantscope.core.stats.fused.FusedPass`: its stored bytes
  are read once, a chunk at a time, by as many threads as there are cores (the kernels
  release the GIL), several tensors in flight at once, so a checkpoint scans at about the
  speed the disk or page cache delivers it, in the memory of a few chunks;
* under any other settings (percentile, MSE, entropy, a preset, groups), and for a tensor of
  at most ``DIRECT_MAX`` elements, the tensor is loaded as float32 and the panes' own mapping
  (:func:`quantscope.state.compute.pane_params`, then :func:`quantscope.core.stats.analyze`)
  gives the figures, slower: ``report`` and the window take that very pass on such a small
  tensor, so the scan prints their numbers to the bit (the fused pass sums the squared errors
  in its own order, equal to about 1e-14 relative, not to the last digit);
* with ``formats=True`` the figures come by the same routes (so ``scan`` and ``scan --formats``
  print the same int8 columns), then every tensor is loaded as float32 and its best 8-bit and
  best 4-bit number format (:func:`quantscope.state.formats.best_formats`, the comparison
  panes' own rules) join its figures.

Either way a row's numbers are ``quantscope report``'s symmetric schemes for that tensor: to
the bit up to ``DIRECT_MAX`` elements; above, ``report`` sums the errors from sorted prefix sums
and the two agree to about 1e-14 relative (one correctly rounded sum in every path would make
them equal).
A quantized checkpoint's stored weight (listed by :func:`quantscope.io.stored.source_checkpoint`)
is decoded as its package decodes it and analysed as float32 by the engine's path.
A tensor that cannot be read gets its message; the others carry on.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantscope.core import analyze
from quantscope.core.stats.fused import (
    OUTLIER_THRESHOLD,
    FusedPass,
    FusedRules,
    TensorFigures,
    fused_axis,
    raw_dtype,
)
from quantscope.errors import QuantscopeError, UserError
from quantscope.io import load_for_analysis
from quantscope.io.checkpoint import Checkpoint, RawTensor
from quantscope.io.stored import load_stored
from quantscope.io.tensor_info import TensorInfo
from quantscope.state.axes import choose_axis
from quantscope.state.compute import lower_thread_priority, pane_params
from quantscope.state.format_batch import (
    BATCH_ELEMENTS,
    batchable,
    best_formats_many,
    tensor_sums,
)
from quantscope.state.formats import BestFormats, best_formats
from quantscope.state.pane_rules import DIRECT_MAX
from quantscope.state.settings import Settings
from quantscope.state.source import Source

#: A layer index in a tensor name: ``layers.N.``, ``layer.N.``, ``h.N.``, ``blocks.N.``.
LAYER_PATTERN = re.compile(r"(?:^|[._])(?:layers|layer|h|blocks)[._](\d+)(?=[._]|$)")

PENDING, OK, SKIPPED, ERROR = "pending", "ok", "skipped", "error"


def layer_and_kind(name: str) -> tuple[int | None, str]:
    """``("model.layers.3.self_attn.q_proj.weight")`` -> ``(3, "self_attn.q_proj.weight")``:
    the layer index and what the tensor is within its layer (the chart's series); names
    without a layer give ``(None, name)``."""
    m = LAYER_PATTERN.search(name)
    if m is None:
        return None, name
    return int(m.group(1)), name[m.end():].lstrip("._") or name


@dataclass(frozen=True)
class ModelRow:
    """One tensor of a checkpoint and, once scanned, its figures (or why it has none)."""

    index: int
    name: str
    file: str
    info: TensorInfo | None
    layer: int | None
    kind: str
    status: str = PENDING
    reason: str = ""
    figures: TensorFigures | None = None
    path: str = ""
    #: The per-channel axis its figures used (None below two dimensions or before the scan).
    axis: int | None = None
    formats: BestFormats | None = None

    @property
    def params(self) -> int:
        return self.info.size if self.info is not None else 0

    @property
    def nbytes(self) -> int:
        return self.info.nbytes if self.info is not None else 0


def skip_reason(info: TensorInfo) -> str | None:
    """Why a listed tensor is shown but not analysed, or None."""
    if not info.is_floating:
        return f"not floating point ({info.dtype})"
    if info.size == 0:
        return "empty"
    if info.ndim == 0:
        return "scalar"
    return None


def model_rows(checkpoint: Checkpoint) -> list[ModelRow]:
    """The checkpoint's tensors in file order: analysable ones pending, the rest marked."""
    rows = []
    for i, t in enumerate(checkpoint.tensors):
        layer, kind = layer_and_kind(t.name)
        status, reason = PENDING, ""
        if t.info is None:
            status, reason = ERROR, t.problem or "cannot be read"
        elif (why := skip_reason(t.info)) is not None:
            status, reason = SKIPPED, why
        rows.append(ModelRow(i, t.name, t.file.name, t.info, layer, kind, status, reason,
                             path=str(t.file)))
    return rows


def reset(rows: list[ModelRow]) -> list[ModelRow]:
    """The rows with every computed figure forgotten (new settings): pending again."""
    return [dataclasses.replace(r, status=PENDING, reason="", figures=None, formats=None)
            if r.status in (OK, PENDING) or (r.status == SKIPPED and r.info is not None
                                               and skip_reason(r.info) is None) else r
            for r in rows]


def channel_axis(row: ModelRow, given: int | None = None) -> int | None:
    """The per-channel axis of a row's tensor, None below two dimensions.

    ``given`` (``scan --axis``) applies to every tensor it fits; otherwise each tensor gets the
    axis the window would give it when opened from this file (its name saying weight or
    activation, else its shape: :func:`quantscope.state.axes.choose_axis`), so a row's
    numbers are the panes' numbers for that tensor.
    """
    info = row.info
    if info is None or info.ndim < 2:
        return None
    if given is not None:
        return given if -info.ndim <= given < info.ndim else None
    source = Source("file", row.path or row.file, tensor=row.name)
    return choose_axis(info.shape, source).axis


def scan_settings(settings: Settings) -> Settings:
    """``settings`` if a scan can honour them. A scan puts every tensor's per-tensor figure beside
    its per-channel one; entropy calibration exists per tensor only, so it is refused here, once,
    rather than as every tensor's failure (which a table would list as files it could not read)."""
    if settings.method == "entropy":
        raise UserError("scan compares per-tensor with per-channel quantization, and entropy "
                        "calibration is per tensor only (as ModelOpt's HistogramCalibrator); use "
                        "--method minmax, percentile or mse, or `report --method entropy` for "
                        "one tensor")
    return settings


def fused_rules(settings: Settings, threshold: float = OUTLIER_THRESHOLD) -> FusedRules | None:
    """The fused pass's rules for these settings, or None when only the engine's general path
    computes what they ask (a range method other than min/max, a preset, groups)."""
    if settings.method != "minmax" or settings.runtime is not None or settings.group_size:
        return None
    return FusedRules(bits=settings.bits, narrow_range=settings.narrow_range,
                      rounding=settings.rounding, outlier_threshold=threshold)


def engine_figures(x: np.ndarray, axis: int | None, settings: Settings,
                   threshold: float = OUTLIER_THRESHOLD) -> TensorFigures:
    """A float32 tensor's figures through the panes' mapping and the direct pass."""
    per_tensor = analyze(x, pane_params(x, "symmetric/tensor", settings))
    per_channel = None
    if axis is not None:
        chan = dataclasses.replace(settings, axis=axis)
        per_channel = float(analyze(x, pane_params(x, "symmetric/channel", chan)).sqnr_db)
    max_abs, outliers, channels = magnitudes(x, axis, threshold)
    return TensorFigures(
        n=per_tensor.n, n_nonfinite=per_tensor.n_nonfinite,
        per_tensor_db=float(per_tensor.sqnr_db), per_channel_db=per_channel,
        clipped_fraction=per_tensor.clipped_fraction, max_abs=max_abs,
        outlier_channels=outliers, channels=channels, bits=settings.bits)


def magnitudes(x: np.ndarray, axis: int | None, threshold: float = OUTLIER_THRESHOLD
               ) -> tuple[float, int | None, int | None]:
    """``(max |x|, channels holding an |x| >= threshold, channels)`` over the finite values of
    a float32 tensor (the last two None without a channel ``axis``).

    A tensor whose least and largest values are finite has no NaN or inf, and its channels'
    minima and maxima give both figures exactly (the magnitude of a float32 is exact): two
    reductions, no temporary the tensor's size. Otherwise the non-finite values are set
    aside first."""
    lo, hi = (x.min(), x.max()) if x.size else (np.float32(0), np.float32(0))
    if np.isfinite(lo) and np.isfinite(hi):
        max_abs = float(max(-lo, hi, np.float32(0)))
        if axis is None:
            return max_abs, None, None
        others = tuple(a for a in range(x.ndim) if a != axis % x.ndim)
        reach = np.maximum(-x.min(axis=others), x.max(axis=others))
        return max_abs, int(np.count_nonzero(reach >= np.float32(threshold))), reach.size
    finite_abs = np.abs(np.where(np.isfinite(x), x, 0.0))
    if axis is None:
        return float(finite_abs.max(initial=0.0)), None, None
    big = np.moveaxis(finite_abs >= np.float32(threshold), axis, 0)
    channels = big.shape[0]
    return (float(finite_abs.max(initial=0.0)),
            int(np.count_nonzero(big.reshape(channels, -1).any(axis=1))), channels)


def engine_figures_many(xs: list[np.ndarray], axis: int | None, settings: Settings,
                        threshold: float = OUTLIER_THRESHOLD) -> list[TensorFigures]:
    """``[engine_figures(x, axis, settings, threshold) for x in xs]``, equal to it, for finite
    float32 tensors of one shape: their reports computed together
    (:func:`quantscope.state.format_batch.tensor_sums`)."""
    if len(xs) < 2 or settings.group_size is not None or not batchable(xs[0].shape, settings):
        return [engine_figures(x, axis, settings, threshold) for x in xs]
    flat = dataclasses.replace(settings, axis=0)
    tensor = tensor_sums(xs, "tensor", lambda x: pane_params(x, "symmetric/tensor", settings),
                         lambda y: pane_params(y, "symmetric/channel", flat))
    channel = None
    if axis is not None:
        chan = dataclasses.replace(settings, axis=axis)
        first = pane_params(xs[0], "symmetric/channel", chan)
        channel = tensor_sums(
            xs, "channel", lambda x: pane_params(x, "symmetric/channel", chan),
            lambda y: pane_params(y, "symmetric/channel", flat), axis=first.axis).sqnr_db()
    db = tensor.sqnr_db()
    out = []
    for i, x in enumerate(xs):
        n = int(tensor.n[i])
        max_abs, outliers, channels = magnitudes(x, axis, threshold)
        out.append(TensorFigures(
            n=n, n_nonfinite=x.size - n, per_tensor_db=float(db[i]) if n else float("nan"),
            per_channel_db=None if channel is None else float(channel[i]),
            clipped_fraction=int(tensor.clipped[i]) / n if n else 0.0, max_abs=max_abs,
            outlier_channels=outliers, channels=channels, bits=settings.bits))
    return out


def fused_pass_for(row: ModelRow, settings: Settings, axis: int | None = None,
                   threshold: float = OUTLIER_THRESHOLD, formats: bool = False,
                   chunk_elements: int | None = None, direct_max: int = DIRECT_MAX
                   ) -> tuple[FusedPass | None, int | None]:
    """The fused pass that reads ``row``'s tensor under ``settings`` (None when only the
    engine's general path computes what they ask, for a dtype or channel axis the pass does
    not take, or a tensor of at most ``direct_max`` elements: see :func:`reads_raw`), and the
    row's channel axis (``axis`` as :func:`channel_axis` takes it)."""
    info = row.info
    assert info is not None  # a pending row was listed with its tensor's info
    rules = None if formats else fused_rules(settings, threshold)
    chan = channel_axis(row, axis)
    if rules is None or not reads_raw(info, direct_max):
        return None, chan
    if chan is not None and fused_axis(info.shape, chan) is None:
        return None, chan
    return FusedPass(info.shape, info.dtype, chan, rules, chunk_elements), chan


def reads_raw(info: TensorInfo, direct_max: int = DIRECT_MAX) -> bool:
    """Whether a fused pass may read this tensor's stored bytes: a dtype it takes, not a stored
    (quantized) weight, which is decoded as its package decodes it, and more than
    ``direct_max`` elements. ``report`` and the window take the direct pass on a tensor of at
    most :data:`DIRECT_MAX` elements, whose sums the fused pass does not repeat bit for bit (it
    adds the squared errors row by row in its own order), so by default the scan takes that
    pass too; ``direct_max=0`` reads every tensor it can with the fused pass (faster on many
    small tensors, equal to ``report`` to about 1e-14 relative)."""
    return (raw_dtype(info.dtype) is not None and info.format != "stored"
            and int(np.prod(info.shape, dtype=np.int64)) > direct_max)


def finished_row(row: ModelRow, result: FusedPass | TensorFigures, axis: int | None,
                 formats: BestFormats | None = None) -> ModelRow:
    """``row`` with its figures (from the engine, or a fused pass with every chunk read):
    scanned, or skipped when no value was finite, or failed with the pass's message."""
    try:
        figures = result.result() if isinstance(result, FusedPass) else result
    except QuantscopeError as exc:
        return dataclasses.replace(row, status=ERROR, reason=str(exc))
    if figures.n == 0:
        return dataclasses.replace(row, status=SKIPPED,
                                   reason=f"all {row.params} values are NaN or infinite")
    return dataclasses.replace(row, status=OK, figures=figures, axis=axis, formats=formats)


@dataclass
class _Work:
    """A tensor in flight: its row, fused pass and reader, and the chunks still out."""

    row: ModelRow
    fused: FusedPass | None
    reader: RawTensor | None
    passes: int
    out: int = 0
    failed: str | None = None
    result: TensorFigures | None = None
    formats: BestFormats | None = None
    #: Rows of small tensors of one shape scanned together (their formats in one batch).
    batch: list[ModelRow] | None = None


class ModelScan:
    """Fill in the pending rows of a checkpoint (see the module docstring).

    Parameters
    ----------
    rows : list of ModelRow
        From :func:`model_rows`; rows already scanned are kept (that is how a cancelled scan
        resumes).
    settings : Settings
        The window's settings: bits, range method, rounding, preset (its ``axis`` is the
        open tensor's and is not used here).
    axis : int, optional
        The per-channel axis of every tensor (``scan --axis``); default each tensor's own
        (:func:`channel_axis`).
    workers : int, optional
        Threads (the caller's included); default one per core.
    background : bool
        Run the extra threads at a lower priority (the window's thread comes first).
    formats : bool
        Also find each tensor's best 8-bit and 4-bit number format (loads every tensor as
        float32 and analyses each candidate format: many times the work of the int8 figures,
        which stay those of the plain scan).
    chunk_elements : int, optional
        Elements per chunk of a fused pass (default
        :data:`~quantscope.core.stats.fused.CHUNK_ELEMENTS`).
    direct_max : int
        Tensors of at most this many elements take the engine's direct pass, as ``report``
        does, even under the fused pass's settings (see :func:`reads_raw`).
    """

    def __init__(self, rows: list[ModelRow], settings: Settings, *, axis: int | None = None,
                 workers: int | None = None, threshold: float = OUTLIER_THRESHOLD,
                 background: bool = False, formats: bool = False,
                 chunk_elements: int | None = None, direct_max: int = DIRECT_MAX) -> None:
        self.rows = list(rows)
        self.axis = axis
        self.settings = settings.check()
        self.threshold = threshold
        self.formats = formats
        self.rules = fused_rules(self.settings, threshold)
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.background = background
        self.chunk_elements = chunk_elements
        self.direct_max = direct_max
        self.total_bytes = sum(r.nbytes for r in self.rows if r.status == PENDING)

    def run(self, on_row: Callable[[ModelRow], None] | None = None,
            on_progress: Callable[[int, int, str], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> list[ModelRow]:
        """Scan every pending row; returns the rows (finished ones filled in, the others
        still pending if ``should_stop()`` became true). ``on_row(row)`` is called as each
        tensor completes and ``on_progress(done_bytes, total_bytes, name)`` after each chunk,
        both from worker threads."""
        self._todo = deque(r for r in self.rows if r.status == PENDING)
        self._tasks: deque[tuple[_Work, int, int]] = deque()
        self._lock = threading.Condition()
        self._busy = 0
        self._work_done = 0
        self._work_total = sum(r.nbytes * self._passes(r) for r in self._todo) or 1
        if self.formats:  # small tensors of one shape: their formats evaluated together
            batches, self._todo = self._batches(self._todo)
            self._tasks.extend((_Work(b[0], None, None, 1, batch=b), 0, -3) for b in batches)
        self._on_row, self._on_progress = on_row, on_progress
        self._stop = should_stop or (lambda: False)
        self._buffers = threading.local()
        self._headers: dict = {}  # each file's header, validated once for the whole scan
        threads = [threading.Thread(target=self._loop, args=(True,), daemon=True,
                                    name="quantscope-scan") for _ in range(self.workers - 1)]
        self._halted = False
        for t in threads:
            t.start()
        try:
            self._loop(False)
        except BaseException:  # Ctrl-C or SIGTERM on this thread: the others stop too
            with self._lock:
                self._halted = True
                self._lock.notify_all()
            deadline = time.monotonic() + 0.5  # a chunk in flight finishes or is abandoned
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
            raise
        finally:
            for t in threads:
                if not self._halted:
                    t.join()
        return self.rows

    @property
    def finished(self) -> int:
        """Rows no longer pending (all of them after :meth:`run` returns; fewer after it was
        interrupted or stopped)."""
        return sum(r.status != PENDING for r in self.rows)

    # -- planning -------------------------------------------------------------------------------
    def _batches(self, rows) -> tuple[list[list[ModelRow]], deque[ModelRow]]:
        """Rows of small tensors grouped by shape and channel axis (batches of at most
        ``BATCH_ELEMENTS`` values, so the threads share them), and the rows left to scan one
        at a time."""
        groups: dict[tuple, list[ModelRow]] = {}
        single: deque[ModelRow] = deque()
        for row in rows:
            info = row.info
            if info is None or info.format == "stored" or not batchable(info.shape,
                                                                        self.settings):
                single.append(row)
                continue
            groups.setdefault((info.shape, channel_axis(row, self.axis)), []).append(row)
        batches = []
        for (shape, _), members in groups.items():
            if len(members) < 2:
                single.extend(members)
                continue
            size = int(np.prod(shape, dtype=np.int64))
            step = max(2, min(512, BATCH_ELEMENTS // size))
            batches += [members[i:i + step] for i in range(0, len(members), step)]
        return batches, single

    def _fused_for(self, row: ModelRow) -> FusedPass | None:
        # with formats too: the int8 figures are the plain scan's, the formats found after
        return fused_pass_for(row, self.settings, self.axis, self.threshold, False,
                              self.chunk_elements, self.direct_max)[0]

    def _passes(self, row: ModelRow) -> int:
        """Reads of the data a row takes (for the progress), without building its pass."""
        info = row.info
        assert info is not None  # a pending row was listed with its tensor's info
        if self.rules is None or not reads_raw(info, self.direct_max):
            return 1
        axis = fused_axis(info.shape, channel_axis(row, self.axis))
        return 2 if info.dtype == "float32" or (axis is not None and axis != 0) else 1

    def _open(self, row: ModelRow) -> None:
        """Queue the chunks of the next tensor (called with the lock held)."""
        try:
            fused = self._fused_for(row)
            reader = None
            if fused is not None:
                assert row.info is not None  # _fused_for read it
                reader = RawTensor(_path(row), row.info, self._headers)
                if not reader.layout_ok:
                    reader.close()
                    reader, fused = None, None
        except QuantscopeError as exc:
            self._finish(_Work(row, None, None, 1, failed=str(exc)))
            return
        work = _Work(row, fused, reader, 2 if fused and fused.needs_second_pass else 1)
        if fused is None:
            self._tasks.append((work, 0, -1))
            work.out = 1
        else:
            self._tasks.extend((work, 0, i) for i in range(len(fused.chunks)))
            work.out = len(fused.chunks)
            if not fused.chunks:
                self._tasks.append((work, 0, -2))  # nothing to read: finish at once
                work.out = 1

    # -- the threads ----------------------------------------------------------------------------
    def _loop(self, spawned: bool) -> None:
        if spawned and self.background:
            lower_thread_priority()
        while True:
            with self._lock:
                while True:
                    if self._halted or self._stop():
                        self._lock.notify_all()
                        return
                    while not self._tasks and self._todo:
                        self._open(self._todo.popleft())
                    if self._tasks:
                        task = self._tasks.popleft()
                        self._busy += 1
                        break
                    if self._busy == 0:
                        self._lock.notify_all()
                        return
                    self._lock.wait(0.1)
            try:
                self._run(*task)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._lock.notify_all()

    def _buffer(self, dtype: np.dtype, n: int) -> np.ndarray:
        cache = getattr(self._buffers, "arrays", None)
        if cache is None:
            cache = self._buffers.arrays = {}
        buf = cache.get(dtype)
        if buf is None or buf.size < n:
            buf = cache[dtype] = np.empty(max(n, 1), dtype)
        return buf[:n]

    def _run(self, work: _Work, phase: int, chunk: int) -> None:
        if chunk == -3:
            self._run_batch(work.batch or [])
            return
        row = work.row
        nbytes = 0
        if work.failed is None:
            try:
                if chunk == -1:
                    self._engine(work)
                    nbytes = row.nbytes * work.passes
                elif chunk >= 0:
                    fused, reader, info = work.fused, work.reader, row.info
                    # chunks are queued only for a tensor read by a fused pass
                    assert fused is not None and reader is not None and info is not None
                    a, b = fused.chunks[chunk]
                    raw = self._buffer(fused.raw_dtype, b - a)
                    reader.read_into(a, raw)
                    (fused.first if phase == 0 else fused.second)(chunk, raw)
                    nbytes = (b - a) * info.numpy_dtype.itemsize
            except QuantscopeError as exc:
                work.failed = str(exc)
            except MemoryError:
                work.failed = f"{row.name}: not enough memory to analyse this tensor"
        with self._lock:
            self._work_done += nbytes
            work.out -= 1
            last = work.out == 0
            if last and work.failed is None and phase == 0 and work.passes == 2:
                fused = work.fused
                assert fused is not None  # two passes are a fused pass's
                fused.prepare_second()
                self._tasks.extendleft((work, 1, i) for i in reversed(range(len(fused.chunks))))
                work.out = len(fused.chunks)
                last = False
            done = self._work_done
        if self._on_progress is not None and nbytes:
            scaled = int(self.total_bytes * done / self._work_total)
            self._on_progress(min(scaled, self.total_bytes), self.total_bytes, row.name)
        if last:
            if self.formats and work.fused is not None and work.failed is None:
                self._fused_formats(work)
            self._finish(work)

    def _fused_formats(self, work: _Work) -> None:
        """The best formats of a tensor whose figures a fused pass read: from the tensor
        loaded as float32, once its pass is complete."""
        fused = work.fused
        assert fused is not None  # called for a fused pass's tensor
        try:
            if fused.result().n:
                x = self._read_float32(work.row)
                axis = channel_axis(work.row, self.axis)
                work.formats = best_formats(x, self._at(axis), per_channel=axis is not None)
        except QuantscopeError as exc:
            work.failed = str(exc)
        except MemoryError:
            work.failed = f"{work.row.name}: not enough memory to analyse this tensor"

    def _run_batch(self, rows: list[ModelRow]) -> None:
        """Small tensors of one shape: each one's int8 figures, then their best formats at
        once (:func:`~quantscope.state.format_batch.best_formats_many`, equal to one at a
        time)."""
        axis = channel_axis(rows[0], self.axis)
        works, ready = [], []
        for row in rows:
            work = _Work(row, None, None, 1)
            works.append(work)
            try:
                x = self._read_float32(row)
                if np.isfinite(x).all():
                    ready.append((work, x))
                    continue
                # non-finite values: the one-tensor path, as always
                work.result = engine_figures(x, axis, self.settings, self.threshold)
                if work.result.n:
                    work.formats = best_formats(x, self._at(axis), per_channel=axis is not None)
            except QuantscopeError as exc:
                work.failed = str(exc)
            except MemoryError:
                work.failed = f"{row.name}: not enough memory to analyse this tensor"
        figures: list[TensorFigures | None]
        try:
            figures = list(engine_figures_many([x for _, x in ready], axis, self.settings,
                                               self.threshold))
        except QuantscopeError:  # one tensor's refusal is its own row's message
            figures = []
            for work, x in ready:
                try:
                    figures.append(engine_figures(x, axis, self.settings, self.threshold))
                except QuantscopeError as exc:
                    work.failed = str(exc)
                    figures.append(None)
        for (work, _), result in zip(ready, figures, strict=True):
            work.result = result
        ready = [(w, x) for w, x in ready if w.failed is None]
        try:
            best = best_formats_many([x for _, x in ready], self._at(axis),
                                     per_channel=axis is not None)
            for (work, _), b in zip(ready, best, strict=True):
                work.formats = b
        except QuantscopeError:  # one tensor's refusal is its own row's message
            for work, x in ready:
                try:
                    work.formats = best_formats(x, self._at(axis), per_channel=axis is not None)
                except QuantscopeError as exc:
                    work.failed = str(exc)
        nbytes = sum(r.nbytes for r in rows)
        with self._lock:
            self._work_done += nbytes
            done = self._work_done
        if self._on_progress is not None and nbytes:
            scaled = int(self.total_bytes * done / self._work_total)
            self._on_progress(min(scaled, self.total_bytes), self.total_bytes, rows[-1].name)
        for work in works:
            self._finish(work)

    def _at(self, axis: int | None) -> Settings:
        return self.settings if axis is None else dataclasses.replace(self.settings, axis=axis)

    def _engine(self, work: _Work) -> None:
        row = work.row
        if row.info is not None and row.info.format == "stored":  # decoded, not raw bytes
            x = load_stored(_path(row), row.name).values
        else:
            x = self._read_float32(row)
        axis = channel_axis(row, self.axis)
        work.result = engine_figures(x, axis, self.settings, self.threshold)
        if self.formats and work.result.n:
            at = self.settings if axis is None else dataclasses.replace(self.settings, axis=axis)
            work.formats = best_formats(x, at, per_channel=axis is not None)

    def _read_float32(self, row: ModelRow) -> np.ndarray:
        """The row's tensor as float32. A safetensors tensor of a dtype the fused pass reads
        is located through its file's header, validated once per scan: loading it by name
        validated the whole header again for each tensor, a scan of 10^5 tensors in one file
        quadratic in their number."""
        info = row.info
        assert info is not None  # a pending row was listed with its tensor's info
        raw = raw_dtype(info.dtype)
        if info.format == "safetensors" and raw is not None and info.size:
            with self._lock:  # the header cache is shared by the threads
                reader = RawTensor(_path(row), info, self._headers)
            try:
                if reader.layout_ok:
                    bits = np.empty(int(np.prod(info.shape, dtype=np.int64)), raw)
                    reader.read_into(0, bits)
                    values = bits.view(info.numpy_dtype).reshape(info.shape)
                    return values if values.dtype == np.float32 else values.astype(np.float32)
            finally:
                reader.close()
        x, _ = load_for_analysis(_path(row), row.name)
        return x

    def _finish(self, work: _Work) -> None:
        """Complete a tensor's row and hand it on (any thread)."""
        if work.reader is not None:
            work.reader.close()
        row = work.row
        if work.failed is not None:
            done = dataclasses.replace(row, status=ERROR, reason=work.failed)
        else:
            result = work.result if work.result is not None else work.fused
            assert result is not None  # the engine's figures, or a fused pass with every chunk
            done = finished_row(row, result, channel_axis(row, self.axis), work.formats)
        with self._lock:
            self.rows[row.index] = done
        if self._on_row is not None:
            self._on_row(done)


def _path(row: ModelRow) -> Path:
    return Path(row.path)


def scan_checkpoint(checkpoint: Checkpoint, settings: Settings | None = None,
                    **kw) -> list[ModelRow]:
    """Every row of ``checkpoint`` scanned under ``settings`` (engine defaults): one call."""
    return ModelScan(model_rows(checkpoint), settings or Settings(), **kw).run()
