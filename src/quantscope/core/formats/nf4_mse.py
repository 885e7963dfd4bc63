"""The MSE-optimal float32 scale of every NF4 block (``method="mse"``).

NF4 stores one float32 scale ``s`` per block of 64 (bitsandbytes' ``absmax``); an element is
rounded to the nearest of the 16 levels ``L_k`` from ``f32(x · f32(1 / s))`` (ties to the lower
level) and dequantized by ``f32(L_k · s)``. The specification takes ``s = absmax``; with
``method="mse"`` each block takes the float32 ``s`` of least total squared error. The levels
are not a floating-point grid (twice a level is not a level), so no octave bounds the rest and
a local search can stop in the wrong basin; instead the error is minimised exactly, in two
steps.

1. In exact arithmetic the error is ``E(s) = Σ_i min_k (x_i − s·L_k)²``: rounding ``x/s`` to
   the nearest level is choosing the nearest multiple ``s·L_k``. Between two consecutive
   *breakpoints* ``s = |x_i| / |m_k|`` (``m_k`` a midpoint between levels on ``x_i``'s side)
   no element changes level, and ``E`` is the quadratic ``A − 2·s·B + s²·C`` (``A = Σ x²``,
   ``B = Σ x·L``, ``C = Σ L²`` over the levels of that piece), least at ``B / C``. At a
   breakpoint ``E`` is the lesser of two quadratics that cross there, so its slope can only
   drop: no minimum sits on a breakpoint, and the global minimum is the vertex ``B / C`` of
   some piece that lies inside it. The search sorts the breakpoints, walks the pieces in
   order updating ``B`` and ``C`` by one element's step at each, and keeps the least vertex.
   Only the breakpoints inside ``(s_lo, s_hi]`` are sorted (into buckets, then by insertion),
   where ``E1`` is the error of the levels ``absmax`` gives, at their own best scale
   ``B0 / C0`` (a Lloyd step: ``E(B0 / C0) <= E1 <= E(absmax)``): below ``s_lo`` the elements
   beyond ``±s`` alone cost ``Σ (|x| − s)² >= E1`` (no level reaches further); above ``s_hi``
   the smallest elements, whose squares sum to ``E1`` or more, all round to level 0 (``|x| /
   s`` below the least midpoint magnitude): no scale out there beats ``B0 / C0``.
2. The engine's arithmetic is float32: the scaled value, the rounding of it and the
   dequantized value move by an ulp from the exact ones. Around the exact optimum the error is
   flat to within that noise, so the float32 scales tried are the nearest to the vertex and
   :data:`NEIGHBOURS` float32 neighbours on each side, with the engine's own arithmetic (the
   float32 reciprocal, product and rounding of the report, squared differences summed in
   float64); the specification's ``absmax`` is kept unless one of them is strictly better.
   ``tests/core/test_nf4_mse.py`` holds the result within 0.001 dB of an exhaustive search
   over every float32 scale from ``absmax / 2`` to ``2 · absmax``, on real and constructed
   multi-basin blocks.

Blocks whose ``absmax`` is zero, subnormal or not finite keep the specification's scale. A
scale the search returns is a float32 from ``2^-126`` to the largest finite float32, so its
reciprocal is finite too. Time: a sort of a few hundred breakpoints per block of 64, on the
engine's threads; memory beyond the tensor one float32 per block (and buffers of a few KiB per
thread).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.elements import ELEMENTS, NF4_LEVELS
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.parallel import THREADS, parallel
from quantscope.core.kernels.read_only import read_only

_jit = njit(nogil=True, error_model="numpy")
#: Float32 neighbours of the exact optimum tried on each side (step 2 of the module doc).
NEIGHBOURS = 2
#: Blocks from which the search is split between the engine's threads.
PARALLEL_BLOCKS = 1 << 10
#: Buckets the breakpoints of a block are first sorted into (a few hundred breakpoints).
BUCKETS = 256
#: The largest elements whose clipping bounds the scales from below, and the bins of ``|x|``
#: whose squares bound them from above (step 1 of the module doc).
TOP, ZERO_BINS = 8, 128
_TINY32 = float(np.finfo(np.float32).tiny)
_MAX32 = float(np.finfo(np.float32).max)


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The levels (float32, as the engine dequantizes), the midpoints (float64, as it rounds),
    and per midpoint ``k``: ``1 / |m_k|``, the level gap ``L_{k+1} − L_k`` and the change of ``L²``
    when an element crosses ``m_k`` away from the outer level (step 1 of the module doc)."""
    lv = NF4_LEVELS.astype(np.float64)
    mids = ELEMENTS["nf4"].midpoints
    gap = lv[1:] - lv[:-1]
    outer = np.where(mids > 0, lv[1:], lv[:-1])
    inner = np.where(mids > 0, lv[:-1], lv[1:])
    return NF4_LEVELS.copy(), mids, 1.0 / np.abs(mids), gap, inner * inner - outer * outer


LEVELS32, MIDS, INV_MIDS, GAPS, DSQ = _tables()


@njit(nogil=True, error_model="numpy", inline="always")
def block_error(x, a, b, s, levels, mids) -> float:
    """Total squared error of the finite elements of ``x[a:b]`` at float32 scale ``s``, by
    the engine's arithmetic: ``f32(x · f32(1 / s))`` rounded by counting the midpoints below
    it, dequantized by ``f32(L · s)``, the squared differences summed in float64."""
    sf = np.float32(s)
    inv = np.float32(np.float32(1.0) / sf)
    err = 0.0
    for i in range(a, b):
        xv = x[i]
        xz = xv if xv - xv == 0 else np.float32(0.0)  # a non-finite element adds 0
        q = np.float64(np.float32(xz * inv))
        c = 0
        for j in range(mids.size):
            c += mids[j] < q
        d = np.float64(xz) - np.float64(np.float32(levels[c] * sf))
        err += d * d
    return err


@_jit
def _clip_bound(absx, n, e):
    """``s_lo``: below it the elements of ``absx[:n]`` (ascending) beyond ``±s`` alone cost
    ``Σ (|x| − s)² >= e`` (the levels reach no further than ``±s``)."""
    cnt = 0.0
    s1 = 0.0
    s2 = 0.0
    for j in range(n - 1, -1, -1):
        v = absx[j]
        cnt += 1.0
        s1 += v
        s2 += v * v
        below = absx[j - 1] if j > 0 else 0.0
        # on [below, v] the clipping is cnt·s² − 2·s1·s + s2, falling: where it equals e
        disc = s1 * s1 - cnt * (s2 - e)
        s = (s1 - np.sqrt(max(disc, 0.0))) / cnt
        if s >= below:
            return max(s, 0.0)
    return 0.0


@njit(nogil=True, error_model="numpy", inline="always")
def _bucket(se, s_lo, per_width):
    """The bucket of breakpoint ``se > s_lo`` (the last one for ``s_hi`` itself)."""
    t = np.int64((se - s_lo) * per_width)
    return t if t < BUCKETS else BUCKETS - 1


@_jit
def _exact_optimum(x, a, b, amax, lv64, mids, inv_mids, gaps, dsq, absx, sq, ev_s, ev_b,
                   ev_k, sorted_s, sorted_b, sorted_k, counts):
    """The scale of least exact error ``E(s)`` of the finite elements of ``x[a:b]`` (step 1
    of the module doc); the other arguments after ``amax`` are tables and buffers (:data:`TOP`
    entries for ``absx``, :data:`ZERO_BINS` for ``sq``, ``15 · (b − a)`` for the breakpoints,
    :data:`BUCKETS` + 1 for ``counts``)."""
    big = 0.0  # Σ x², and B and C as s -> 0 (every non-zero element at level ±1)
    bsum = 0.0
    csum = 0.0
    b0 = 0.0  # B and C at amax
    c0 = 0.0
    n = 0
    absx[:TOP] = -1.0
    sq[:] = 0.0
    per_bin = ZERO_BINS / amax
    for i in range(a, b):
        xv = np.float64(x[i])
        if not np.isfinite(xv):
            continue
        v = abs(xv)
        big += v * v
        if v > 0.0:
            bsum += v
            csum += 1.0
        q = xv / amax
        c = 0
        for j in range(mids.size):
            c += mids[j] < q
        b0 += xv * lv64[c]
        c0 += lv64[c] * lv64[c]
        sq[min(np.int64(v * per_bin), ZERO_BINS - 1)] += v * v
        if v > absx[0]:  # one of the TOP largest: into absx, ascending
            p = 1
            while p < TOP and absx[p] < v:
                absx[p - 1] = absx[p]
                p += 1
            absx[p - 1] = v
        n += 1
    # the levels at amax, with the scale b0 / c0 of least error for them: an error no more
    # than E(amax) that E reaches at s1 or below (a Lloyd step), the bound of the walk
    s1 = b0 / c0
    e1 = max(big - b0 * s1, 0.0)
    # the largest elements' clipping alone (a part of the sum bounds it from below), and the
    # squares of the small ones by bins of |x|: every element of the bins up to j is below
    # the bin's upper edge, so for s above edge / zero_mid all of them round to level 0
    k = min(n, TOP)
    s_lo = _clip_bound(absx[TOP - k:TOP], k, e1)
    zero_mid = 1.0 / max(inv_mids[7], inv_mids[6])  # below it |x| / s rounds to level 0
    s_hi = amax / zero_mid
    acc = 0.0
    for j in range(ZERO_BINS):
        acc += sq[j]
        if acc >= e1:
            s_hi = (j + 1) / per_bin / zero_mid
            break
    s_hi = max(s_hi, s1)
    m = 0
    for i in range(a, b):
        xv = np.float64(x[i])
        if not np.isfinite(xv) or xv == 0.0:
            continue
        v = abs(xv)
        k0, k1 = (7, 15) if xv > 0 else (0, 7)
        for k in range(k0, k1):
            se = v * inv_mids[k]
            if se <= s_lo:  # crossed before the walk starts
                bsum -= v * gaps[k]
                csum += dsq[k]
            elif se <= s_hi:
                ev_s[m] = se
                ev_b[m] = v * gaps[k]
                ev_k[m] = k
                m += 1
    # the breakpoints in order: by bucket of equal width, then an insertion sort that moves
    # each only past the few of its bucket
    counts[:] = 0
    per_width = BUCKETS / (s_hi - s_lo) if m else 0.0
    for e in range(m):
        t = _bucket(ev_s[e], s_lo, per_width)
        counts[t + 1] += 1
        ev_k[e] |= t << 4  # the bucket beside the midpoint, for the second pass
    for t in range(BUCKETS):
        counts[t + 1] += counts[t]
    for e in range(m):
        t = ev_k[e] >> 4
        p = counts[t]
        counts[t] = p + 1
        sorted_s[p] = ev_s[e]
        sorted_b[p] = ev_b[e]
        sorted_k[p] = ev_k[e] & 15
    for e in range(1, m):
        vs, vb, vk = sorted_s[e], sorted_b[e], sorted_k[e]
        p = e
        while p > 0 and sorted_s[p - 1] > vs:
            sorted_s[p] = sorted_s[p - 1]
            sorted_b[p] = sorted_b[p - 1]
            sorted_k[p] = sorted_k[p - 1]
            p -= 1
        sorted_s[p], sorted_b[p], sorted_k[p] = vs, vb, vk
    # only a vertex inside its piece can be the minimum (module doc), and E at s_lo and s_hi
    # is no less than e1: the pieces' ends need no evaluation, nor a vertex outside its piece
    # (tested without a division: C > 0 on every piece with an element off level 0)
    best_s = s1
    gain = big - e1  # the vertex of a piece beats the best where B² / C exceeds this
    lo = s_lo
    for e in range(m + 1):
        hi = sorted_s[e] if e < m else s_hi
        if (bsum * bsum > gain * csum and bsum >= lo * csum and bsum <= hi * csum
                and csum > 0.0):
            best_s = bsum / csum
            gain = bsum * best_s
        if e < m:
            bsum -= sorted_b[e]
            csum += dsq[sorted_k[e]]
            lo = hi
    return best_s


@_jit
def mse_block_scales(x2d, block, lo, hi, spec, levels, mids, inv_mids, gaps, dsq, out):
    """For blocks ``lo..hi`` of ``x2d`` (counted row by row, ``block`` elements each along the
    rows): the float32 scale of least error (module doc) into ``out[j]``; ``spec[j]`` is the
    block's absmax (float32)."""
    n = x2d.shape[1]
    nb = spec.shape[0] // x2d.shape[0] if x2d.shape[0] else 0
    absx = np.empty(TOP, np.float64)
    sq = np.empty(ZERO_BINS, np.float64)
    lv64 = levels.astype(np.float64)
    ev_s = np.empty(15 * block)
    ev_b = np.empty(15 * block)
    ev_k = np.empty(15 * block, np.int64)
    sorted_s = np.empty(15 * block)
    sorted_b = np.empty(15 * block)
    sorted_k = np.empty(15 * block, np.int64)
    counts = np.empty(BUCKETS + 1, np.int64)
    for j in range(lo, hi):
        row = x2d[j // nb]
        a = (j % nb) * block
        b = min(a + block, n)
        s0 = spec[j]
        out[j] = s0
        if not (np.float64(s0) >= _TINY32 and np.float64(s0) <= _MAX32):
            continue
        best = block_error(row, a, b, s0, levels, mids)
        if best == 0.0:
            continue
        v = _exact_optimum(row, a, b, np.float64(s0), lv64, mids, inv_mids, gaps, dsq, absx,
                           sq, ev_s, ev_b, ev_k, sorted_s, sorted_b, sorted_k, counts)
        c = np.float32(min(max(v, _TINY32), _MAX32))
        up = c
        down = c
        for t in range(2 * NEIGHBOURS + 1):  # c, then one ulp up and down, alternately
            if t == 0:
                s = c
            elif t % 2 == 1:
                up = np.nextafter(up, np.float32(np.inf))
                s = up
            else:
                down = np.nextafter(down, np.float32(0.0))
                s = down
            if not (np.float64(s) >= _TINY32 and np.float64(s) <= _MAX32) or s == s0:
                continue
            err = block_error(row, a, b, s, levels, mids)
            if err < best:
                best = err
                out[j] = s


def nf4_mse_scales(xf: np.ndarray, absmax: np.ndarray, block: int = 64) -> np.ndarray:
    """The float32 scales of least error (module doc) for ``xf``'s blocks of ``block`` along
    its last axis, given each block's ``absmax`` (float32, the per-group parameter shape)."""
    n = xf.shape[-1]
    # one loop for either kind of tensor (a read-only view is no copy)
    x2d = read_only(np.ascontiguousarray(xf, np.float32).reshape(-1, n))
    spec = np.ascontiguousarray(absmax, np.float32).reshape(-1)
    out = np.empty(spec.size, np.float32)

    def share(lo: int, hi: int) -> None:
        mse_block_scales(x2d, block, lo, hi, spec, LEVELS32, MIDS, INV_MIDS, GAPS, DSQ, out)

    n_blocks = spec.size
    t_count = THREADS if n_blocks >= PARALLEL_BLOCKS else 1
    parallel(share, [(i * n_blocks // t_count, (i + 1) * n_blocks // t_count)
                     for i in range(t_count)])
    return out.reshape(np.shape(absmax))
