"""The direct passes compiled: quantize, dequantize and a per-tensor analysis in one pass each.

NumPy makes a pass over memory per operation (divide, round, add, clip, cast...); here each
element is read once and every quantity is formed in registers, in loops Numba compiles once per
rounding rule and arithmetic (so the loop holds no branch on them and vectorises), that release
the GIL and run on every core (:mod:`quantscope.core.kernels.parallel`), each on its own share.

Exactness: an element's code is :func:`quantscope.core.kernels.sorted_kernel.code_of`, the direct
rule written out for one float32 (the tests compare it with the NumPy rule on every tie and on
random bit patterns); the clamp, the NaN-to-zero-point rule and ``x̂ = float32(float32(q − z)
· s)`` are the NumPy passes' own, so codes, counts, clips and the maximum error are bit for bit
those of :mod:`quantscope.core.schemes.quantize` and :mod:`quantscope.core.stats.analyze`. Error
sums are
float64, summed per block of :data:`SUM_BLOCK` elements in the fixed order of
:mod:`quantscope.core.kernels.lane_order` and then across blocks (within
``(SUM_BLOCK + n / SUM_BLOCK)`` units of roundoff of the exact sum).
"""

from __future__ import annotations

import itertools
import platform
from typing import Any

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.lane_sums import sum_in_lanes
from quantscope.core.kernels.quantize_lines import LANES, NEAR_BOUNDARY, quantize_lines
from quantscope.core.kernels.read_only import read_only
from quantscope.core.kernels.sorted_kernel import (
    ARITHMETIC_CODES,
    _largest,
    code_of,
    prefetch_range,
)

#: Elements summed on their own before their sum joins the total (their scratch stays in L1).
SUM_BLOCK = 1024
#: Bytes of a memory page (the smallest): one write in each faults a fresh array in.
PAGE_BYTES = 4096
#: The smallest normal float32.
TINY_NORMAL = np.float32(np.finfo(np.float32).tiny)

_jit = njit(nogil=True, error_model="numpy")
_inline = njit(nogil=True, error_model="numpy", inline="always")

__all__ = ["ARITHMETIC_CODES", "analyze_range", "dequantize_range", "quantize_range"]


@_jit
def quantize_range(x, lo, hi, s, inv, z, qmin, qmax, arithmetic, half_away, out) -> bool:
    """Codes of ``x[lo:hi]`` (float32, one scale) into ``out[lo:hi]`` (int8 or uint8),
    saturated, NaN to the zero point; returns whether some element is NaN or inf.

    Whole lines of 16 elements go through :func:`quantize_lines`, the last few through
    ``code_of`` one at a time."""
    lines = (hi - lo) // LANES
    zf, cmin, cmax = np.float32(z), np.float32(qmin), np.float32(qmax)
    near = np.float32(NEAR_BOUNDARY)  # see quantize_lines._Line.fused
    if arithmetic == 0:
        inv = np.float32(np.float32(1) / s)
        if not TINY_NORMAL <= inv <= np.finfo(np.float32).max:
            near = np.float32(np.inf)  # every line divides
    bits: int = quantize_lines(x, out, lo, lines, s, inv, zf, cmin, cmax, near, arithmetic,
                               half_away)
    bad = bits != 0
    for k in range(lo + lines * LANES, hi):
        v = code_of(x[k], s, inv, z, arithmetic, half_away)
        c = cmin if v < cmin else (cmax if v > cmax else v)  # inf saturates
        out[k] = zf if v != v else c  # NaN goes to the zero point
        bad |= x[k] - x[k] != 0
    return bad


#: Elements per non-temporal store of the dequantization: one 64-byte line of float32.
NT_LINE = 16
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


@intrinsic
def _dequantize_line_nt(typingctx, q, out, i, s, z):
    """``out[i:i + 16] = float32(float32(int32(q[i:i + 16]) − z) · s)`` as one vector: the codes
    widened to int32 (sign- or zero-extended as their dtype says), the zero point subtracted in
    int32, converted, one float32 product -- the operations of :func:`dequantize_range`'s plain
    loop, lane for lane -- and written by one non-temporal store of the line at ``out + i``
    (which must be 64-byte aligned). Numba cannot mark a store non-temporal, so the vector is
    written out in LLVM IR."""
    if not (isinstance(q, types.Array) and isinstance(q.dtype, types.Integer)
            and isinstance(out, types.Array) and out.dtype == types.float32):
        return None
    code: Any = q.dtype  # Numba's Integer type: its stubs lack bitwidth and signed
    if code.bitwidth > 32:
        return None
    sig = types.void(q, out, i, s, z)
    signed = code.signed

    def codegen(context, builder, signature, args):
        qty, oty = signature.args[0], signature.args[1]
        qa = context.make_array(qty)(context, builder, args[0])
        oa = context.make_array(oty)(context, builder, args[1])
        qp = cgutils.get_item_pointer(context, builder, qty, qa, [args[2]], wraparound=False)
        op = cgutils.get_item_pointer(context, builder, oty, oa, [args[2]], wraparound=False)
        i32 = ir.IntType(32)
        vi = ir.VectorType(i32, NT_LINE)
        vf = ir.VectorType(ir.FloatType(), NT_LINE)
        lanes0 = ir.Constant(vi, [0] * NT_LINE)
        codes = builder.load(builder.bitcast(qp, ir.VectorType(qp.type.pointee, NT_LINE)
                                             .as_pointer()), align=1)
        if qp.type.pointee.width < 32:
            codes = builder.sext(codes, vi) if signed else builder.zext(codes, vi)
        zs = builder.insert_element(ir.Constant(vi, ir.Undefined), args[4], ir.Constant(i32, 0))
        zs = builder.shuffle_vector(zs, ir.Constant(vi, ir.Undefined), lanes0)
        ss = builder.insert_element(ir.Constant(vf, ir.Undefined), args[3], ir.Constant(i32, 0))
        ss = builder.shuffle_vector(ss, ir.Constant(vf, ir.Undefined), lanes0)
        value = builder.fmul(builder.sitofp(builder.sub(codes, zs), vf), ss)
        store = builder.store(value, builder.bitcast(op, vf.as_pointer()), align=64)
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(i32, 1)]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _store_fence(typingctx):
    """A store fence: non-temporal stores are weakly ordered, so a share ends with one before
    another thread reads what it wrote (``sfence`` on x86, where a locked instruction, LLVM's
    fence there, does not order them; a full fence elsewhere)."""
    def codegen(context, builder, signature, args):
        if _X86:
            fence = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse.sfence")
            builder.call(fence, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@_jit
def dequantize_range(q, lo, hi, s, z, out, fresh) -> None:
    """``out[i] = float32(float32(q[i] − z) · s)`` for ``i`` in ``[lo, hi)``: the codes widened
    before the zero point is subtracted, one float32 multiplication (ONNX DequantizeLinear).

    The difference is narrowed back to int32 (the callers refuse codes and zero points whose
    difference leaves it): Numba forms int32 − int32 in int64, and int64 → float32 has no
    vector instruction before AVX-512, which kept the loop scalar.

    How ``out`` is written depends on where its memory comes from. A ``fresh`` output was just
    allocated: the kernel zeroes each of its pages on the first touch, so the lines a store
    reaches are already in the cache and plain stores hit them there (non-temporal stores
    would write each line to memory a second time: 0.56 of the naive NumPy time instead of
    0.35-0.46 at 16M). A reused buffer's lines are not cached: its 64-byte lines inside the
    range are written by non-temporal stores (:func:`_dequantize_line_nt`), sparing the read of
    each line a plain store makes first (into a reused 64 MB buffer: 0.19 of the naive time
    instead of 0.33-0.41)."""
    if fresh:
        qs = q[lo:hi]  # indexed from 0 (see _quantize_loop)
        os_ = out[lo:hi]
        for k in range(qs.size):
            os_[k] = np.float32(np.float32(np.int32(np.int32(qs[k]) - z)) * s)
        return
    head = min(((-(out.ctypes.data + 4 * lo)) & 63) >> 2, hi - lo)  # up to the first line
    qs = q[lo:lo + head]
    os_ = out[lo:lo + head]
    for i in range(qs.size):
        os_[i] = np.float32(np.float32(np.int32(np.int32(qs[i]) - z)) * s)
    i = lo + head
    while i + NT_LINE <= hi:
        _dequantize_line_nt(q, out, i, s, z)
        i += NT_LINE
    qs = q[i:hi]
    os_ = out[i:hi]
    for k in range(qs.size):
        os_[k] = np.float32(np.float32(np.int32(np.int32(qs[k]) - z)) * s)
    _store_fence()


@_inline
def _analyze_loop(x, lo, hi, s, inv, z, qmin, qmax, arithmetic, half_away, codes, rs, cs, xs,
                  sq, hist, out_f, out_i) -> None:
    zf = np.float32(z)
    cmin = np.float32(qmin)
    cmax = np.float32(qmax)
    rnd = 0.0
    clip = 0.0
    sig = 0.0
    worst = 0.0
    n = 0
    below = 0
    above = 0
    for b0 in range(lo, hi, SUM_BLOCK):
        # the block two ahead is asked for: a 16M-element analysis took 21 ms on two threads
        # with the hardware's prefetching alone, 14 ms with this
        prefetch_range(x, b0 + 2 * SUM_BLOCK, b0 + 3 * SUM_BLOCK)
        xb = x[b0:min(b0 + SUM_BLOCK, hi)]  # indexed from 0 (see _quantize_loop)
        m = xb.size
        for k in range(m):  # no branch, no floating-point reduction: this loop vectorises
            xi = xb[k]
            fin = xi - xi == 0  # non-finite elements weigh 0 and count nowhere
            v = code_of(xi, s, inv, z, arithmetic, half_away)
            lo_c = v < cmin
            hi_c = v > cmax
            c = cmin if lo_c else (cmax if hi_c else v)
            c = cmin if not fin else c
            codes[k] = np.int32(c) - qmin if fin else -1
            x64 = np.float64(xi) if fin else 0.0
            d = x64 - np.float64(np.float32(np.float32(c - zf) * s)) if fin else 0.0
            e2 = d * d
            clipped = lo_c or hi_c
            rs[k] = 0.0 if clipped else e2
            cs[k] = e2 if clipped else 0.0
            sq[k] = e2
            xs[k] = x64 * x64
            n += np.int64(fin)
            below += np.int64(lo_c and fin)
            above += np.int64(hi_c and fin)
        for k in range(m):
            if codes[k] >= 0:
                hist[codes[k]] += 1
        rnd += sum_in_lanes(rs[:m])
        clip += sum_in_lanes(cs[:m])
        sig += sum_in_lanes(xs[:m])
        # max |d| = sqrt(max d²) exactly (see sorted_kernel._walk_row)
        worst = max(worst, np.sqrt(_largest(sq[:m])))
    out_f[0] = rnd
    out_f[1] = clip
    out_f[2] = sig
    out_f[3] = worst
    out_i[0] = n
    out_i[1] = below
    out_i[2] = above


@_jit
def analyze_range(x, lo, hi, s, inv, z, qmin, qmax, arithmetic, half_away, hist, out_f,
                  out_i) -> None:
    """The direct analysis of ``x[lo:hi]`` under one scale: the code counts added to ``hist``
    (clipped elements at the ends), ``out_f`` = (rounding error, clipping error, Σx²,
    max |error|), ``out_i`` = (finite elements, clipped below, clipped above). NaN and inf are
    left out of everything, as in :func:`quantscope.core.stats.analyze.analyze`."""
    codes = np.empty(SUM_BLOCK, np.int32)
    rs = np.empty(SUM_BLOCK)
    cs = np.empty(SUM_BLOCK)
    xs = np.empty(SUM_BLOCK)
    sq = np.empty(SUM_BLOCK)
    if half_away:
        if arithmetic == 0:
            _analyze_loop(x, lo, hi, s, inv, z, qmin, qmax, 0, True,
                          codes, rs, cs, xs, sq, hist, out_f, out_i)
        elif arithmetic == 1:
            _analyze_loop(x, lo, hi, s, inv, z, qmin, qmax, 1, True,
                          codes, rs, cs, xs, sq, hist, out_f, out_i)
        elif arithmetic == 2:
            _analyze_loop(x, lo, hi, s, inv, z, qmin, qmax, 2, True,
                          codes, rs, cs, xs, sq, hist, out_f, out_i)
        else:
            _analyze_loop(x, lo, hi, s, inv, z, qmin, qmax, 3, True,
                          codes, rs, cs, xs, sq, hist, out_f, out_i)
    elif arithmetic == 0:
        _analyze_loop(x, lo, hi, s, inv, z, qmin, qmax, 0, False,
                      codes, rs, cs, xs, sq, hist, out_f, out_i)
    elif arithmetic == 1:
        _analyze_loop(x, lo, hi, s, inv, z, qmin, qmax, 1, False,
                      codes, rs, cs, xs, sq, hist, out_f, out_i)
    elif arithmetic == 2:
        _analyze_loop(x, lo, hi, s, inv, z, qmin, qmax, 2, False,
                      codes, rs, cs, xs, sq, hist, out_f, out_i)
    else:
        _analyze_loop(x, lo, hi, s, inv, z, qmin, qmax, 3, False,
                      codes, rs, cs, xs, sq, hist, out_f, out_i)


def _rule(s, inv, arithmetic: str) -> tuple[np.float32, np.float32, int]:
    s32 = np.float32(s)
    inv32 = np.float32(np.float32(1.0) / s32) if inv is None else np.float32(inv)
    return s32, inv32, ARITHMETIC_CODES[arithmetic]


def quantize_flat(x: np.ndarray, s, z, qmin: int, qmax: int, rounding: str, arithmetic: str,
                  inv, out: np.ndarray) -> bool:
    """Codes of contiguous float32 ``x`` under one scale into ``out`` (same size), on every
    core; returns whether some element is NaN or inf (saturated / sent to the zero point)."""
    from quantscope.core.kernels.parallel import parallel, shares

    s32, inv32, code = _rule(s, inv, arithmetic)
    # read-only: one loop for writable and read-only tensors (quantscope.core.kernels.read_only)
    flat, dst = read_only(x.reshape(-1)), out.reshape(-1)
    return any(parallel(quantize_range, [
        (flat, lo, hi, s32, inv32, np.int32(z), qmin, qmax, code, rounding == "half_away", dst)
        for lo, hi in shares(flat.size)]))


def dequantize_into(q: np.ndarray, s, z, out: np.ndarray, fresh: bool) -> np.ndarray:
    """``out = float32(float32(q − z) · s)`` of contiguous integer codes under one scale;
    ``fresh``: ``out`` was allocated for this call (see :func:`dequantize_range`).

    A large fresh output's pages are faulted in by the calling thread a block ahead of the
    pool's threads, which write the values behind it (:func:`touch_pages`,
    :func:`quantscope.core.kernels.parallel.parallel_behind`): the two threads faulting in a new 64
    MB
    output at once took 60-100 ms on about one call in ten beside other large allocations,
    against 5-7 ms, and left later allocations slower; the faults on one thread, overlapped
    with the loop, cost no more than the loop alone."""
    from quantscope.core.kernels.parallel import PARALLEL_MIN, parallel, parallel_behind, shares

    flat, dst = q.reshape(-1), out.reshape(-1)
    s32, z32 = np.float32(s), np.int32(z)
    if not fresh or flat.size < PARALLEL_MIN:
        parallel(dequantize_range, [(flat, lo, hi, s32, z32, dst, fresh)
                                    for lo, hi in shares(flat.size)])
        return out
    blocks = list(itertools.pairwise([*range(0, flat.size, TOUCH_BLOCK), flat.size]))
    page = dst.view(np.uint8)
    parallel_behind(dequantize_range, [(flat, lo, hi, s32, z32, dst, True) for lo, hi in blocks],
                    lambda k: touch_pages(page, 4 * blocks[k][0], 4 * blocks[k][1]))
    return out


#: Elements per block of a fresh output faulted in ahead of the dequantization (4 MB).
TOUCH_BLOCK = 1 << 20


@_jit
def touch_pages(b, lo: int, hi: int) -> None:
    """Write 0 into a byte of every page ``b[lo:hi]`` reaches (a fresh array's: their first
    touch maps them in), without the GIL."""
    for i in range(lo, hi, PAGE_BYTES):
        b[i] = 0
    if hi > lo:
        b[hi - 1] = 0  # the last page, which the steps from lo may pass over


def analyze_flat(x: np.ndarray, s, z, qmin: int, qmax: int, rounding: str, arithmetic: str,
                 inv) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The direct per-tensor analysis of contiguous float32 ``x`` on every core: the code
    histogram, (rounding error, clipping error, Σx², max |error|) and (finite elements,
    clipped below, clipped above) -- see :func:`analyze_range`."""
    from quantscope.core.kernels.parallel import parallel, shares

    s32, inv32, code = _rule(s, inv, arithmetic)
    flat = read_only(x.reshape(-1))  # one loop for writable and read-only tensors
    parts = shares(flat.size)
    hist = np.zeros((len(parts), qmax - qmin + 1), np.int64)
    out_f = np.zeros((len(parts), 4))
    out_i = np.zeros((len(parts), 3), np.int64)
    parallel(analyze_range, [
        (flat, lo, hi, s32, inv32, np.int32(z), qmin, qmax, code, rounding == "half_away",
         hist[k], out_f[k], out_i[k]) for k, (lo, hi) in enumerate(parts)])
    sums = np.array([out_f[:, 0].sum(), out_f[:, 1].sum(), out_f[:, 2].sum(),
                     out_f[:, 3].max()])
    return hist.sum(axis=0), sums, out_i.sum(axis=0)
