"""A scale's errors for a few zero points, element by element (the incumbents' evaluation):
the exact error of every zero point weighed -- values half way between two codes, clamped
ends, outliers, zeros, constant rows, 2 to 8 bits, groups of 128 -- and the same pick as the
runs' evaluation it replaces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quantscope.core.kernels import mse_bound as mb
from quantscope.core.kernels import scale_errors as se
from quantscope.core.stats.mse_search import FLOOR

# the loops called here on their own (the app runs them inside rows_optimum, compiled with
# it): versions of their own, compiled once per cache
pytestmark = pytest.mark.compiles("the incumbents' evaluation on its own")


def _rows() -> dict[str, np.ndarray]:
    """Sorted float32 rows: an LLM weight's channel (four values ten times larger), a group
    of 128, halves of integers (every value half way between two codes at scale 1 and 0.5),
    a constant row, zeros with two values, a row far from 0 for its spread, one value."""
    rng = np.random.default_rng(11)
    llm = rng.standard_normal(2048) * 0.02
    llm[:4] *= 10
    rows = {"llm": llm, "group": rng.standard_normal(128) * 0.05,
            "halves": np.arange(-301, 302) / 2.0, "constant": np.full(64, 0.37),
            "zeros": np.concatenate([np.zeros(50), [-0.3, 1.2]]),
            "far": 3.0 + rng.standard_normal(300) * 1e-3, "one": np.array([-0.7])}
    return {k: np.sort(v.astype(np.float32)) for k, v in rows.items()}


def _scales(x: np.ndarray, bits: int) -> list[float]:
    """Float32 scales around the unit's min/max scale, the incumbents' among them, and 1 and
    0.5 (where the halves are ties)."""
    span = max(float(x[-1]) - min(float(x[0]), 0.0), float(x[-1]), 1e-3)
    s_mm = span / (2**bits - 1)
    out = [s_mm * f for f in (0.5, 0.9, 0.97, 0.98, 0.99, 1.0, 1.1, 2.0)] + [1.0, 0.5]
    return [float(np.float32(s)) for s in out]


def _exact(x: np.ndarray, s: float, z: int, qmin: int, qmax: int) -> float:
    """The error at scale ``s`` and zero point ``z``: codes ``clip(rint(x · (1/s)) + z)`` (the
    product rounded half to even, as the search's codes), squares summed exactly."""
    xd = x.astype(np.float64)
    c = np.clip(np.rint(xd * (1.0 / s)) + z, qmin, qmax) - z
    return math.fsum((xd - s * c) ** 2)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_the_errors_of_a_scale_are_each_zero_points_exact_error(bits):
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    k = qmax - qmin + 1
    weighed = 0
    for name, x in _rows().items():
        floor = FLOOR * float((x.astype(np.float64) ** 2).sum())
        for s in _scales(x, bits):
            # the zero points the incumbents weigh, one fixed one, and a few at each end
            near = mb._zero_points_near(x, 0, x.size, s, k, qmin, qmax, qmin, qmax, floor)
            for za, zb in (near, (0, 0), (qmin, qmin + 2), (qmax - 1, qmax)):
                out = np.full(zb - za + 1, -1.0)
                if not se.errors_at(x, 0, x.size, s, k, qmin, qmax, za, zb, out):
                    assert (out == -1.0).all()  # declined: left untouched
                    continue
                weighed += 1
                want = [_exact(x, s, z, qmin, qmax) for z in range(za, zb + 1)]
                np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-300,
                                           err_msg=f"{name} {s} {za}..{zb}")
    assert weighed > 100


def test_a_unit_inside_a_longer_array_weighs_its_own_values():
    x = _rows()["llm"]
    pad = np.concatenate([np.full(37, -5.0, np.float32), x, np.full(11, 9.0, np.float32)])
    s = float(np.float32((float(x[-1]) - float(x[0])) / 255 * 0.98))
    want, got = np.empty(4), np.empty(4)
    assert se.errors_at(x, 0, x.size, s, 256, -128, 127, -3, 0, want)
    assert se.errors_at(pad, 37, 37 + x.size, s, 256, -128, 127, -3, 0, got)
    np.testing.assert_array_equal(got, want)


def test_a_scale_that_clamps_many_values_is_left_to_the_runs():
    x = _rows()["llm"]
    s = float(np.float32((float(x[-1]) - float(x[0])) / 255 * 0.05))  # most values clamp
    out = np.full(3, -1.0)
    assert not se.errors_at(x, 0, x.size, s, 256, -128, 127, -1, 1, out)
    assert (out == -1.0).all()


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_the_incumbents_pick_what_the_runs_evaluation_picks(bits):
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    k = qmax - qmin + 1
    cap = 4 * k + 8
    for name, x in _rows().items():
        pre = np.empty((x.size + 1, 4))
        mb.unit_prefix(x, 0, x.size, pre)
        floor = FLOOR * float((x.astype(np.float64) ** 2).sum())
        s_mm = float(np.float32(max(float(x[-1]) - min(float(x[0]), 0.0), 1e-3) / (k - 1)))
        for z0, z1 in ((qmin, qmax), (0, 0)):
            rlo, rhi = np.empty(cap, np.int64), np.empty(cap, np.int64)
            rf, cum = np.empty((cap, 4)), np.empty((cap + 1, 7))
            lb, arg = np.empty(k), np.empty(k)
            got = mb._incumbents(x, 0, x.size, pre, s_mm, 1e-4 * s_mm, 2 * s_mm, np.inf, s_mm,
                                 z0, k, qmin, qmax, z0, z1, floor, rlo, rhi, rf, cum, lb, arg)
            # the runs' evaluation of the same scales, in the same order
            want = (np.inf, s_mm, z0)
            for f in mb.INCUMBENTS:
                s = float(np.float32(s_mm * f))
                za, zb = mb._zero_points_near(x, 0, x.size, s, k, qmin, qmax, z0, z1, floor)
                n = mb.runs_prefix(x, 0, x.size, pre, s, s, k, rlo, rhi, rf)
                want = mb._evaluate(rlo, rhi, rf, n, s, qmin, qmax, za, zb, *want, cum, lb, arg)
            assert got[1:] == want[1:], (name, bits, z0)
            assert got[0] == pytest.approx(want[0], rel=1e-9, abs=floor), (name, bits, z0)
