"""A walked row's set-up before its boxes: the prefix sums, the runs of one scale and the zero
points weighed at a scale are shortcuts, each giving exactly what the longer way gives --
values half way between two codes, clamped codes, constant rows and few bits included."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.kernels import mse_bound as mb
from quantscope.core.stats.mse_search import FLOOR

# the set-up's loops, each called here on its own (the app runs them inside rows_optimum,
# compiled with it): versions of their own, compiled once per cache
pytestmark = pytest.mark.compiles("the search's set-up loops on their own")


def _scratch(k: int):
    cap = 4 * k + 8
    return (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty((cap, 4)),
            np.empty((cap + 1, 7)), np.empty(k), np.empty(k))


def _rows() -> dict[str, np.ndarray]:
    """Sorted float32 rows: an LLM weight's channel (four values ten times larger), a group
    of 128, halves of integers (every value half way between two codes at scale 1), a
    constant row, zeros with two values, a row far from 0 for its spread."""
    rng = np.random.default_rng(5)
    llm = rng.standard_normal(2048) * 0.02
    llm[:4] *= 10
    far = 3.0 + rng.standard_normal(300) * 1e-3
    rows = {"llm": llm, "group": rng.standard_normal(128) * 0.05,
            "halves": np.arange(-301, 302) / 2.0, "constant": np.full(64, 0.37),
            "zeros": np.concatenate([np.zeros(50), [-0.3, 1.2]]), "far": far}
    return {k: np.sort(v.astype(np.float32)) for k, v in rows.items()}


def _scales(x: np.ndarray, bits: int) -> list[float]:
    """Scales around the unit's min/max scale, 1 and 0.5 (exact halves), and one so small
    that most codes clamp."""
    span = max(float(x[-1]) - float(x[0]), 1e-3)
    s_mm = span / (2**bits - 1)
    out = [s_mm * f for f in (0.1, 0.5, 0.9, 0.97, 0.99, 1.0, 1.01, 1.1, 2.0)] + [1.0, 0.5]
    return [float(np.float32(s)) for s in out]


def _codes(x: np.ndarray, s: float, k: int) -> np.ndarray:
    """Each value's code as :func:`mse_bound._code` gives it: ``rint(x · (1/s))`` (half to
    even), clamped to ``[-k, k]``."""
    return np.clip(np.rint(x.astype(np.float64) * (1.0 / s)), -k, k).astype(np.int64)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_the_runs_of_one_scale_start_where_the_codes_change(bits):
    k = 2**bits
    for name, x in _rows().items():
        pre = np.empty((x.size + 1, 4))
        mb.unit_prefix(x, 0, x.size, pre)
        for s in _scales(x, bits):
            codes = _codes(x, s, k)
            starts = np.flatnonzero(np.diff(codes, prepend=codes[0] - 1))
            pos, code = np.empty(x.size + 1, np.int64), np.empty(x.size + 1, np.int64)
            n = mb.codes_at(x, 0, x.size, s, k, pos, code, 0, *mb.code_scratch(x.size))
            np.testing.assert_array_equal(pos[:n], starts, err_msg=f"{name} {s}")
            np.testing.assert_array_equal(code[:n], codes[starts], err_msg=f"{name} {s}")
            # with their sums, from the prefix sums (the gallop of a scale)
            runs = _scratch(k)
            assert mb.runs_prefix(x, 0, x.size, pre, s, s, k, *runs[:3]) == n
            np.testing.assert_array_equal(runs[0][:n], codes[starts])
            np.testing.assert_array_equal(runs[1][:n], codes[starts])
            cut = np.append(starts, x.size)
            xd = x.astype(np.float64)
            np.testing.assert_allclose(runs[2][:n, 1], np.add.reduceat(xd, starts), rtol=1e-12,
                                       atol=1e-15)
            np.testing.assert_array_equal(runs[2][:n, 0], np.diff(cut))
            # and the walk without prefix sums
            assert mb.runs_walk(x, 0, x.size, s, s, k, *runs[:3]) == n
            np.testing.assert_array_equal(runs[0][:n], codes[starts])


def test_the_halves_put_ties_above_even_and_odd_codes():
    # the test above would pass without ties if rint were never at a half: here it is, above
    # codes of both parities (a tie stays with an even code, leaves an odd one), both signs
    y = _rows()["halves"].astype(np.float64)
    ties = y == np.floor(y) + 0.5
    assert ties.sum() > 300 and (y[ties] < 0).any() and (y[ties] > 0).any()
    assert set((np.floor(y[ties]).astype(np.int64) % 2).tolist()) == {0, 1}
    assert (_codes(y.astype(np.float32), 1.0, 256)[ties] % 2 == 0).all()


def _twosum_prefix(x: np.ndarray) -> np.ndarray:
    """The double-double running sums of ``x`` and ``x²``, TwoSum at every step, in Python."""
    want = np.zeros((x.size + 1, 4))
    h1 = l1 = h2 = l2 = 0.0
    for i, v in enumerate(x.astype(np.float64).tolist()):
        for col, w in ((0, v), (2, v * v)):
            h, lo = (h1, l1) if col == 0 else (h2, l2)
            cur = h + w  # TwoSum: the exact rounding error of h + w, added to lo
            bv = cur - h
            av = cur - bv
            lo += (h - av) + (w - bv)
            if col == 0:
                h1, l1 = cur, lo
            else:
                h2, l2 = cur, lo
        want[i + 1] = h1, l1, h2, l2
    return want


def _prefix_rows() -> dict[str, np.ndarray]:
    """Sorted rows whose running sums test the checks of whole blocks: both signs with the
    sum through 0 (near 0 for a long stretch: values summing to almost nothing), values far
    apart in magnitude, one side only, zeros, equal values, subnormals, lengths around a
    block's."""
    rng = np.random.default_rng(1)
    b = mb.PREFIX_BLOCK
    sym = rng.standard_normal(1500) * 0.02
    rows = {
        "mixed": np.concatenate([rng.standard_normal(3000) * 0.02, np.zeros(7), [-5.0, 9.0],
                                 rng.standard_normal(40) * 1e-9]),
        "balanced": np.concatenate([sym, -sym, [1e-30, -1e-30]]),
        "magnitudes": rng.standard_normal(2000) * 10.0 ** rng.integers(-30, 30, 2000),
        "negative": -np.abs(rng.standard_normal(999)),
        "positive": np.abs(rng.standard_normal(1001)) + 1e3,
        "zeros": np.zeros(3 * b + 1),
        "equal": np.full(5 * b, -0.37),
        "subnormal": np.concatenate([rng.standard_normal(300) * 1e-40,
                                     rng.standard_normal(300) * 1e-3]),
        "one": np.array([2.5]),
        "short": rng.standard_normal(b - 1),
        "block": rng.standard_normal(b),
        "longer": rng.standard_normal(b + 1),
    }
    return {k: np.sort(v.astype(np.float32)) for k, v in rows.items()}


@pytest.mark.parametrize("name", sorted(_prefix_rows()))
def test_the_prefix_sums_are_twosums_running_sums_bit_for_bit(name):
    x = _prefix_rows()[name]
    pre = np.empty((x.size + 1, 4))
    mb.unit_prefix(x, 0, x.size, pre)
    np.testing.assert_array_equal(pre, _twosum_prefix(x))
    # from an offset inside a longer array, as a row of a matrix
    pad = np.concatenate([np.full(11, -7.0, np.float32), x, np.full(3, 7.0, np.float32)])
    pre[:] = np.nan
    mb.unit_prefix(pad, 11, 11 + x.size, pre)
    np.testing.assert_array_equal(pre, _twosum_prefix(x))


def _best(x, pre, s, k, qmin, qmax, za, zb):
    rlo, rhi, rf, cum, lb, arg = _scratch(k)
    n = mb.runs_prefix(x, 0, x.size, pre, s, s, k, rlo, rhi, rf)
    return mb._evaluate(rlo, rhi, rf, n, s, qmin, qmax, za, zb, np.inf, s, za, cum, lb, arg)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_the_zero_points_near_a_scale_hold_its_least_error_and_its_least_zero_point(bits):
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    k = qmax - qmin + 1
    narrow = 0
    for name, x in _rows().items():
        pre = np.empty((x.size + 1, 4))
        mb.unit_prefix(x, 0, x.size, pre)
        xd = x.astype(np.float64)
        floor = FLOOR * (xd * xd).sum()  # the search's bound on its sums' roundoff
        for z0, z1 in ((qmin, qmax), (0, 0), (qmin + 1, qmin + 1), (qmax, qmax), (-1, 1)):
            for s in _scales(x, bits):
                za, zb = mb._zero_points_near(x, 0, x.size, s, k, qmin, qmax, z0, z1, floor)
                assert z0 <= za <= zb <= z1
                narrow += zb - za < z1 - z0
                got = _best(x, pre, s, k, qmin, qmax, za, zb)
                assert got == _best(x, pre, s, k, qmin, qmax, z0, z1), (name, s, z0, z1)
                # the error named is the exact one of that zero point
                c = np.clip(_codes(x, s, k) + got[2], qmin, qmax) - got[2]
                assert ((xd - s * c) ** 2).sum() == pytest.approx(got[0], rel=1e-9, abs=floor)
        # where the sums' roundoff could order the zero points, every one is weighed
        s = _scales(x, bits)[5]
        assert mb._zero_points_near(x, 0, x.size, s, k, qmin, qmax, qmin, qmax,
                                    s * s) == (qmin, qmax)
    assert narrow > 0


def test_the_runs_of_a_row_inside_a_longer_one_are_appended_after_earlier_entries():
    # every length from 1 to 40 (whole packs of 16 codes compared and a tail one by one), the
    # row starting part way into the values, entries already in the lists before it
    rng = np.random.default_rng(8)
    x = np.sort(rng.standard_normal(200).astype(np.float32))
    k = 16
    for a in (0, 3, 77):
        for m in range(1, 41):
            b = a + m
            s = float(np.float32((float(x[b - 1]) - float(x[a]) + 1e-3) / 9.0))
            codes = _codes(x[a:b], s, k)
            starts = np.flatnonzero(np.diff(codes, prepend=codes[0] - 1))
            pos, code = np.full(m + 5, -7, np.int64), np.full(m + 5, -7, np.int64)
            n = mb.codes_at(x, a, b, s, k, pos, code, 2, *mb.code_scratch(b - a))
            assert n == 2 + starts.size
            np.testing.assert_array_equal(pos[2:n], a + starts)
            np.testing.assert_array_equal(code[2:n], codes[starts])
            assert (pos[:2] == -7).all() and (code[:2] == -7).all()
