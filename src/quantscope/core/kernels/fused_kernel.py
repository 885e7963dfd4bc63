"""The compiled loops of :mod:`quantscope.core.stats.fused`: a tensor's int8 figures in one read.

Every loop takes the tensor's *stored* bits as unsigned integers and widens them to float32
a row at a time into a scratch row (``bits`` and ``f``: one buffer of ``cols`` elements seen
as uint32 and as float32, made by the caller -- a view made inside compiled code loses the
contiguity that lets the loops vectorise) (kind 0: float32 bits as they are; kind 1:
bfloat16, the upper half of a float32; kind 2: any other 8- or 16-bit float through a table
of its 256 or 65536 values), so a bf16 checkpoint is never converted as a whole. They are
compiled by Numba like :mod:`quantscope.core.kernels.sorted_kernel` and release the GIL, so two
threads run them on two cores.

Exactness rests on the element rule being the engine's: :func:`code_of` (float32 ``x / s``,
half to even or half away, exactly as :func:`quantscope.core.stats.analyze.analyze` forms codes),
the clamp, ``x̂ = float32(code · s)`` and the squared error in float64; and on
:func:`symmetric_scale` being :func:`quantscope.core.schemes.qparams.params_from_range`'s symmetric
rule (the caller checks every scale it used against that function afterwards).

For the 8- and 16-bit kinds a row pass also counts each bit pattern: a per-tensor scale is
known only once every row has been read, and then the per-tensor error is a sum over the at
most 65536 distinct values (:func:`histogram_error`) instead of a second pass over the data.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.sorted_kernel import code_of

_jit = njit(nogil=True, error_model="numpy")
#: The loops with sums may reorder them (and only that): without it no float sum vectorises.
_fast = njit(nogil=True, error_model="numpy", fastmath={"reassoc"})
_TINY = np.float32(np.finfo(np.float32).tiny)

#: Kinds of stored data (see the module docstring).
KIND_F32, KIND_BF16, KIND_TABLE = 0, 1, 2

#: Columns of a row pass's float output and integer output.
ROW_F = ("amax", "sig", "err", "scale")
ROW_I = ("n", "below", "above", "big")

_ABS = np.uint32(0x7FFFFFFF)
_INF_BITS = np.uint32(0x7F800000)  # finite float32 magnitudes have smaller bit patterns


@_jit
def symmetric_scale(amax: float, qsym: int) -> np.float32:
    """:func:`params_from_range`'s symmetric scale for a finite ``max|x|`` (the range widened
    to include 0 has no other say): ``amax / qsym`` in float64 rounded once to float32, and
    1.0 when that is below float32's smallest normal number (division would lose precision)."""
    s = np.float32(amax / qsym)
    if not s >= _TINY:
        s = np.float32(1.0)
    return s


@_jit
def as_float(abits: np.uint32) -> np.float32:
    """The float32 whose bit pattern is ``abits``."""
    box = np.empty(1, np.uint32)
    box[0] = abits
    return box.view(np.float32)[0]


@_jit
def _widen(raw, a: int, n: int, kind: int, table, bits, f) -> None:
    """``raw[a:a+n]`` as float32 into ``f`` (``bits`` is the same buffer seen as uint32)."""
    # the row as its own slice, indexed from 0: ``raw[a + j]`` is an index the compiler cannot
    # prove non-negative, and Numba's wraparound select on it keeps the loop one lane at a time
    row = raw[a:a + n]
    if kind == 0:
        for j in range(n):
            bits[j] = row[j]
    elif kind == 1:
        for j in range(n):
            bits[j] = np.uint32(row[j]) << np.uint32(16)
    else:
        for j in range(n):
            f[j] = table[row[j]]


@_jit
def _count_patterns(raw, a: int, n: int, hist) -> None:
    """Count each bit pattern of ``raw[a:a+n]`` in ``hist`` (indexed from 0, as :func:`_widen`)."""
    row = raw[a:a + n]
    for j in range(n):
        hist[row[j]] += 1


@_jit
def _element(x, s, qmin: int, qmax: int, half_away: bool):
    """Squared error of finite ``x`` at scale ``s`` (zero point 0), and -1/0/1 for clipped
    below / inside / clipped above, by the direct pass's rule."""
    v = code_of(x, s, s, np.int32(0), 0, half_away)
    side = 0
    if v < qmin:
        v = np.float32(qmin)
        side = -1
    elif v > qmax:
        v = np.float32(qmax)
        side = 1
    e = np.float64(x) - np.float64(np.float32(v * s))
    return e * e, side


@_fast
def _row_stats(bits, f, n: int, tbits: np.uint32):
    """Bit pattern of the finite max |x|, Σx², finite count and ``|x| >= threshold`` count
    (``tbits``: the threshold's bits) of ``f[:n]``. Magnitudes are compared as integers --
    exact for non-negative floats, and a reduction that vectorises without assuming NaN
    away; the only freedom taken is the order of the sum (``reassoc``)."""
    m = np.uint32(0)
    count = 0
    big = 0
    sig = 0.0
    for j in range(n):
        a = bits[j] & _ABS
        fin = a < _INF_BITS
        m = max(m, a if fin else np.uint32(0))
        count += 1 if fin else 0
        big += 1 if (fin and a >= tbits) else 0
        x64 = np.float64(f[j]) if fin else 0.0
        sig += x64 * x64
    return m, sig, count, big


@_fast
def _row_error(f, n: int, s: np.float32, qmin: int, qmax: int, half_away: bool,
               all_finite: bool):
    """Squared error and clipped counts of the finite elements of ``f[:n]`` at scale ``s``:
    :func:`_element` without branches, one loop per rounding rule (and one for rows known to
    be finite, the common case, which need no mask)."""
    if half_away or not all_finite:
        err = 0.0
        below = 0
        above = 0
        for j in range(n):
            x = f[j]
            if x - x == 0:
                e2, side = _element(x, s, qmin, qmax, half_away)
                err += e2
                below += 1 if side < 0 else 0
                above += 1 if side > 0 else 0
        return err, below, above
    err = 0.0
    below = 0
    above = 0
    lo = np.float32(qmin)
    hi = np.float32(qmax)
    for j in range(n):
        x = f[j]
        v = np.float32(np.rint(np.float32(x / s)))
        below += 1 if v < lo else 0
        above += 1 if v > hi else 0
        v = min(max(v, lo), hi)
        e = np.float64(x) - np.float64(np.float32(v * s))
        err += e * e
    return err, below, above


@_jit
def row_pass(raw, kind: int, table, cols: int, per_row: bool, qsym: int, qmin: int, qmax: int,
             half_away: bool, tbits: np.uint32, want_hist: bool, hist, out_f, out_i,
             bits, f) -> None:
    """Figures of each row of ``raw`` (``out_f.shape[0]`` rows of ``cols`` elements).

    Per row: finite max |x|, Σx², the count of finite elements and of ``|x| >= threshold``;
    with ``per_row`` the row is then quantized with its own symmetric scale (it is a channel)
    while it sits in the scratch buffer: squared error and clipped counts. With ``want_hist``
    every element's bit pattern is counted in ``hist``.
    """
    for r in range(out_f.shape[0]):
        a = r * cols
        _widen(raw, a, cols, kind, table, bits, f)
        if want_hist:
            _count_patterns(raw, a, cols, hist)
        m, sig, n, big = _row_stats(bits, f, cols, tbits)
        amax = as_float(m)
        err = 0.0
        below = 0
        above = 0
        s = np.float32(1.0)
        if per_row:
            s = symmetric_scale(np.float64(amax), qsym)
            err, below, above = _row_error(f, cols, s, qmin, qmax, half_away, n == cols)
        out_f[r, 0] = amax
        out_f[r, 1] = sig
        out_f[r, 2] = err
        out_f[r, 3] = s
        out_i[r, 0] = n
        out_i[r, 1] = below
        out_i[r, 2] = above
        out_i[r, 3] = big


@_jit
def column_ranges(raw, kind: int, table, cols: int, rows: int, tbits: np.uint32,
                  want_hist: bool, hist, abits, sig, n, big, bits, f) -> None:
    """First pass when the channels are columns: accumulate each column's finite max |x| (as
    its bit pattern), Σx², element count and ``|x| >= threshold`` count (and the histogram)."""
    for r in range(rows):
        a = r * cols
        _widen(raw, a, cols, kind, table, bits, f)
        if want_hist:
            _count_patterns(raw, a, cols, hist)
        for j in range(cols):
            m = bits[j] & _ABS
            if m < _INF_BITS:
                abits[j] = max(abits[j], m)
                x = np.float64(f[j])
                sig[j] += x * x
                n[j] += 1
                if m >= tbits:
                    big[j] += 1


@_jit
def error_pass(raw, kind: int, table, cols: int, rows: int, col_scale, per_col: bool,
               tensor_scale, per_tensor: bool, qmin: int, qmax: int, half_away: bool,
               col_err, col_clip, tensor_out, bits, f) -> None:
    """Second pass over rows of ``cols`` elements: the error of each column under its own
    scale (``per_col``) and of the whole under ``tensor_scale`` (``per_tensor``, for data
    without a bit-pattern histogram). ``col_clip[j]`` and ``tensor_out[1:3]`` count clipped
    below / above; ``tensor_out[0]`` accumulates the per-tensor squared error."""
    t_err = 0.0
    t_below = 0
    t_above = 0
    for r in range(rows):
        a = r * cols
        _widen(raw, a, cols, kind, table, bits, f)
        if per_tensor and not per_col:
            e, b, c = _row_error(f, cols, tensor_scale, qmin, qmax, half_away, False)
            t_err += e
            t_below += b
            t_above += c
            continue
        for j in range(cols):
            x = f[j]
            if x - x != 0:
                continue
            if per_col:
                e2, side = _element(x, col_scale[j], qmin, qmax, half_away)
                col_err[j] += e2
                if side < 0:
                    col_clip[j, 0] += 1
                elif side > 0:
                    col_clip[j, 1] += 1
            if per_tensor:
                e2, side = _element(x, tensor_scale, qmin, qmax, half_away)
                t_err += e2
                if side < 0:
                    t_below += 1
                elif side > 0:
                    t_above += 1
    tensor_out[0] += t_err
    tensor_out[1] += t_below
    tensor_out[2] += t_above


@_jit
def histogram_error(values, hist, s: np.float32, qmin: int, qmax: int, half_away: bool):
    """Per-tensor squared error and clipped counts from a bit-pattern histogram: ``values[u]``
    is pattern ``u`` as float32, ``hist[u]`` how often it occurs (non-finite ones skipped)."""
    err = 0.0
    below = 0
    above = 0
    for u in range(hist.size):
        c = hist[u]
        if c == 0:
            continue
        x = values[u]
        if x - x != 0:
            continue
        e2, side = _element(x, s, qmin, qmax, half_away)
        err += e2 * c
        if side < 0:
            below += c
        elif side > 0:
            above += c
    return err, below, above
