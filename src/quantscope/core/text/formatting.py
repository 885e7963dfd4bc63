"""How numbers read as text: the one set of formats for the panes, captions, views, talks and
reports, so a number reads the same wherever it is shown. Pure functions of a number, no Qt.
"""

from __future__ import annotations

import math

import numpy as np


def fmt_float(v: float, digits: int = 4) -> str:
    """``1.234e-05`` style with ``digits`` significant digits; infinities as ∞."""
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    return f"{v:.{digits}g}"


def fmt_count_percent(count: int, n: int) -> str:
    """A pane's clipped count as a percentage of the finite elements, always 3 decimals (a
    table column that does not jump), or below 0.001% -- where 3 decimals would print a
    non-zero count as "0.000%" -- the count itself."""
    share = 100.0 * count / n if n else 0.0
    if count and share < 0.001:
        return "1 value" if count == 1 else f"{count:,} values"
    return f"{share:.3f}%"


def fmt_value(v: float) -> str:
    """A tensor value for a sentence: three significant digits, no exponent when avoidable."""
    v = float(v)
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e5:
        return f"{v:.3g}" if abs(v) >= 1 else f"{v:.3f}".rstrip("0")
    return f"{v:.2e}"


def fmt_db(db: float, digits: int = 1) -> str:
    """An SQNR for a sentence: ``"∞ dB (exact)"`` for a lossless quantization."""
    db = float(db)
    if np.isnan(db):
        return "n/a"
    if np.isinf(db):
        return "∞ dB (exact)" if db > 0 else "-∞ dB"
    return f"{db:.{digits}f} dB"


def fmt_percent(fraction: float) -> str:
    """A share for a sentence (captions): a percentage with just enough digits to be non-zero
    when it is non-zero."""
    p = 100.0 * float(fraction)
    if p == 0 or p >= 10:
        return f"{p:.0f}%"
    if p >= 0.1:
        return f"{p:.1f}%".replace(".0%", "%")
    return f"{p:.2g}%"


def fmt_cell(v: float) -> str:
    """A number in a plain-text table (``quantscope report``): 4 significant digits, infinities
    as ``inf`` / ``-inf``."""
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.4g}"
