"""A bits plan: one number format per tensor, the model's bits within a budget, the total error
least. Qt-free; ``quantscope.plan`` and ``quantscope plan``.

Every candidate format is measured on every planned tensor by the comparison panes' own rules
(:func:`quantscope.state.formats.format_pane_params`, then the exact report), giving exact
``(bits, error)`` pairs: bits are the whole stored size (elements, block and tensor scales,
zero points: :func:`quantscope.core.formats.catalog.bits_per_element` times the element count,
an integer), the error the chosen objective. Picking one pair per tensor under
``sum(bits) <= budget * sum(params)`` with the least summed error is a multiple-choice knapsack,
solved exactly by :func:`quantscope.core.calibration.plan_knapsack.solve`.

The budget counts the planned tensors. Tensors kept in their stored precision -- names matching
a keep pattern (embeddings, lm_head and norms by default) and 1-D tensors (biases, norm
scales: no per-channel or block layout the target tools quantize) -- are listed with their
stored bits, and :attr:`Plan.model_bits` gives the average over the whole model too.

Objectives: ``"relative"`` (default) sums each tensor's MSE relative to its signal (its mean
square), so every tensor counts alike whatever its size and scale; ``"sse"`` sums squared
errors (MSE times elements), so large tensors weigh more; ``"params"`` sums relative MSE
times elements; or a callable ``f(name, spec, report, x) -> float``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantscope.core.calibration.plan_knapsack import solve
from quantscope.core.formats.catalog import FORMATS, bits_per_element
from quantscope.errors import QuantscopeError, UserError
from quantscope.io.dtypes import dtype_from_name
from quantscope.state.compute import analyze_with
from quantscope.state.export_targets import TARGETS, expresses, tensor_refusal
from quantscope.state.formats import CHOICES, format_pane_params, pane_specs
from quantscope.state.model_scan import ModelRow
from quantscope.state.model_table import ModelTable

#: Name patterns kept in high precision unless told otherwise (case-insensitive regexes).
DEFAULT_KEEP = ("embed", "lm_head", "norm")
OBJECTIVES = ("relative", "sse", "params")


@dataclass(frozen=True)
class Candidate:
    """One format on one tensor: its exact stored bits and error."""

    spec: str
    bits: int
    error: float
    mse: float
    sqnr_db: float

    def bits_per_element(self, params: int) -> float:
        return self.bits / max(params, 1)


@dataclass(frozen=True)
class PlanRow:
    """A tensor of the plan: the chosen format (None when kept), why kept, its candidates."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    params: int
    axis: int | None
    spec: str | None
    kept: str | None = None
    pinned: bool = False
    candidates: tuple[Candidate, ...] = ()
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def chosen(self) -> Candidate | None:
        for c in self.candidates:
            if c.spec == self.spec:
                return c
        return None

    @property
    def bits(self) -> int:
        """Stored bits under the plan (the stored dtype's for a kept tensor)."""
        c = self.chosen
        if c is not None:
            return c.bits
        return self.params * stored_bits(self.dtype)

    @property
    def error(self) -> float:
        c = self.chosen
        return c.error if c is not None else 0.0


def stored_bits(dtype: str) -> int:
    """Bits of one element of a stored dtype name (``"bfloat16"`` -> 16)."""
    return 8 * dtype_from_name(dtype).itemsize


@dataclass(frozen=True)
class Plan:
    """The plan (see the module docstring); :meth:`choose` changes a row and re-plans."""

    rows: tuple[PlanRow, ...]
    budget: float
    objective: str
    table: ModelTable = field(repr=False, compare=False)
    cells: int = 0

    @property
    def planned(self) -> list[PlanRow]:
        return [r for r in self.rows if r.kept is None]

    @property
    def kept(self) -> list[PlanRow]:
        return [r for r in self.rows if r.kept is not None]

    @property
    def average_bits(self) -> float:
        """Bits per element over the planned tensors, scales included (within the budget)."""
        rows = self.planned
        return sum(r.bits for r in rows) / max(sum(r.params for r in rows), 1)

    @property
    def model_bits(self) -> float:
        """Bits per element over every tensor, the kept ones at their stored precision."""
        return sum(r.bits for r in self.rows) / max(sum(r.params for r in self.rows), 1)

    @property
    def total_error(self) -> float:
        return sum(r.error for r in self.planned)

    def __getitem__(self, name: str) -> PlanRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    def choose(self, name: str, spec: str | None) -> Plan:
        """The plan with tensor ``name`` pinned to ``spec`` (None: kept at its stored
        precision) and every unpinned tensor re-planned under the same budget."""
        return self.with_pins({name: spec})

    def with_pins(self, pins: dict[str, str | None]) -> Plan:
        """:meth:`choose` for several tensors at once (one re-plan)."""
        rows = {r.name: r for r in self.rows}
        for name, spec in pins.items():
            row = self[name]
            if spec is not None and spec not in {c.spec for c in row.candidates}:
                raise UserError(f"{spec!r} is not a candidate for {name}; candidates: "
                                f"{', '.join(c.spec for c in row.candidates) or 'none'}")
            rows[name] = (dataclasses.replace(row, spec=None, kept=row.kept or "kept by you",
                                              pinned=True) if spec is None else
                          dataclasses.replace(row, spec=spec, kept=None, pinned=True))
        return _solve(tuple(rows.values()), self.budget, self.objective, self.table)

    def with_budget(self, budget: float) -> Plan:
        """The plan re-solved under another budget (pins kept, nothing measured again)."""
        if not isinstance(budget, int | float) or not math.isfinite(budget) or budget <= 0:
            raise UserError(f"budget must be a positive number of bits, got {budget!r}")
        return _solve(self.rows, float(budget), self.objective, self.table)

    def unpin_all(self) -> Plan:
        """Every pin dropped and the plan solved afresh."""
        rows = tuple(dataclasses.replace(r, pinned=False,
                                         kept=None if r.candidates else r.kept)
                     if r.pinned else r for r in self.rows)
        return _solve(rows, self.budget, self.objective, self.table)

    def unpin(self, name: str) -> Plan:
        """The plan with ``name`` free again (re-planned)."""
        rows = tuple(dataclasses.replace(r, pinned=False, kept=None if r.candidates else r.kept)
                     if r.name == name else r for r in self.rows)
        return _solve(rows, self.budget, self.objective, self.table)

    def record(self) -> dict[str, Any]:
        """The plan's values (``quantscope plan --json``): numbers stay floats, an exact
        tensor's SQNR ``inf`` too; :func:`quantscope.jsonable.dumps` writes it as ``null``
        with a ``"nonfinite"`` flag."""
        return {
            "budget_bits": self.budget, "objective": self.objective,
            "average_bits": self.average_bits, "model_bits": self.model_bits,
            "total_error": self.total_error,
            "planned_params": sum(r.params for r in self.planned),
            "kept_params": sum(r.params for r in self.kept),
            "tensors": [{
                "name": r.name, "shape": list(r.shape), "dtype": r.dtype, "params": r.params,
                "format": r.spec, "kept": r.kept, "pinned": r.pinned,
                "bits_per_element": r.bits / max(r.params, 1), "error": r.error,
                "sqnr_db": r.chosen.sqnr_db if r.chosen else None,
            } for r in self.rows],
        }

    def summary(self) -> str:
        """A plain-text table: one line per tensor, then the totals."""
        head = ("tensor", "shape", "format", "bits/elem", "SQNR dB", "error")
        lines = [head]
        for r in self.rows:
            c = r.chosen
            fmt = (r.spec or f"keep {r.dtype}") + (" *" if r.pinned else "")
            lines.append((r.name, "x".join(map(str, r.shape)), fmt,
                          f"{r.bits / max(r.params, 1):.4f}",
                          f"{c.sqnr_db:.2f}" if c else "-",
                          f"{c.error:.4g}" if c else (r.kept or "")))
        widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
        out = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
               for row in lines]
        out.append(f"planned {sum(r.params for r in self.planned):,} parameters at "
                   f"{self.average_bits:.4f} bits/element (budget {self.budget:g}), "
                   f"total {self.objective} error {self.total_error:.6g}; whole model "
                   f"{self.model_bits:.4f} bits/element with {len(self.kept)} tensors kept"
                   + ("; * = pinned" if any(r.pinned for r in self.rows) else ""))
        return "\n".join(out)

    def _repr_html_(self) -> str:
        import html

        rows = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in line.split("\t"))
                       + "</tr>" for line in self._tab_lines())
        return (f"<table><caption>{html.escape(self.summary().splitlines()[-1])}</caption>"
                "<tr><th>tensor</th><th>format</th><th>bits/elem</th><th>SQNR dB</th></tr>"
                f"{rows}</table>")

    def _tab_lines(self) -> Iterable[str]:
        for r in self.rows:
            c = r.chosen
            yield "\t".join((r.name, r.spec or f"keep ({r.kept})",
                             f"{r.bits / max(r.params, 1):.4f}",
                             f"{c.sqnr_db:.2f}" if c else "-"))

    def __repr__(self) -> str:
        return self.summary()


def candidate_specs(formats: Sequence[str] | None = None) -> tuple[str, ...]:
    """The pane formats a plan chooses among: every one of the format table by default
    (formats added to the table join automatically), else the names given (a bare name
    expands to its per-tensor and per-channel variants)."""
    if formats is None:
        return CHOICES
    specs = []
    for f in formats:
        if f in CHOICES:
            specs.append(f)
        elif f in FORMATS:
            specs += pane_specs([f])
        else:
            raise UserError(f"unknown format {f!r}; choose from {', '.join(CHOICES)}")
    return tuple(dict.fromkeys(specs))


def objective_value(objective: str | Callable, name: str, spec: str, report,
                    x: np.ndarray, signal: float) -> float:
    """One candidate's error under the objective (see the module docstring)."""
    if callable(objective):
        return float(objective(name, spec, report, x))
    mse = float(report.mse)
    if objective == "sse":
        return mse * x.size
    relative = mse / signal if signal > 0 else 0.0
    return relative * x.size if objective == "params" else relative


def measure(row: ModelRow, x: np.ndarray, specs: Sequence[str], settings,
            objective: str | Callable = "relative"
            ) -> tuple[tuple[Candidate, ...], dict[str, str]]:
    """Every spec on one tensor: its candidates and the specs it refuses (why)."""
    at = settings if row.axis is None else dataclasses.replace(settings, axis=row.axis)
    finite = x[np.isfinite(x)]
    signal = float(np.mean(np.square(finite, dtype=np.float64))) if finite.size else 0.0
    out, refused = [], {}
    for spec in specs:
        try:
            params = format_pane_params(x, spec, at)
            report = analyze_with(x, None, params)
        except QuantscopeError as exc:
            refused[spec] = str(exc)
            continue
        bits = round(bits_per_element(params, x.size) * x.size)
        out.append(Candidate(spec, int(bits), objective_value(objective, row.name, spec, report,
                                                              x, signal),
                             float(report.mse), float(report.sqnr_db)))
    return tuple(out), refused


def keep_reason(row: ModelRow, keep: Sequence[str]) -> str | None:
    """Why a tensor stays in its stored precision, or None."""
    for pattern in keep:
        if re.search(pattern, row.name, re.IGNORECASE):
            return f"name matches {pattern!r}"
    if row.info is not None and row.info.ndim < 2:
        return "1-D (bias or norm scale)"
    return None


def plan(table: ModelTable, budget: float = 4.5, *, formats: Sequence[str] | None = None,
         target: str | None = None,
         keep: Sequence[str] = DEFAULT_KEEP, objective: str | Callable = "relative",
         pins: dict[str, str | None] | None = None,
         on_tensor: Callable[[str, int, int], None] | None = None) -> Plan:
    """Plan ``table``'s tensors under ``budget`` bits per element (see the module docstring).

    Parameters
    ----------
    table : ModelTable
        From :func:`quantscope.scan` (or :func:`quantscope.observe`).
    budget : float
        Average bits per element over the planned tensors, every scale included.
    formats : sequence of str, optional
        Candidate formats (names or pane formats); default every format of the table.
    target : str, optional
        ``"compressed-tensors"``, ``"modelopt"`` or ``"onnx"``: only the candidates that tool
        runs (:mod:`quantscope.state.export_targets`), so its export expresses every row.
    keep : sequence of str
        Regexes of names kept in their stored precision.
    objective : str or callable
        ``"relative"``, ``"sse"``, ``"params"`` or ``f(name, spec, report, x)``.
    pins : dict, optional
        Tensors whose format is fixed (None: kept); the others are planned around them.
    on_tensor : callable, optional
        ``on_tensor(name, done, total)`` after each tensor is measured (progress).
    """
    if not isinstance(budget, int | float) or not math.isfinite(budget) or budget <= 0:
        raise UserError(f"budget must be a positive number of bits, got {budget!r}")
    if not callable(objective) and objective not in OBJECTIVES:
        raise UserError(f"objective must be one of {OBJECTIVES} or a callable, "
                        f"got {objective!r}")
    specs = candidate_specs(formats)
    if target is not None:
        if target not in TARGETS:
            raise UserError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
        specs = tuple(s for s in specs if expresses(target, s))
        if not specs:
            raise UserError(f"none of the candidate formats is one {target} runs")
    keep = tuple(keep)
    for pattern in keep:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UserError(f"keep pattern {pattern!r} is not a regex: {exc}") from None
    pins = dict(pins or {})
    unknown = set(pins) - {r.name for r in table.analysed}
    if unknown:
        raise UserError(f"pinned tensors not in the table: {', '.join(sorted(unknown))}")
    rows = []
    todo = table.analysed
    for i, r in enumerate(todo):
        assert r.info is not None
        reason = keep_reason(r, keep)
        if reason is None and target is not None:
            reason = tensor_refusal(target, r.name, r.info.shape)
        if reason is not None and r.name not in pins:
            rows.append(PlanRow(r.name, r.info.shape, r.info.dtype, r.params, r.axis, None,
                                kept=reason))
        else:
            x = table.tensor(r.name)
            cands, refused = measure(r, x, specs, table.settings, objective)
            del x
            rows.append(PlanRow(r.name, r.info.shape, r.info.dtype, r.params, r.axis, None,
                                candidates=cands, refused=refused,
                                kept=None if cands else "no candidate format fits"))
        if on_tensor is not None:
            on_tensor(r.name, i + 1, len(todo))
    name = objective if isinstance(objective, str) else getattr(objective, "__name__", "custom")
    unsolved = Plan(tuple(rows), float(budget), name, table)
    return unsolved.with_pins(pins) if pins else _solve(unsolved.rows, float(budget), name,
                                                         table)


def _solve(rows: tuple[PlanRow, ...], budget: float, objective: str, table: ModelTable
           ) -> Plan:
    """The rows with every free planned tensor's format chosen by the exact knapsack."""
    planned = [r for r in rows if r.kept is None]
    free = [r for r in planned if not r.pinned]
    params = sum(r.params for r in planned)
    capacity = math.floor(budget * params + 1e-9) - sum(r.bits for r in planned if r.pinned)
    if not free:
        if capacity < 0:
            raise UserError(f"the pinned formats alone exceed {budget:g} bits per element")
        return Plan(rows, budget, objective, table)
    try:
        sol = solve([[c.bits for c in r.candidates] for r in free],
                    [[c.error for c in r.candidates] for r in free], capacity)
    except QuantscopeError as exc:
        cheapest = sum(min(c.bits for c in r.candidates) for r in free) + sum(
            r.bits for r in planned if r.pinned)
        raise UserError(f"no plan fits {budget:g} bits per element: the cheapest candidates "
                        f"average {cheapest / max(params, 1):.4f} ({exc})") from None
    chosen = {r.name: r.candidates[k].spec for r, k in zip(free, sol.choice, strict=True)}
    out = tuple(dataclasses.replace(r, spec=chosen[r.name]) if r.name in chosen else r
                for r in rows)
    return Plan(out, budget, objective, table, sol.cells)
