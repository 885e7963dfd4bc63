"""A tensor's int8 figures in one read of its stored bytes: what a model scan shows per tensor.

The figures are those of :func:`quantscope.core.stats.analyze.analyze` under symmetric min/max
parameters (:func:`quantscope.core.schemes.qparams.params_from_range`), per tensor and per channel:
SQNR of each, the gain of per-channel, the clipped share, max |x|, the channels holding an
outlier (``|x| >= 6``, LLM.int8()'s threshold) and a suggested scheme. The direct pass would
read a bf16 tensor four times (convert, min/max twice, two analyses); here
:mod:`quantscope.core.kernels.fused_kernel` reads each row once, widens it to float32 in a scratch
row, and quantizes it with its own scale while it is in cache. The per-tensor error needs the
whole tensor's range first: 8- and 16-bit data get it from a histogram of bit patterns made
during the same read; float32 data need a second pass (:attr:`FusedPass.needs_second_pass`).

The caller owns the I/O and the threads: :attr:`FusedPass.chunks` lists element ranges,
:meth:`FusedPass.first` / :meth:`FusedPass.second` take a chunk's raw bits (any thread, in any
order; the kernels release the GIL) and :meth:`FusedPass.result` assembles the figures.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import cache

import numpy as np

from quantscope.core.kernels import fused_kernel as fk
from quantscope.core.schemes.qparams import code_range, params_from_range
from quantscope.core.stats.report import sqnr_db
from quantscope.core.tensors.validate import ROUNDING_RULES, EngineValueError, check_choice

#: Elements per chunk: 8 MB of bf16, enough to make the Python between chunks negligible,
#: small enough for progress inside a large embedding and for two threads to share a tensor.
CHUNK_ELEMENTS = 1 << 22
#: LLM.int8()'s outlier threshold: a feature with any |x| >= 6 is kept in 16-bit float.
OUTLIER_THRESHOLD = 6.0
#: Per-channel scales are suggested when they buy at least this much (half a bit).
SUGGEST_GAIN_DB = 3.0
#: Below this SQNR (about 3 effective bits) int8 is not suggested at all.
SUGGEST_FLOOR_DB = 20.0

_KINDS = {"float32": fk.KIND_F32, "bfloat16": fk.KIND_BF16, "float16": fk.KIND_TABLE,
          "float8_e4m3fn": fk.KIND_TABLE, "float8_e5m2": fk.KIND_TABLE}
_RAW: dict[int, np.dtype] = {4: np.dtype("<u4"), 2: np.dtype("<u2"), 1: np.dtype("u1")}


@dataclass(frozen=True)
class FusedRules:
    """The settings the fused pass honours: symmetric min/max at ``bits`` with the engine's
    narrow-range default, and the rounding rule (division arithmetic, as the engine's)."""

    bits: int = 8
    narrow_range: bool | None = None
    rounding: str = "half_even"
    outlier_threshold: float = OUTLIER_THRESHOLD

    def check(self) -> FusedRules:
        code_range(self.bits, symmetric=True, narrow_range=self.narrow_range)
        check_choice(self.rounding, ROUNDING_RULES, "rounding")
        t = self.outlier_threshold
        if not (isinstance(t, int | float) and 0 < t < float(np.finfo(np.float32).max)):
            raise EngineValueError(f"the outlier threshold must be a positive float32, got {t!r}")
        return self

    @property
    def threshold_bits(self) -> np.uint32:
        """The threshold's float32 bit pattern: the kernels compare magnitudes as integers."""
        return np.float32(self.outlier_threshold).view(np.uint32)


@dataclass(frozen=True)
class TensorFigures:
    """One tensor's row of a model scan (see the module docstring).

    ``per_channel_db``, ``outlier_channels`` and ``channels`` are None for tensors with fewer
    than two dimensions, where one scale per element would be exact and say nothing.
    ``clipped_fraction`` is the per-tensor scheme's share of clipped finite elements.
    """

    n: int
    n_nonfinite: int
    per_tensor_db: float
    per_channel_db: float | None
    clipped_fraction: float
    max_abs: float
    outlier_channels: int | None
    channels: int | None
    bits: int = 8

    @property
    def gain_db(self) -> float | None:
        """Per-channel minus per-tensor SQNR (0 when both are exact)."""
        if self.per_channel_db is None:
            return None
        if math.isinf(self.per_channel_db) and self.per_channel_db == self.per_tensor_db:
            return 0.0
        return self.per_channel_db - self.per_tensor_db

    @property
    def suggested(self) -> str:
        """``per-tensor``, ``per-channel``, ``fp16 outliers`` or ``keep 16-bit``."""
        return suggest(self.per_tensor_db, self.per_channel_db, self.outlier_channels, self.bits)


def suggest_floor_db(bits: int = 8) -> float:
    """The SQNR under which :func:`suggest` gives up on the integer grid at ``bits`` (the
    model chart shades below it): :data:`SUGGEST_FLOOR_DB` at 8 bits, 6.02 dB less per bit
    below."""
    return SUGGEST_FLOOR_DB - 6.02 * (8 - bits)


def suggest(per_tensor_db: float, per_channel_db: float | None,
            outlier_channels: int | None, bits: int = 8) -> str:
    """The simplest scheme that serves: per-tensor unless per-channel buys half a bit
    (:data:`SUGGEST_GAIN_DB`); when even the better one stays under :data:`SUGGEST_FLOOR_DB`
    (6.02 dB less per bit below 8), the integer grid alone does not serve -- keep the outlier
    channels in 16-bit (LLM.int8()) when there are any, else the whole tensor."""
    best = per_tensor_db if per_channel_db is None else max(per_tensor_db, per_channel_db)
    if math.isnan(best):
        return "-"
    if best < suggest_floor_db(bits):
        return "fp16 outliers" if outlier_channels else "keep 16-bit"
    if per_channel_db is not None and per_channel_db - per_tensor_db >= SUGGEST_GAIN_DB:
        return "per-channel"
    return "per-tensor"


def _dtype(name: str) -> np.dtype:
    """A NumPy or ml_dtypes dtype by name (ml_dtypes loads only for its own types)."""
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


@cache
def _values(dtype_name: str) -> np.ndarray:
    """Every bit pattern of an 8- or 16-bit float type as float32 (NaN patterns included)."""
    dtype = _dtype(dtype_name)
    patterns = np.arange(1 << (8 * dtype.itemsize), dtype=_RAW[dtype.itemsize])
    with np.errstate(invalid="ignore", over="ignore"):
        return patterns.view(dtype).astype(np.float32)


def raw_dtype(dtype_name: str) -> np.dtype | None:
    """The unsigned type whose bits the kernels read for ``dtype_name``, or None when the
    fused pass does not handle that dtype (float64, integers: the engine's path does)."""
    if dtype_name not in _KINDS:
        return None
    return _RAW[_dtype(dtype_name).itemsize]


@dataclass(frozen=True)
class FirstPart:
    """The first pass over some chunks of a tensor (:meth:`FusedPass.first_part`): the
    bit-pattern histogram, and either each row's figures by chunk (``rows``: chunk -> the rows'
    float and integer records) or the columns' maxima, counts and float sums by chunk."""

    chunks: tuple[int, ...]
    hist: np.ndarray
    rows: dict[int, tuple[np.ndarray, np.ndarray]] | None
    cols: tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray | None]] | None


@dataclass(frozen=True)
class SecondPart:
    """The second pass over some chunks (:meth:`FusedPass.second_part`): clipped counts below
    and above, the float error sums by chunk, and the columns' clip counts."""

    chunks: tuple[int, ...]
    clipped: np.ndarray
    errors: dict[int, tuple[float, np.ndarray | None] | None]
    col_clip: np.ndarray | None


class FusedPass:
    """The figures of one tensor of ``shape`` stored as ``dtype_name``, chunk by chunk.

    ``axis`` is the channel axis: 0 (channels are rows, quantized as they are read) or the
    last axis (channels are columns: ranges in the first pass, errors in a second); None for
    per-tensor only. Use :func:`fused_axis` to know whether a layout is handled.
    """

    def __init__(self, shape: tuple[int, ...], dtype_name: str, axis: int | None,
                 rules: FusedRules = FusedRules(), chunk_elements: int | None = None) -> None:
        self.rules = rules.check()
        self.kind = _KINDS[dtype_name]
        self.raw_dtype = _RAW[_dtype(dtype_name).itemsize]  # raw_dtype(), known to be handled
        self.table = (_values(dtype_name) if self.kind != fk.KIND_F32
                      else np.zeros(1, np.float32))
        self.shape = tuple(shape)
        self.size = math.prod(self.shape)
        ax = fused_axis(self.shape, axis)
        if axis is not None and ax is None and len(self.shape) >= 2:
            raise EngineValueError(f"the fused pass takes channels on the first or last axis, "
                                   f"not axis {axis} of shape {self.shape}")
        self.channels_are_rows = ax == 0
        self.per_channel = ax is not None
        if ax is None:
            self.rows, self.cols = 1, self.size
        elif ax == 0:
            self.rows, self.cols = self.shape[0], self.size // max(self.shape[0], 1)
        else:
            self.cols = self.shape[-1]
            self.rows = self.size // max(self.cols, 1)
        #: Elements per chunk (whole rows at least); the float sums are kept per chunk, so
        #: passes whose figures must be equal bit for bit use the same value.
        self.chunk_elements = chunk_elements or CHUNK_ELEMENTS
        step = max(1, self.chunk_elements // max(self.cols, 1))
        self.chunks = [(r * self.cols, min(r + step, self.rows) * self.cols)
                       for r in range(0, self.rows, step)]
        self.qmin, self.qmax = code_range(rules.bits, symmetric=True,
                                          narrow_range=rules.narrow_range)
        self.qsym = (1 << (rules.bits - 1)) - 1
        self.half_away = rules.rounding == "half_away"
        self.want_hist = self.kind != fk.KIND_F32
        self._lock = threading.Lock()
        self.hist = np.zeros(self.table.size if self.want_hist else 1, np.int64)
        if self.channels_are_rows or not self.per_channel:
            self.row_f = np.zeros((self.rows, len(fk.ROW_F)))
            self.row_i = np.zeros((self.rows, len(fk.ROW_I)), np.int64)
        else:
            c = self.cols
            self.col_abits = np.zeros(c, np.uint32)
            self.col_sig, self.col_err = np.zeros(c), np.zeros(c)
            self.col_n, self.col_big = np.zeros(c, np.int64), np.zeros(c, np.int64)
            self.col_clip = np.zeros((c, 2), np.int64)
            self.col_scale: np.ndarray | None = None
        self.tensor_out = np.zeros(3)  # per-tensor error, below, above (second pass)
        # float partial sums by chunk, so the totals do not depend on which thread ran first
        self._sig_parts: list[np.ndarray | None] = [None] * len(self.chunks)
        self._err_parts: list[tuple[float, np.ndarray | None] | None] = [None] * len(self.chunks)
        self.tensor_scale: np.float32 | None = None

    @property
    def needs_second_pass(self) -> bool:
        """True when the data must be read again after :meth:`prepare_second`: float32 data
        (no histogram to take the per-tensor error from) and channels that are columns."""
        return not self.want_hist or (self.per_channel and not self.channels_are_rows)

    def _rows_of(self, i: int, raw: np.ndarray) -> tuple[int, int]:
        a, b = self.chunks[i]
        if raw.dtype != self.raw_dtype or raw.shape != (b - a,):
            raise EngineValueError(f"chunk {i} must be {b - a} elements of {self.raw_dtype}, "
                                   f"got {raw.shape} of {raw.dtype}")
        return self._row_range(i)

    def first(self, i: int, raw: np.ndarray) -> None:
        """Read chunk ``i`` (its raw bits, 1-D) for ranges, sums and the histogram."""
        r0, r1 = self._rows_of(i, raw)
        hist = np.zeros_like(self.hist)
        r = self.rules
        if self.channels_are_rows or not self.per_channel:
            fk.row_pass(raw, self.kind, self.table, self.cols, self.channels_are_rows,
                        self.qsym, self.qmin, self.qmax, self.half_away,
                        r.threshold_bits, self.want_hist, hist,
                        self.row_f[r0:r1], self.row_i[r0:r1], *_scratch(self.cols))
            if self.want_hist:
                with self._lock:
                    self.hist += hist
            return
        c = self.cols
        abits, sig = np.zeros(c, np.uint32), np.zeros(c)
        n, big = np.zeros(c, np.int64), np.zeros(c, np.int64)
        fk.column_ranges(raw, self.kind, self.table, c, r1 - r0, r.threshold_bits,
                         self.want_hist, hist, abits, sig, n, big, *_scratch(c))
        with self._lock:
            self.hist += hist
            np.maximum(self.col_abits, abits, out=self.col_abits)
            self._sig_parts[i] = sig
            self.col_n += n
            self.col_big += big

    def _add_parts(self) -> None:
        """The columns' float sums, chunk by chunk in order."""
        self.col_sig[:] = 0.0
        self.col_err[:] = 0.0
        for part in self._sig_parts:
            if part is not None:
                self.col_sig += part
        for chunk in self._err_parts:
            if chunk is not None and chunk[1] is not None:
                self.col_err += chunk[1]

    def _amax(self) -> np.ndarray:
        """Each channel's (or the tensor's one row's) finite max |x|, 0 when empty."""
        if self.channels_are_rows or not self.per_channel:
            return self.row_f[:, 0]
        return self.col_abits.view(np.float32).astype(np.float64)

    def _params(self, amax):
        """The engine's symmetric parameters for a range of ``max|x|`` (only it matters)."""
        r = self.rules
        return params_from_range(-amax, amax, symmetric=True, bits=r.bits,
                                 narrow_range=r.narrow_range, rounding=r.rounding)

    def prepare_second(self) -> None:
        """After every :meth:`first`: fix the scales the second pass quantizes with."""
        amax = self._amax()
        self.tensor_scale = self._params(amax.max(initial=0.0)).scale[()]
        if self.per_channel and not self.channels_are_rows:
            self.col_scale = self._params(amax).scale

    def second(self, i: int, raw: np.ndarray) -> None:
        """Read chunk ``i`` again for the errors the first pass could not know."""
        r0, r1 = self._rows_of(i, raw)
        if self.tensor_scale is None:
            raise EngineValueError("prepare_second() must come before second()")
        per_col = self.per_channel and not self.channels_are_rows
        c = self.cols
        err = np.zeros(c if per_col else 1)
        clip = np.zeros((c if per_col else 1, 2), np.int64)
        out = np.zeros(3)
        fk.error_pass(raw, self.kind, self.table, c, r1 - r0,
                      self.col_scale if per_col else np.ones(1, np.float32), per_col,
                      self.tensor_scale, not self.want_hist, self.qmin, self.qmax,
                      self.half_away, err, clip, out, *_scratch(c))
        with self._lock:  # float sums are kept per chunk, added in chunk order at the end
            self.tensor_out[1:] += out[1:]
            self._err_parts[i] = (out[0], err if per_col else None)
            if per_col:
                self.col_clip += clip

    # -- partial results: chunks run elsewhere (another process or machine) merge exactly ---------
    def first_part(self, chunk_ids: list[int]) -> FirstPart:
        """What :meth:`first` learned from ``chunk_ids`` (run on this pass alone), for
        :meth:`merge_first` of the pass that owns the whole tensor: integer counts, maxima,
        each row's own figures and the per-chunk float sums, so the merged figures equal a
        local pass's bit for bit whatever the order the parts arrive in."""
        rows = cols = None
        if self.channels_are_rows or not self.per_channel:
            rows = {i: (self.row_f[slice(*self._row_range(i))].copy(),
                        self.row_i[slice(*self._row_range(i))].copy()) for i in chunk_ids}
        else:
            cols = (self.col_abits.copy(), self.col_n.copy(), self.col_big.copy(),
                    {i: self._sig_parts[i] for i in chunk_ids})
        return FirstPart(tuple(chunk_ids), self.hist.copy(), rows, cols)

    def merge_first(self, part: FirstPart) -> None:
        """Add a :meth:`first_part` of another pass over the same tensor (see there)."""
        with self._lock:
            self.hist += part.hist
            if part.rows is not None:
                for i, (f, n) in part.rows.items():
                    r0, r1 = self._row_range(i)
                    self.row_f[r0:r1], self.row_i[r0:r1] = f, n
            if part.cols is not None:
                abits, n, big, sig = part.cols
                np.maximum(self.col_abits, abits, out=self.col_abits)
                self.col_n += n
                self.col_big += big
                for i, s in sig.items():
                    self._sig_parts[i] = s

    def second_scales(self) -> tuple[np.float32, np.ndarray | None]:
        """The scales :meth:`prepare_second` fixed, for :meth:`use_second_scales` elsewhere."""
        if self.tensor_scale is None:
            raise EngineValueError("prepare_second() must come before second_scales()")
        columns = self.per_channel and not self.channels_are_rows
        return self.tensor_scale, self.col_scale if columns else None

    def use_second_scales(self, scales: tuple[np.float32, np.ndarray | None]) -> None:
        """Quantize the second pass with the scales the owning pass fixed from every chunk."""
        self.tensor_scale, col_scale = scales
        if self.per_channel and not self.channels_are_rows:
            self.col_scale = col_scale

    def second_part(self, chunk_ids: list[int]) -> SecondPart:
        """What :meth:`second` learned from ``chunk_ids``, for :meth:`merge_second`."""
        clip = self.col_clip.copy() if self.per_channel and not self.channels_are_rows else None
        return SecondPart(tuple(chunk_ids), self.tensor_out[1:].copy(),
                          {i: self._err_parts[i] for i in chunk_ids}, clip)

    def merge_second(self, part: SecondPart) -> None:
        """Add a :meth:`second_part` of another pass over the same tensor."""
        with self._lock:
            self.tensor_out[1:] += part.clipped
            for i, e in part.errors.items():
                self._err_parts[i] = e
            if part.col_clip is not None:
                self.col_clip += part.col_clip

    def _row_range(self, i: int) -> tuple[int, int]:
        a, b = self.chunks[i]
        return a // max(self.cols, 1), b // max(self.cols, 1)

    def result(self) -> TensorFigures:
        """The figures, once every chunk went through :meth:`first` (and :meth:`second`)."""
        if self.tensor_scale is None:
            self.prepare_second()
        amax = self._amax()
        if self.channels_are_rows or not self.per_channel:
            sig_u, n_u = self.row_f[:, 1], self.row_i[:, 0]
            err_u, big_u = self.row_f[:, 2], self.row_i[:, 3]
            if self.channels_are_rows:  # the kernel's scales must be the engine's, bit for bit
                used = self.row_f[:, 3].astype(np.float32)
                if not np.array_equal(used, self._params(amax).scale):
                    raise EngineValueError("internal error: a channel scale of the fused pass "
                                           "differs from params_from_range")
        else:
            self._add_parts()
            sig_u, n_u, err_u, big_u = self.col_sig, self.col_n, self.col_err, self.col_big
        s = self.tensor_scale
        assert s is not None  # prepare_second() above sets it
        if not self.want_hist:
            self.tensor_out[0] = sum(p[0] for p in self._err_parts if p is not None)
        if self.want_hist:
            t_err, below, above = fk.histogram_error(self.table, self.hist, s, self.qmin,
                                                     self.qmax, self.half_away)
        else:
            t_err, below, above = self.tensor_out[0], int(self.tensor_out[1]), \
                int(self.tensor_out[2])
        n = int(n_u.sum())
        sig = float(sig_u.sum())
        nan = float("nan")
        per_channel_db = None
        if self.per_channel:
            per_channel_db = float(sqnr_db(sig, float(err_u.sum()))) if n else nan
        return TensorFigures(
            n=n, n_nonfinite=self.size - n,
            per_tensor_db=float(sqnr_db(sig, float(t_err))) if n else nan,
            per_channel_db=per_channel_db,
            clipped_fraction=(int(below) + int(above)) / n if n else 0.0,
            max_abs=float(amax.max(initial=0.0)),
            outlier_channels=int(np.count_nonzero(big_u)) if self.per_channel else None,
            channels=len(n_u) if self.per_channel else None, bits=self.rules.bits)


def _scratch(cols: int) -> tuple[np.ndarray, np.ndarray]:
    """One row of scratch seen as uint32 and as float32 (see :mod:`.fused_kernel`)."""
    bits = np.empty(max(cols, 1), np.uint32)
    return bits, bits.view(np.float32)


def fused_axis(shape: tuple[int, ...], axis: int | None) -> int | None:
    """The channel axis as the fused pass sees it: 0 (rows), ``ndim - 1`` (columns), or None
    (per-tensor only: no axis, or fewer than two dimensions). A middle axis also gives None;
    :class:`FusedPass` refuses it, so callers use the engine's path for such tensors."""
    ndim = len(shape)
    if axis is None or ndim < 2 or not -ndim <= axis < ndim:
        return None
    a = axis % ndim
    return a if a in (0, ndim - 1) else None


def figures_of(x: np.ndarray, axis: int | None, rules: FusedRules = FusedRules()
               ) -> TensorFigures:
    """The figures of an in-memory tensor in one call (tests and small tensors)."""
    x = np.ascontiguousarray(x)
    p = FusedPass(x.shape, x.dtype.name, axis, rules)
    flat = x.reshape(-1).view(p.raw_dtype)
    for i, (a, b) in enumerate(p.chunks):
        p.first(i, flat[a:b])
    if p.needs_second_pass:
        p.prepare_second()
        for i, (a, b) in enumerate(p.chunks):
            p.second(i, flat[a:b])
    return p.result()
