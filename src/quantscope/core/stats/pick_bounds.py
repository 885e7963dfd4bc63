"""How far the format MSE search's and its scan's errors can lie from the engine's report of
the same float32 scale: what lets the pick (:func:`quantscope.core.stats.format_mse.
_engine_pick`) leave out of the report a candidate that cannot be strictly better than
another it reports anyway.

Three arithmetics rate a scale ``s`` of a floating-point grid:

* the search's (:mod:`~quantscope.core.formats.grid_bound`): each element at the grid value
  nearest ``x · (1/s)`` (float64), the reconstruction ``s · v`` unrounded, the error summed as
  a quadratic of the row's run sums;
* the scan's (:mod:`~quantscope.core.formats.float32_pick`): the report's own codes (clear of
  a piece's ends) and reconstructions ``float32(v · s)``, summed the same way;
* the report's: codes from ``float32(x / s)``, reconstructions ``float32(v · s)``, sums within
  :data:`~quantscope.core.stats.format_stats.REL_TOL` of the exact ones (or walked:
  ``n`` units of roundoff).

Their exact values differ as follows. Let ``d`` be an element's distance to the nearest
point of the scaled grid and ``E* = Σd²``. The search's code is nearest to ``x · (1/s)``,
which is within ``2^-52`` (relative) of ``x / s``: its distance is at most ``d + 2^-51·|x|``,
so its error ``E`` is at most ``E* + 2^-50·sqrt(S·E*) + 2^-102·S`` (``S = Σx²``). Whatever
code the report takes, ``|x − v·s| >= d``, and its reconstruction is off ``v·s`` by
``u <= 2^-24·|v·s| + 2^-150`` (a float32 rounding, subnormal results included), so the
element's error is at least ``max(0, d − u)² >= d² − 2·d·u``; with ``|v·s| <= 2|x| +
2·s·q`` (a code nearest ``x / s`` is at most a half step of the grid away, and a step is at
most half the value for at least one mantissa bit, or the subnormal quantum ``q``; a clipped
element's is below ``|x|``), Cauchy–Schwarz gives the report's exact error at least
``E* − 2^-22·sqrt(E*)·(sqrt(S) + s·q·sqrt(n)) − 2^-149·sqrt(n·E*)``.

The computed sums of a quadratic ``Σx² − 2s·Σxv + s²·Σv²`` add terms whose magnitudes sum to
at most about ``12·S'`` (``S' = S + n·(s·q)²``, by the same ``|v·s|`` bound), each through at
most ``depth`` additions: the rounding is within ``depth · 2^-48 · S'`` (:func:`sums_room`).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.stats.format_stats import REL_TOL


def sums_room(depth: np.ndarray, sumsq: np.ndarray, n: np.ndarray, s: np.ndarray,
              q_sub: float) -> np.ndarray:
    """How far a quadratic error summed through at most ``depth`` additions may be from its
    exact value, per row (``sumsq``: Σx²; ``n``: elements; ``s``: the scale; ``q_sub``: the
    grid's least positive value)."""
    s = np.asarray(s, np.float64)
    return np.asarray(depth, np.float64) * 2.0 ** -48 * (sumsq + n * (s * q_sub) ** 2)


def report_rel(n: np.ndarray) -> np.ndarray:
    """How far (relative) the report's error sums may be from the exact ones: their
    certified bound, or a walk's ``n`` units of roundoff, with room for the bound's own
    rounding."""
    return 2.0 * REL_TOL + np.asarray(n, np.float64) * 2.0 ** -51


def report_floor(err: np.ndarray, depth: np.ndarray, sumsq: np.ndarray, n: np.ndarray,
                 s: np.ndarray, q_sub: float) -> np.ndarray:
    """Per row, a value the report's error at float32 scale ``s`` is certainly not below,
    from the search's error ``err`` there summed through at most ``depth`` additions
    (module doc); ``-inf`` where ``err`` is not finite or the bound says nothing."""
    err = np.asarray(err, np.float64)
    ok = np.isfinite(err)
    e = np.where(ok, err, 0.0)
    s = np.asarray(s, np.float64)
    room = sums_room(depth, sumsq, n, s, q_sub)
    e_hi = e + room
    root = np.sqrt(e_hi)
    low = (e - room - 2.0 ** -50 * np.sqrt(sumsq * e_hi) - 2.0 ** -102 * sumsq
           - 2.0 ** -22 * root * (np.sqrt(sumsq) + s * q_sub * np.sqrt(n))
           - 2.0 ** -149 * np.sqrt(n * e_hi))
    low = low * (1.0 - report_rel(n))
    return np.where(ok & (low > 0.0), low, -np.inf)


def rated_span(rated: np.ndarray, runs: int, sumsq: np.ndarray, n: np.ndarray,
               s: np.ndarray, q_sub: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the least and the largest value the report's error may take at a float32
    scale ``s`` the scan rated ``rated`` (its sums through at most ``n + runs`` additions:
    each run's, then the runs'), ``(-inf, inf)`` where it rated none."""
    rated = np.asarray(rated, np.float64)
    ok = np.isfinite(rated)
    r = np.where(ok, rated, 0.0)
    room = sums_room(n + runs + 17, sumsq, n, s, q_sub)
    rel = report_rel(n)
    return (np.where(ok, (r - room) * (1.0 - rel), -np.inf),
            np.where(ok, (r + room) * (1.0 + rel), np.inf))
