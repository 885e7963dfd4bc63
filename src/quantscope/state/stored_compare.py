"""What a shipped quantization lost: a quantized checkpoint's decoded weights against the
original's, tensor by tensor, beside the engine's formats at the same or fewer bits. Qt-free.

For each weight the quantized checkpoint stores (:mod:`quantscope.io.stored`), the original
tensor of the same name is found (:func:`match_names`: the quantized checkpoint's own names
are already given back their ``.weight`` form; a ``model.`` prefix present on one side only
is also matched), and the decoded tensor is measured against it exactly as the panes measure a
quantization (:mod:`quantscope.core.stats.report`'s conventions): SQNR, and the error split
into rounding (originals inside the window their own scale and zero point can decode to) and
clipping (those outside it). Beside it, every format of the engine's table whose bits per
element (scales included) do not exceed the stored one's is run on the original through the
comparison panes' own rules (:func:`quantscope.state.formats.format_points`) and ranked by
SQNR: the best alternative is the first.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from quantscope.core.formats.catalog import FORMAT_TABLE
from quantscope.core.stats.report import sqnr_db
from quantscope.errors import QuantscopeError
from quantscope.io import load_for_analysis
from quantscope.io.checkpoint import list_checkpoint
from quantscope.io.stored import StoredCheckpoint, StoredTensor, open_stored
from quantscope.io.stored.gguf_stored import GgufStored, open_gguf_stored
from quantscope.io.tensor_info import TensorFileError
from quantscope.state.choices import FormatChoice
from quantscope.state.formats import CHOICES, DEFAULT_COMPARISON, element_bits, format_points
from quantscope.state.settings import Settings

#: A bits-per-element comparison tolerance (fractions like 4 + 16/128 are exact in binary;
#: this only absorbs the per-tensor scalars that differ by a few bits per million).
_BITS_SLACK = 1e-3


@dataclass(frozen=True)
class StoredFigures:
    """The stored scheme's loss on one tensor, against the original."""

    format: str
    bits_per_element: float
    sqnr_db: float
    rounding_mse: float
    clipping_mse: float
    clipped_fraction: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Alternative:
    """An engine format run on the original: its bits per element and loss."""

    spec: str
    bits_per_element: float
    sqnr_db: float
    rounding_mse: float
    clipping_mse: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CompareRow:
    """One stored weight: matched, measured and set beside its alternatives, or why not."""

    name: str
    reference: str | None
    shape: tuple[int, ...]
    stored: StoredFigures | None = None
    alternatives: tuple[Alternative, ...] = ()
    problem: str | None = None
    #: The engine's pane format closest to the stored scheme (:func:`engine_spec`).
    engine_spec: str | None = None

    def panes(self) -> tuple[str, str, str, str]:
        """The four pane formats this row opens with: stored scheme, then alternatives."""
        return pane_formats(self.engine_spec, self.alternatives,
                            self.stored.bits_per_element if self.stored else None)

    @property
    def best(self) -> Alternative | None:
        return self.alternatives[0] if self.alternatives else None


@dataclass
class Comparison:
    """Every stored weight's row (worst first once ranked), and what could not be paired."""

    quantized: Path
    reference: Path
    method: str
    rows: list[CompareRow] = field(default_factory=list)
    unmatched_reference: list[str] = field(default_factory=list)
    plain: list[str] = field(default_factory=list)

    def ranked(self) -> list[CompareRow]:
        """Measured rows by stored SQNR, lowest (most lost) first, then the others."""
        def key(row: CompareRow) -> tuple[bool, float, str]:
            db = row.stored.sqnr_db if row.stored is not None else math.nan
            return (math.isnan(db), 0.0 if math.isnan(db) else db, row.name)
        done = sorted((r for r in self.rows if r.stored is not None), key=key)
        return done + [r for r in self.rows if r.stored is None]


def match_names(stored: list[str], reference: list[str]) -> dict[str, str]:
    """Each stored weight's name in the original: the same name, else the same name without
    (or with) a leading ``model.``, else the only reference name ending with it."""
    available = set(reference)
    out: dict[str, str] = {}
    for name in stored:
        candidates = [name, name.removeprefix("model."), f"model.{name}"]
        found = next((c for c in candidates if c in available), None)
        if found is None:
            tails = [r for r in reference if r.endswith("." + name) or name.endswith("." + r)]
            found = tails[0] if len(tails) == 1 else None
        if found is not None:
            out[name] = found
            available.discard(found)
    return out


def stored_figures(x: np.ndarray, decoded: StoredTensor) -> StoredFigures:
    """The decoded tensor's loss against the original ``x`` (float32, same shape), split as
    the engine splits it: sums over elements divided by the finite count."""
    finite = np.isfinite(x)
    xf = np.where(finite, x, 0).astype(np.float64)
    err2 = np.where(finite, (xf - decoded.values.astype(np.float64)) ** 2, 0.0)
    n = int(np.count_nonzero(finite))
    clipped = np.zeros(x.shape, bool)
    if decoded.window is not None:
        lo, hi = decoded.window()
        clipped = finite & ((x < lo) | (x > hi))
    clip_err = float(err2[clipped].sum())
    total = float(err2.sum())
    return StoredFigures(
        format=decoded.format.label, bits_per_element=decoded.bits_per_element,
        sqnr_db=float(sqnr_db(float((xf * xf).sum()), total)),
        rounding_mse=(total - clip_err) / n if n else 0.0,
        clipping_mse=clip_err / n if n else 0.0,
        clipped_fraction=int(np.count_nonzero(clipped)) / n if n else 0.0)


def alternatives(x: np.ndarray, bits: float, settings: Settings | None = None
                 ) -> tuple[Alternative, ...]:
    """Every engine format at ``bits`` per element or fewer on ``x``, best SQNR first (a tie
    goes to fewer bits). Per-channel formats scale along axis 0: a weight's output rows."""
    at = settings or Settings(axis=0)
    points = format_points(x, None, at, CHOICES, curve=False)
    kept = [Alternative(p.spec, p.bits_per_element, float(p.sqnr_db), float(p.rounding_mse),
                        float(p.clipping_mse))
            for p in points if p.bits_per_element <= bits + _BITS_SLACK]
    kept.sort(key=lambda a: (-a.sqnr_db if not math.isnan(a.sqnr_db) else math.inf,
                             a.bits_per_element, a.spec))
    return tuple(kept)


def open_quantized(path: str | os.PathLike) -> StoredCheckpoint | GgufStored:
    """The quantized checkpoint at ``path`` (a Hugging Face one declaring its quantization, or
    a GGUF file), or one clear error when it is neither."""
    gguf = open_gguf_stored(path)
    if gguf is not None:
        return gguf
    stored = open_stored(path)
    if stored is None:
        raise TensorFileError(f"{path}: declares no quantization (no quantization_config in "
                              "a config.json beside it): nothing stored to decode")
    return stored


def compare(quantized: str | os.PathLike, reference: str | os.PathLike, *,
            with_alternatives: bool = True,
            on_row: Callable[[CompareRow], None] | None = None) -> Comparison:
    """Decode every stored weight of ``quantized`` and measure it against ``reference``'s
    (see the module docstring). A weight that cannot be decoded, has no original or whose
    shapes differ gets a row with its problem; the others carry on."""
    stored = open_quantized(quantized)
    ref = list_checkpoint(reference)
    ref_tensors = {t.name: t for t in ref.tensors if t.info is not None}
    pairs = match_names(stored.names, list(ref_tensors))
    result = Comparison(Path(quantized), Path(reference), stored.config.method,
                        plain=[t.name for t in stored.plain()])
    paired = set(pairs.values())
    result.unmatched_reference = [n for n, t in ref_tensors.items() if n not in paired
                                  and t.info is not None and t.info.is_floating
                                  and t.info.ndim >= 2]
    for name in stored.names:
        row = _row(stored, name, pairs.get(name), ref_tensors, with_alternatives)
        result.rows.append(row)
        if on_row is not None:
            on_row(row)
    return result


def _row(stored: StoredCheckpoint | GgufStored, name: str, ref_name: str | None, ref_tensors: dict,
         with_alternatives: bool) -> CompareRow:
    if ref_name is None:
        return CompareRow(name, None, (), problem="no tensor of this name in the original")
    try:
        decoded = stored.decode(name)
        t = ref_tensors[ref_name]
        x, _ = load_for_analysis(t.file, t.name)
    except QuantscopeError as exc:
        return CompareRow(name, ref_name, (), problem=str(exc))
    if x.shape != decoded.values.shape:
        return CompareRow(name, ref_name, decoded.values.shape,
                          problem=f"shapes differ: stored {list(decoded.values.shape)}, "
                                  f"original {list(x.shape)}")
    figures = stored_figures(x, decoded)
    spec = engine_spec(decoded.format)
    alts: tuple[Alternative, ...] = ()
    if with_alternatives and x.ndim >= 1:
        try:
            alts = alternatives(x, figures.bits_per_element)
        except QuantscopeError as exc:
            return CompareRow(name, ref_name, x.shape, figures, problem=str(exc),
                              engine_spec=spec)
    return CompareRow(name, ref_name, x.shape, figures, alts, engine_spec=spec)


def engine_spec(fmt) -> str | None:
    """The engine's pane format closest to a stored scheme (its element, what one scale
    covers), or None when the engine has none: ``awq uint4 g128`` -> ``awq_int4_g128``,
    ``fp8 per channel`` -> ``fp8_e4m3/channel``, NVFP4 -> ``nvfp4``, NF4 blocks of 64 ->
    ``nf4``. Block-wise FP8 and odd group sizes have no pane of their own."""
    element = fmt.element.removeprefix("u")
    spec: str | None = None
    if element == "int4" and fmt.granularity == "group":
        # the packages' own rules where the engine has them: AutoAWQ's asymmetric min/max
        # (compressed-tensors' asymmetric rule is the same), GPTQ's symmetric zero point 8
        own = (f"awq_int4_g{fmt.group_size}" if fmt.method == "awq" or (
            fmt.method == "compressed-tensors" and not fmt.symmetric) else
            f"gptq_int4_g{fmt.group_size}" + ("" if fmt.symmetric else "_asym"))
        spec = own if own in CHOICES else f"int4_g{fmt.group_size}"
    elif element == "int8" and fmt.granularity in ("tensor", "channel"):
        spec = f"int8/{fmt.granularity}"
    elif element in ("fp8_e4m3", "fp8_e5m2") and fmt.granularity in ("tensor", "channel"):
        spec = f"{element}/{fmt.granularity}"
    elif element == "fp4_e2m1" and fmt.group_size == 16:
        spec = "nvfp4"
    elif element == "nf4" and fmt.group_size == 64:
        spec = "nf4"
    elif fmt.method == "gguf":  # llama.cpp's own block types are engine formats
        spec = f"gguf_{element.lower()}"
    return spec if spec in CHOICES else None


def pane_formats(stored_spec: str | None, alternatives: tuple[Alternative, ...] = (),
                 bits: float | None = None) -> tuple[str, str, str, str]:
    """The four panes for a stored weight: its scheme's engine format first, then the best
    alternatives (by SQNR when they were measured, else the engine's formats at ``bits`` or
    fewer per element, largest first), each once; panes left over (fewer alternatives than
    three) take the default comparison's formats, int8 per channel first."""
    chosen: list[str] = [stored_spec] if stored_spec else []
    ranked = [a.spec for a in alternatives]
    if not ranked and bits is not None:
        cheap = [(spec, _nominal_bits(spec, FORMAT_TABLE)) for spec in _simple_specs()]
        ranked = [s for s, b in sorted(cheap, key=lambda t: -t[1]) if b <= bits + _BITS_SLACK]
    for spec in [*ranked, *DEFAULT_COMPARISON]:
        if spec not in chosen:
            chosen.append(spec)
        if len(chosen) == 4:
            break
    return (chosen[0], chosen[1], chosen[2], chosen[3])


def _simple_specs() -> tuple[str, ...]:
    return tuple(c for c in CHOICES if not c.startswith("gguf"))


def _nominal_bits(spec: str, table: dict) -> float:
    """Bits per element of a pane format on a large tensor (its scales included)."""
    name = FormatChoice(spec).name
    _, _, block, scale_bits = table[name][:4]
    return element_bits(name) + (scale_bits / block if block else 0.0)
