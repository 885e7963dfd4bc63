"""A model scan on a Dask distributed cluster: the same rows as a local scan, figure for figure.

:class:`ClusterScan` takes the rows of one or many checkpoints (:func:`model_rows`) and fills
them in as :class:`~quantscope.state.model_scan.ModelScan` does, with the work spread over a
cluster whose workers read the shards from shared storage:

* tensors up to :data:`TASK_BYTES` go to the workers in batches (a task per batch of about that
  many bytes, or :data:`TASK_ROWS` rows), each batch scanned on its worker by the local scan
  itself, so each row is the local row;
* a larger tensor under the fused pass's settings is split into tasks of whole chunks of its
  :class:`~quantscope.core.stats.fused.FusedPass`. A chunk's first-pass figures are counts,
  maxima, each row's own records and per-chunk float sums (:class:`FirstPart`), merged exactly
  into the pass the client holds; when the tensor needs a second read (float32 data, channels
  on the last axis) the client fixes the scales from every chunk and sends them with the
  second-pass tasks. The float sums are added in chunk order at the end, as locally, so the
  merged figures equal the local pass's bit for bit whatever the order tasks finish in;
* a larger tensor that only the engine's general path computes (another range method, a
  preset, ``formats``) is one task: it is loaded whole on its worker either way.

Faults: tasks are pure (they read and compute, nothing else), so a task lost with its worker is
run again (``retries``) and its result merged once (each future yields once); a task that
fails on every try reports its rows with the worker's message while the rest goes on; cancel
(``should_stop``) cancels the cluster's tasks. Dask (``distributed``) is an optional extra,
imported only here and only when a cluster is used.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from quantscope.core.stats.fused import (
    OUTLIER_THRESHOLD,
    FirstPart,
    FusedPass,
    FusedRules,
    SecondPart,
)
from quantscope.errors import QuantscopeError, UserError
from quantscope.io.checkpoint import RawTensor
from quantscope.state.model_scan import (
    ERROR,
    PENDING,
    ModelRow,
    ModelScan,
    finished_row,
    fused_pass_for,
)
from quantscope.state.pane_rules import DIRECT_MAX
from quantscope.state.settings import Settings

if TYPE_CHECKING:
    from distributed import Client, Future

#: Bytes of tensor data per task: large enough that a task's overhead (a few milliseconds on the
#: scheduler and the wire) is under 1 % of its read at disk speed, small enough to spread one
#: large embedding over many workers.
TASK_BYTES = 64 << 20
#: Rows per batch task at most, so a checkpoint of many tiny tensors still spreads out.
TASK_ROWS = 256
#: Tries of a task in all (the first and the retries) before its rows are reported as failed.
RETRIES = 3

#: The extra that installs the cluster client, named in the error when it is missing.
EXTRA = "pip install 'quantscope[dask]'"


def connect(address: str) -> Client:
    """A client for ``address``: ``tcp://host:port`` (or ``host:port``, a scheduler already
    running) or ``local:N``, a cluster of N worker processes on this machine (loopback only,
    one thread each), closed with the client."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UserError(f"scanning on a Dask cluster needs the distributed package: "
                        f"{EXTRA}") from None
    if address.startswith("local:"):
        count = address.removeprefix("local:")
        if not count.isdigit() or not 1 <= int(count) <= 1024:
            raise UserError(f"--dask local:N takes a number of workers from 1 to 1024, "
                            f"got {address!r}")
        cluster = LocalCluster(n_workers=int(count), threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address="127.0.0.1:0")
        return Client(cluster, set_as_default=False)
    try:
        return Client(address, timeout=30, set_as_default=False)
    except OSError as exc:
        raise UserError(f"cannot reach the Dask scheduler at {address!r}: {exc}") from None


# -- what the workers run (module-level functions: Dask pickles them by name) -----------------

def scan_batch(rows: list[ModelRow], settings: Settings, axis: int | None, threshold: float,
               formats: bool, chunk_elements: int | None,
               direct_max: int = DIRECT_MAX) -> list[ModelRow]:
    """Whole tensors scanned on a worker by the local scan (one thread: the cluster gives the
    parallelism), returned with their own indices."""
    local = [dataclasses.replace(r, index=i) for i, r in enumerate(rows)]
    done = ModelScan(local, settings, axis=axis, threshold=threshold, formats=formats,
                     workers=1, chunk_elements=chunk_elements, direct_max=direct_max).run()
    return [dataclasses.replace(d, index=r.index) for d, r in zip(done, rows, strict=True)]


def first_chunks(row: ModelRow, axis: int | None, rules: FusedRules, chunk_elements: int,
                 chunk_ids: list[int]) -> FirstPart:
    """The first pass over some chunks of a large tensor, read from its shard."""
    fused = _pass(row, axis, rules, chunk_elements)
    with RawTensor(Path(row.path), _info(row)) as reader:
        for i in chunk_ids:
            fused.first(i, _read(reader, fused, i))
    return fused.first_part(chunk_ids)


def second_chunks(row: ModelRow, axis: int | None, rules: FusedRules, chunk_elements: int,
                  scales: tuple[np.float32, np.ndarray | None],
                  chunk_ids: list[int]) -> SecondPart:
    """The second pass over some chunks, with the scales the client fixed from every chunk."""
    fused = _pass(row, axis, rules, chunk_elements)
    fused.use_second_scales(scales)
    with RawTensor(Path(row.path), _info(row)) as reader:
        for i in chunk_ids:
            fused.second(i, _read(reader, fused, i))
    return fused.second_part(chunk_ids)


def _info(row: ModelRow):
    assert row.info is not None  # only listed, pending rows are sent
    return row.info


def _pass(row: ModelRow, axis: int | None, rules: FusedRules, chunk_elements: int
          ) -> FusedPass:
    info = _info(row)
    return FusedPass(info.shape, info.dtype, axis, rules, chunk_elements)


def _read(reader: RawTensor, fused: FusedPass, i: int) -> np.ndarray:
    a, b = fused.chunks[i]
    raw = np.empty(b - a, fused.raw_dtype)
    reader.read_into(a, raw)
    return raw


# -- the client's side ---------------------------------------------------------------------------

@dataclass
class _Split:
    """A large tensor whose chunks run as tasks: the pass that merges them, and what is out."""

    row: ModelRow
    fused: FusedPass
    axis: int | None
    groups: list[list[int]]
    out: int = 0
    phase: int = 0
    failed: str | None = None


class ClusterScan:
    """Fill in the pending rows on a Dask cluster (see the module docstring).

    Same parameters and :meth:`run` as :class:`~quantscope.state.model_scan.ModelScan`, plus
    ``client`` (a ``distributed.Client``; see :func:`connect`), ``task_bytes`` and
    ``retries``; ``chunk_elements`` and ``direct_max`` as the local scan's (the workers chunk
    as the client does). The rows may come from several checkpoints: each row names its own file.
    """

    def __init__(self, rows: list[ModelRow], settings: Settings, client: Client, *,
                 axis: int | None = None, threshold: float = OUTLIER_THRESHOLD,
                 formats: bool = False, task_bytes: int = TASK_BYTES,
                 retries: int = RETRIES, chunk_elements: int | None = None,
                 direct_max: int = DIRECT_MAX) -> None:
        self.rows = list(rows)
        self.settings = settings.check()
        self.client = client
        self.axis = axis
        self.threshold = threshold
        self.formats = formats
        self.task_bytes = max(1, task_bytes)
        self.retries = max(0, retries - 1)
        self.chunk_elements = chunk_elements
        self.direct_max = direct_max
        self.total_bytes = sum(r.nbytes for r in self.rows if r.status == PENDING)
        #: Tasks submitted, by kind: what ``overhead`` figures divide by.
        self.tasks = 0

    def run(self, on_row: Callable[[ModelRow], None] | None = None,
            on_progress: Callable[[int, int, str], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> list[ModelRow]:
        """Scan every pending row on the cluster; returns the rows (see
        :meth:`ModelScan.run`: the callbacks are called on the calling thread here)."""
        from distributed import as_completed

        stop = should_stop or (lambda: False)
        self._on_row, self._on_progress = on_row, on_progress
        self._done_bytes = 0
        futures: dict[Future, tuple[str, Any]] = {}
        headers: dict = {}
        batch: list[ModelRow] = []
        batch_bytes = 0

        def flush() -> None:
            nonlocal batch, batch_bytes
            if batch:
                futures[self._submit(scan_batch, batch, self.settings, self.axis,
                                     self.threshold, self.formats, self.chunk_elements,
                                     self.direct_max)] = ("batch", batch)
                batch, batch_bytes = [], 0

        for row in self.rows:
            if row.status != PENDING:
                continue
            split = self._split(row, headers) if row.nbytes > self.task_bytes else None
            if split is None:
                if row.nbytes > self.task_bytes:  # the engine's path: one task of its own
                    futures[self._submit(scan_batch, [row], self.settings, self.axis,
                                         self.threshold, self.formats, self.chunk_elements,
                                         self.direct_max)] = ("batch", [row])
                    continue
                batch.append(row)
                batch_bytes += row.nbytes
                if batch_bytes >= self.task_bytes or len(batch) >= TASK_ROWS:
                    flush()
                continue
            for group in split.groups:
                futures[self._submit(first_chunks, row, split.axis, split.fused.rules,
                                     split.fused.chunk_elements, group)] = ("first",
                                                                            (split, group))
            split.out = len(split.groups)
        flush()

        pending = as_completed(list(futures), loop=self.client.loop)
        try:
            while not pending.is_empty():
                if stop():
                    self.client.cancel(list(futures))
                    break
                done = pending.next_batch(block=False)
                if not done:
                    time.sleep(0.02)
                    continue
                for future in done:
                    kind, what = futures.pop(future)
                    for follow in self._collect(future, kind, what):
                        futures[follow[0]] = follow[1]
                        pending.add(follow[0])
        finally:
            if futures and stop():
                self.client.cancel(list(futures))
        return self.rows

    # -- planning --------------------------------------------------------------------------------
    def _submit(self, fn, *args) -> Future:
        self.tasks += 1
        return self.client.submit(fn, *args, pure=False, retries=self.retries)

    def _split(self, row: ModelRow, headers: dict) -> _Split | None:
        """The chunk groups of a large tensor the fused pass reads, None for the engine's
        path (or a layout the raw reader cannot read in place)."""
        try:
            fused, axis = fused_pass_for(row, self.settings, self.axis, self.threshold,
                                         self.formats, self.chunk_elements, self.direct_max)
            if fused is None:
                return None
            with RawTensor(Path(row.path), _info(row), headers) as reader:
                if not reader.layout_ok:
                    return None
        except QuantscopeError:
            return None  # the batch task reports it as the local scan would
        per_chunk = max(1, (fused.chunks[0][1] - fused.chunks[0][0]) * _info(row).numpy_dtype
                        .itemsize) if fused.chunks else 1
        step = max(1, self.task_bytes // per_chunk)
        ids = list(range(len(fused.chunks)))
        groups = [ids[i:i + step] for i in range(0, len(ids), step)]
        if not groups:
            return None
        return _Split(row, fused, axis, groups)

    # -- results ---------------------------------------------------------------------------------
    def _collect(self, future: Future, kind: str, what: Any) -> list[tuple[Future, tuple]]:
        """Merge one finished task; returns the tasks it makes necessary (a second pass)."""
        error = _error_of(future)
        if kind == "batch":
            rows: list[ModelRow] = what
            if error is not None:
                for row in rows:
                    self._finish(dataclasses.replace(row, status=ERROR, reason=error))
            else:
                for row in future.result():
                    self._finish(row)
            return []
        split, group = what
        split.out -= 1
        if error is not None:
            split.failed = split.failed or error
        elif kind == "first":
            split.fused.merge_first(future.result())
        else:
            split.fused.merge_second(future.result())
        nbytes = sum(b - a for a, b in (split.fused.chunks[i] for i in group)) \
            * _info(split.row).numpy_dtype.itemsize
        self._progress(nbytes // (2 if split.fused.needs_second_pass else 1), split.row.name)
        if split.out:
            return []
        if split.failed is None and split.phase == 0 and split.fused.needs_second_pass:
            split.phase = 1
            split.fused.prepare_second()
            scales = split.fused.second_scales()
            follow = []
            for g in split.groups:
                f = self._submit(second_chunks, split.row, split.axis, split.fused.rules,
                                 split.fused.chunk_elements, scales, g)
                follow.append((f, ("second", (split, g))))
            split.out = len(split.groups)
            return follow
        if split.failed is not None:
            self._finish(dataclasses.replace(split.row, status=ERROR, reason=split.failed),
                         counted=True)
        else:
            self._finish(finished_row(split.row, split.fused, split.axis), counted=True)
        return []

    def _progress(self, nbytes: int, name: str) -> None:
        self._done_bytes += nbytes
        if self._on_progress is not None:
            self._on_progress(min(self._done_bytes, self.total_bytes), self.total_bytes, name)

    def _finish(self, row: ModelRow, counted: bool = False) -> None:
        self.rows[row.index] = row
        if not counted:
            self._progress(row.nbytes, row.name)
        if self._on_row is not None:
            self._on_row(row)


def _error_of(future: Future) -> str | None:
    """The message of a task that failed on every try (or was cancelled), else None.

    A finished task's result can be lost with its worker after ``as_completed`` handed the
    future over: the future is then "lost" until the scheduler has computed it again (this
    client still holds it), so the outcome is read only after waiting for that -- and
    waited for again when the status read after the wait is "lost" or "pending": the result
    can be lost between the wait and that read (the client's loop updates the status on its
    own thread), and reading it as a failure reported a row the cluster then computed."""
    while True:
        if future.status != "cancelled":
            future.exception()  # waits while the task is lost or retried, raises nothing
        status = future.status
        if status == "finished":
            return None
        if status == "cancelled":
            return "cancelled on the cluster"
        if status == "error":
            break
    exc = future.exception()
    if isinstance(exc, QuantscopeError):
        return str(exc)
    return f"failed on the cluster: {type(exc).__name__}: {exc}"
