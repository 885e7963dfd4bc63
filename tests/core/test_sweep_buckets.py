"""A box sweep's buckets: the sums pass adds up every crossing of each bucket and keeps the
clamping ones (a small box's, every one), writing down the others' buckets in order, the keep
pass keeps exactly the other crossings of the buckets asked for (found by binary search in
those), and a sweep that keeps only the buckets near its best -- whatever best it starts
from -- still finds the least error of the box (ties, zeros, outliers, 2 to 8 bits)."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.kernels import mse_bound as mb
from quantscope.core.kernels import mse_sweep as ms
from quantscope.core.kernels import sweep_buckets as sb

# the sweep's inner loops, each called here on its own (the app runs them inside rows_optimum,
# compiled with it): versions of their own, compiled once per cache
pytestmark = pytest.mark.compiles("the sweep's inner loops on their own")


def _box(x: np.ndarray, s1: float, s2: float, qmin: int, qmax: int):
    """The runs of sorted ``x`` on ``[s1, s2]`` and their crossings."""
    k = qmax - qmin + 1
    cap = 4 * k + 8 + x.size
    rlo, rhi, rf = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty((cap, 4))
    n = mb.runs_walk(x, 0, x.size, s1, s2, k, rlo, rhi, rf)
    return rlo, rhi, rf, n, ms.box_crossings(rlo, rhi, rf, n)


def _every_crossing(x, rlo, rhi, rf, n, s1, s2, scale, nb):
    """Each crossing as (element, code before, breakpoint, bucket), from the runs' definition
    element by element: the reference for the passes."""
    out = []
    p = 0
    for r in range(n):
        cnt, lo, hi = int(rf[r, 0]), int(rlo[r]), int(rhi[r])
        if lo != hi:
            step = 1 if lo >= 0 else -1
            for k in range(abs(lo if lo >= 0 else hi), max(abs(lo), abs(hi))):
                for i in range(p, p + cnt):
                    b = min(max(abs(float(x[i])) * (1.0 / (k + 0.5)), s1), s2)
                    out.append((i, step * k, b, min(max(int((s2 - b) * scale), 0), nb - 1)))
        p += cnt
    return out


def _values(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.standard_normal(900) * 0.05, [0.93, 0.95, -0.61, -0.6, 0.4],
                        np.zeros(7), np.full(30, 0.0123), np.full(20, -0.031)])
    return np.sort(x.astype(np.float32))


def _pass(x, mode, rlo, rhi, rf, n, s1, s2, inner_lo, inner_hi, nb, want, j_lo, j_hi, bk=None,
          head=None, ne=0, cap=0, dealt=None):
    """One pass of :func:`deal` (the keep pass after a sums pass: its ``bk``, ``head`` and
    ``dealt``); (scale, bk, head, link, (ev_b, ev_x, ev_m), entries kept, dealt: the inner
    crossings' buckets and steps written down)."""
    scale, fresh = sb.bucket_table(s1, s2, nb, 5)
    bk = fresh if bk is None else bk
    head = np.full(nb, -1, np.int64) if head is None else head
    cap = max(cap, 1)
    dealt = (np.full(cap, -1, np.int32), np.full((cap + 2, 3), -1)) if dealt is None else dealt
    ev = (np.zeros(cap), np.zeros(cap), np.zeros(cap, np.int64))
    link = np.full(cap, -2, np.int64)
    ne = sb.deal(mode, x, 0, rlo, rhi, rf, n, s1, s2, scale, nb, inner_lo, inner_hi, bk, want,
                 j_lo, j_hi, *dealt, *ev, head, link, ne)
    return scale, bk, head, link, ev, ne, dealt


@pytest.mark.parametrize(("z_lo", "z_hi"), [(-128, 127), (-40, 12), (0, 0)])
def test_the_sums_pass_adds_up_each_bucket_and_keeps_the_clamping_crossings(z_lo, z_hi):
    x = _values(1)
    s0 = (float(x[-1]) - float(x[0])) / 255
    s1, s2 = float(np.float32(0.9 * s0)), float(np.float32(s0))
    rlo, rhi, rf, n, n_cross = _box(x, s1, s2, -128, 127)
    nb = max(1, n_cross // sb.BUCKET)
    inner_lo, inner_hi = -128 - z_lo, 127 - z_hi
    want = np.zeros(nb, np.bool_)
    scale, bk, head, link, (ev_b, ev_x, ev_m), ne, (slot, steps) = _pass(
        x, sb.SUMS, rlo, rhi, rf, n, s1, s2, inner_lo, inner_hi, nb, want, 0, nb - 1,
        cap=n_cross)
    every = _every_crossing(x, rlo, rhi, rf, n, s1, s2, scale, nb)
    assert len(every) == n_cross > 100
    # the inner crossings' buckets written down for the keep pass, in the order dealt
    inner_buckets = [c[3] for c in every if inner_lo <= c[1] <= inner_hi
                     and inner_lo <= c[1] + np.sign(c[1] or x[c[0]]) <= inner_hi]
    n_inner = len(inner_buckets)
    assert slot[:n_inner].tolist() == inner_buckets and steps[steps[0, 0] + 1, 0] == n_inner
    edge = []
    for j in range(nb):
        mine = [c for c in every if c[3] == j]
        inner = [c for c in mine if inner_lo <= c[1] <= inner_hi
                 and inner_lo <= c[1] + np.sign(c[1] or x[c[0]]) <= inner_hi]
        if not mine:
            assert bk[j, 2] > bk[j, 3]
            continue
        assert bk[j, 2] == min(c[2] for c in mine) and bk[j, 3] == max(c[2] for c in mine)
        assert bk[j, 1] == sum(2 * abs(c[1]) + 1 for c in inner)
        assert bk[j, 0] == pytest.approx(sum(abs(float(x[c[0]])) for c in inner), rel=1e-12)
        assert bk[j, 4] == (1.0 if len(inner) < len(mine) else 0.0)
        edge += [(c[0], c[1], j) for c in mine if c not in inner]
    kept = []
    for j in range(nb):
        e = head[j]
        while e >= 0:
            kept.append((float(ev_x[e]), int(ev_m[e]), j))
            assert ev_b[e] == next(c[2] for c in every if c[3] == j and c[1] == ev_m[e]
                                   and x[c[0]] == ev_x[e])
            e = link[e]
    # equal values: matched by value, not position
    assert sorted(kept) == sorted(
        (float(x[i]), m, j) for i, m, j in edge)
    assert ne == len(edge)
    assert ne > 0  # the outliers' codes pass the range's ends inside the box
    # a small box's first pass: the same sums, and every crossing kept, each in its bucket
    _, bk_all, head, link, (ev_b, ev_x, ev_m), ne, _ = _pass(
        x, sb.SUMS_ALL, rlo, rhi, rf, n, s1, s2, inner_lo, inner_hi, nb, want, 0, nb - 1,
        cap=n_cross)
    assert ne == n_cross and np.array_equal(bk_all, bk)
    kept = []
    for j in range(nb):
        e = head[j]
        while e >= 0:
            kept.append((float(ev_x[e]), int(ev_m[e]), float(ev_b[e]), j))
            e = link[e]
    assert sorted(kept) == sorted((float(x[i]), m, b, j) for i, m, b, j in every)


@pytest.mark.parametrize(("seed", "window"), [(0, "some"), (1, "some"), (2, "some"),
                                             (0, "every"), (1, "first"), (2, "last")])
def test_the_keep_pass_keeps_the_inner_crossings_of_the_buckets_asked_for_and_no_other(seed,
                                                                                     window):
    """Some of a random window's buckets, or every bucket, or the box's first or last one
    alone (the ends of every step's buckets)."""
    x = _values(seed + 3)
    s0 = (float(x[-1]) - float(x[0])) / 255
    s1, s2 = float(np.float32(0.88 * s0)), float(np.float32(1.01 * s0))
    rlo, rhi, rf, n, n_cross = _box(x, s1, s2, -128, 127)
    nb = max(1, n_cross // sb.BUCKET)
    inner_lo, inner_hi = -128 + 40, 127 - 12
    rng = np.random.default_rng(seed)
    j_lo = int(rng.integers(0, nb // 2))
    j_hi = int(rng.integers(j_lo, nb))
    want = np.zeros(nb, np.bool_)
    want[j_lo:j_hi + 1] = rng.random(j_hi - j_lo + 1) < 0.7
    want[j_lo] = want[j_hi] = True
    if window != "some":
        j_lo, j_hi = {"every": (0, nb - 1), "first": (0, 0), "last": (nb - 1, nb - 1)}[window]
        want[:] = False
        want[j_lo:j_hi + 1] = True
    sums = _pass(x, sb.SUMS, rlo, rhi, rf, n, s1, s2, inner_lo, inner_hi, nb, want, 0, nb - 1,
                 cap=2 * n_cross)
    scale, bk, head, _, _, n_edge, dealt = sums
    before = head.copy()
    got = _pass(x, sb.KEEP, rlo, rhi, rf, n, s1, s2, inner_lo, inner_hi, nb, want, j_lo, j_hi,
                bk=bk, head=head, ne=n_edge, cap=2 * n_cross, dealt=dealt)
    _, _, head, link, (ev_b, ev_x, ev_m), ne, _ = got
    every = _every_crossing(x, rlo, rhi, rf, n, s1, s2, scale, nb)
    expect = sorted((float(x[i]), m, b, j) for i, m, b, j in every if want[j]
                    and inner_lo <= m <= inner_hi and inner_lo <= m + (1 if x[i] > 0 else -1)
                    <= inner_hi)
    kept = []
    for j in range(nb):
        e = head[j]
        while e >= n_edge:  # the keep pass's entries come before the sums pass's in a list
            kept.append((float(ev_x[e]), int(ev_m[e]), float(ev_b[e]), j))
            e = link[e]
        assert e == before[j]
    assert len(expect) > (0 if window in ("first", "last") else 50)
    assert sorted(kept) == expect and ne - n_edge == len(expect)


def test_a_buckets_crossings_come_sorted_largest_breakpoint_first_ties_in_kept_order():
    ev_b = np.array([0.3, 0.5, 0.3, 0.9, 0.5, 0.1])
    ev_x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, -6.0])
    ev_m = np.array([0, 0, 0, 0, 0, -127])
    head = np.array([5])
    link = np.array([-1, 0, 1, 2, 3, 4])  # kept 0, 1, ..., 5: the list holds 5 first
    buf = np.empty(6, np.int64)
    n = sb.sorted_crossings(head, link, 0, ev_b, ev_x, ev_m, -100, 100, False, buf)
    assert n == 6 and buf.tolist() == [3, 1, 4, 0, 2, 5]
    # only the crossing that clamps for some zero point (code -127 to -128 past -100)
    n = sb.sorted_crossings(head, link, 0, ev_b, ev_x, ev_m, -100, 100, True, buf)
    assert n == 1 and buf[0] == 5


def _exhaustive(x, s1, s2, qmin, qmax, z_lo, z_hi):
    from mse_exhaustive import _sweep

    want, _, _ = _sweep(x.astype(np.float64), s1, s2, qmin, qmax, np.arange(z_lo, z_hi + 1))
    return want


def _error(x, s, z, qmin, qmax):
    xd = x.astype(np.float64)
    codes = np.clip(np.rint(xd / s) + z, qmin, qmax)
    return float(((xd - s * (codes - z)) ** 2).sum())


@pytest.mark.parametrize("every_zero_point", [True, False])
@pytest.mark.parametrize("bits", [8, 4, 3, 2])
@pytest.mark.parametrize(("lo_frac", "hi_frac"), [(0.9, 1.0), (0.97, 1.03), (1.0, 1.08)])
def test_a_sweep_from_any_starting_best_finds_the_least_error_of_the_box(bits, lo_frac,
                                                                       hi_frac,
                                                                       every_zero_point):
    """From no best, from one just above the box's least error (nearly every bucket passed,
    a few kept) and from one a little above: the same error, the exhaustive minimum; from one
    just below it, nothing."""
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    k = qmax - qmin + 1
    x = _values(bits)
    s0 = (float(x[-1]) - float(x[0])) / (qmax - qmin)
    s1, s2 = float(np.float32(lo_frac * s0)), float(np.float32(hi_frac * s0))
    rlo, rhi, rf, n, n_cross = _box(x, s1, s2, qmin, qmax)
    z_lo, z_hi = (qmin, qmax) if every_zero_point else (0, 0)
    want = _exhaustive(x, s1, s2, qmin, qmax, z_lo, z_hi)
    found = []
    for start in (np.inf, want * (1 + 1e-7), want * (1 + 1e-3)):
        ev = (np.empty(n_cross), np.empty(n_cross), np.empty(n_cross, np.int64))
        out = np.full(3, -1.0)
        assert ms.box_sweep(x, 0, rlo, rhi, rf, n, s1, s2, qmin, qmax, z_lo, z_hi, start, *ev,
                            np.empty(k), np.empty(k), out)
        assert want * (1 - 1e-12) <= out[0] <= want * (1 + 1e-9)
        assert s1 <= out[1] <= s2 and out[1] == float(np.float32(out[1]))
        assert out[0] == pytest.approx(_error(x, out[1], int(out[2]), qmin, qmax), rel=1e-9)
        found.append(out[0])
    assert max(found) <= min(found) * (1 + 1e-12)
    out = np.full(3, -1.0)
    ev = (np.empty(n_cross), np.empty(n_cross), np.empty(n_cross, np.int64))
    assert not ms.box_sweep(x, 0, rlo, rhi, rf, n, s1, s2, qmin, qmax, z_lo, z_hi,
                            want * (1 - 1e-9), *ev, np.empty(k), np.empty(k), out)
    assert out.tolist() == [-1.0, -1.0, -1.0]
