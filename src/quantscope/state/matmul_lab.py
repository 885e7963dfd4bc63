"""What the Matmul view shows, without Qt: operands, one request, and its outcome as text.

The view is a thin shell over :func:`quantscope.core.labs.outliers.quantized_matmul`. Everything it
needs per control change is built here, in the worker thread, from one immutable
:class:`LabRequest`:

* the operands, named by :class:`Operand` specs (the bundled MiniLM pair, a generator with
  shape and seed, or a file), loaded once and cached, so dragging α never reloads a file;
* the float reference ``A @ W`` (float64), cached per operand pair: it does not depend on the
  schemes, α or the threshold, and passing it is what makes a call 15-40 ms;
* the *plain* result (same schemes, no outlier fix), cached per pair and schemes, drawn as a
  grey ghost so the audience sees what α or the threshold changed;
* the output-error histogram (display binning of the engine's error array, on bins shared by
  the plain and the current result so the two curves compare) and every label's text.

It lives in the state layer, under the view: Qt-free, so the test compares the view's labels
with :func:`display_text` applied to an independent engine call, and the view (in ``gui``)
stays arithmetic-free.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from quantscope.core.labs.outliers import (
    DEFAULT_ACTIVATION_SCHEME,
    DEFAULT_OUTPUT_SCHEME,
    DEFAULT_WEIGHT_SCHEME,
    MatmulLabResult,
    quantized_matmul,
)
from quantscope.core.labs.requant import INT32_MAX
from quantscope.core.tensors.generators import GENERATORS, generate
from quantscope.core.text.formatting import fmt_value
from quantscope.errors import QuantscopeError
from quantscope.io import load_for_analysis, samples

#: Bins of the output-error histogram.
HIST_BINS = 81
#: Largest M·K·N the lab runs (about a second per float64 GEMM on one core): every control
#: change runs the product once more, and the worker cannot stop a GEMM half-way.
MAX_MACS = 2**33
#: Generators offered per side (activations look like activations, weights like weights).
A_GENERATORS = ("outliers", "gelu", "normal", "laplace", "student_t")
W_GENERATORS = ("weights", "normal", "laplace", "student_t")


class OperandError(QuantscopeError, ValueError):
    """An operand that cannot be used: unreadable file, not 2-D, or K does not match."""


@dataclass(frozen=True)
class Operand:
    """Where one side of the matmul comes from (hashable: it keys the cache).

    ``kind`` is ``"sample"`` (``name`` a bundled sample), ``"generator"`` (``name`` a generator,
    ``shape`` the [rows, cols] of the operand as used, ``seed``) or ``"file"`` (``name`` a path,
    ``tensor`` the tensor in it). ``transpose`` uses the stored matrix transposed: weights are
    stored [out, in] by PyTorch's Linear (and the ``weights`` generator), the matmul takes
    W [in, out] = [K, N].
    """

    kind: str
    name: str
    tensor: str | None = None
    shape: tuple[int, int] | None = None
    seed: int = 0
    transpose: bool = False

    def label(self) -> str:
        """A short description for the operand line."""
        if self.kind == "sample":
            return f"MiniLM {self.name.replace('_', ' ')}" + (" (transposed)" if self.transpose
                                                              else "")
        if self.kind == "generator":
            return f"{GENERATORS[self.name].label}, seed {self.seed}"
        base = self.name.replace("\\", "/").rsplit("/", 1)[-1]
        return base + (f":{self.tensor}" if self.tensor else "") + (
            " (transposed)" if self.transpose else "")


REAL_A = Operand("sample", "output_activations")
REAL_W = Operand("sample", "ffn_weight", transpose=True)


def generated(side: str, name: str, m: int, k: int, n: int, seed: int = 0) -> Operand:
    """A generated operand of the shape the side needs: A [M, K], W [K, N]."""
    if side == "A":
        return Operand("generator", name, shape=(m, k), seed=seed)
    return Operand("generator", name, shape=(k, n), seed=seed, transpose=name == "weights")


def scheme_a(symmetric: bool, per_row: bool, rounding: str) -> dict:
    """Activation scheme for choose_qparams: per tensor, or per row (LLM.int8() vector-wise)."""
    s = {"symmetric": symmetric, "rounding": rounding}
    if per_row:
        s.update(granularity="channel", axis=0)
    return s


def scheme_w(symmetric: bool, per_channel: bool, rounding: str) -> dict:
    """Weight scheme: per tensor, or per output channel (axis 1 of W [K, N])."""
    s = {"symmetric": symmetric, "rounding": rounding}
    if per_channel:
        s.update(granularity="channel", axis=1)
    return s


@overload
def _frozen(scheme: dict) -> tuple: ...
@overload
def _frozen(scheme: None) -> None: ...
def _frozen(scheme: dict | None) -> tuple | None:
    return None if scheme is None else tuple(sorted(scheme.items()))


def _shape(spec: Operand) -> tuple[int, int]:
    """A generated operand's [rows, cols] (refused for an operand built without one)."""
    if spec.shape is None:
        raise OperandError(f"generated operand {spec.name!r} has no shape")
    return spec.shape


@dataclass(frozen=True)
class LabRequest:
    """Everything one computation depends on (an immutable snapshot of the controls)."""

    a: Operand = REAL_A
    w: Operand = REAL_W
    a_scheme: tuple = _frozen(dict(DEFAULT_ACTIVATION_SCHEME))
    w_scheme: tuple = _frozen(dict(DEFAULT_WEIGHT_SCHEME))
    out_scheme: tuple | None = _frozen(dict(DEFAULT_OUTPUT_SCHEME))
    alpha: float | None = None
    threshold: float | None = None
    requantization: str = "single"

    @staticmethod
    def freeze(scheme: dict | None) -> tuple | None:
        """A scheme dict as a hashable field value (``None`` stays None: float output)."""
        return _frozen(scheme)

    def engine_kwargs(self) -> dict:
        """The keyword arguments of :func:`quantized_matmul` this request stands for."""
        return {
            "a_scheme": dict(self.a_scheme), "w_scheme": dict(self.w_scheme),
            "out_scheme": None if self.out_scheme is None else dict(self.out_scheme),
            "alpha": self.alpha, "threshold": self.threshold,
            "requantization": self.requantization,
        }


@dataclass(frozen=True, eq=False)
class LabOutcome:
    """One request's results, ready to draw."""

    request: LabRequest
    result: MatmulLabResult
    plain: MatmulLabResult
    a_shape: tuple[int, int]
    w_shape: tuple[int, int]
    hist_centres: np.ndarray
    hist_counts: np.ndarray  # 0 shown as NaN (a gap on the log axis)
    plain_counts: np.ndarray
    channels: np.ndarray  # 0..N-1, the x of the per-channel plot
    channel_sqnr: np.ndarray  # per output channel; exact channels (inf) as NaN
    plain_channel_sqnr: np.ndarray
    sorted_sqnr: np.ndarray  # the same, worst channel first (each curve sorted on its own)
    plain_sorted_sqnr: np.ndarray
    text: dict[str, str] = field(default_factory=dict)


def load_operand(spec: Operand) -> np.ndarray:
    """The float32 [rows, cols] matrix ``spec`` names (C-contiguous, as the matmul uses it)."""
    try:
        if spec.kind == "sample":
            x, _ = load_for_analysis(samples.sample_path(spec.name))
        elif spec.kind == "file":
            x, _ = load_for_analysis(spec.name, spec.tensor)
        elif spec.kind == "generator":
            rows, cols = _shape(spec)
            shape = (cols, rows) if spec.transpose else (rows, cols)
            x = generate(spec.name, shape, seed=spec.seed)
        else:
            raise OperandError(f"unknown operand kind {spec.kind!r}")
    except OperandError:
        raise
    except QuantscopeError as exc:
        raise OperandError(str(exc)) from None
    if x.ndim != 2:
        raise OperandError(f"{spec.label()}: a matmul operand must be a 2-D matrix, this tensor "
                           f"has shape {tuple(x.shape)}")
    if not np.isfinite(x).all():
        raise OperandError(f"{spec.label()}: {int(np.count_nonzero(~np.isfinite(x))):,} NaN or "
                           "infinite value(s); an int8 matmul needs finite operands")
    return np.ascontiguousarray(x.T if spec.transpose else x)


class LabCache:
    """Operands, float references and plain results kept between requests.

    Used from the worker thread only (one job at a time), so it needs no lock. Small LRU
    bounds keep memory flat however many files or generators the user tries.
    """

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self.operands: OrderedDict = OrderedDict()
        self.references: OrderedDict = OrderedDict()
        self.plains: OrderedDict = OrderedDict()

    def _get(self, store: OrderedDict, key, make):
        if key in store:
            store.move_to_end(key)
            return store[key]
        value = make()
        store[key] = value
        while len(store) > self.size:
            store.popitem(last=False)
        return value

    def _load(self, spec: Operand, side: str) -> np.ndarray:
        try:
            return self._get(self.operands, spec, lambda: load_operand(spec))
        except OperandError as exc:  # say which side the message is about
            raise OperandError(f"{side} ({'activations' if side == 'A' else 'weights'}): "
                               f"{exc}") from None

    def pair(self, a: Operand, w: Operand) -> tuple[np.ndarray, np.ndarray]:
        """Both operands, checked to multiply: generated sides adopt the fixed side's K."""
        fixed_k = None
        if a.kind != "generator":
            x_a = self._load(a, "A")
            fixed_k = x_a.shape[1]
        if w.kind != "generator":
            x_w = self._load(w, "W")
            fixed_k = x_w.shape[0] if fixed_k is None else fixed_k
        if a.kind == "generator":
            x_a = self._load(_with_k(a, "A", fixed_k), "A")
        if w.kind == "generator":
            x_w = self._load(_with_k(w, "W", fixed_k if fixed_k is not None else x_a.shape[1]),
                             "W")
        macs = x_a.shape[0] * x_a.shape[1] * x_w.shape[1]
        if x_a.shape[1] == x_w.shape[0] and macs > MAX_MACS:
            raise OperandError(f"A {list(x_a.shape)} × W {list(x_w.shape)} is {macs:,} "
                               f"multiply-accumulates; the lab stays interactive up to "
                               f"{MAX_MACS:,} (use fewer rows M or columns N)")
        if x_a.shape[1] != x_w.shape[0]:
            hint = (" (the weight file may be stored [out, in]: tick 'transpose W')"
                    if x_w.shape[1] == x_a.shape[1] else "")
            raise OperandError(f"A is {list(x_a.shape)} and W is {list(x_w.shape)}: A's columns "
                               f"must equal W's rows (K){hint}")
        return x_a, x_w

    def run(self, req: LabRequest) -> LabOutcome:
        """Compute one request (the worker's job)."""
        a, w = self.pair(req.a, req.w)
        ref = self._get(self.references, (req.a, req.w),
                        lambda: a.astype(np.float64) @ w.astype(np.float64))
        kwargs = req.engine_kwargs()
        result = quantized_matmul(a, w, float_reference=ref, **kwargs)
        plain_kwargs = dict(kwargs, alpha=None, threshold=None)
        plain_key = (req.a, req.w, req.a_scheme, req.w_scheme, req.out_scheme,
                     req.requantization)
        if req.alpha is None and req.threshold is None:
            plain = self._get(self.plains, plain_key, lambda: result)
        else:
            plain = self._get(self.plains, plain_key,
                              lambda: quantized_matmul(a, w, float_reference=ref,
                                                       **plain_kwargs))
        edges, counts, plain_counts = error_histograms(result, plain)
        outcome = LabOutcome(req, result, plain, a.shape, w.shape, (edges[:-1] + edges[1:]) / 2,
                             _gaps(counts), _gaps(plain_counts),
                             np.arange(w.shape[1]), *_per_channel(result, plain))
        outcome.text.update(display_text(result, plain, a.shape, w.shape,
                                          threshold=req.threshold))
        return outcome


def _gaps(counts: np.ndarray) -> np.ndarray:
    return np.where(counts > 0, counts, np.nan)


def _finite(values: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(values), values, np.nan)


def _per_channel(result: MatmulLabResult, plain: MatmulLabResult
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-channel SQNR of both results, in channel order and sorted (worst first)."""
    now = _finite(result.vs_float.sqnr_db_per_channel)
    before = _finite(plain.vs_float.sqnr_db_per_channel)
    return now, before, np.sort(now), np.sort(before)  # NaN (exact) sorts last


def _with_k(spec: Operand, side: str, k: int | None) -> Operand:
    """The generated spec with its K replaced by the fixed side's (A: columns, W: rows)."""
    if k is None:
        return spec
    rows, cols = _shape(spec)
    return Operand(spec.kind, spec.name, spec.tensor,
                   (rows, k) if side == "A" else (k, cols), spec.seed, spec.transpose)


def error_histograms(result: MatmulLabResult,
                     plain: MatmulLabResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Histograms of ``output - A @ W`` for both results on the same symmetric bins."""
    reach = max(result.vs_float.max_abs_error, plain.vs_float.max_abs_error)
    reach = reach if reach > 0 else 1.0
    edges = np.linspace(-reach, reach, HIST_BINS + 1)
    counts = np.histogram(result.vs_float.error, bins=edges)[0]
    plain_counts = np.histogram(plain.vs_float.error, bins=edges)[0]
    return edges, counts, plain_counts


def _db(v: float) -> str:
    return "∞ dB (exact)" if np.isposinf(v) else f"{v:.2f} dB"


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def display_text(result: MatmulLabResult, plain: MatmulLabResult,
                 a_shape: tuple[int, int], w_shape: tuple[int, int], *,
                 threshold: float | None = None) -> dict[str, str]:
    """Every label of the view, formatted from the engine's numbers only.

    Keys ending in ``_detail`` (and ``sqnr_plain``, ``max_error``, ``accumulator``,
    ``safe_k``) are the smaller lines under a big number. Lines are broken here, at most ~40
    characters each, rather than word-wrapped by Qt (wrapped labels in nested layouts get
    their height wrong and overlap).
    """
    rep = result.int8
    cols = result.outlier_columns.size
    k_total = rep.k + cols
    now_db, plain_db = result.vs_float.sqnr_db, plain.vs_float.sqnr_db
    gain = (f" ({now_db - plain_db:+.2f} dB)"
            if np.isfinite(now_db) and np.isfinite(plain_db) else "")
    plain_line = ("no outlier fix on" if result is plain
                  else f"without fixes: {_db(plain_db)}{gain}")
    if rep.accumulator_overflows:
        headroom = f"OVERFLOW in {_plural(rep.accumulator_overflows, 'output')}"
    elif np.isfinite(rep.headroom_bits):
        headroom = f"{rep.headroom_bits:.1f} bits spare"
    else:
        headroom = "all products zero"
    safe = "any K" if rep.max_safe_k is None else f"K ≤ {rep.max_safe_k:,}"
    safe_codes = "any K" if rep.max_safe_k_codes is None else f"K ≤ {rep.max_safe_k_codes:,}"
    terms = rep.zero_point_terms_per_output
    if result.out_params is None:
        saturated = "none (float output)"
        saturated_detail = "accumulator dequantized, no int8 requantization"
    else:
        saturated = f"{result.output_saturated:,} of {result.output.size:,} outputs"
        saturated_detail = (f"clamped to the codes "
                            f"[{result.out_params.qmin}, {result.out_params.qmax}]")
    zp_detail = (f"+{rep.zero_point_overhead:.2%} ops per MAC"
                 if terms else "symmetric A and W: gemmlowp's expansion adds nothing")
    if rep.zero_point_offline_ops:
        zp_detail += f"\n{rep.zero_point_offline_ops:,} offline (W column sums)"
    if threshold is None:
        outliers, outliers_detail = "off", f"all {k_total} columns in int8"
    elif cols:
        outliers = f"{cols} of {k_total} columns in float16"
        outliers_detail = (f"columns with |A| ≥ {threshold:g}: "
                           f"{result.outlier_fraction:.2%} of the MACs")
    else:
        outliers, outliers_detail = "no column split", f"no |A| ≥ {threshold:g}"
    return {
        "shapes": f"A {list(a_shape)} × W {list(w_shape)} → [{a_shape[0]}, {w_shape[1]}]",
        "sqnr": _db(now_db),
        "sqnr_plain": plain_line,
        "max_error": f"max |error| {fmt_value(result.vs_float.max_abs_error)}, "
                     f"MSE {result.vs_float.mse:.3g}",
        "headroom": headroom,
        "accumulator": f"used [{rep.accumulator_min:,}, {rep.accumulator_max:,}]\n"
                       f"of ±{INT32_MAX:,}",
        "safe_k": f"no overflow possible for {safe}"
                  + (f"\n(any codes: {safe_codes})" if safe_codes != safe else "")
                  + f"\nhere K = {rep.k}" + (" (the int8 part)" if cols else ""),
        "saturated": saturated,
        "saturated_detail": saturated_detail,
        "zero_points": ("none" if terms == 0 else
                        f"{_plural(terms, 'extra term')} / output"),
        "zp_detail": zp_detail,
        "outliers": outliers,
        "outliers_detail": outliers_detail,
        "path": "int32 product: " + rep.gemm_path.replace(", ", ",\n", 1),
    }


__all__ = [
    "A_GENERATORS",
    "HIST_BINS",
    "MAX_MACS",
    "REAL_A",
    "REAL_W",
    "W_GENERATORS",
    "LabCache",
    "LabOutcome",
    "LabRequest",
    "Operand",
    "OperandError",
    "display_text",
    "error_histograms",
    "generated",
    "load_operand",
    "scheme_a",
    "scheme_w",
]
