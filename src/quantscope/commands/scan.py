"""``quantscope scan CHECKPOINT [--json | --csv] [--top N]``: a whole model's int8 story.

Every floating tensor of a checkpoint -- a .safetensors file, a sharded Hugging Face folder
or its *.index.json, an .npz, a folder of .npy files -- is quantized with symmetric int8 two
ways: one scale for the whole tensor, and one scale per channel (axis 0 by default). Each
row gives both SQNRs, the gain of per-channel, the clipped share, max |x|, the channels
holding an |x| >= 6 outlier and a suggested scheme; worst per-tensor SQNR first. A large gain
marks a layer whose channels have very different ranges: per-tensor scaling wastes most
codes on it. The numbers are those of `quantscope report` for each tensor, computed in one
read of the stored bytes on every core (see quantscope.state.model_scan).

With --formats each row also names the tensor's best 8-bit format (int8, FP8 E4M3 / E5M2 and
their FNUZ variants per tensor and per channel, MXFP8, MXINT8, GGUF Q8_0) and best 4-bit format
(INT4 g32/g64/g128, GPTQ, AWQ and torchao INT4, FP4 E2M1, MXFP4, NVFP4, NF4, GGUF Q4_0 /
Q4_1 / Q4_K where the rows hold whole blocks) by SQNR, as `quantscope report --format` and the
window's comparison panes compute them, to the last digit (above a quarter million elements
the tensor is prepared as they prepare it, when a format that may win reads its sorted
rows). The int8 columns stay those of the plain scan. It loads every tensor and evaluates some
thirty formats; on a large tensor a cheap bounded error sum, a slice of rows at a time, rules
out the formats that cannot win (a block format's parameters chosen only on the rows screened),
and only the others get a full report (quantscope.core.stats.format_sweep), yet each of the
thirty costs a pass of its own and the winners' exact reports and llama.cpp's Q4_K search
more: about 20-35x the plain scan's processor time on a 4096x4096 or 14336x4096 float32 weight
(bench/scan_speed.py --formats; bench/scan_formats_cost.py for each format's share). Small
tensors of one shape are evaluated in batches, about as fast as the plain scan.

A quantized checkpoint (its config.json declares a quantization_config: compressed-tensors,
FP8, GPTQ, AWQ, bitsandbytes) is decoded weight by weight instead; with --reference ORIGINAL
each row says what the stored quantization lost against the original and which of the
engine's formats at the same or fewer bits would have lost less; without it, how the stored
codes and scales are spent (see quantscope.commands.scan_stored).

Tensors that cannot be read (a missing or truncated shard, a lying header) are reported and
the others scanned: the exit status is 1 then, 2 when nothing at all could be read.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from quantscope.commands.source import add_file_or_sample, resolve_file_or_sample
from quantscope.core import code_range
from quantscope.errors import QuantscopeError, UserError
from quantscope.io.tensor_info import format_bytes, printable
from quantscope.state.setting_names import add_setting_options

if TYPE_CHECKING:
    from quantscope.state import Settings


def add_parser(subparsers) -> None:
    """Register ``scan`` on the command line."""
    p = subparsers.add_parser(
        "scan", help="a checkpoint's int8 figures, one row per tensor, worst first",
        description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_file_or_sample(p, "a checkpoint (.safetensors, PyTorch .pt/.pth/.bin, .onnx, .npz, "
                          ".npy...), or a sharded one: its "
                          "directory or its *.index.json; or a directory of .npy files; or a "
                          "folder of model folders (each scanned, one table grouped by model)")
    p.add_argument("more", nargs="*", metavar="PATH",
                   help="more checkpoints, scanned in the same job: one table grouped by model")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="scan on a Dask cluster: a scheduler's tcp://HOST:PORT (its workers "
                        "read the files at the same paths), or local:N for N worker processes "
                        "on this machine; needs pip install 'quantscope[dask]'")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of a table")
    out.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    p.add_argument("--top", type=int, metavar="N", help="show only the N worst tensors")
    p.add_argument("--reference", metavar="ORIGINAL",
                   help="the unquantized checkpoint FILE was made from: measure what each "
                        "stored weight lost against it, beside the best format at the same "
                        "or fewer bits")
    p.add_argument("--sort", choices=("sqnr", "gap"), default="sqnr",
                   help="rank by per-tensor SQNR, lowest first (default), or by the gain "
                        "per-channel minus per-tensor, largest first")
    add_setting_options(
        p, fields=("bits", "axis", "method", "runtime"),
        choices={"method": ("minmax", "percentile", "mse"),
                 "runtime": ("pytorch", "onnxruntime", "tflite", "tensorrt")},
        defaults={"bits": 8, "method": "minmax"},
        helps={"bits": "bit width (default 8)",
               "axis": "per-channel axis of every tensor (default: each tensor's own, as the "
                       "window picks it: a name saying weight gives axis 0, activation -1, "
                       "otherwise axis 0)",
               "method": "range method (default minmax: the fast pass)",
               "runtime": "pytorch, onnxruntime, tflite or tensorrt: a runtime's parameter "
                          "rules and arithmetic (--runtime is an alias)"})
    p.add_argument("--formats", action="store_true",
                   help="also name each tensor's best 8-bit and 4-bit number format (slow)")
    p.add_argument("--outlier", type=float, default=6.0, metavar="T",
                   help="a channel with any |x| >= T is an outlier channel (default 6)")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None,
                     help="always draw the progress bar on stderr (default: when a terminal)")
    bar.add_argument("--no-progress", dest="progress", action="store_false",
                     help="never draw it")


class ProgressBar:
    """``scan [#####-----]  47%  1.9/4.0 GiB  12/200  1.21 GB/s  ~3 s left  name`` in place.

    Fed from the scan's threads: by chunk (so it moves inside a large embedding) at most
    ten times a second, and at every finished tensor.
    """

    width = 24

    def __init__(self, stream: TextIO | None, total_bytes: int, count: int) -> None:
        self.stream, self.total, self.count = stream, max(total_bytes, 1), count
        self.done_bytes = self.done_count = 0
        self.last_len, self.last_draw = 0, 0.0
        self.name = ""
        self.start = time.perf_counter()
        self._lock = threading.Lock()

    def chunk(self, done: int, total: int, name: str) -> None:
        with self._lock:
            self.done_bytes, self.name = max(self.done_bytes, done), name
            if time.perf_counter() - self.last_draw >= 0.1:
                self._draw()

    def tensor(self, name: str) -> None:
        with self._lock:
            self.done_count += 1
            self.name = name
            self._draw()

    def _draw(self) -> None:
        if self.stream is None:
            return
        self.last_draw = now = time.perf_counter()
        frac = min(self.done_bytes / self.total, 1.0)
        filled = round(self.width * frac)
        elapsed = now - self.start
        rate = f"  {self.done_bytes / elapsed / 1e9:.2f} GB/s" if elapsed > 0.5 else ""
        eta = (f"  ~{elapsed * (1 - frac) / frac:.0f} s left" if frac > 0 and elapsed > 1
               else "")
        name = printable(self.name)
        name = name if len(name) <= 44 else "..." + name[-41:]
        line = (f"scan [{'#' * filled}{'-' * (self.width - filled)}] {100 * frac:3.0f}%  "
                f"{format_bytes(self.done_bytes)}/{format_bytes(self.total)}  "
                f"{self.done_count}/{self.count}{rate}{eta}  {name}")
        self.stream.write("\r" + line.ljust(self.last_len))
        self.stream.flush()
        self.last_len = len(line)

    def stop(self) -> None:
        """End the bar's line where it stands (the scan was interrupted)."""
        if self.stream is not None and self.count:
            self.stream.write("\n")
            self.stream.flush()

    def finish(self) -> None:
        if self.stream is None or not self.count:
            return
        line = f"scan [{'#' * self.width}] 100%  {self.count}/{self.count}  done"
        self.stream.write("\r" + line.ljust(self.last_len) + "\n")
        self.stream.flush()


def rank(rows, by: str = "sqnr"):
    """Analysed rows worst first: lowest per-tensor SQNR, or largest gain; NaN last."""
    def key(row):
        f = row.figures
        value = f.per_tensor_db if by == "sqnr" else -(f.gain_db if f.gain_db is not None
                                                       else math.nan)
        return (1 if math.isnan(value) else 0, 0.0 if math.isnan(value) else value, row.name)
    return sorted((r for r in rows if r.figures is not None), key=key)


def _db(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.2f}"


def format_table(label: str, rows, shown, settings, seconds: float, sharded: bool,
                 axis: int | None = None) -> str:
    """The plain-text report: one line per tensor, worst first, then what was left out."""
    analysed = [r for r in rows if r.figures is not None]
    lines = [f"{label}: {len(analysed)} floating tensors, "
             f"{sum(r.params for r in analysed):,} parameters; symmetric int{settings.bits} "
             f"({settings.runtime or settings.method}), per-tensor vs per-channel "
             f"({'each tensor’s own axis' if axis is None else f'axis {axis}'}), worst first"]
    with_formats = any(r.formats is not None for r in shown)
    head = ("#", "tensor", "shape", "dtype", "per-tensor dB", "per-channel dB", "axis", "gap dB",
            "clip %", "max |x|", "outliers") + (
            ("best 8-bit", "dB", "best 4-bit", "dB") if with_formats else ()) + ("suggested",)
    table = [head]
    for i, r in enumerate(shown, 1):
        f = r.figures
        outliers = "-" if f.outlier_channels is None else f"{f.outlier_channels}/{f.channels}"
        best = () if not with_formats else ("-", "-", "-", "-") if r.formats is None else (
            r.formats.best8.spec, _db(r.formats.best8.sqnr_db), r.formats.best4.spec,
            _db(r.formats.best4.sqnr_db))
        table.append((
            str(i), printable(r.name), "x".join(map(str, r.info.shape)),
            r.info.stored or r.info.dtype,  # a GGUF tensor: the type it is stored in
            _db(f.per_tensor_db), _db(f.per_channel_db),
            "-" if r.axis is None else str(r.axis), _db(f.gain_db),
            f"{100 * f.clipped_fraction:.3f}", f"{f.max_abs:.4g}", outliers, *best,
            f.suggested + (f"  ({f.n_nonfinite} non-finite ignored)" if f.n_nonfinite else "")
            + (f"  [{printable(r.file)}]" if sharded else "")))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    right = {0, 4, 5, 6, 7, 8, 9, 10} | ({12, 14} if with_formats else set())
    for row in table:
        lines.append("  ".join(c.rjust(w) if j in right else c.ljust(w)
                               for j, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    if not analysed:
        lines.append("no floating-point tensors to scan")
    if len(shown) < len(analysed):
        lines.append(f"... {len(analysed) - len(shown)} more (--top {len(shown)} shown)")
    for status, word in (("skipped", "skipped"), ("error", "could not read")):
        left = [r for r in rows if r.status == status]
        if left:
            reasons = "; ".join(f"{printable(r.name)} ({r.reason})" for r in left[:5])
            more = f"; and {len(left) - 5} more" if len(left) > 5 else ""
            lines.append(f"{word} {len(left)}: {reasons}{more}")
    total = sum(r.nbytes for r in analysed)
    rate = f", {total / seconds / 1e6:,.0f} MB/s" if seconds > 0 else ""
    lines.append(f"scanned {format_bytes(total)} in {seconds:.2f} s{rate}")
    return "\n".join(lines)


def _models(args: argparse.Namespace) -> list[tuple[Path, str]]:
    """``(path, label)`` of every checkpoint the command names: FILE (or ``--sample``) and the
    further PATHs, a folder of model folders standing for each model in it."""
    from quantscope.io.checkpoint import model_folders
    from quantscope.io.checks import show_path

    if args.more and args.sample:
        raise UserError("give either paths or --sample NAME, not both")
    first = [resolve_file_or_sample(args)]
    named = first + [(Path(m), show_path(m)) for m in args.more]
    models = []
    for path, label in named:
        inside = model_folders(path)
        models += [(q, show_path(str(q))) for q in inside] if inside else [(path, label)]
    return models


class _Interrupted(Exception):
    """A local scan stopped by Ctrl-C or SIGTERM, with its rows (the unfinished ones still
    pending) and the interruption to raise once they are printed."""

    def __init__(self, rows: list, interruption: KeyboardInterrupt) -> None:
        super().__init__("interrupted")
        self.rows, self.interruption = rows, interruption


def _scan(rows, settings: Settings, args: argparse.Namespace, bar: ProgressBar):
    """Every row scanned here, or on the cluster ``--dask`` names (same rows either way)."""
    from quantscope.state.model_scan import ModelScan

    if args.dask is None:
        scanner = ModelScan(rows, settings, axis=args.axis, threshold=args.outlier,
                            formats=args.formats)
        try:
            return scanner.run(on_row=lambda r: bar.tensor(r.name), on_progress=bar.chunk)
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: hand in what is finished
            raise _Interrupted(scanner.rows, exc) from None
    from quantscope.state.cluster_scan import ClusterScan, connect

    with connect(args.dask) as client:
        return ClusterScan(rows, settings, client, axis=args.axis, threshold=args.outlier,
                           formats=args.formats).run(on_row=lambda r: bar.tensor(r.name),
                                                     on_progress=bar.chunk)


def run(args: argparse.Namespace) -> int:
    """Scan, print the ranking (table, JSON or CSV on stdout, progress on stderr)."""
    from quantscope.core.kernels.compile_notice import announce_compiles
    from quantscope.io.checkpoint import list_checkpoint
    from quantscope.io.stored.config import read_quant_config
    from quantscope.io.tensor_info import TensorFileError
    from quantscope.state import Settings
    from quantscope.state.model_records import to_csv, to_json
    from quantscope.state.model_scan import PENDING, model_rows, scan_settings

    if args.top is not None and args.top < 1:
        raise UserError(f"--top must be at least 1, got {args.top}")
    code_range(args.bits, symmetric=True)  # a bad --bits is one error, not N skipped tensors
    if not args.outlier > 0:
        raise UserError(f"--outlier must be positive, got {args.outlier}")
    if args.dask is not None and args.dask.startswith("local:"):
        count = args.dask.removeprefix("local:")
        if not count.isdigit() or not 1 <= int(count) <= 1024:
            raise UserError(f"--dask local:N takes a number of workers from 1 to 1024, "
                            f"got {args.dask!r}")
    settings = scan_settings(Settings(bits=args.bits, method=args.method,
                                      runtime=args.runtime).check())
    if args.reference is not None or (not args.more and read_quant_config(
            resolve_file_or_sample(args)[0]) is not None):
        from quantscope.commands import scan_stored

        if args.more:
            raise UserError("--reference compares one quantized checkpoint with its original; "
                            "give one FILE")
        if args.dask is not None:
            raise UserError("--dask scans the stored tensors of unquantized checkpoints; a "
                            "quantized checkpoint is decoded and compared here: drop --dask")
        return scan_stored.run(args, *resolve_file_or_sample(args))
    models = _models(args)
    quantized = [label for path, label in models if read_quant_config(path) is not None]
    if quantized:
        raise UserError(f"{quantized[0]} is a quantized checkpoint: scan it on its own "
                        "(its weights are decoded, with --reference to compare them)")
    listed, problems = [], []
    for path, label in models:
        try:
            checkpoint = list_checkpoint(path)
        except TensorFileError as exc:
            if len(models) == 1:
                raise
            problems.append(str(exc))
            continue
        listed.append((label, checkpoint, model_rows(checkpoint)))
    if not listed:
        raise QuantscopeError(problems[0])
    rows = [dataclasses.replace(r, index=k) for k, r in
            enumerate(r for _, _, model in listed for r in model)]
    if rows and all(r.status == "error" for r in rows):  # nothing readable: one clear error
        raise QuantscopeError(rows[0].reason)
    show_bar = sys.stderr.isatty() if args.progress is None else args.progress
    pending = [r for r in rows if r.status == PENDING]
    bar = ProgressBar(sys.stderr if show_bar else None, sum(r.nbytes for r in pending),
                      len(pending))
    announce_compiles()
    start = time.perf_counter()
    interrupted: KeyboardInterrupt | None = None
    try:
        rows = _scan(rows, settings, args, bar)
    except _Interrupted as stop:  # print what is finished, then stop
        rows, interrupted = stop.rows, stop.interruption
    seconds = time.perf_counter() - start
    if interrupted is None:
        bar.finish()
    else:
        bar.stop()
    out, docs, start_at = [], [], 0
    for label, checkpoint, model in listed:
        mine = [r for r in rows[start_at:start_at + len(model)] if r.status != PENDING]
        start_at += len(model)
        ranked = rank(mine, args.sort)
        shown = ranked[: args.top] if args.top else ranked
        others = [r for r in mine if r.figures is None]
        if args.json:
            docs.append(to_json(label, mine, shown, settings, checkpoint.sharded, args.axis))
        elif args.csv:
            out.append(_with_model(to_csv(shown + others), label, len(listed) > 1,
                                   header=not out))
        else:
            out.append(format_table(label, mine, shown, settings, seconds, checkpoint.sharded,
                                    args.axis))
        problems += checkpoint.problems
    if args.json:
        print(docs[0] if len(docs) == 1 else
              json.dumps({"models": [json.loads(d) for d in docs]}, indent=2))
    else:
        print(("" if args.csv else "\n\n").join(out), end="" if args.csv else "\n")
    if interrupted is not None:
        if not (args.json or args.csv):
            done = sum(r.status != PENDING for r in rows) - (len(rows) - len(pending))
            print(f"interrupted: {done} of {len(pending)} tensors scanned")
        sys.stdout.flush()
        raise interrupted
    errors = [r for r in rows if r.status == "error"]
    warn_capped([*problems, *(r.reason for r in errors)])
    return 1 if errors or problems else 0


#: Warnings printed one per line; the rest are counted in one more line.
WARNINGS_SHOWN = 20


def warn_capped(messages: list[str]) -> None:
    """One ``quantscope: warning:`` line per distinct message, at most
    :data:`WARNINGS_SHOWN` of them, then one line counting the others: an index that names a
    million missing tensors is one problem, not a million lines on the terminal."""
    distinct = list(dict.fromkeys(messages))
    for message in distinct[:WARNINGS_SHOWN]:
        print(f"quantscope: warning: {message}", file=sys.stderr)
    if len(distinct) > WARNINGS_SHOWN:
        print(f"quantscope: warning: ... and {len(distinct) - WARNINGS_SHOWN:,} more warnings "
              "like these (--json lists every tensor's status)", file=sys.stderr)


def _with_model(text: str, label: str, several: bool, header: bool) -> str:
    """A model's CSV lines; with several models each line starts with its model's label
    (the header, ``model``, once)."""
    if not several:
        return text
    lines = text.splitlines(keepends=True)
    quoted = '"' + label.replace('"', '""') + '"'
    body = [f"{quoted},{line}" for line in lines[1:]]
    return "".join(([f"model,{lines[0]}"] if header else []) + body)
