"""The archive of a quantized tensor (.npz): what ``quantscope export`` and the window's
File ▸ Export ▸ Quantized tensor write, in one layout.

It holds ``codes`` (int8, or uint8 for an unsigned range), ``scale`` (float32), ``zero_point``
(int32) and ``metadata``: a JSON string (0-d unicode array) with the scheme, the source and the
error figures. Nothing in it needs pickle: ``np.load(OUT, allow_pickle=False)`` reads it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from quantscope.core import QuantParams
from quantscope.io.writing import write_atomically

#: Identifies the archive layout; bump when the members or metadata change meaning.
EXPORT_FORMAT = "quantscope-export"
EXPORT_VERSION = 1


def _finite_or_text(value: float) -> float | str:
    value = float(value)
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def build_metadata(params: QuantParams, *, source: str, tensor: str, source_dtype: str,
                   shape: tuple[int, ...], report) -> dict:
    """Everything needed to interpret the codes without quantscope, as plain JSON types."""
    from quantscope import __version__

    return {
        "format": EXPORT_FORMAT,
        "format_version": EXPORT_VERSION,
        "quantscope_version": __version__,
        "source": source,
        "tensor": tensor,
        "source_dtype": source_dtype,
        "shape": list(shape),
        "scheme": {
            "bits": params.bits, "qmin": params.qmin, "qmax": params.qmax,
            "symmetric": params.symmetric, "granularity": params.granularity,
            "axis": params.axis, "group_size": params.group_size,
            "rounding": params.rounding, "arithmetic": params.arithmetic,
            "method": params.method, "runtime": params.runtime,
        },
        "dequantize": "x = (codes - zero_point) * scale, scale/zero_point broadcast per "
                      "tensor, per index along axis (channel), or per block of group_size "
                      "along axis (group)",
        "report": {
            "sqnr_db": _finite_or_text(report.sqnr_db), "mse": _finite_or_text(report.mse),
            "rounding_mse": _finite_or_text(report.rounding_mse),
            "clipping_mse": _finite_or_text(report.clipping_mse),
            "clipped_fraction": _finite_or_text(report.clipped_fraction),
            "n_nonfinite": int(report.n_nonfinite),
        },
    }


def write_archive(out: Path, codes: np.ndarray, params: QuantParams, metadata: dict,
                  members: dict | None = None) -> None:
    """Write the .npz atomically (see :func:`quantscope.io.writing.write_atomically`: only
    over a regular file or at a new path, with the user's umask). ``members`` replaces codes,
    scale and zero point for a number format's archive.

    The file handle is passed to ``np.savez`` so the name is used exactly as given (with a
    path, NumPy would append ``.npz`` to names lacking it).
    """
    members = dict(members or {
        "codes": codes,
        "scale": np.asarray(params.scale, dtype=np.float32),
        "zero_point": np.asarray(params.zero_point, dtype=np.int32),
    })
    members["metadata"] = np.array(json.dumps(metadata, allow_nan=False))  # 0-d '<U': no pickle
    write_atomically(out, lambda fh: np.savez(fh, allow_pickle=False, **members))
