"""A scanned checkpoint as records: the rows of ``quantscope scan --json / --csv`` and of the
model view's exports (one definition for both, so a file written by either reads the same).
"""

from __future__ import annotations

import csv
import io
from typing import Any

from quantscope.jsonable import dumps
from quantscope.state.model_scan import ModelRow
from quantscope.state.settings import Settings

#: The CSV columns, in order.
COLUMNS = ("name", "shape", "dtype", "params", "per_tensor_sqnr_db", "per_channel_sqnr_db",
           "gain_db", "axis", "clipped_percent", "max_abs", "outlier_channels", "channels",
           "suggested", "n_nonfinite", "layer", "kind", "file", "status", "reason")
#: The columns ``scan --formats`` adds: each tensor's best 8-bit and 4-bit format.
FORMAT_COLUMNS = ("best_8bit", "best_8bit_sqnr_db", "best_8bit_bits", "best_4bit",
                  "best_4bit_sqnr_db", "best_4bit_bits")


#: ``scan --json``'s document version: bumped when a key changes meaning or name.
SCAN_SCHEMA = "quantscope.scan/1"


def row_record(row: ModelRow, rank_: int | None = None, sharded: bool = False
               ) -> dict[str, Any]:
    """One row as the JSON/CSV record (also what the window exports). Numbers stay floats,
    infinite ones too (an exact quantization's SQNR): :func:`to_json` writes them as ``null``
    with a ``"nonfinite"`` flag (:mod:`quantscope.jsonable`), CSV as ``inf``."""
    f, info = row.figures, row.info
    record: dict[str, Any] = {  # JSON values: numbers, strings, lists, objects or null
        "name": row.name,
        "shape": list(info.shape) if info else None,
        "dtype": info.dtype if info else None,
        "file_dtype": info.file_dtype if info else None,
        "stored": info.stored if info else None,  # already quantized: "gguf_q4_k"...
        "params": row.params,
        "layer": row.layer,
        "kind": row.kind,
        "status": row.status,
    }
    if rank_ is not None:
        record = {"rank": rank_, **record}
    if f is not None:
        record.update({
            "per_tensor_sqnr_db": f.per_tensor_db,
            "per_channel_sqnr_db": f.per_channel_db,
            "gain_db": f.gain_db,
            "axis": row.axis,
            "clipped_percent": 100 * f.clipped_fraction,
            "max_abs": f.max_abs,
            "outlier_channels": f.outlier_channels,
            "channels": f.channels,
            "suggested": f.suggested,
            "n_nonfinite": f.n_nonfinite,
        })
        if row.formats is not None:
            for key, p in (("best_8bit", row.formats.best8), ("best_4bit", row.formats.best4)):
                record[key] = {"format": p.spec, "sqnr_db": p.sqnr_db,
                               "bits_per_element": p.bits_per_element}
    else:
        record["reason"] = row.reason
    if sharded:
        record["file"] = row.file
    return record


def to_json(label: str, rows: list[ModelRow], shown: list[ModelRow], settings: Settings,
            sharded: bool, axis: int | None = None) -> str:
    """The machine-readable report (schema :data:`SCAN_SCHEMA`; strict JSON: infinities are
    ``null`` with a ``"nonfinite"`` flag). ``axis`` is the
    one given for every tensor, None when each tensor had its own (each record's ``axis``)."""
    analysed = [r for r in rows if r.figures is not None]
    doc = {
        "schema": SCAN_SCHEMA,
        "source": label,
        "scheme": {"bits": settings.bits, "symmetric": True, "method": settings.method,
                   "preset": settings.runtime,
                   "per_channel_axis": "each tensor's own" if axis is None else axis},
        "count": len(analysed),
        "parameters": sum(r.params for r in analysed),
        "tensors": [row_record(r, i, sharded) for i, r in enumerate(shown, 1)],
        "skipped": [{"name": r.name, "dtype": r.info.dtype if r.info else None,
                     "reason": r.reason} for r in rows if r.status == "skipped"],
        "errors": [{"name": r.name, "file": r.file, "reason": r.reason}
                   for r in rows if r.status == "error"],
    }
    return dumps(doc, indent=2)


def to_csv(rows: list[ModelRow]) -> str:
    """Every row (analysed ones ranked first, then the others), one CSV line each."""
    buf = io.StringIO()
    with_formats = any(r.formats is not None for r in rows)
    writer = csv.DictWriter(buf, fieldnames=COLUMNS + (FORMAT_COLUMNS if with_formats else ()),
                            extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in rows:
        rec = row_record(r, sharded=True)
        rec["shape"] = "x".join(map(str, rec["shape"])) if rec["shape"] else ""
        for key in ("best_8bit", "best_4bit"):
            if key in rec:
                best = rec.pop(key)
                rec[key], rec[key + "_sqnr_db"] = best["format"], best["sqnr_db"]
                rec[key + "_bits"] = best["bits_per_element"]
        writer.writerow(rec)
    return buf.getvalue()
