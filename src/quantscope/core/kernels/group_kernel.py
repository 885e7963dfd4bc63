"""The direct pass of integer parameters per group, compiled: every group's totals in one loop.

A per-group report of a tensor whose groups are too many to sort
(:data:`quantscope.core.stats.prepared.LAYOUT_MAX_UNITS`, an LLM weight in groups of 32) is a
pass over the tensor. The blocked NumPy pass (:mod:`quantscope.core.stats.analyze`) makes a
dozen passes over each block of memory and reduces rows of 32 elements with NumPy calls: 26 ns
per element, 6.8 s for a Llama-8B MLP weight. Here each element is read once and its code,
value, error and counts are formed in registers.

Exactness: an element's code is :func:`quantscope.core.kernels.sorted_kernel.code_of` (the
direct rule for one float32, tested against NumPy's on every tie), clamped to
``[qmin, qmax]``; its value ``float32(float32(code - z) · s)`` and its float64 error are the
NumPy pass's own. So codes, clip counts, codes used, minimum, maximum and the largest error
are bit for bit those of the NumPy pass; each group's error sums are float64 sums in the
group's element order (NumPy's pairwise order differs in the last bits only).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.sorted_kernel import code_of
from quantscope.core.kernels.unit_totals import store_unit

_jit = njit(nogil=True, error_model="numpy")
#: Elements of a chunk of groups whose codes are formed before their sums are taken.
CHUNK = 1024


@njit(nogil=True, error_model="numpy", inline="always")
def _codes(xr, s, inv, z, qmin, qmax, arithmetic, half_away, dbuf, slots, at) -> None:
    """Each element's error (0.0 if not finite) into ``dbuf[at + k]`` and its slot into
    ``slots[at + k]``: the code index ``0..levels - 1``, ``-1`` / ``-2`` when clipped below /
    above (then counted at the end codes), ``levels`` when not finite. No sum is carried from
    one element to the next, so the processor overlaps the elements' long chains."""
    zf = np.float32(z)
    lo = np.float32(qmin)
    hi = np.float32(qmax)
    levels = qmax - qmin + 1
    for k in range(xr.size):
        xv = xr[k]
        fin = xv - xv == 0
        xz = xv if fin else np.float32(0.0)
        v = code_of(xz, s, inv, z, arithmetic, half_away)
        c = min(max(v, lo), hi)
        xhat = np.float32(np.float32(c - zf) * s)
        dbuf[at + k] = np.float64(xz) - np.float64(xhat)
        slot = np.int64(c) - qmin
        slot = -1 if v < lo else (-2 if v > hi else slot)
        slots[at + k] = slot if fin else levels


@_jit
def group_rows(x2d, scale, inv_scale, zero_point, qmin, qmax, arithmetic, half_away, has_inv,
               hist, out_f, out_i) -> None:
    """Row ``r`` of ``x2d`` (one group) quantized with ``scale[r]``, ``zero_point[r]`` (and
    ``inv_scale[r]`` if ``has_inv``) by the rule ``arithmetic`` / ``half_away`` (see
    :func:`~quantscope.core.kernels.sorted_kernel.code_of`): its totals into ``out_f[r]`` /
    ``out_i[r]`` (:func:`~quantscope.core.kernels.unit_totals.store_unit`), its codes counted in
    ``hist`` (``levels + 1`` slots, the last one for non-finite elements, left for the caller to
    drop). One loop for every rule: a copy per rule (the branches on it gone) was an eighth
    faster and four times the compile time."""
    levels = qmax - qmin + 1
    g = x2d.shape[1]
    per = max(1, CHUNK // max(g, 1))
    dbuf = np.empty(per * g, np.float64)
    slots = np.empty(per * g, np.int64)
    stamp = np.full(levels + 1, -1, np.int64)
    top = levels - 1
    for r0 in range(0, x2d.shape[0], per):
        r1 = min(r0 + per, x2d.shape[0])
        for r in range(r0, r1):
            s = scale[r]
            inv = inv_scale[r] if has_inv else np.float32(np.float32(1.0) / s)
            _codes(x2d[r], s, inv, zero_point[r], qmin, qmax, arithmetic, half_away, dbuf,
                   slots, (r - r0) * g)
        for r in range(r0, r1):
            at = (r - r0) * g
            rnd = 0.0
            clip = 0.0
            worst = 0.0
            sig = 0.0
            lo = np.inf
            hi = -np.inf
            n = np.int64(0)
            below = np.int64(0)
            above = np.int64(0)
            used = np.int64(0)
            xr = x2d[r]
            for k in range(g):
                xv = xr[k]
                slot = slots[at + k]
                fin = slot != levels
                x64 = np.float64(xv) if fin else 0.0
                d = dbuf[at + k]
                e2 = d * d
                clipped = slot < 0
                n += np.int64(fin)
                sig += x64 * x64
                lo = min(lo, x64 if fin else np.inf)
                hi = max(hi, x64 if fin else -np.inf)
                below += np.int64(slot == -1)
                above += np.int64(slot == -2)
                clip += e2 if clipped else 0.0
                rnd += 0.0 if clipped else e2
                worst = max(worst, abs(d))
            for k in range(g):
                slot = slots[at + k]
                slot = 0 if slot == -1 else (top if slot == -2 else slot)
                hist[slot] += 1
                used += np.int64(stamp[slot] != r and slot != levels)
                stamp[slot] = r
            store_unit(out_f, out_i, r, rnd, clip, worst, sig, lo, hi, n, below, above, used)
