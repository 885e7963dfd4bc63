"""Where the explorer's tensor comes from, and what the source panel says about it.

Everything here is a pure function of its inputs, so the window runs it in its worker thread:
building a generator's tensor, reading a file, validating, summarising, preparing.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quantscope.core.stats.prepared import prepare, warm_up, working_copy
from quantscope.core.tensors.binning import equal_bins, percentiles
from quantscope.core.tensors.channels import channel_abs_max
from quantscope.core.tensors.generators import GENERATORS, generate
from quantscope.errors import QuantscopeError
from quantscope.io import load_for_analysis
from quantscope.io.samples import sample_path
from quantscope.state.axes import units
from quantscope.state.errors import SettingsError, short_repr

# -- where tensors come from ------------------------------------------------------------------
SOURCE_KINDS = ("generator", "file", "sample", "array")
#: The built-in demo: real GELU activations of a BERT-family FFN, with one feature at 24.8 while
#: 99.9% of |x| stays under 2.8 -- the case where per-tensor min/max scaling wastes the buckets.
DEMO_SAMPLE = "gelu_activations"
#: Channel axis of the demo tensor ([tokens, features]: features are the channels); its name
#: says "activations", so the axis rule picks it.
DEMO_AXIS = -1


@dataclass(frozen=True)
class Source:
    """Where the tensor came from, enough to rebuild it (sessions) and to label it (titles).

    ``kind`` is ``"generator"`` (``name`` = generator, with ``shape``, ``seed``, ``params``),
    ``"file"`` (``name`` = path, ``tensor`` = name inside), ``"sample"`` (``name`` = bundled
    sample, ``tensor`` for multi-tensor samples) or ``"array"`` (handed over in code; cannot be
    rebuilt). ``axis``, when given (``--axis``, a session), is the channel axis; otherwise
    the tensor's ``role`` (picked by the user, or read from its name and shape) decides it
    (:func:`quantscope.state.axes.choose_axis`).
    """

    kind: str
    name: str
    tensor: str | None = None
    shape: tuple[int, ...] | None = None
    seed: int | None = None
    params: tuple[tuple[str, float], ...] = ()
    axis: int | None = None
    role: str | None = None  # "weight" / "activation" when the user says (sets the axis)

    def label(self) -> str:
        """Short human description, e.g. ``outliers(count=4) [256x1024] seed 0``."""
        if self.kind == "generator":
            args = ", ".join(f"{k}={v:g}" for k, v in self.params)
            shape = "x".join(map(str, self.shape or ()))
            return f"{self.name}({args}) [{shape}] seed {self.seed}"
        if self.kind == "file":
            base = os.path.basename(str(self.name))
            return base + (f" [{self.tensor}]" if self.tensor else "")
        if self.kind == "sample":
            return f"sample {self.name}" + (f" [{self.tensor}]" if self.tensor else "")
        return self.name

    def to_dict(self) -> dict:
        """JSON-ready form."""
        d = dataclasses.asdict(self)
        d["shape"] = list(self.shape) if self.shape is not None else None
        d["params"] = dict(self.params)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Source:
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        if d.get("kind") not in SOURCE_KINDS:
            raise SettingsError(f"source kind must be one of {SOURCE_KINDS}, got "
                                f"{short_repr(d.get('kind'))}")
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise SettingsError(f"unknown source field(s) {sorted(map(str, unknown))}")
        _expect(d, "name", str)
        _expect(d, "tensor", str, optional=True)
        for key in ("seed", "axis"):
            if d.get(key) is not None and not _is_int(d[key]):
                raise SettingsError(f"source {key} must be an integer, got {short_repr(d[key])}")
        shape = d.get("shape")
        if shape is not None:  # a list of ints: "64" must not become (6, 4), 1e400 no int
            if not isinstance(shape, list | tuple) or not all(_is_int(v) for v in shape):
                raise SettingsError(f"source shape must be a list of integers, got "
                                    f"{short_repr(shape)}")
            d["shape"] = tuple(shape)
        params = d.get("params") or {}
        if not isinstance(params, dict) or not all(
                isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
                and math.isfinite(v) for k, v in params.items()):
            raise SettingsError(f"source params must map names to finite numbers, got "
                                f"{short_repr(params)}")
        d["params"] = tuple(sorted((k, float(v)) for k, v in params.items()))
        return cls(**d)

    @classmethod
    def generator(cls, name: str, shape, seed: int = 0, **params) -> Source:
        """A generator source with every parameter spelled out (defaults filled in from the
        registry, so the source still rebuilds the same bits if a default changes later) and
        sorted, so equal sources compare equal."""
        gen = GENERATORS.get(name)
        full = {**(gen.defaults() if gen else {}), **params}
        return cls("generator", name, shape=tuple(int(v) for v in shape), seed=int(seed),
                   params=tuple(sorted((k, float(v)) for k, v in full.items())))


Progress = Callable[[float, str], None]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _expect(d: dict, key: str, kind: type, optional: bool = False) -> None:
    value = d.get(key)
    if (value is None and optional) or isinstance(value, kind):
        return
    raise SettingsError(f"source {key} must be a {kind.__name__}, got {short_repr(value)}")


def load_source(source: Source, progress: Progress | None = None) -> tuple[np.ndarray, str]:
    """Build or read the float32 tensor ``source`` describes, and the dtype it was stored in.

    Runs in any thread; raises QuantscopeError subclasses (TensorFileError, GeneratorError,
    UnknownSampleError) with a message that names the input.
    """
    if progress:
        progress(0.0, f"loading {source.label()}")
    if source.kind == "generator":
        params = dict(source.params)
        integer = {p.name for p in GENERATORS[source.name].params if p.integer} \
            if source.name in GENERATORS else set()
        params = {k: int(v) if k in integer else v for k, v in params.items()}
        return generate(source.name, source.shape, source.seed or 0, **params), "float32"

    if source.kind in ("file", "sample"):
        path = source.name if source.kind == "file" else sample_path(source.name)
        x, info = load_for_analysis(path, source.tensor, progress=progress)
        return x, info.dtype
    raise SettingsError(f"a {source.kind!r} source cannot be reloaded")


def tensor_problem(x) -> str | None:
    """Why ``x`` cannot be explored (empty, 0-d, not real numbers, no finite value), or None.

    A float32 tensor is checked in blocks (no full-size copy or mask: a 10^9-element tensor
    costs no extra memory, and the check stops at the first finite block)."""
    try:
        arr = np.asarray(x)
    except Exception as exc:
        return f"not an array ({exc})"
    name = arr.dtype.name
    if arr.dtype.kind not in "fiu" and name != "bfloat16" and not name.startswith("float8"):
        return f"dtype {arr.dtype} is not a real number type; nothing to quantize"
    if arr.ndim == 0:
        return "a 0-d (scalar) tensor has no distribution to explore; give at least 1 dimension"
    if arr.size == 0:
        return f"the tensor is empty (shape {arr.shape}); nothing to quantize"
    if not any(np.isfinite(block).any() for block in _blocks(arr)):
        return (f"all {arr.size} values are NaN or infinite; there is no finite value to "
                "quantize")
    return None


#: Elements per block of the checks and the summary (16 MiB of float32).
SUMMARY_BLOCK = 1 << 22


def _blocks(arr: np.ndarray):
    """``arr`` as float32 blocks of :data:`SUMMARY_BLOCK` elements (converted block by block)."""
    flat = arr.reshape(-1)
    for lo in range(0, flat.size, SUMMARY_BLOCK):
        # the error state is set per block, never held across a yield: a generator left
        # unfinished (``any`` stops early) is closed later, maybe in another thread's context
        with np.errstate(over="ignore", invalid="ignore"):
            block = np.asarray(flat[lo:lo + SUMMARY_BLOCK], dtype=np.float32)
        yield block


def working_tensor(x, progress: Progress | None = None) -> np.ndarray:
    """``x`` as the float32 array the engine works on: itself when float32 (a memory-mapped
    file stays mapped), else converted once, in blocks, with ``progress`` (any thread)."""
    return working_copy(x, progress)


#: Percentiles the source panel's summary lists.
SUMMARY_PERCENTILES = (0.1, 1.0, 50.0, 99.0, 99.9, 99.99)
#: Histogram resolution of the panes (value bins over the finite range).
HISTOGRAM_BINS = 2048


@dataclass(frozen=True, eq=False)
class TensorOverview:
    """The tensor's summary and value histogram, computed once per tensor (off-thread)."""

    shape: tuple[int, ...]
    n: int
    n_nan: int
    n_posinf: int
    n_neginf: int
    min: float
    max: float
    mean: float
    std: float
    percentiles: dict[float, float]
    hist_edges: np.ndarray
    hist_counts: np.ndarray
    dtype: str = "float32"
    #: Per axis (2-D and up), the largest |x| of each channel along it: outlier channels are
    #: counted along every axis from these (:func:`quantscope.core.labs.outliers.axis_outliers`).
    channel_abs_max: tuple[np.ndarray, ...] | None = None

    def rows(self) -> list[tuple[str, str]]:
        """(label, text) rows for the summary table."""
        rows = [("shape", "x".join(map(str, self.shape))), ("dtype", self.dtype),
                ("elements", f"{self.n:,}"),
                ("min", f"{self.min:.6g}"), ("max", f"{self.max:.6g}"),
                ("mean", f"{self.mean:.6g}"), ("std", f"{self.std:.6g}")]
        rows += [(f"p{p:g}", f"{v:.6g}") for p, v in self.percentiles.items()]
        rows.append(("NaN/+∞/−∞", f"{self.n_nan} / {self.n_posinf} / {self.n_neginf}"))
        return rows


def overview(x: np.ndarray, dtype: str = "float32", prepared=None) -> TensorOverview:
    """Summary statistics (float64 sums) and a value histogram of the finite values of ``x``
    (``dtype``: what the tensor was stored as, for the summary).

    With ``prepared`` (the engine's preparation of ``x``), the extremes, percentiles and
    histogram counts come from its sorted values -- the same numbers as NumPy's, exactly, in
    O(bins · log N) -- and the rest from passes in blocks: no full-size temporary, so a
    10^9-element tensor is summarised in its own memory."""
    if prepared is None or x.size <= SUMMARY_BLOCK:
        return _overview_numpy(x, dtype)
    rows = prepared.layout(None, None)
    vals = rows.values
    n = int(vals.size)
    n_nan = n_pos = 0
    if rows.n_nonfinite:
        for block in _blocks(x):
            n_nan += int(np.count_nonzero(np.isnan(block)))
            n_pos += int(np.count_nonzero(block == np.inf))
    lo, hi = (float(vals[0]), float(vals[-1])) if n else (0.0, 0.0)
    total = 0.0
    for block in _blocks(x):
        total += float(np.sum(block, dtype=np.float64, where=np.isfinite(block)))
    mean = total / n if n else 0.0
    dev = 0.0
    for block in _blocks(x):
        d = block[np.isfinite(block)].astype(np.float64) - mean
        dev += float(np.einsum("i,i->", d, d))  # not np.dot: no BLAS thread pool
    std = float(np.sqrt(dev / n)) if n else 0.0
    pct = prepared.percentile(np.asarray(SUMMARY_PERCENTILES)) if n \
        else np.zeros(len(SUMMARY_PERCENTILES))
    span = (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)
    edges = np.histogram_bin_edges(np.zeros(0, np.float32), bins=HISTOGRAM_BINS, range=span)
    counts = rows.histogram(edges)
    return TensorOverview(tuple(x.shape), int(x.size), n_nan, n_pos,
                          int(x.size - n - n_nan - n_pos), lo, hi, mean, std,
                          dict(zip(SUMMARY_PERCENTILES, map(float, pct), strict=True)),
                          edges, counts, dtype, _channels(x))


def _overview_numpy(x: np.ndarray, dtype: str) -> TensorOverview:
    """:func:`overview` in NumPy calls over the whole tensor (small tensors, or no
    preparation at hand)."""
    flat = x.reshape(-1)
    finite = np.isfinite(flat)
    all_finite = bool(finite.all())
    vals = flat if all_finite else flat[finite]
    n_nan = int(np.count_nonzero(np.isnan(flat))) if not all_finite else 0
    n_pos = int(np.count_nonzero(flat == np.inf)) if not all_finite else 0
    lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 0.0)
    mean = float(np.mean(vals, dtype=np.float64)) if vals.size else 0.0
    std = float(np.std(vals, dtype=np.float64)) if vals.size else 0.0
    pct = (percentiles(vals, SUMMARY_PERCENTILES) if vals.size
           else np.zeros(len(SUMMARY_PERCENTILES)))
    pad = max(0.5, abs(lo) * 2.0**-20)  # a constant tensor: a narrow range around it
    span = (lo, hi) if hi > lo else (lo - pad, hi + pad)
    counts, edges = equal_bins(vals, HISTOGRAM_BINS, *span)
    return TensorOverview(tuple(x.shape), int(x.size), n_nan, n_pos,
                          int(flat.size - vals.size - n_nan - n_pos), lo, hi, mean, std,
                          dict(zip(SUMMARY_PERCENTILES, map(float, pct), strict=True)),
                          edges, counts, dtype, _channels(x))


def _channels(x: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """Each axis's channel maxima of a tensor of 2 or more dimensions (None below)."""
    return channel_abs_max(x) if x.ndim >= 2 else None


def prepare_tensor(x: np.ndarray, settings=None, axis: int | None = None,
                   progress: Progress | None = None, *, warm: bool = True):
    """The engine's one-time preparation for fast exact reports (any thread).

    With ``settings``, the per-channel (or per-group) layout the panes will ask for is built
    now too, prefix sums included (for the channel axis ``axis`` when given, else
    ``settings.axis``), so the first report after a load is as fast as the next ones; a layout
    the tensor cannot have is simply skipped. ``progress(fraction, stage)`` follows the
    preparation (raise to cancel). With ``warm`` every compiled loop a later report may need
    is loaded now too (a session's first percentile then does not stall); a one-shot report
    loads only the ones it runs.
    """
    if warm:
        warm_up()
    prepared = prepare(x, progress)
    if settings is not None and x.ndim > 0:
        u = units(x.shape, settings.axis if axis is None else axis, settings.group_size)
        if u.refusal is None:
            try:
                prepared.layout(u.engine_axis, u.group_size).build_sums()
            except QuantscopeError:
                pass
    return prepared
