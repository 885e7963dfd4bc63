"""The compiled inner loop of :func:`quantscope.core.stats.sorted_stats.evaluate`.

An evaluation (a sorted row, a scale, a zero point) splits the row into intervals of equal
code. In NumPy that work was one ``searchsorted`` call per row and a dozen
``[evaluations, levels]`` temporaries, which for 4096 rows of 4096 elements cost more than a
pass over the data. Here it is one loop, compiled by Numba, that releases the GIL (the window's
thread keeps painting while it runs). A row is treated one of two ways:

* long rows (many elements per code, e.g. a whole tensor) are split by binary search for each
  code threshold, and each interval's error comes from the row's prefix sums: O(levels · log n);
* shorter rows (a channel, a group) are walked: every element's code and squared error
  (summed without cancellation, a chunk at a time; the largest gives the max |error|) in one
  pass, compiled once per rounding rule and arithmetic so the loop holds no branch; then the
  places where the code changes, listed 8 compares at a time through a table of bit
  positions, each a run of equal code -- two simple passes over a row that sits in cache,
  with work per code rather than per element and no branch on the data.

Exactness rests on :func:`code_of`, the direct pass's quantization rule written out for one
float32 element: float32 division or multiplication (or the float64-emulated fused
multiply-add, or a float32 product plus the zero point in float32), then half-to-even or
half-away rounding, exactly as :func:`quantscope.core.schemes.quantize.quantize_codes_float` does
it;
the tests compare the two on every tie and on random bit patterns. A searched threshold is
estimated in float64, then moved until :func:`code_of` agrees, so rows split exactly where the
direct pass changes code.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from quantscope.core.kernels.block_sums import prefix_at, prefix_from
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.lane_order import LANES
from quantscope.core.kernels.lane_sums import sum_ends_in_lanes, sum_in_lanes

#: ``arithmetic`` names as the kernel's integer codes.
ARITHMETIC_CODES = {"divide": 0, "multiply": 1, "fma": 2, "multiply_add": 3, "divide64": 4}
#: The arithmetics the one-pass loops of :mod:`quantscope.core.kernels.quantize_lines` know.
LINE_ARITHMETIC = ("divide", "multiply", "fma", "multiply_add")
#: Fix-up moves allowed per threshold before an evaluation is reported unsettled (never seen:
#: each move skips a whole run of equal values, and codes are monotone in the value).
MAX_FIX_MOVES = 64
_EPS = float(np.finfo(np.float64).eps)
#: A walked row's squared errors are computed and summed this many at a time: the squares of a
#: whole channel (32 KiB for 4096 elements) written, then read back, pushed the row's values out
#: of the first-level cache; a chunk's 8 KiB stay there. Measured on 4096x4096 normal values,
#: one thread, interleaved with the whole-row pass: 0.77 - 0.89 of its time.
WALK_CHUNK = 1024
#: A walk asks for the values this many chunks ahead of the one it is on (the hardware's own
#: prefetching kept both cores waiting on memory: a per-channel report of 4096x4096 took
#: 9.2-11.6 ms without, 6.9-7.6 ms with, runs alternated; 1 and 4 chunks ahead did the same).
PREFETCH_CHUNKS = 2

#: Compiled on first use and cached beside the module (about 8 s once, then 0.4 s per process).
_jit = njit(nogil=True, error_model="numpy")

@intrinsic
def float64_bits(typingctx, x):
    """The IEEE bits of a float64 as an int64 (an LLVM bitcast: Numba has no scalar view)."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def bits_float64(typingctx, u):
    """The float64 whose IEEE bits are the int64 ``u``."""
    if u != types.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def prefetch(typingctx, arr, i):
    """Ask for the cache line holding ``arr[i]`` to be read ahead (``i`` may lie past the end:
    a prefetch never faults, and it changes nothing the program computes)."""
    if not isinstance(arr, types.Array) or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        prefetch_at(builder, builder.gep(data, [args[1]]))
        return context.get_dummy_value()

    return types.void(arr, i), codegen


#: Bytes of a cache line: one prefetch asks for this many.
CACHE_LINE = 64


@njit(nogil=True, error_model="numpy", inline="always")
def prefetch_range(arr, lo: int, hi: int) -> None:
    """:func:`prefetch` every cache line that ``arr[lo:hi]`` (1-D, contiguous) covers."""
    for k in range(lo, hi, max(1, CACHE_LINE // arr.itemsize)):
        prefetch(arr, k)


def prefetch_at(builder: ir.IRBuilder, pointer) -> None:
    """Emit a prefetch of the line at ``pointer``: for reading, kept in every cache level."""
    at = builder.bitcast(pointer, ir.IntType(8).as_pointer())
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
        ir.VoidType(), [at.type] + [ir.IntType(32)] * 3), "llvm.prefetch.p0")
    builder.call(fn, [at] + [ir.Constant(ir.IntType(32), k) for k in (0, 3, 1)])


@_jit
def code_of(x: np.float32, s: np.float32, inv: np.float32, z: np.int32, arithmetic: int,
            half_away: bool) -> np.float32:
    """The unclamped code of one float32 element (a float32 integer), by the direct rule."""
    if arithmetic == 4:  # the float64 quotient, rounded in float64 (see schemes.quantize)
        q = np.float64(x) / np.float64(s)
        if half_away:
            t = np.trunc(q)
            if abs(q - t) >= 0.5:
                t = t + (1.0 if q > 0 else -1.0)
            q = t
        else:
            q = np.rint(q)
        return np.float32(q + np.float64(z))
    if arithmetic == 0:
        v = np.float32(x / s)
    elif arithmetic == 1:
        v = np.float32(x * inv)
    elif arithmetic == 2:  # one rounding of x * inv + z, emulated in float64 (x * inv is exact)
        v = np.float32(np.float64(x) * np.float64(inv) + np.float64(z))
    else:  # a float32 product, then a float32 sum with the zero point
        v = np.float32(np.float32(x * inv) + np.float32(z))
    if half_away:
        t = np.float32(np.trunc(v))
        if abs(np.float32(v - t)) >= np.float32(0.5):
            t = np.float32(t + (np.float32(1.0) if v > 0 else np.float32(-1.0)))
        v = t
    else:
        v = np.float32(np.rint(v))
    if arithmetic < 2:
        v = np.float32(v + np.float32(z))
    return v


@_jit
def _lower_bound(values, lo: int, hi: int, needle) -> int:
    """First position in ``values[lo:hi]`` whose value is not below ``needle`` (NaN sorts last,
    as in ``np.searchsorted``)."""
    if needle != needle:
        return hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < needle:
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def _gallop(values, lo: int, hi: int, needle) -> int:
    """:func:`_lower_bound` for a needle expected just after ``lo``: steps of 1, 2, 4, ... then
    a binary search in the last step. Consecutive thresholds are a code apart, a few elements
    in a row of thousands, so this takes a handful of predictable steps where a binary search
    over the row takes a dozen unpredictable ones."""
    if needle != needle:
        return hi
    if lo >= hi or not values[lo] < needle:
        return lo
    bound = 1
    while lo + bound < hi and values[lo + bound] < needle:
        bound *= 2
    return _lower_bound(values, lo + bound // 2 + 1, min(lo + bound, hi), needle)


@_jit
def _upper_bound(values, lo: int, hi: int, needle) -> int:
    """First position in ``values[lo:hi]`` whose value is above ``needle``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] <= needle:
            lo = mid + 1
        else:
            hi = mid
    return lo


#: An evaluation's running totals, threaded through :func:`_close` as a tuple (so they stay in
#: registers): rounding error, clipping error, their bounds, max |error|, clipped below,
#: clipped above, codes used, histogram index of the last code counted.
_START = (0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, -1)


@_jit
def _close(j: int, n: int, err: float, bound: float, worst: float, levels: int,
           want_counts: bool, hist, totals):
    """``totals`` with interval ``j`` (``n > 0`` elements) added. Interval 0 is clipped below
    and counted as code qmin, interval ``levels + 1`` clipped above and counted as qmax, the
    others hold code ``qmin + j - 1``. Intervals must come in increasing order."""
    rnd, clip, rnd_b, clip_b, max_abs, below, above, used, last = totals
    if j == 0 or j == levels + 1:
        clip += err
        clip_b += bound
        if j == 0:
            below = n
        else:
            above = n
    else:
        rnd += err
        rnd_b += bound
    idx = 0 if j == 0 else (levels - 1 if j > levels else j - 1)
    if idx != last:
        used += 1
        last = idx
    if want_counts:
        hist[idx] += n
    return rnd, clip, rnd_b, clip_b, max(max_abs, worst), below, above, used, last


@_jit
def _store(totals, sig: float, settled: bool, e: int, out_f, out_i) -> None:
    """Write an evaluation's totals to its rows of ``out_f`` / ``out_i``."""
    out_f[e, 0] = totals[0]
    out_f[e, 1] = totals[1]
    out_f[e, 2] = totals[2]
    out_f[e, 3] = totals[3]
    out_f[e, 4] = totals[4]
    out_f[e, 5] = sig
    out_i[e, 1] = totals[5]
    out_i[e, 2] = totals[6]
    out_i[e, 3] = totals[7]
    out_i[e, 4] = settled


@_jit
def evaluate_rows(values, starts, sumsq, rec, rec_starts, bound1, bound2, row, scale,
                  inv_scale, zero_point,
                  qmin: int, qmax: int, arithmetic: int, half_away: bool, has_inv: bool,
                  walk_below: int, want_counts: bool, hist, out_f, out_i) -> None:
    """Statistics of each evaluation ``e``: row ``row[e]`` quantized with ``scale[e]``,
    ``zero_point[e]`` (and ``inv_scale[e]`` if ``has_inv``).

    Rows shorter than ``walk_below`` are walked (:func:`_walk_row`; their Σx² is ``sumsq``,
    no prefix sums needed); longer ones are split by binary search (:func:`_search_row`), with
    the block records ``rec`` of their prefix sums (row ``r``'s from ``rec_starts[r]``, see
    :mod:`quantscope.core.kernels.block_sums`).
    ``out_f[e]`` receives (rounding error, clipping error, their two error bounds,
    max |error|, Σx², min, max); ``out_i[e]`` (elements, clipped below, clipped above, codes
    used, settled: 1 if every threshold was placed, else 0 and the evaluation must be redone
    element by element). With ``want_counts``, every evaluation's code counts (clipped ones at
    the ends) are added to ``hist``.
    """
    longest = 0  # scratch for the longest walked row: codes (and a word of room), squares
    # (a chunk's, and the lanes of a sum)
    for e in range(row.size):
        n = starts[row[e] + 1] - starts[row[e]]
        if n < walk_below:
            longest = max(longest, n)
    codes = np.empty(longest + 64, np.float32)
    sq = np.empty(min(longest, WALK_CHUNK) + LANES, np.float64)
    pos = np.empty(longest + CHANGE_STEP, np.int32)
    for e in range(row.size):
        r = row[e]
        a = starts[r]
        b = starts[r + 1]
        s = scale[e]
        z = zero_point[e]
        inv = inv_scale[e] if has_inv else np.float32(np.float32(1.0) / s)
        step = np.float64(s) if not has_inv else 1.0 / np.float64(inv)
        for c in range(8):
            out_f[e, c] = 0.0
        out_i[e, 0] = b - a
        for c in range(1, 4):
            out_i[e, c] = 0
        out_i[e, 4] = 1
        if b == a:
            continue
        if b - a < walk_below:
            _walk_row(values[a:b], codes, sq, pos, sumsq[r], s, inv, z, qmin, qmax, arithmetic,
                      half_away, want_counts, hist, e, out_f, out_i)
        else:
            _search_row(values, a, b, rec, rec_starts[r], bound1[r], bound2[r], s, inv, z, step,
                        qmin, qmax, arithmetic, half_away, want_counts, hist, e, out_f, out_i)
        out_f[e, 6] = values[a]
        out_f[e, 7] = values[b - 1]


@_jit
def _xhat(j: int, levels: int, qmin: int, qmax: int, s, z) -> float:
    """The dequantized value of interval ``j`` (the clipped ones dequantize to qmin / qmax)."""
    code = qmin if j == 0 else (qmax if j == levels + 1 else qmin + j - 1)
    return np.float64(np.float32(np.float32(code - z) * s))


@njit(nogil=True, error_model="numpy", fastmath={"reassoc"})
def _sum_in_any_order(values) -> float:
    """``Σ values`` in float64, in whatever order vectorises (the only floating-point operation
    here is the addition, so the licence to reassociate reaches nothing else; the terms are
    squares, so any order is within n units of roundoff). For sums that only bound or screen:
    a report's sums take the fixed order of :mod:`quantscope.core.kernels.lane_order`, which
    NumPy can repeat."""
    acc = 0.0
    for k in range(values.size):  # indices from 0: no check for negative ones, no gathers
        acc += values[k]
    return acc


@_jit
def _largest(values) -> float:
    """``max(values)`` of non-empty, non-negative float64 values, none NaN; overwrites
    ``values[0]``.

    Their bit patterns, read as int64, are in the same order as the values, and an integer
    maximum vectorises where a floating-point one does not (Numba's ``max`` checks for NaN).
    The largest pattern is written back to ``values[0]`` to be read as a float64."""
    bits = values.view(np.int64)
    top = 0
    for k in range(bits.size):
        top = max(top, bits[k])
    bits[0] = top
    return values[0]


@_jit
def row_sums_of_squares(values, starts, out) -> None:
    """``out[r] = Σ x²`` over row ``r`` (``values[starts[r]:starts[r + 1]]``), in float64."""
    for r in range(starts.size - 1):
        acc = 0.0
        for i in range(starts[r], starts[r + 1]):
            acc += np.float64(values[i]) * np.float64(values[i])
        out[r] = acc


@njit(nogil=True, error_model="numpy", inline="always")
def _codes_and_squares(x, codes, sq, s, inv, z, lo, hi, arithmetic, half_away) -> float:
    """Each element's code (:func:`code_of`) into ``codes``, its squared error into ``sq``, in
    one loop the compiler vectorises (``x`` is the row's own slice: indices from 0 need no
    check for negative ones, which made its loads gathers); returns the largest squared error.
    Inlined where it is called, so a call with a constant rule compiles to a loop without that
    rule's branches. The largest is kept as an integer maximum of the squares' bit patterns
    (in the same order as the values, none NaN): an integer maximum vectorises inside this
    loop where a floating-point one does not, and a second pass over ``sq`` for it cost a
    sixth of a per-channel report."""
    zf = np.float32(z)
    top = 0
    for k in range(x.size):
        code = code_of(x[k], s, inv, z, arithmetic, half_away)
        codes[k] = code
        d = (np.float64(x[k])
             - np.float64(np.float32(np.float32(min(max(code, lo), hi) - zf) * s)))
        d2 = d * d
        sq[k] = d2
        top = max(top, float64_bits(d2))
    return bits_float64(top)


#: Codes compared per step when a walked row's code changes are listed (two packs of
#: :data:`PACK_LANES`).
CHANGE_STEP = 16
#: Codes compared by one pack (:func:`_pack_changes`): an 8-bit mask indexes a table of 256
#: rows.
PACK_LANES = 8


def _set_bit_offsets(lanes: int) -> np.ndarray:
    """Row ``m``: the indices of the bits set in ``m`` (``m < 2**lanes``), ascending, then
    zeros: the offsets a pack adds to its first position."""
    table = np.zeros((1 << lanes, lanes), np.int32)
    for m in range(1 << lanes):
        bits = [k for k in range(lanes) if m >> k & 1]
        table[m, :len(bits)] = bits
    return table


#: :func:`_set_bit_offsets` of :data:`PACK_LANES` (8 KiB, read by every pack).
SET_BIT_OFFSETS = _set_bit_offsets(PACK_LANES)


@intrinsic
def _pack_changes(typingctx, codes, i, pos, j, offsets):
    """Append to ``pos[j:]`` each ``k`` in ``[i, i + 8)`` where ``codes[k] != codes[k - 1]``,
    in order, and return how many: the 8 compares as one vector, their mask (one byte) picks
    row ``mask`` of ``offsets`` (:data:`SET_BIT_OFFSETS`), and ``i`` plus that row is written
    as one vector (``pos`` needs 8 entries of room past ``j``; the entries past the count are
    overwritten by the next pack).

    Plain LLVM vector operations, no target's own instruction, so every machine gets the
    same few: LLVM's generic vector compress, one instruction with AVX-512, becomes a store
    per lane without it, and listing the same positions took 3.7 times as long (13.3 against
    3.6 ms over 4096 rows of 4096 codes in cache, one thread, AVX2)."""
    if not (isinstance(codes, types.Array) and codes.dtype == types.float32
            and isinstance(pos, types.Array) and pos.dtype == types.int32
            and isinstance(offsets, types.Array) and offsets.dtype == types.int32
            and offsets.ndim == 2 and offsets.layout == "C"):
        return None
    sig = types.int64(codes, i, pos, j, offsets)

    def codegen(context, builder, signature, args):
        cty, pty, oty = signature.args[0], signature.args[2], signature.args[4]
        ca = context.make_array(cty)(context, builder, args[0])
        pa = context.make_array(pty)(context, builder, args[2])
        oa = context.make_array(oty)(context, builder, args[4])
        cur_p = cgutils.get_item_pointer(context, builder, cty, ca, [args[1]], wraparound=False)
        prev_p = builder.gep(cur_p, [ir.Constant(ir.IntType(64), -1)])
        out_p = cgutils.get_item_pointer(context, builder, pty, pa, [args[3]], wraparound=False)
        i32, i64 = ir.IntType(32), ir.IntType(64)
        vf = ir.VectorType(ir.FloatType(), PACK_LANES)
        vi = ir.VectorType(i32, PACK_LANES)
        cur = builder.load(builder.bitcast(cur_p, vf.as_pointer()), align=4)
        prev = builder.load(builder.bitcast(prev_p, vf.as_pointer()), align=4)
        changed = builder.fcmp_unordered("!=", cur, prev)  # as Numba's != on floats
        word = ir.IntType(PACK_LANES)
        mask = builder.bitcast(changed, word)
        row_p = builder.gep(oa.data, [builder.mul(builder.zext(mask, i64),
                                                  ir.Constant(i64, PACK_LANES))])
        offs = builder.load(builder.bitcast(row_p, vi.as_pointer()), align=4)
        base = builder.insert_element(ir.Constant(vi, ir.Undefined), builder.trunc(args[1], i32),
                                      ir.Constant(i32, 0))
        base = builder.shuffle_vector(base, ir.Constant(vi, ir.Undefined),
                                      ir.Constant(vi, [0] * PACK_LANES))
        builder.store(builder.add(base, offs), builder.bitcast(out_p, vi.as_pointer()), align=4)
        popcount = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(word, [word]), f"llvm.ctpop.i{PACK_LANES}")
        return builder.zext(builder.call(popcount, [mask]), i64)

    return sig, codegen


@njit(nogil=True, error_model="numpy", inline="always")
def _list_changes(codes, i, pos, j) -> int:
    """Append to ``pos[j:]`` each ``k`` in ``[i, i + 16)`` where ``codes[k] != codes[k - 1]``,
    in order, and return how many (``pos`` needs 16 entries of room past ``j``): two
    :func:`_pack_changes`."""
    c: int = _pack_changes(codes, i, pos, j, SET_BIT_OFFSETS)
    return c + _pack_changes(codes, i + PACK_LANES, pos, j + c, SET_BIT_OFFSETS)


@njit(nogil=True, error_model="numpy", inline="always")
def _changes_in(codes, lo: int, hi: int, pos) -> int:
    """Write to ``pos`` each ``k`` in ``[lo, hi)`` where ``codes[k] != codes[k - 1]``, in
    order, and return how many: :data:`CHANGE_STEP` compares at a time
    (:func:`_list_changes`; ``codes`` needs 16 values of room past ``hi``, ``pos`` 16
    entries past the count), the last few one by one."""
    changes = 0
    i = lo
    while i + CHANGE_STEP <= hi:
        changes += _list_changes(codes, i, pos, changes)
        i += CHANGE_STEP
    for k in range(i, hi):
        if codes[k] != codes[k - 1]:
            pos[changes] = k
            changes += 1
    return changes


@njit(nogil=True, error_model="numpy", inline="always")
def _squares_in_chunks(x, codes, sq, s, inv, z, lo, hi, arithmetic, half_away):
    """Every element's code into ``codes`` and its squared error, :data:`WALK_CHUNK` elements
    at a time (``sq`` holds a chunk's squares, then :data:`LANES` values of room), summed in
    float64 (n elements within n units of roundoff): the rounding error, the clipping error,
    and the largest square, with the lengths of the clipped prefix and suffix. Codes are
    monotone along the sorted row, so a chunk's clipped elements are its own prefix and
    suffix, found from its ends. Each chunk's rounding and clipping squares are summed in the
    fixed order of :mod:`quantscope.core.kernels.lane_order` as the chunk's squares with the
    other kind's set to zero (NumPy can repeat that to the last bit; the clipped ones without
    a pass over the chunk, :func:`sum_ends_in_lanes`), then added to the row's totals chunk
    by chunk. Inlined where
    it is called, like :func:`_codes_and_squares`, so a constant rule compiles to loops without
    its branches."""
    n = x.size
    lanes = sq[sq.size - LANES:]
    rnd = 0.0
    clip = 0.0
    top = 0.0
    below = 0
    above = 0
    for c0 in range(0, n, WALK_CHUNK):
        c1 = min(c0 + WALK_CHUNK, n)
        # a later chunk, or the next rows'
        prefetch_range(x, c0 + PREFETCH_CHUNKS * WALK_CHUNK, c1 + PREFETCH_CHUNKS * WALK_CHUNK)
        t = _codes_and_squares(x[c0:c1], codes[c0:c1], sq, s, inv, z, lo, hi, arithmetic,
                               half_away)
        top = max(top, t)
        r0 = c0  # this chunk's unclipped elements: [r0, r1)
        while r0 < c1 and codes[r0] < lo:
            r0 += 1
        r1 = c1
        while r1 > r0 and codes[r1 - 1] > hi:
            r1 -= 1
        below += r0 - c0
        above += c1 - r1
        m = c1 - c0
        if r0 > c0 or c1 > r1:  # the clipped squares summed, then zeros in their place
            clip += sum_ends_in_lanes(sq[:m], r0 - c0, r1 - c0, lanes)
            for k in range(r0 - c0):
                sq[k] = 0.0
            for k in range(r1 - c0, m):
                sq[k] = 0.0
        rnd += sum_in_lanes(sq[:m])
    return rnd, clip, top, below, above


@_jit
def _walk_row(x, codes, sq, pos, sumsq, s, inv, z, qmin, qmax, arithmetic, half_away,
              want_counts, hist, e, out_f, out_i) -> None:
    """One sorted row ``x`` in two passes: every element's code (:func:`code_of`) and squared
    error, summed in float64 without cancellation (n elements are within n units of roundoff:
    the bound given), and the largest of them gives the max |error|; then the places where the
    code changes, which give the codes used (counted, in a loop that vectorises) and, with
    ``want_counts``, the code counts: the positions where the code changes listed into ``pos``
    (:func:`_list_changes`), then one histogram update per run (a code is ~16 elements of a
    channel: work per run, not per element). ``codes`` has 64 values of room past the row,
    ``pos`` 16 past its length. The clipped elements are
    a prefix and a suffix. The first pass takes a chunk at a time (:func:`_squares_in_chunks`).
    """
    n = x.size
    lo = np.float32(qmin)
    hi = np.float32(qmax)
    # one copy of the first pass per rule: with the rule a constant, no branch per element
    # (those branches were a quarter of a per-channel report's time without counts)
    if half_away:
        if arithmetic == 0:
            rnd, clip, top, below, above = _squares_in_chunks(
                x, codes, sq, s, inv, z, lo, hi, 0, True)
        elif arithmetic == 1:
            rnd, clip, top, below, above = _squares_in_chunks(
                x, codes, sq, s, inv, z, lo, hi, 1, True)
        elif arithmetic == 2:
            rnd, clip, top, below, above = _squares_in_chunks(
                x, codes, sq, s, inv, z, lo, hi, 2, True)
        elif arithmetic == 3:
            rnd, clip, top, below, above = _squares_in_chunks(
                x, codes, sq, s, inv, z, lo, hi, 3, True)
        else:
            rnd, clip, top, below, above = _squares_in_chunks(
                x, codes, sq, s, inv, z, lo, hi, 4, True)
    elif arithmetic == 0:
        rnd, clip, top, below, above = _squares_in_chunks(
            x, codes, sq, s, inv, z, lo, hi, 0, False)
    elif arithmetic == 1:
        rnd, clip, top, below, above = _squares_in_chunks(
            x, codes, sq, s, inv, z, lo, hi, 1, False)
    elif arithmetic == 2:
        rnd, clip, top, below, above = _squares_in_chunks(
            x, codes, sq, s, inv, z, lo, hi, 2, False)
    elif arithmetic == 3:
        rnd, clip, top, below, above = _squares_in_chunks(
            x, codes, sq, s, inv, z, lo, hi, 3, False)
    else:
        rnd, clip, top, below, above = _squares_in_chunks(
            x, codes, sq, s, inv, z, lo, hi, 4, False)
    end = n - above
    # max |d| = sqrt(max d²): sqrt(d * d) is |d| exactly in binary round-to-nearest barring
    # underflow and overflow (Boldo, 2015), and d, a difference of finite float32 values (the
    # layout holds no others), is 0 or 2^-149 to 2^129 in magnitude (or inf if x̂ overflows)
    max_abs = np.sqrt(top)
    levels = qmax - qmin + 1
    used = 0
    last = -1  # histogram index of the last code counted
    if below:  # clipped below: counted as code qmin
        used, last = 1, 0
        if want_counts:
            hist[0] += below
    if end > below:  # runs of equal code, each a code not counted before
        used += np.int64(int(codes[below]) - qmin != last)
        if want_counts:
            # the places where the code changes, listed without a branch per element
            # (:func:`_changes_in`); then one histogram update per run in a loop of known
            # length (a loop over the set bits of a word of changes mispredicted its exit about
            # once a word: 0.81 of the whole walk's time with the list, 4096x4096, one thread)
            changes = _changes_in(codes, below + 1, end, pos)
            start = below  # the current run's first element
            for c in range(changes):
                k = pos[c]
                hist[int(codes[start]) - qmin] += k - start
                start = k
            hist[int(codes[start]) - qmin] += end - start
            used += changes
        else:  # only how often it changes: a count that vectorises
            prev = codes[below:end - 1]
            cur = codes[below + 1:end]
            for k in range(cur.size):
                used += np.int64(cur[k] != prev[k])
        last = int(codes[end - 1]) - qmin
    if above:  # clipped above: counted as code qmax
        if last != levels - 1:
            used += 1
            last = levels - 1
        if want_counts:
            hist[levels - 1] += above
    totals = (rnd, clip, n * _EPS * rnd, n * _EPS * clip, max_abs, below, above, used, last)
    _store(totals, sumsq, True, e, out_f, out_i)


@_jit
def _search_row(values, a, b, rec, k0, b1, b2, s, inv, z, step, qmin, qmax, arithmetic,
                half_away, want_counts, hist, e, out_f, out_i) -> None:
    """One long sorted row split at its code thresholds by binary search; each interval's
    error from the prefix sums ``Σx² − 2·x̂·Σx + n·x̂²`` with its rounding bound (see
    :mod:`quantscope.core.stats.sorted_stats`); the prefix sums at each threshold from the row's
    block records (``rec`` from ``k0``)."""
    levels = qmax - qmin + 1
    settled = True
    totals = _START
    lo_edge = a  # start of the current interval (interval 0 is clipped below)
    g = prefix_at(values, a, a, rec, k0)  # the prefix sums at lo_edge
    for j in range(levels + 2):
        if j <= levels:  # threshold j: the first element whose code is >= qmin + j
            k = np.float32(qmin + j)
            est = np.float32((np.float64(qmin + j) - z - 0.5) * step)
            p = _gallop(values, lo_edge, b, est)
            moves = 0
            while True:
                if p > a and code_of(values[p - 1], s, inv, z, arithmetic, half_away) >= k:
                    p = _lower_bound(values, a, p, values[p - 1])
                elif p < b and code_of(values[p], s, inv, z, arithmetic, half_away) < k:
                    p = _upper_bound(values, p, b, values[p])
                else:
                    break
                moves += 1
                if moves > MAX_FIX_MOVES:
                    settled = False
                    break
            hi_edge = p
        else:
            hi_edge = b
        n = hi_edge - lo_edge
        if n > 0:
            xhat = _xhat(j, levels, qmin, qmax, s, z)
            h = prefix_from(values, a, lo_edge, g, hi_edge, rec, k0)
            s1 = (h[0] - g[0]) + (h[1] - g[1])
            s2 = (h[2] - g[2]) + (h[3] - g[3])
            cross = xhat * s1
            nx2 = n * (xhat * xhat)
            err = max(s2 - 2.0 * cross + nx2, 0.0)
            bound = _EPS * (2.5 * s2 + 6.0 * abs(cross) + nx2)
            bound += n * (b2 + 2.0 * abs(xhat) * b1)
            worst = max(abs(np.float64(values[lo_edge]) - xhat),
                        abs(np.float64(values[hi_edge - 1]) - xhat))
            totals = _close(j, n, err, bound, worst, levels, want_counts, hist, totals)
            g = h
        lo_edge = hi_edge
    h = prefix_from(values, a, lo_edge, g, b, rec, k0)  # lo_edge is b: g itself
    sig = h[2] + h[3]  # the row's prefix sums start from zero
    _store(totals, sig, settled, e, out_f, out_i)


@_jit
def abs_order_stats(values, starts, k, out) -> None:
    """``out[r]``: the ``k[r]``-th smallest ``|x|`` (0-based) of sorted row ``r`` (0.0 for an
    empty row).

    ``|x|`` ascending is the merge of the negative values read backwards (A) and the
    non-negative ones (B); bisection finds how many of the first ``k + 1`` come from A: the
    smallest ``i`` with ``A[i] >= B[k - i]``. O(log n) per row, no copy of the row."""
    for r in range(starts.size - 1):
        a = starts[r]
        b = starts[r + 1]
        if b == a:
            out[r] = 0.0
            continue
        kr = k[r]
        n_neg = _lower_bound(values, a, b, np.float32(0.0)) - a
        n_pos = b - a - n_neg
        lo = max(0, kr + 1 - n_pos)
        hi = min(n_neg, kr + 1)
        while lo < hi:
            mid = (lo + hi) >> 1
            j = kr - mid
            neg = -np.float64(values[a + n_neg - 1 - mid]) if mid < n_neg else 0.0
            if mid >= n_neg or j < 0 or neg >= np.float64(values[a + n_neg + j]):
                hi = mid
            else:
                lo = mid + 1
        j = kr - lo
        left = -np.float64(values[a + n_neg - lo]) if lo > 0 else -np.inf
        right = np.float64(values[a + n_neg + j]) if j >= 0 else -np.inf
        out[r] = max(left, right)
