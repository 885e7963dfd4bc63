"""A box sweep's per-bucket bounds and edge sums: each zero point's edge sums after a crossing
equal the clamp-by-clamp reference bit for bit, and the bound of a bucket without edge events,
taken per zero point on the bucket's own span, holds below every float32 scale's error in it
at every zero point (and is close to the least of them)."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.kernels import mse_sweep as ms

pytestmark = pytest.mark.compiles("the sweep's inner loops on their own")


def _v(m: int, z: int, qmin: int, qmax: int) -> int:
    return min(max(m + z, qmin), qmax) - z


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_an_edge_step_changes_each_zero_points_sums_as_its_clamps_say(bits):
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    rng = np.random.default_rng(bits)
    checked = 0
    for _ in range(300):
        za = int(rng.integers(qmin, qmax + 1))
        nz = int(rng.integers(1, qmax - za + 2))
        m_old = int(rng.integers(-2 * (qmax - qmin), 2 * (qmax - qmin) + 1))
        xv = float(rng.standard_normal()) * 3.0
        if xv == 0.0 or (m_old > 0 and xv < 0) or (m_old < 0 and xv > 0):
            continue  # a crossing steps outward, by the value's sign
        q1 = rng.standard_normal(nz)
        q2 = rng.random(nz) * 50.0
        want1, want2 = q1.copy(), q2.copy()
        m_new = m_old + (1 if xv > 0.0 else -1)
        for t in range(nz):
            v0 = float(_v(m_old, za + t, qmin, qmax))
            v1 = float(_v(m_new, za + t, qmin, qmax))
            if v0 != v1:
                want1[t] += xv * (v1 - v0)
                want2[t] += v1 * v1 - v0 * v0
        before = q1.copy()
        ms._edge_step(q1, q2, nz, za, qmin, qmax, m_old, xv)
        assert q1.tobytes() == want1.tobytes() and q2.tobytes() == want2.tobytes()
        checked += int((q1 != before).any())  # some zero point held both codes
    assert checked > 30


def _codes(x: np.ndarray, s: float) -> np.ndarray:
    return np.rint(x / s).astype(np.int64)


def _sums_at(x, s, inner_lo, inner_hi, za, nz, qmin, qmax):
    """(Σx², the inner codes' Σxm and Σm², each zero point's Σxv and Σv² of the others) of
    the codes at scale ``s``: the sweep's sums at the top of a bucket."""
    m = _codes(x, s)
    inner = (m >= inner_lo) & (m <= inner_hi)
    q0 = float((x * x).sum())
    a1 = float((m[inner] * x[inner]).sum())
    a2 = float((m[inner].astype(np.float64) ** 2).sum())
    q1, q2 = np.zeros(nz), np.zeros(nz)
    for t in range(nz):
        v = np.clip(m[~inner] + za + t, qmin, qmax) - (za + t)
        q1[t] = float((v * x[~inner]).sum())
        q2[t] = float((v.astype(np.float64) ** 2).sum())
    return q0, a1, a2, q1, q2


def _least_real(x, pieces, za, nz, qmin, qmax):
    """The least error over real scales of the pieces ``(lo, hi)`` (codes fixed on each) at
    every zero point: each one's quadratic, least at its vertex clipped into the piece."""
    least = np.inf
    for lo, hi in pieces:
        m = _codes(x, 0.5 * (lo + hi))
        for t in range(nz):
            v = (np.clip(m + za + t, qmin, qmax) - (za + t)).astype(np.float64)
            q1, q2 = float((x * v).sum()), float((v * v).sum())
            s = min(max(q1 / q2, lo), hi) if q2 > 0 else hi
            least = min(least, float(((x - s * v) ** 2).sum()))
    return least


@pytest.mark.parametrize(("bits", "seed"), [(8, 0), (8, 1), (4, 2), (3, 3)])
def test_a_buckets_bound_per_zero_point_holds_below_every_scale_of_its_span(bits, seed):
    """Buckets of about eight crossings of an outlier-heavy unit whose extreme codes clamp for
    some of the zero points: where no clamped code changes in the bucket, the bound lies below
    the least error of every real scale of its span at every zero point (so below every
    float32 scale's), within a hundredth of it."""
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    rng = np.random.default_rng(seed)
    x = np.sort(np.concatenate([rng.standard_normal(600) * 0.02, [0.2, 0.23, -0.21, -0.19],
                                np.zeros(5), np.full(9, 0.0123)]).astype(np.float32))
    x = x.astype(np.float64)
    s0 = (x[-1] - x[0]) / (qmax - qmin)
    za = qmin - int(np.rint(x[0] / s0)) - 3
    nz = 7
    inner_lo, inner_hi = qmin - za, qmax - (za + nz - 1)
    checked = 0
    hi = 0.99 * s0
    while checked < 12 and hi > 0.8 * s0:
        m_hi = _codes(x, hi)
        # the span down to the eighth breakpoint below hi
        bps = []
        for xv, m in zip(x, m_hi, strict=True):
            k = abs(int(m))
            while abs(xv) / (k + 0.5) >= 0.985 * hi and len(bps) < 10_000:
                b = abs(xv) / (k + 0.5)
                if b < hi:
                    bps.append((b, xv, k))
                k += 1
        bps.sort(reverse=True)
        lo = bps[7][0] if len(bps) > 8 else 0.985 * hi
        inside = [(b, xv, k) for b, xv, k in bps if b >= lo]
        step = [(1 if xv > 0 else -1) for _, xv, _ in inside]
        m_old = [s * k for s, (_, _, k) in zip(step, inside, strict=True)]
        edge = any(not (inner_lo <= mo <= inner_hi and inner_lo <= mo + s <= inner_hi)
                   for mo, s in zip(m_old, step, strict=True))
        if not edge:
            bk = np.zeros((1, 5))
            for (_, xv, _), mo, s in zip(inside, m_old, step, strict=True):
                bk[0, 0] += xv * s
                bk[0, 1] += (mo + s) ** 2 - mo ** 2
            q0, a1, a2, q1, q2 = _sums_at(x, np.nextafter(hi, 0.0), inner_lo, inner_hi, za, nz,
                                          qmin, qmax)
            assert np.ptp(q2) > 0  # the zero points' edge parts differ
            bound = ms._bucket_low_z(q0, a1, a2, q1, q2, nz, bk, 0, lo, hi)
            cuts = [hi] + [b for b, _, _ in inside if lo < b < hi] + [lo]
            least = _least_real(x, list(zip(cuts[1:], cuts[:-1], strict=True)), za, nz, qmin, qmax)
            assert bound <= least * (1 + 1e-12)
            assert bound >= least * 0.99
            checked += 1
        hi = lo
    assert checked >= (4 if bits >= 4 else 1)
