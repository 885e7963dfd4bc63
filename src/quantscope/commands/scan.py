"""``quantscope scan CHECKPOINT [--json] [--top N]``: which tensors break under per-tensor int8.

Every floating tensor of a checkpoint is quantized two ways with the engine's symmetric int8
rules — one scale for the whole tensor, and one scale per output channel (axis 0) — and the
SQNR of each is reported with the gap between them, worst per-tensor SQNR first. A large gap
marks a layer whose channels have very different ranges: per-tensor scaling wastes most codes
on it, per-channel scaling rescues it. Tensors are loaded one at a time (memory-mapped, then
converted to float32), so memory stays at about one tensor, not one checkpoint.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from quantscope.commands.source import add_file_or_sample, resolve_file_or_sample
from quantscope.core import analyze, choose_qparams, code_range
from quantscope.errors import QuantscopeError, UserError
from quantscope.io import TensorFileError, TensorInfo, list_tensors, load_for_analysis
from quantscope.io.shards import checkpoint_files
from quantscope.io.tensor_info import format_bytes, printable


@dataclass(frozen=True)
class ScanRow:
    """One analysed tensor. ``per_channel_db``/``gap_db`` are None for 1-D tensors, where
    "one scale per element" would be exact by construction and say nothing."""

    info: TensorInfo
    per_tensor_db: float
    per_channel_db: float | None
    n_nonfinite: int
    file: str | None = None  # the shard, for checkpoints split over several files

    @property
    def gap_db(self) -> float | None:
        if self.per_channel_db is None:
            return None
        if math.isinf(self.per_channel_db) and self.per_channel_db == self.per_tensor_db:
            return 0.0
        return self.per_channel_db - self.per_tensor_db


def add_parser(subparsers) -> None:
    """Register ``scan`` on the command line."""
    p = subparsers.add_parser(
        "scan", help="rank a checkpoint's tensors by int8 per-tensor SQNR",
        description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_file_or_sample(p, ".safetensors checkpoint (or .npz / .npy), or a sharded one: its "
                          "directory or its *.index.json")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--top", type=int, metavar="N", help="show only the N worst tensors")
    p.add_argument("--sort", choices=("sqnr", "gap"), default="sqnr",
                   help="rank by per-tensor SQNR, lowest first (default), or by the gap "
                        "per-channel minus per-tensor, largest first")
    p.add_argument("--bits", type=int, default=8, help="bit width (default 8)")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                     help="always draw the progress bar on stderr (default: when a terminal)")
    bar.add_argument("--no-progress", dest="progress", action="store_false",
                     help="never draw it")


def scan(path, *, bits: int = 8, progress: TextIO | None = None,
         ) -> tuple[list[ScanRow], list[tuple[TensorInfo, str]]]:
    """Analyse every floating tensor of ``path``; returns (rows, skipped with reasons).

    Parameters
    ----------
    path : path-like
        Any file ``quantscope.io`` reads, or a sharded checkpoint: its directory or its
        ``*.index.json`` (see :func:`quantscope.io.shards.checkpoint_files`).
    bits : int
        Bit width of the symmetric integer grid.
    progress : text stream, optional
        Where to draw the progress bar (weighted by bytes, since checkpoints mix 1-KB biases
        with 100-MB embeddings).
    """
    files = checkpoint_files(path)
    todo: list[tuple[Path, TensorInfo]] = []
    skipped: list[tuple[TensorInfo, str]] = []
    for file in files:  # every header is validated before the first tensor is analysed
        for info in list_tensors(file):
            reason = _skip_reason(info)
            if reason:
                skipped.append((info, reason))
            else:
                todo.append((file, info))
    bar = _ProgressBar(progress, sum(i.nbytes for _, i in todo), len(todo))
    rows = []
    for file, info in todo:
        bar.update(info)
        try:
            row = _analyse(file, info, bits, file.name if len(files) > 1 else None)
            if isinstance(row, str):
                skipped.append((info, row))
            else:
                rows.append(row)
        except TensorFileError:
            raise
        except QuantscopeError as exc:  # e.g. a tensor that is all NaN: report, keep going
            skipped.append((info, str(exc)))
        bar.done_with(info)
    bar.finish()
    return rows, skipped


def _skip_reason(info: TensorInfo) -> str | None:
    if not info.is_floating:
        return f"not floating point ({info.dtype})"
    if info.size == 0:
        return "empty"
    if info.ndim == 0:
        return "scalar"
    return None


def _analyse(path, info: TensorInfo, bits: int, shard: str | None) -> ScanRow | str:
    """The tensor's row, or the reason it has nothing to rank (no finite value at all)."""
    x, _ = load_for_analysis(path, info.name)
    per_tensor = analyze(x, choose_qparams(x, symmetric=True, granularity="tensor", bits=bits))
    if per_tensor.n == 0:
        return f"all {info.size} values are NaN or infinite"
    per_channel_db = None
    if x.ndim >= 2:
        params = choose_qparams(x, symmetric=True, granularity="channel", axis=0, bits=bits)
        per_channel_db = float(analyze(x, params).sqnr_db)
    return ScanRow(info, float(per_tensor.sqnr_db), per_channel_db, int(per_tensor.n_nonfinite),
                   shard)


def rank(rows: list[ScanRow], by: str = "sqnr") -> list[ScanRow]:
    """Worst first: lowest per-tensor SQNR, or largest gap; NaN / missing values last."""
    def key(row: ScanRow) -> tuple[int, float, str]:
        value = row.per_tensor_db if by == "sqnr" else -(row.gap_db if row.gap_db is not None
                                                         else math.nan)
        return (1 if math.isnan(value) else 0, 0.0 if math.isnan(value) else value,
                row.info.name)
    return sorted(rows, key=key)


class _ProgressBar:
    """``scan [#######-------]  47%  12/200  encoder.layer.3...`` redrawn in place with ``\\r``.

    Plain text on purpose: no dependency, and it degrades to nothing when disabled.
    """

    width = 28

    def __init__(self, stream: TextIO | None, total_bytes: int, total_count: int) -> None:
        self.stream, self.total = stream, max(total_bytes, 1)
        self.count, self.done_bytes, self.done_count = total_count, 0, 0
        self.last_len = 0
        self.start = time.perf_counter()

    def update(self, info: TensorInfo) -> None:
        if self.stream is None:
            return
        filled = round(self.width * self.done_bytes / self.total)
        bar = "#" * filled + "-" * (self.width - filled)
        name = printable(info.name)
        name = name if len(name) <= 48 else "..." + name[-45:]
        elapsed = time.perf_counter() - self.start
        eta = (f"  ~{elapsed * (self.total - self.done_bytes) / self.done_bytes:.0f}s left"
               if self.done_bytes and elapsed > 1 else "")
        line = (f"scan [{bar}] {100 * self.done_bytes / self.total:3.0f}%  "
                f"{self.done_count + 1}/{self.count}{eta}  {name}")
        self.stream.write("\r" + line.ljust(self.last_len))
        self.stream.flush()
        self.last_len = len(line)

    def done_with(self, info: TensorInfo) -> None:
        self.done_bytes += info.nbytes
        self.done_count += 1

    def finish(self) -> None:
        if self.stream is None or not self.count:
            return
        line = f"scan [{'#' * self.width}] 100%  {self.count}/{self.count}  done"
        self.stream.write("\r" + line.ljust(self.last_len) + "\n")
        self.stream.flush()


def _db(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.2f}"


def _json_db(value: float | None) -> float | str | None:
    """JSON has no infinity: exact quantizations are reported as the string ``"inf"``."""
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def format_table(label: str, rows: list[ScanRow], shown: list[ScanRow],
                 skipped: list[tuple[TensorInfo, str]], bits: int, seconds: float) -> str:
    """The plain-text report: one line per tensor, worst first, and a summary."""
    params = sum(r.info.size for r in rows)
    lines = [f"{label}: {len(rows)} floating tensors, {params:,} parameters; symmetric int{bits}, "
             "per-tensor vs per-channel (axis 0), worst first"]
    head = ("#", "tensor", "shape", "dtype", "per-tensor dB", "per-channel dB", "gap dB")
    table = [head] + [
        (str(i), printable(r.info.name), "x".join(map(str, r.info.shape)), r.info.dtype,
         _db(r.per_tensor_db), _db(r.per_channel_db), _db(r.gap_db)
         + (f"  ({r.n_nonfinite} non-finite ignored)" if r.n_nonfinite else "")
         + (f"  [{printable(r.file)}]" if r.file else ""))
        for i, r in enumerate(shown, 1)]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        lines.append("  ".join(c.rjust(w) if j in (0, 4, 5) else c.ljust(w)
                               for j, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    if not rows:
        lines.append("no floating-point tensors to scan")
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more (--top {len(shown)} shown)")
    if skipped:
        reasons = "; ".join(f"{printable(info.name)} ({why})" for info, why in skipped[:5])
        more = f"; and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        lines.append(f"skipped {len(skipped)}: {reasons}{more}")
    total = sum(r.info.nbytes for r in rows)
    lines.append(f"scanned {format_bytes(total)} in {seconds:.2f} s")
    return "\n".join(lines)


def to_json(label: str, rows: list[ScanRow], shown: list[ScanRow],
            skipped: list[tuple[TensorInfo, str]], bits: int) -> str:
    """The machine-readable report (valid JSON: infinities become strings)."""
    doc = {
        "source": label,
        "scheme": {"bits": bits, "symmetric": True, "method": "minmax",
                   "per_channel_axis": 0},
        "count": len(rows),
        "parameters": sum(r.info.size for r in rows),
        "tensors": [
            {"rank": i, "name": r.info.name, "shape": list(r.info.shape), "dtype": r.info.dtype,
             "file_dtype": r.info.file_dtype, "per_tensor_sqnr_db": _json_db(r.per_tensor_db),
             "per_channel_sqnr_db": _json_db(r.per_channel_db), "gap_db": _json_db(r.gap_db),
             "n_nonfinite": r.n_nonfinite, **({"file": r.file} if r.file else {})}
            for i, r in enumerate(shown, 1)],
        "skipped": [{"name": info.name, "dtype": info.dtype, "reason": why}
                    for info, why in skipped],
    }
    return json.dumps(doc, indent=2, allow_nan=False)


def run(args: argparse.Namespace) -> int:
    """Scan, print the ranking (table or JSON on stdout, progress on stderr); exit code."""
    if args.top is not None and args.top < 1:
        raise UserError(f"--top must be at least 1, got {args.top}")
    code_range(args.bits, symmetric=True)  # a bad --bits is one error, not N skipped tensors
    path, label = resolve_file_or_sample(args)
    show_bar = sys.stderr.isatty() if args.progress is None else args.progress
    start = time.perf_counter()
    rows, skipped = scan(path, bits=args.bits, progress=sys.stderr if show_bar else None)
    seconds = time.perf_counter() - start
    ranked = rank(rows, args.sort)
    shown = ranked[: args.top] if args.top else ranked
    if args.json:
        print(to_json(label, ranked, shown, skipped, args.bits))
    else:
        print(format_table(label, ranked, shown, skipped, args.bits, seconds))
    return 0
