"""An observed layer input's figures: int8 and FP8 E4M3, per tensor, per token and per channel,
under each calibration method. Qt-free.

A layer's captured activations are a ``[tokens, channels]`` matrix (every batch's leading
dimensions flattened into tokens, the features last, as a Linear layer consumes them; a
convolution's ``[N, C, H, W]`` input moves its channels last first). Static per-tensor
calibration is what an int8 runtime ships; per-token scales are what dynamic activation
quantization computes at run time (one scale per row), per-channel scales what SmoothQuant-like
methods would need -- so the three show which one a layer can live with. Every figure is the
engine's exact report (:func:`quantscope.core.analyze`) on the exact captured values.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantscope.core import analyze, choose_qparams
from quantscope.errors import QuantscopeError

#: (format, granularity) pairs measured on every activation; a token is a row, a channel a
#: column of the ``[tokens, channels]`` matrix.
SCHEMES = (("int8", "tensor"), ("int8", "token"), ("int8", "channel"),
           ("fp8_e4m3", "tensor"), ("fp8_e4m3", "token"), ("fp8_e4m3", "channel"))
#: The calibration methods (the percentile at the TensorRT/ModelOpt default, 99.99).
METHODS = ("minmax", "percentile", "mse", "entropy")
PERCENTILE = 99.99


def as_tokens(x: np.ndarray, channels_axis: int) -> np.ndarray:
    """``x`` as ``[tokens, channels]`` float32 with the channel axis last."""
    x = np.moveaxis(np.asarray(x), channels_axis, -1)
    return np.ascontiguousarray(x.reshape(-1, x.shape[-1] if x.ndim else 1), np.float32)


def scheme_figures(x2: np.ndarray, fmt: str, granularity: str, method: str
                   ) -> dict[str, Any]:
    """One scheme on a ``[tokens, channels]`` matrix: SQNR, MSE relative to the signal and the
    clipped share (or ``{"error": why}`` where the engine refuses it)."""
    gran, axis = ("tensor", None) if granularity == "tensor" else (
        "channel", 0 if granularity == "token" else 1)
    options: dict[str, Any] = {"percentile": PERCENTILE} if method == "percentile" else {}
    try:
        if fmt == "int8":
            p = choose_qparams(x2, symmetric=True, granularity=gran, axis=axis, method=method,
                               **options)
        else:
            p = choose_qparams(x2, format=fmt, granularity=gran, axis=axis, method=method,
                               **options)
        r = analyze(x2, p)
    except QuantscopeError as exc:
        return {"error": str(exc)}
    sqnr = float(r.sqnr_db)
    return {"sqnr_db": sqnr,
            "mse": float(r.mse), "clipped_percent": 100.0 * float(r.clipped_fraction)}


def activation_figures(x2: np.ndarray, methods=METHODS) -> dict[str, dict[str, Any]]:
    """Every scheme of :data:`SCHEMES` under every method, keyed ``"int8/token/minmax"``."""
    return {f"{fmt}/{gran}/{m}": scheme_figures(x2, fmt, gran, m)
            for fmt, gran in SCHEMES for m in methods}


@dataclass(eq=False)
class ActivationRow:
    """One observed tensor: a layer's input (or output), every batch's values kept exactly.

    ``values`` is the ``[tokens, channels]`` float32 matrix, in memory or, past the capture's
    per-layer cap, a read-only memory map of a temporary file (already unlinked: the mapping
    keeps the data until the array is released, and nothing is left on disk).
    """

    name: str
    module: str
    module_type: str
    port: str
    dtype: str
    batch_shapes: list[tuple[int, ...]]
    values: np.ndarray
    spilled: bool = False
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return int(self.values.shape[0])

    @property
    def channels(self) -> int:
        return int(self.values.shape[1])

    @property
    def max_abs(self) -> float:
        v = self.values
        return float(np.abs(v[np.isfinite(v)]).max(initial=0.0))

    def record(self) -> dict[str, Any]:
        """The row as JSON-ready values (``to_json``'s ``"activations"`` entries)."""
        return {"name": self.name, "module": self.module, "module_type": self.module_type,
                "port": self.port, "dtype": self.dtype, "tokens": self.tokens,
                "channels": self.channels, "batches": len(self.batch_shapes),
                "batch_shapes": [list(s) for s in self.batch_shapes],
                "max_abs": self.max_abs, "spilled": self.spilled, "figures": self.figures}

    def flat_record(self) -> dict[str, Any]:
        """One flat dict (a DataFrame row): SQNR of each scheme as its own column."""
        rec: dict[str, Any] = {"name": self.name, "role": "activation", "module": self.module,
                               "shape": [self.tokens, self.channels], "dtype": self.dtype,
                               "params": self.values.size, "max_abs": self.max_abs}
        for key, fig in self.figures.items():
            rec[f"{key}_sqnr_db"] = fig.get("sqnr_db")
        return rec

    @staticmethod
    def html_table(rows: list[ActivationRow]) -> str:
        """The activation rows' min/max SQNRs as an HTML table."""
        keys = [f"{f}/{g}/minmax" for f, g in SCHEMES]
        head = ["activation", "tokens x channels", "max |x|"] + [k.rsplit("/", 1)[0] + " dB"
                                                                for k in keys]
        out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
        for a in rows:
            vals = [a.name, f"{a.tokens}x{a.channels}", f"{a.max_abs:.4g}"]
            for k in keys:
                v = a.figures.get(k, {}).get("sqnr_db", "-")
                vals.append(f"{v:.2f}" if isinstance(v, float) else str(v))  # inf: "inf"
            out.append("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in vals) + "</tr>")
        return "".join(out) + "</table>"
