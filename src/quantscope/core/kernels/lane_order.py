"""The order in which the compiled loops add a row of float64 terms, and the same sum in NumPy.

A sum of float64 terms depends on the order of its additions. Compiled with licence to
reassociate, a loop adds in whatever order the machine's vector width suggests (4 lanes with
AVX2, 8 or 32 with AVX-512), so no other program -- NumPy in particular -- could reproduce its
result bit for bit, and an exact NumPy stand-in for a compiled report (what the window can show
while its loops still compile) was impossible. The order here is fixed and the same on every
machine:

* the terms go to :data:`LANES` running sums starting at ``+0.0``, term ``i`` to lane
  ``i % LANES``, each lane added strictly in order (a last short round reaches only its first
  lanes);
* the lanes are then combined by halves: ``lane[j] + lane[j + 16]`` for ``j < 16``, then
  ``+ [j + 8]``, ``+ [j + 4]``, ``+ [j + 2]``, ``+ [j + 1]``.

The compiled form (:func:`quantscope.core.kernels.lane_sums.sum_in_lanes`) keeps the lanes in
one LLVM vector of 32 float64, added element by element as IEEE requires whatever the machine's
registers (four AVX-512 or eight AVX2 registers); :func:`lane_sum` here is its twin, equal to it
with ``==``. This module imports NumPy alone.
"""

from __future__ import annotations

import numpy as np

#: Running sums a row's terms are dealt to: four AVX-512 vectors (eight AVX2 ones), enough
#: independent chains to hide the adder's latency, so the sum keeps pace with the any-order loop
#: it replaced (16 lanes, one chain of two vectors, took 0.20 ns per term against its 0.14-0.18;
#: 32 lanes 0.14, as fast).
LANES = 32
# Numba keys the cache of a loop by its own file's contents only: a change here reaches the
# kernels that inline the sum (sorted_kernel, direct_kernel) once their files change too.


def lane_sum(terms: np.ndarray) -> np.ndarray:
    """The fixed-order sum of float64 ``terms`` along the last axis, for every leading index:
    the compiled :func:`~quantscope.core.kernels.lane_sums.sum_in_lanes` of each row, bit for
    bit.

    ``terms`` of shape ``(..., n)`` (any float64 values; an empty row sums to ``+0.0``)."""
    terms = np.asarray(terms, np.float64)
    n = terms.shape[-1]
    rounds, rest = divmod(n, LANES)
    blocks = terms[..., :rounds * LANES].reshape((*terms.shape[:-1], rounds, LANES))
    acc = np.zeros((*terms.shape[:-1], LANES))
    for r in range(rounds):  # one round at a time, in order (a NumPy reduction may regroup)
        acc += blocks[..., r, :]
    acc[..., :rest] += terms[..., rounds * LANES:]
    return combine_lanes(acc)


def combine_lanes(acc: np.ndarray) -> np.ndarray:
    """The lanes (last axis, :data:`LANES` long) combined by halves, as the compiled sum does."""
    width = acc.shape[-1]
    while width > 1:
        width //= 2
        acc = acc[..., :width] + acc[..., width:2 * width]
    return acc[..., 0]
