"""The MSE-optimal E4M3 scale of every NVFP4 block (``method="mse"``), given the tensor scale.

NVFP4 stores one FP32 scale ``t`` per tensor and one E4M3 scale ``b`` per block of 16; an
element is cast to E2M1 from ``x · f32(f32(1 / t) / b)`` (torchao) or ``x / f32(b · t)``
(ModelOpt), saturated at 6, and dequantized by ``f32(t · b)``. With ``method="mse"`` the
tensor scale stays the one the format computes (``amax / (6 · 448)``), and each block's ``b``
is, among every E4M3 value the flavour stores, the one whose total squared error over the
block is least: the 119 values of ``[2^-6, 448]`` for torchao (its clamp), all 126 positive
finite E4M3 values (``[2^-9, 448]``) for ModelOpt. Each candidate's error is computed with the
report's arithmetic (its products and quotients in float32, a cast equal to its cast, the
squared differences summed in float64), so the chosen scale is the exact minimiser over that
set -- the block scales given the tensor scale; the tensor scale itself is not searched.
Time is linear in the blocks (a few dozen evaluations of 16 elements each, on the engine's
threads); memory beyond the tensor a few arrays of one entry per block (indices and scales,
about 25 bytes per block: 1.6 bytes per element; 1.9 measured with the amax and the
specification's scales, ``tracemalloc``, on a 4096x4096 weight).

Not every candidate is computed; two cuts drop only candidates that cannot be better, each
proven for the rounded arithmetic, not only for exact numbers:

* above a candidate ``b``: the elements that ``b`` casts to 0 (``|scaled x| <= 0.25``) cost
  ``x²`` each, ``Z(b)`` together. A larger ``b'`` scales every element by a multiplier no
  larger (a float32 quotient and product are monotone in their operands), so those elements
  cast to 0 again: ``err(b') >= Z(b') >= Z(b)`` (float64 sums of non-negative terms in the
  same order only grow with more or larger terms). Once ``Z(b)`` reaches the best error, no
  larger scale is better;
* below a candidate ``b``: no dequantized value exceeds ``m(b) = f32(6 · f32(t · b))`` in
  magnitude, and ``m`` grows with ``b``, so an element beyond ``m(b)`` costs at least
  ``(|x| - m(b))²`` there and at every smaller scale: ``err(b') >= C(b') >= C(b)`` with ``C``
  the sum of those. Once ``C(b)`` reaches the best error, neither ``b`` nor a smaller scale is
  better.

Ties: the specification's scale when it is a minimiser (a block its rule already quantizes
best is left as it is), else the first minimiser met going up from it, then going down: the
cuts drop only candidates that are at best equal and come later in that order.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from quantscope.core.formats.elements import ELEMENTS
from quantscope.core.formats.mx_mse import _clip_cost
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.parallel import THREADS, parallel
from quantscope.core.kernels.read_only import read_only

_jit = njit(nogil=True, error_model="numpy")
#: The elements of a block and their largest value (E2M1).
BLOCK, _E2M1_MAX = 16, 6.0
#: E2M1's non-negative values, and the midpoints between them: a tie at a midpoint goes to
#: the even value (0, 1, 2, 4), so at 0.25, 1.25, 2.5 and 5 it stays below (``>`` counts it
#: not), at 0.75, 1.75 and 3.5 it goes above (``>=``).
_E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
#: Blocks from which the search is split between the engine's threads (a block costs a few
#: dozen evaluations of 16 elements: far more than a pass's element).
PARALLEL_BLOCKS = 1 << 12


def e4m3_candidates(floor: float) -> np.ndarray:
    """Every finite E4M3 value from ``floor`` to 448, ascending (float32)."""
    v = ELEMENTS["float8_e4m3fn"].values
    return v[v >= floor].astype(np.float32)


@njit(nogil=True, error_model="numpy", inline="always")
def _errors(x, a, b, c, t, inv_t, use_inv):
    """Total squared error of the finite elements of ``x[a:b]`` at block scale ``c`` (tensor
    scale ``t``, ``inv_t = f32(1 / t)``), and the part of it from elements cast to 0.

    The error of ``x`` is that of ``|x|`` (the cast and the products are symmetric), and
    ``|x|`` scaled is cast to E2M1 by counting the midpoints of its grid below it
    (:data:`E2M1_MIDPOINTS`), with no branch: the same value as the engine's cast, ties to
    the even value, saturated at 6 (``tests/core/test_nvfp4_mse.py`` holds them equal on every
    midpoint and its float32 neighbours). Inlined in the search, a third faster than a call
    to the general cast per element."""
    sf = np.float32(np.float64(t) * np.float64(c))
    inv = np.float32(np.float64(inv_t) / np.float64(c))
    err = 0.0
    zero = 0.0
    for i in range(a, b):
        xv = x[i]
        xa = abs(xv) if xv - xv == 0 else np.float32(0.0)  # a non-finite element adds 0
        v = np.float32(np.float64(xa) * np.float64(inv)) if use_inv else np.float32(
            np.float64(xa) / np.float64(sf))
        k = (np.int64(v > 0.25) + np.int64(v >= 0.75) + np.int64(v > 1.25)
             + np.int64(v >= 1.75) + np.int64(v > 2.5) + np.int64(v >= 3.5) + np.int64(v > 5.0))
        r = _E2M1_GRID[k]
        d = np.float64(xa) - np.float64(np.float32(np.float32(r) * sf))
        e2 = d * d
        err += e2
        zero += e2 * np.float64(r == 0)  # a product, not a branch the data would mispredict
    return err, zero


@_jit
def _clip_floor(x, a, b, c, t):
    """``C(c)``: Σ (|x| − m)² over the finite elements of ``x[a:b]`` beyond the largest
    dequantized magnitude ``m`` at block scale ``c`` (module doc)."""
    sf = np.float32(np.float64(t) * np.float64(c))
    return _clip_cost(x, a, b, np.float64(np.float32(np.float32(_E2M1_MAX) * sf)))


@_jit
def mse_block_scales(x2d, lo, hi, cands, spec, t, inv_t, use_inv, out):
    """For blocks ``lo..hi`` of ``x2d`` (counted row by row, :data:`BLOCK` elements each along
    the rows): the index into ``cands`` of the block scale of least error (module doc), the
    specification's index ``spec[j]`` first, into ``out[j]``."""
    n = x2d.shape[1]
    nb = spec.shape[0] // x2d.shape[0] if x2d.shape[0] else 0
    for j in range(lo, hi):
        row = x2d[j // nb]
        a = (j % nb) * BLOCK
        b = min(a + BLOCK, n)
        k0 = spec[j]
        best, zero = _errors(row, a, b, cands[k0], t, inv_t, use_inv)
        best_k = k0
        k = k0 + 1
        while zero < best and k < cands.size:  # up, until the zeros alone cost the best
            err, zero = _errors(row, a, b, cands[k], t, inv_t, use_inv)
            if err < best:
                best, best_k = err, k
            k += 1
        k = k0 - 1
        while k >= 0 and _clip_floor(row, a, b, cands[k], t) < best:  # down, until clipping
            err, _ = _errors(row, a, b, cands[k], t, inv_t, use_inv)
            if err < best:
                best, best_k = err, k
            k -= 1
        out[j] = best_k


def nvfp4_mse_scales(xf: np.ndarray, tensor_scale: np.float32, spec: np.ndarray, *,
                     modelopt: bool) -> np.ndarray:
    """The E4M3 block scales of least error (module doc) for ``xf``'s blocks of 16 along its
    last axis, given the FP32 ``tensor_scale`` and the specification's block scales ``spec``
    (E4M3, the per-group parameter shape): torchao's arithmetic and floor ``2^-6``, or
    ModelOpt's (``modelopt``) and floor ``2^-9``."""
    cands = e4m3_candidates(2.0 ** -9 if modelopt else 2.0 ** -6)
    n = xf.shape[-1]
    # one loop for either kind of tensor (a read-only view is no copy)
    x2d = read_only(np.ascontiguousarray(xf, np.float32).reshape(-1, n))
    spec32 = np.ascontiguousarray(spec.astype(np.float32)).reshape(-1)
    k0 = np.searchsorted(cands, spec32).astype(np.int64)
    assert np.array_equal(cands[k0], spec32), "a specification's scale outside the candidates"
    t = np.float32(tensor_scale)
    inv_t = np.float32(np.float32(1.0) / t)
    out = np.empty(k0.size, np.int64)

    def share(lo: int, hi: int) -> None:
        mse_block_scales(x2d, lo, hi, cands, k0, t, inv_t, not modelopt, out)

    n_blocks = k0.size
    t_count = THREADS if n_blocks >= PARALLEL_BLOCKS else 1
    parallel(share, [(i * n_blocks // t_count, (i + 1) * n_blocks // t_count)
                     for i in range(t_count)])
    return cands[out].reshape(spec.shape).astype(ml_dtypes.float8_e4m3fn)
