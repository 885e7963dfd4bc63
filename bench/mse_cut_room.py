"""How much of the integer MSE search's swept range its cuts could still give up: per channel of
``bench/mse_speed.py``'s weight, the scales the search sweeps (between its two cuts,
:mod:`quantscope.core.kernels.scale_cuts`, placed here at the error of the min/max scale; the
search places them at the best of it and its incumbents, a little lower) against the scales
whose error really is at most that one (1,200 scales from 0.85 to 1.12 times the min/max scale
evaluated exactly, each at the zero points around the one that puts the least value at the
lowest code). Below 0.85 the search's grid starts another box, which its bound drops, so the
swept range starts there at the lowest.

The sweep's work grows with the breakpoints its elements cross in the range swept, about
``Σ|x| · (1/s_lo − 1/s_hi)``: printed is that share of the swept range that lies outside the
scales that could matter -- what tighter provable cuts would save the sweep.

Run: ``PYTHONPATH=src python bench/mse_cut_room.py [--channels 16]``.
"""

from __future__ import annotations

import argparse

import numpy as np

from mse_speed import weight  # the integer search's bench weight (bench/ is on the path)


def _error(x: np.ndarray, s: float, qmin: int, qmax: int, symmetric: bool) -> float:
    """The least exact error at scale ``s``: symmetric codes keep zero point 0, affine ones
    take the best of those around the one that puts the least value at ``qmin``."""
    if symmetric:
        zs = range(0, 1)
    else:
        z = round(qmin - min(float(x[0]), 0.0) / s)
        zs = range(max(z - 4, qmin), min(z + 5, qmax + 1))
    return min(float(((x - s * (np.clip(np.rint(x / s) + z, qmin, qmax) - z)) ** 2).sum())
               for z in zs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--channels", type=int, default=16, help="channels measured (of 4096)")
    args = ap.parse_args()
    from quantscope.core.kernels.mse_bound import unit_prefix
    from quantscope.core.kernels.scale_cuts import clip_cut, clip_spread_cut, spread_cut
    from quantscope.core.schemes.qparams import code_range

    w = weight(4096, 4096)[: args.channels]
    print(f"{args.channels} channels of the 4096x4096 bench weight, 8 bits; scales as multiples "
          "of the min/max scale (median over channels)")
    print(f"{'scheme':11s} {'cut lo':>7s} {'cut hi':>7s} {'needed lo':>9s} {'needed hi':>9s} "
          f"{'swept but not needed':>21s}")
    for symmetric in (True, False):
        qmin, qmax = code_range(8, symmetric=symmetric)
        rows = []
        for row in w:
            x32 = np.sort(row)
            x = x32.astype(np.float64)
            lo, hi = min(x[0], 0.0), max(x[-1], 0.0)
            if symmetric:
                s0, a_lo, a_hi = max(-lo, hi) / qmax, qmin, qmin
            else:
                s0, a_lo, a_hi = (hi - lo) / (qmax - qmin), qmin - qmax, 0
            s_mm = float(np.float32(s0))
            bar = _error(x, s_mm, qmin, qmax, symmetric)
            pre = np.empty((x.size + 1, 4))
            unit_prefix(x32, 0, x.size, pre)
            c_lo = clip_cut(x32, 0, x.size, s_mm, 1e-4 * s_mm, a_lo, a_hi, qmax - qmin, bar)
            if c_lo > 1e-4 * s_mm:  # as the search: the clipping and the spread together
                c_lo = clip_spread_cut(x32, 0, x.size, c_lo, s_mm, a_lo, a_hi, qmax - qmin, bar,
                                       pre, 0)
            c_hi = spread_cut(x32, 0, x.size, s_mm, 2.0 * s_mm, bar, pre, 0)
            c_lo = max(c_lo, 0.85 * s_mm)  # the search's grid point below the min/max scale
            scales = s_mm * np.linspace(0.85, 1.12, 1200)
            ok = scales[np.array([_error(x, s, qmin, qmax, symmetric) <= bar for s in scales])]
            need_lo, need_hi = ok.min(), ok.max()
            total = np.abs(x).sum()
            swept = total * (1 / c_lo - 1 / c_hi)
            needed = total * (1 / need_lo - 1 / need_hi)
            rows.append((c_lo / s_mm, c_hi / s_mm, need_lo / s_mm, need_hi / s_mm,
                         1 - needed / swept))
        med = np.median(np.array(rows), axis=0)
        print(f"{'symmetric' if symmetric else 'asymmetric':11s} {med[0]:7.3f} {med[1]:7.3f} "
              f"{med[2]:9.3f} {med[3]:9.3f} {100 * med[4]:20.0f}%")


if __name__ == "__main__":
    main()
