"""llama.cpp's sub-block scale searches, run on many sub-blocks at once.

``make_qkx2_quants`` (Q2_K, Q4_K, Q5_K) and ``make_qx_quants`` with ``rmse_type 1`` (Q6_K)
try 16 to 21 candidate scales per sub-block, ``make_q3_quants`` (Q3_K) sweeps its codes up to
five times, and each trial or sweep sums float32 products over the sub-block in element
order. Those sums are chains of dependent additions: one sub-block at a
time, a processor waits on each addition's latency and the search costs 40-70 ns per element,
llama.cpp's own C speed. Sub-blocks are independent, though, so here the sub-blocks of a
chunk of super-blocks (128 or 256 of them) are *lanes*: the data is held transposed
(``xt[i, j]`` is element ``i`` of sub-block ``j``), each loop over elements runs an inner loop
over the lanes, and the compiler turns that inner loop into vector instructions -- sixteen
sums advancing together, each still formed in its own element order with the same float32
operations as the C code (no fused multiply-add, no reordering). The result is llama.cpp's to
the bit (the reference tests compare bytes) at a third of its time.

Every lane's state lives in a row of the float32 scratch ``st`` (``st[k, j]``); candidates a
lane rejects (a non-positive determinant, a worse error) leave its state untouched, exactly
as the C code's ``if`` does.

A code is ggml's ``nearest_int(v)``: the float32 sum ``v + 1.5 · 2^23`` read as an integer. For
``|v| < 2^22`` that is ``rint(v)`` (ties to even), one vector instruction instead of four, so
``make_qkx2_quants``' trials take the float path (:func:`_trial_sums_rint`,
:func:`_trial_error_rint`: a tenth less time per element) whenever every live lane's products
are within that range (:func:`_rint_safe`), and the integer trick itself otherwise (a lane of
huge values beside tiny ones), where ``nearest_int`` wraps as the C code's does.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.formats.elements import float32_bits
from quantscope.core.kernels.jit_cache import njit

_f32 = np.float32
_kernel = njit(nogil=True, error_model="numpy")
#: ggml's GROUP_MAX_EPS: a sub-block whose amax is below it is all zeros.
GROUP_MAX_EPS = np.float32(1e-15)
#: Rows of the scratch ``st`` the searches use.
SCRATCH_ROWS = 17


@njit(nogil=True, error_model="numpy", inline="always")
def _signed_max(n, nl, xt, amax, mx) -> None:
    """Each lane's largest ``|x|`` into ``amax`` and the value that has it (its sign kept, the
    first of equal magnitudes) into ``mx``, as ggml's symmetric searches start."""
    for j in range(nl):
        amax[j] = _f32(0.0)
        mx[j] = _f32(0.0)
    for i in range(n):
        for j in range(nl):
            v = xt[i, j]
            ax = _f32(abs(v))
            bigger = ax > amax[j]
            amax[j] = ax if bigger else amax[j]
            mx[j] = v if bigger else mx[j]


@njit(nogil=True, error_model="numpy", inline="always")
def _nearest_int32(fval) -> np.int32:
    """:func:`~quantscope.core.formats.gguf_legacy.nearest_int` in int32 arithmetic: its
    result, the low 23 bits less 2^22, always fits, and int32 lanes are twice as many per
    vector as int64 ones."""
    val = _f32(_f32(fval) + _f32(12582912.0))
    i = np.int32(float32_bits(val))
    return (i & np.int32(0x007FFFFF)) - np.int32(0x00400000)


@_kernel
def _trial_sums(n, nl, nmax, xt, wt, isc, mn, sl, sl2, sxl) -> None:
    """One trial's weighted sums of every lane (its codes are not kept: the error pass
    computes them again, cheaper than storing and reloading them). A loop of its own, so the
    compiler sees few arrays and vectorises the lanes."""
    top = np.int32(nmax)
    zero = np.int32(0)
    for j in range(nl):
        sl[j] = _f32(0.0)
        sl2[j] = _f32(0.0)
        sxl[j] = _f32(0.0)
    for i in range(n):
        for j in range(nl):
            q = max(zero, min(top, _nearest_int32(isc[j] * (xt[i, j] - mn[j]))))
            lf = _f32(q)
            wl = wt[i, j] * lf
            sl[j] += wl
            sl2[j] += wl * lf
            sxl[j] += wl * xt[i, j]


@_kernel
def _trial_error(n, nl, nmax, xt, wt, isc, mn, new_s, new_m, use_mad, err) -> None:
    """Each lane's weighted error of a trial's codes (computed again from ``isc`` and
    ``mn``) with its fitted scale and min."""
    top = np.int32(nmax)
    zero = np.int32(0)
    for j in range(nl):
        err[j] = _f32(0.0)
    if use_mad:
        for i in range(n):
            for j in range(nl):
                q = max(zero, min(top, _nearest_int32(isc[j] * (xt[i, j] - mn[j]))))
                diff = new_s[j] * _f32(q) + new_m[j] - xt[i, j]
                err[j] += wt[i, j] * _f32(abs(diff))
    else:
        for i in range(n):
            for j in range(nl):
                q = max(zero, min(top, _nearest_int32(isc[j] * (xt[i, j] - mn[j]))))
                diff = new_s[j] * _f32(q) + new_m[j] - xt[i, j]
                err[j] += wt[i, j] * (diff * diff)



#: Below this magnitude ``nearest_int`` is ``rint``: ``v + 1.5 · 2^23`` lies in ``[2^23, 2^24)``,
#: where float32 steps are 1 (from about ``2^22 - 1/2`` up the sum rounds to ``2^24`` and the
#: trick wraps; the limit keeps clear of it).
_RINT_LIMIT = np.float32(4194000.0)


@_kernel
def _rint_safe(nl, isc, mn, lo, hi, live) -> bool:
    """Whether every live lane's products ``isc · (x - mn)`` lie below :data:`_RINT_LIMIT` in
    magnitude (float32 subtraction and product are monotonic in ``x``, so a lane's extremes
    are at its least and greatest value ``lo``, ``hi``; NaN fails): then ``rint`` gives the
    integer trick's codes. A dead lane's codes are never used."""
    for j in range(nl):
        if live[j] != 0:
            a = isc[j] * (lo[j] - mn[j])
            b = isc[j] * (hi[j] - mn[j])
            if not (abs(a) < _RINT_LIMIT and abs(b) < _RINT_LIMIT):
                return False
    return True


@_kernel
def _trial_sums_rint(n, nl, nmax, xt, wt, isc, mn, sl, sl2, sxl) -> None:
    """:func:`_trial_sums` with each code as a float32 ``rint``, clamped (where
    :func:`_rint_safe`): the same sums to the bit."""
    top = _f32(nmax)
    zero = _f32(0.0)
    for j in range(nl):
        sl[j] = _f32(0.0)
        sl2[j] = _f32(0.0)
        sxl[j] = _f32(0.0)
    for i in range(n):
        for j in range(nl):
            lf = min(top, max(zero, np.rint(isc[j] * (xt[i, j] - mn[j]))))
            wl = wt[i, j] * lf
            sl[j] += wl
            sl2[j] += wl * lf
            sxl[j] += wl * xt[i, j]


@_kernel
def _trial_error_rint(n, nl, nmax, xt, wt, isc, mn, new_s, new_m, use_mad, err) -> None:
    """:func:`_trial_error` with each code as a float32 ``rint``, clamped (where
    :func:`_rint_safe`): the same errors to the bit."""
    top = _f32(nmax)
    zero = _f32(0.0)
    for j in range(nl):
        err[j] = _f32(0.0)
    if use_mad:
        for i in range(n):
            for j in range(nl):
                lf = min(top, max(zero, np.rint(isc[j] * (xt[i, j] - mn[j]))))
                diff = new_s[j] * lf + new_m[j] - xt[i, j]
                err[j] += wt[i, j] * _f32(abs(diff))
    else:
        for i in range(n):
            for j in range(nl):
                lf = min(top, max(zero, np.rint(isc[j] * (xt[i, j] - mn[j]))))
                diff = new_s[j] * lf + new_m[j] - xt[i, j]
                err[j] += wt[i, j] * (diff * diff)


@_kernel
def _winner_codes(n, nl, nmax, xt, Lt, isc, mn, live) -> None:
    """Each lane's codes from the inverse scale and minimum of the trial it kept (0 in a
    lane without a range)."""
    top = np.int32(nmax)
    zero = np.int32(0)
    for i in range(n):
        for j in range(nl):
            q = max(zero, min(top, _nearest_int32(isc[j] * (xt[i, j] - mn[j]))))
            Lt[i, j] = q if live[j] != 0 else zero


@_kernel
def qkx2_lanes(n, nl, nmax, xt, wt, Lt, rmin, rdelta, nstep, use_mad, st, scale_out,
               min_out) -> None:
    """``make_qkx2_quants(n, nmax, x, w, L, ...)`` on ``nl`` sub-blocks: ``xt``, ``wt``
    (float32 ``[n, nl]``) the values and weights, codes into ``Lt`` (int32 ``[n, nl]``);
    each lane's scale and ``-min`` into ``scale_out`` / ``min_out``.

    The C code copies a trial's codes whenever it improves on the best; here each lane keeps
    only the inverse scale and minimum that made its best trial's codes, and the codes are
    computed once, from those, after the last trial (the same expression, so the same
    codes)."""
    mn = st[0]
    mx = st[1]
    sum_w = st[2]
    sum_x = st[3]
    scale = st[4]
    best = st[5]
    isc = st[6]
    sl = st[7]
    sl2 = st[8]
    sxl = st[9]
    err = st[10]
    new_s = st[11]
    new_m = st[12]
    live = st[13]  # 1.0 where a lane has a range (max > min after min is capped at 0)
    win_isc = st[14]  # the inverse scale and minimum of the codes of each lane's best trial
    win_mn = st[15]
    lo = st[16]  # each lane's least value (mn is capped at 0; mx is the greatest)
    for j in range(nl):
        v = xt[0, j]
        mn[j] = v
        mx[j] = v
        sum_w[j] = wt[0, j]
        sum_x[j] = wt[0, j] * v
    for i in range(1, n):
        for j in range(nl):
            v = xt[i, j]
            mn[j] = v if v < mn[j] else mn[j]
            mx[j] = v if v > mx[j] else mx[j]
            sum_w[j] += wt[i, j]
            sum_x[j] += wt[i, j] * v
    for j in range(nl):
        lo[j] = mn[j]
        if mn[j] > 0:
            mn[j] = _f32(0.0)
        live[j] = _f32(1.0) if mx[j] != mn[j] else _f32(0.0)
        iscale = _f32(nmax) / (mx[j] - mn[j])
        isc[j] = iscale
        win_isc[j] = iscale
        win_mn[j] = mn[j]
        scale[j] = _f32(1.0) / iscale
    if _rint_safe(nl, isc, mn, lo, mx, live):
        _trial_error_rint(n, nl, nmax, xt, wt, isc, mn, scale, mn, use_mad, best)
    else:
        _trial_error(n, nl, nmax, xt, wt, isc, mn, scale, mn, use_mad, best)
    for step in range(nstep + 1 if nstep >= 1 else 0):
        for j in range(nl):
            isc[j] = (rmin + rdelta * _f32(step) + _f32(nmax)) / (mx[j] - mn[j])
        safe = _rint_safe(nl, isc, mn, lo, mx, live)
        if safe:
            _trial_sums_rint(n, nl, nmax, xt, wt, isc, mn, sl, sl2, sxl)
        else:
            _trial_sums(n, nl, nmax, xt, wt, isc, mn, sl, sl2, sxl)
        for j in range(nl):
            det = sum_w[j] * sl2[j] - sl[j] * sl[j]
            this_scale = (sum_w[j] * sxl[j] - sum_x[j] * sl[j]) / det
            this_min = (sl2[j] * sum_x[j] - sl[j] * sxl[j]) / det
            if this_min > 0:
                this_min = _f32(0.0)
                this_scale = sxl[j] / sl2[j]
            new_s[j] = this_scale
            new_m[j] = this_min
            # a lane that cannot take this trial gets an error no trial beats
            sl[j] = _f32(0.0) if det > 0 and live[j] != 0 else _f32(np.inf)
        if safe:
            _trial_error_rint(n, nl, nmax, xt, wt, isc, mn, new_s, new_m, use_mad, err)
        else:
            _trial_error(n, nl, nmax, xt, wt, isc, mn, new_s, new_m, use_mad, err)
        for j in range(nl):
            if sl[j] == 0 and err[j] < best[j]:
                best[j] = err[j]
                scale[j] = new_s[j]
                win_isc[j] = isc[j]
                win_mn[j] = mn[j]
                mn[j] = new_m[j]
    _winner_codes(n, nl, nmax, xt, Lt, win_isc, win_mn, live)
    for j in range(nl):
        scale_out[j] = scale[j] if live[j] != 0 else _f32(0.0)
        min_out[j] = -mn[j]


@_kernel
def _qx_sums(n, nl, nmax, xt, isc, slx, sl2) -> None:
    """One trial of ``make_qx_quants``: each lane's ``x²``-weighted sums of its codes."""
    lo = np.int32(-nmax)
    hi = np.int32(nmax - 1)
    for j in range(nl):
        slx[j] = _f32(0.0)
        sl2[j] = _f32(0.0)
    for i in range(n):
        for j in range(nl):
            v = xt[i, j]
            q = max(lo, min(hi, _nearest_int32(isc[j] * v)))
            w = v * v
            lf = _f32(q)
            slx[j] += w * v * lf
            sl2[j] += w * lf * lf


@_kernel
def qx_rmse1_lanes(n, nl, nmax, xt, Lt, st, scale_out) -> None:
    """``make_qx_quants(n, nmax, x, L, 1, NULL)`` on ``nl`` sub-blocks (``xt`` float32
    ``[n, nl]``): the ``x²``-weighted symmetric scale over 19 trial inverse scales, codes
    ``0..2·nmax - 1`` into ``Lt`` (int32 ``[n, nl]``), computed once from the inverse scale
    of each lane's best trial (as the C code computes them from it)."""
    amax = st[0]
    mx = st[1]
    isc = st[2]
    slx = st[3]
    sl2 = st[4]
    scale = st[5]
    best = st[6]
    win_isc = st[7]
    _signed_max(n, nl, xt, amax, mx)
    for t in range(-10, 10):  # -10 is the first fit at -nmax / max, then trials -9..9
        if t == 0:
            continue
        for j in range(nl):
            if t == -10:
                isc[j] = _f32(-nmax) / mx[j]
            else:
                isc[j] = -(_f32(nmax) + _f32(0.1) * _f32(t)) / mx[j]
        _qx_sums(n, nl, nmax, xt, isc, slx, sl2)
        for j in range(nl):
            if t == -10:
                scale[j] = slx[j] / sl2[j] if sl2[j] != 0 else _f32(0.0)
                best[j] = scale[j] * slx[j]
                win_isc[j] = isc[j]
            elif sl2[j] > 0 and slx[j] * slx[j] > best[j] * sl2[j]:
                scale[j] = slx[j] / sl2[j]
                best[j] = scale[j] * slx[j]
                win_isc[j] = isc[j]
    lo = np.int32(-nmax)
    hi = np.int32(nmax - 1)
    for i in range(n):
        for j in range(nl):
            q = max(lo, min(hi, _nearest_int32(win_isc[j] * xt[i, j]))) + np.int32(nmax)
            Lt[i, j] = q if amax[j] >= GROUP_MAX_EPS else np.int32(0)
    for j in range(nl):
        scale_out[j] = scale[j] if amax[j] >= GROUP_MAX_EPS else _f32(0.0)


@_kernel
def _q3_sweep(n, nl, nmax, xt, Lt, sumlx, suml2, changed) -> bool:
    """One sweep of ``make_q3_quants``' refinement over every lane: element by element, a
    code moves to ``x · Σl² / Σxl`` (its own term left out of both sums) when that raises the
    fit's ``(Σxl)² / Σl²``. True if any lane changed a code."""
    lo = np.int32(-nmax)
    hi = np.int32(nmax - 1)
    for j in range(nl):
        changed[j] = _f32(0.0)
    for i in range(n):
        for j in range(nl):
            v = xt[i, j]
            w = v * v
            old = Lt[i, j]
            lf = _f32(old)
            slx = sumlx[j] - w * v * lf
            sl2 = suml2[j] - w * lf * lf
            new_l = max(lo, min(hi, _nearest_int32(v * sl2 / slx)))
            nf = _f32(new_l)
            slx_new = slx + w * v * nf
            sl2_new = sl2 + w * nf * nf
            take = (slx > 0 and new_l != old and sl2_new > 0
                    and slx_new * slx_new * suml2[j] > sumlx[j] * sumlx[j] * sl2_new)
            Lt[i, j] = new_l if take else old
            sumlx[j] = slx_new if take else sumlx[j]
            suml2[j] = sl2_new if take else suml2[j]
            changed[j] = _f32(1.0) if take else changed[j]
    for j in range(nl):
        if changed[j] != 0:
            return True
    return False


@_kernel
def q3_lanes(n, nl, nmax, xt, Lt, xw, Lw, idx, st, scale_out) -> None:
    """``make_q3_quants(n, nmax, x, L, true)`` on ``nl`` sub-blocks (``xt`` float32
    ``[n, nl]``): codes rounded at ``-nmax / max``, then refined one element at a time, at
    most five sweeps, while the ``x²``-weighted fit improves; codes ``0..2·nmax - 1`` into
    ``Lt`` (int32 ``[n, nl]``), the fitted scales into ``scale_out``. ``xw``, ``Lw`` (like
    ``xt``, ``Lt``) and ``idx`` (int32, ``nl``) are scratch.

    The C code stops a sub-block after a sweep that changed nothing. A lane whose sweep
    changed nothing is at a fixed point (the same state sweeps the same way), so sweeping it
    again changes nothing either: after the first sweep, which changes about a fifth of the
    lanes of a real weight, the lanes it changed are gathered side by side and only they
    sweep on (until none changes, at most four more times), then go back to their places.
    Codes and sums are the C code's."""
    amax = st[0]
    mx = st[1]
    isc = st[2]
    sumlx = st[3]
    suml2 = st[4]
    changed = st[5]
    wsx = st[6]
    ws2 = st[7]
    _signed_max(n, nl, xt, amax, mx)
    for j in range(nl):
        isc[j] = _f32(-nmax) / mx[j]
        sumlx[j] = _f32(0.0)
        suml2[j] = _f32(0.0)
    lo = np.int32(-nmax)
    hi = np.int32(nmax - 1)
    for i in range(n):
        for j in range(nl):
            v = xt[i, j]
            q = max(lo, min(hi, _nearest_int32(isc[j] * v)))
            Lt[i, j] = q
            w = v * v
            lf = _f32(q)
            sumlx[j] += w * v * lf
            suml2[j] += w * lf * lf
    if _q3_sweep(n, nl, nmax, xt, Lt, sumlx, suml2, changed):
        m = 0
        for j in range(nl):
            if changed[j] != 0:
                idx[m] = j
                m += 1
        for i in range(n):
            for k in range(m):
                xw[i, k] = xt[i, idx[k]]
                Lw[i, k] = Lt[i, idx[k]]
        for k in range(m):
            wsx[k] = sumlx[idx[k]]
            ws2[k] = suml2[idx[k]]
        for _ in range(4):
            if not _q3_sweep(n, m, nmax, xw, Lw, wsx, ws2, changed):
                break
        for i in range(n):
            for k in range(m):
                Lt[i, idx[k]] = Lw[i, k]
        for k in range(m):
            sumlx[idx[k]] = wsx[k]
            suml2[idx[k]] = ws2[k]
    for j in range(nl):
        live = amax[j] >= GROUP_MAX_EPS
        scale_out[j] = sumlx[j] / suml2[j] if live and suml2[j] > 0 else _f32(0.0)
    for i in range(n):
        for j in range(nl):
            Lt[i, j] = Lt[i, j] + np.int32(nmax) if amax[j] >= GROUP_MAX_EPS else np.int32(0)
