"""The float ``rint`` passes of ``make_qkx2_quants``' trials (Q2_K, Q4_K, Q5_K) against the
integer ``nearest_int`` passes they replace where :func:`_rint_safe` says so: the same sums and
errors to the bit, on rounding ties, negative products, subnormals, signed zeros and values of
every magnitude; the guard refuses any lane whose products the integer trick would wrap.
llama.cpp's own bytes for whole tensors are ``tests/core/test_gguf_reference.py``'s."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.formats import gguf_lanes as lanes
from quantscope.core.formats.gguf import encode

f32 = np.float32
#: The trial passes called on their own: the encoder runs them inlined, with its number of
#: codes a compile-time constant, which a call from Python cannot hand them.
LANES_ON_THEIR_OWN = "the trial passes on their own, with the number of codes a variable"


def _lane_cases(rng: np.random.Generator, n: int, nl: int):
    """Values ``xt``, weights ``wt``, inverse scales and minimums of ``nl`` lanes of ``n``:
    ordinary lanes, lanes of exact ties ``k + 1/2``, subnormal and zero values, and lanes of
    large and tiny magnitudes."""
    xt = rng.standard_normal((n, nl)).astype(f32)
    xt[:, :8] = (rng.integers(-20, 40, (n, 8)) + f32(0.5)).astype(f32)  # ties at isc 1, mn 0
    xt[:, 8:12] = (rng.standard_normal((n, 4)) * 1e-42).astype(f32)  # subnormals
    xt[::3, 12:16] = f32(-0.0)
    xt[:, 16:24] *= f32(1e30)
    xt[:, 24:32] *= f32(1e-30)
    mn = np.minimum(xt.min(axis=0), 0).astype(f32)
    mn[:8] = 0  # the ties stay ties; negative values round below code 0
    mx = xt.max(axis=0)
    with np.errstate(over="ignore"):
        isc = (f32(15) / (mx - mn)).astype(f32)
    isc[:8] = 1
    isc[8:12] = f32(2.0**126)  # the subnormal lanes' products near 1e-4: code 0 or 1
    xt[0, 8:12] = f32(2.0**-127)  # 0.5 exactly: a tie at the bottom
    xt[1, 8:12] = f32(3 * 2.0**-127)  # 1.5: a tie that rounds up
    # a fitted minimum above the least value: products below zero, clamped to code 0
    mn[40:48] = (mn[40:48] * f32(0.5)).astype(f32)
    wt = (np.abs(xt) + np.abs(xt).mean(axis=0)).astype(f32)
    return np.ascontiguousarray(xt), np.ascontiguousarray(wt), isc, mn


@pytest.mark.compiles(LANES_ON_THEIR_OWN)
@pytest.mark.parametrize("nmax", [3, 15, 31])
@pytest.mark.parametrize("seed", range(4))
def test_rint_passes_equal_the_integer_passes_to_the_bit(nmax, seed):
    rng = np.random.default_rng(seed)
    n, nl = 32, 64
    xt, wt, isc, mn = _lane_cases(rng, n, nl)
    live = np.ones(nl, f32)
    assert lanes._rint_safe(nl, isc, mn, xt.min(axis=0), xt.max(axis=0), live)
    out = [np.zeros(nl, f32) for _ in range(6)]
    lanes._trial_sums(n, nl, nmax, xt, wt, isc, mn, *out[:3])
    lanes._trial_sums_rint(n, nl, nmax, xt, wt, isc, mn, *out[3:])
    for a, b in zip(out[:3], out[3:], strict=True):
        assert a.tobytes() == b.tobytes()
    assert np.count_nonzero(out[0]) > nl // 2  # the lanes have codes, not all 0
    new_s = (f32(1) / isc * f32(1.01)).astype(f32)
    new_m = (mn * f32(0.99)).astype(f32)
    for use_mad in (False, True):
        e_int, e_rint = np.zeros(nl, f32), np.zeros(nl, f32)
        lanes._trial_error(n, nl, nmax, xt, wt, isc, mn, new_s, new_m, use_mad, e_int)
        lanes._trial_error_rint(n, nl, nmax, xt, wt, isc, mn, new_s, new_m, use_mad, e_rint)
        assert e_int.tobytes() == e_rint.tobytes()


@pytest.mark.compiles(LANES_ON_THEIR_OWN)
def test_the_guard_refuses_products_the_integer_trick_wraps():
    n, nl = 4, 3
    lo = np.array([-1.0, 0.0, 0.0], f32)
    hi = np.array([1.0, 1.0, 1.0], f32)
    mn = np.array([-1.0, 0.0, 0.0], f32)
    live = np.ones(nl, f32)
    isc = np.array([7.5, 15.0, 4193999.0], f32)
    assert lanes._rint_safe(nl, isc, mn, lo, hi, live)
    for bad in (f32(4194304.0), f32(np.inf), f32(np.nan)):
        isc[2] = bad
        assert not lanes._rint_safe(nl, isc, mn, lo, hi, live)
        live[2] = 0  # a dead lane's codes are never used: it does not count
        assert lanes._rint_safe(nl, isc, mn, lo, hi, live)
        live[2] = 1
    # below the least value: a fitted minimum far above it gives products far below zero
    isc[2] = 15
    mn[2] = f32(300000.0)
    assert not lanes._rint_safe(nl, isc, mn, lo, hi, live)
    # and where the trick would wrap, the integer pass gives the C code's (wrapped) codes,
    # which rint would not: the guard is needed
    xt = np.full((n, 1), f32(4194303.5), f32)
    wt = np.ones((n, 1), f32)
    one, zero = np.ones(1, f32), np.zeros(1, f32)
    s_int = [np.zeros(1, f32) for _ in range(3)]
    s_rint = [np.zeros(1, f32) for _ in range(3)]
    lanes._trial_sums(n, 1, 15, xt, wt, one, zero, *s_int)
    lanes._trial_sums_rint(n, 1, 15, xt, wt, one, zero, *s_rint)
    assert s_int[0][0] != s_rint[0][0]


@pytest.mark.parametrize("name", ["gguf_q2_k", "gguf_q4_k", "gguf_q5_k"])
def test_blocks_of_huge_and_tiny_values_beside_each_other_encode_alike_in_any_chunk(name):
    """Sub-blocks that mix magnitudes (where a lane may leave the float path) give the same
    bytes whether encoded among ordinary blocks or alone."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 256 * 20)).astype(f32)
    x[1, :256] *= f32(1e35)
    x[2, 256:512] = (rng.standard_normal(256) * 1e-40).astype(f32)
    x[3, 512:544] = f32(3e38)
    x[3, 544:576] = f32(-3e38)
    x[0, 768:800:2] = f32(1e-38)
    whole = encode(x, name)
    for r in range(4):
        for b in (0, 1, 2, 7, 14):
            alone = encode(x[r:r + 1, 256 * b:256 * (b + 1)], name)
            width = whole.shape[1] // 20
            assert alone.tobytes() == whole[r, width * b:width * (b + 1)].tobytes()
