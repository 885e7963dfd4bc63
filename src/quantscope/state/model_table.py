"""A scanned model as one table: weight rows (``quantscope scan``'s figures) and, once
observed, activation rows. Qt-free; what ``quantscope.scan`` and ``quantscope.observe`` return.

The table keeps how to read each weight again (the file and tensor name, or the in-memory
tensor itself, never a copy), because planning (:func:`quantscope.state.plan.plan`) measures
every candidate format on every tensor after the scan. Its records are
:func:`quantscope.state.model_records.row_record`'s, so :meth:`ModelTable.to_json` is the text
``quantscope scan --json`` prints for the same tensors; activation rows are appended under
their own key and never change the weight part.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantscope.errors import UserError
from quantscope.jsonable import dumps
from quantscope.state.activation_figures import ActivationRow
from quantscope.state.model_records import row_record, to_json
from quantscope.state.model_scan import OK, ModelRow
from quantscope.state.settings import Settings


def rank_rows(rows: list[ModelRow], by: str = "sqnr") -> list[ModelRow]:
    """Analysed rows worst first, as ``quantscope scan`` ranks them (lowest per-tensor SQNR,
    or the largest per-channel gain); NaN last, ties by name."""
    def key(row: ModelRow):
        f = row.figures
        assert f is not None
        if by == "sqnr":
            value = f.per_tensor_db
        else:
            value = -(f.gain_db if f.gain_db is not None else math.nan)
        return (1 if math.isnan(value) else 0, 0.0 if math.isnan(value) else value, row.name)
    return sorted((r for r in rows if r.figures is not None), key=key)


@dataclass
class ModelTable:
    """One row per tensor of a model (see the module docstring).

    Attributes
    ----------
    rows : list of ModelRow
        The weights (every tensor of the checkpoint or state dict), in the model's order.
    settings : Settings
        The scheme the figures were computed under.
    label : str
        What was scanned (a path, ``"state dict"`` or the module's class name).
    activations : list of ActivationRow
        One per observed layer input (or output), in the order the layers first ran.
    """

    rows: list[ModelRow]
    settings: Settings
    label: str
    read: Callable[[ModelRow], np.ndarray]
    sharded: bool = False
    axis: int | None = None
    activations: list[ActivationRow] = field(default_factory=list)

    # -- access -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.rows) + len(self.activations)

    def __iter__(self) -> Iterator[ModelRow]:
        return iter(self.rows)

    def __getitem__(self, name: str) -> ModelRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def analysed(self) -> list[ModelRow]:
        return [r for r in self.rows if r.status == OK]

    def tensor(self, name: str) -> np.ndarray:
        """The weight ``name`` as float32 (read again from where it lives)."""
        return np.ascontiguousarray(self.read(self[name]), np.float32)

    def activation(self, name: str) -> ActivationRow:
        for a in self.activations:
            if a.name == name:
                return a
        raise KeyError(name)

    # -- records ----------------------------------------------------------------------------
    def to_json(self, sort: str = "sqnr", top: int | None = None) -> str:
        """``quantscope scan --json``'s text for these tensors (``--sort``/``--top`` alike),
        with an ``"activations"`` list added when the table has observed layers."""
        ranked = rank_rows(self.rows, sort)
        shown = ranked[:top] if top else ranked
        text = to_json(self.label, self.rows, shown, self.settings, self.sharded, self.axis)
        if not self.activations:
            return text
        doc = json.loads(text)
        doc["activations"] = [a.record() for a in self.activations]
        return dumps(doc, indent=2)  # an exact activation's SQNR: null, flagged

    def records(self) -> list[dict[str, Any]]:
        """Every weight row (model order) then every activation row, as flat dicts."""
        out = []
        for r in self.rows:
            rec = row_record(r)
            rec["role"] = "weight"
            for key in ("best_8bit", "best_4bit"):
                if key in rec:
                    best = rec.pop(key)
                    rec[key], rec[key + "_sqnr_db"] = best["format"], best["sqnr_db"]
            out.append(rec)
        out += [a.flat_record() for a in self.activations]
        return out

    def to_pandas(self):
        """The records as a ``pandas.DataFrame`` (pandas is needed for this call only)."""
        import importlib

        try:  # looked up by name: pandas is optional and ships no type stubs
            pd = importlib.import_module("pandas")
        except ImportError:
            raise UserError("to_pandas() needs pandas (pip install pandas); to_json() and "
                            "records() need nothing") from None
        return pd.DataFrame(self.records())

    def _repr_html_(self) -> str:
        """The table as Jupyter shows it: weights worst first, then activations."""
        head = ("tensor", "shape", "dtype", "per-tensor dB", "per-channel dB", "gap dB",
                "max |x|", "suggested")
        cells = ["<table><caption>" + html.escape(
            f"{self.label}: {len(self.analysed)} tensors, "
            f"{sum(r.params for r in self.analysed):,} parameters; symmetric "
            f"int{self.settings.bits}") + "</caption><tr>"
            + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
        for r in rank_rows(self.rows):
            f = r.figures
            assert f is not None
            vals = (r.name, "x".join(map(str, r.info.shape)) if r.info else "",
                    r.info.dtype if r.info else "", _db(f.per_tensor_db),
                    _db(f.per_channel_db), _db(f.gain_db), f"{f.max_abs:.4g}", f.suggested)
            cells.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in vals)
                         + "</tr>")
        cells.append("</table>")
        if self.activations:
            cells.append(self.activations[0].html_table(self.activations))
        return "".join(cells)

    def __repr__(self) -> str:
        return (f"ModelTable({self.label!r}: {len(self.rows)} tensors, "
                f"{len(self.activations)} activations)")


def _db(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if math.isfinite(value) else str(value)
