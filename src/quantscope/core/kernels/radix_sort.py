"""Sorting float32 tensors at the machine's speed: one radix pass, then sorts in cache, in parallel.

``np.sort`` runs on one core, and on a tensor far larger than the caches. The prepared
statistics need the finite values of a tensor in ascending order (NaN and inf are counted and
left out), which this gives in three steps, each split between the cores (compiled loops and
NumPy's sort both release the GIL):

1. count: each thread counts, over its share of ``x``, the finite values by the top 11 bits of
   their keys (sign, exponent, two mantissa bits: a bucket is a quarter of a binade);
2. scatter: each thread moves its share, in order, to the slots its counts reserve -- the
   buckets are now in order, each holding its values in any order;
3. sort each bucket in place with ``np.sort`` (a bucket is small enough to stay in cache), the
   buckets dealt to the threads in shares of about equal size.

A float32's key is its bit pattern with the sign bit flipped for positive values and every bit
flipped for negative ones: unsigned keys order as the values, so every value of a bucket lies
below every value of the next (``-0.0`` and ``+0.0``, which compare equal, fall in neighbouring
buckets). The result equals ``np.sort`` of the finite values. Memory: the output alone (4 bytes
per element; no scratch array).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import as_completed

import numpy as np

from quantscope.core.kernels import parallel as _threads
from quantscope.core.kernels.jit_cache import njit
from quantscope.core.kernels.parallel import collector_paused, parallel, submit
from quantscope.core.kernels.read_only import read_only

#: Key bits that pick the bucket (the top ones).
BUCKET_BITS = 11
BUCKETS = 1 << BUCKET_BITS
_SHIFT = 32 - BUCKET_BITS
#: Bucket sorts are handed out in about this many pieces per thread (progress between them).
PIECES_PER_THREAD = 8

_jit = njit(nogil=True, error_model="numpy")


@_jit
def _count(bits, lo, hi, hist) -> int:
    """Count ``bits[lo:hi]``'s finite values (float32 bit patterns) by bucket."""
    n = 0
    for i in range(lo, hi):
        b = np.int64(bits[i])
        if (b & 0x7F800000) != 0x7F800000:
            key = b ^ (((b >> 31) * 0x7FFFFFFF) | 0x80000000)
            hist[key >> _SHIFT] += 1
            n += 1
    return n


@_jit
def _scatter(bits, lo, hi, dst, offsets) -> None:
    """Move the finite values of ``bits[lo:hi]`` to ``dst`` at ``offsets[bucket]``
    (incremented), in order."""
    for i in range(lo, hi):
        b = np.int64(bits[i])
        if (b & 0x7F800000) == 0x7F800000:
            continue
        key = b ^ (((b >> 31) * 0x7FFFFFFF) | 0x80000000)
        d = key >> _SHIFT
        p = offsets[d]
        offsets[d] = p + 1
        dst[p] = bits[i]


def _shares(n: int, threads: int) -> np.ndarray:
    """Share ``t`` of ``n`` positions is ``[b[t], b[t + 1])``."""
    return np.array([t * n // threads for t in range(threads + 1)], np.int64)


def _sort_buckets(out: np.ndarray, edges: np.ndarray, k0: int, k1: int) -> None:
    for k in range(k0, k1):
        a, b = edges[k], edges[k + 1]
        if b - a > 1:
            out[a:b].sort()


def sort_finite(x: np.ndarray, progress: Callable[[float], None] | None = None
                ) -> tuple[np.ndarray, int]:
    """The finite values of float32 ``x`` in ascending order, and how many were not finite.

    ``progress(fraction)`` is called along the way; an exception raised by it stops the sort
    (that is how a caller cancels). Equal to ``np.sort`` of the finite values.
    """
    flat = np.ascontiguousarray(x, np.float32).reshape(-1)
    n, threads = flat.size, _threads.THREADS
    bits = read_only(flat.view(np.uint32))  # one loop for writable and read-only tensors
    share = _shares(n, threads)
    hist = np.zeros((threads, BUCKETS), np.int64)
    m = int(sum(parallel(_count, [(bits, share[t], share[t + 1], hist[t])
                                  for t in range(threads)])))
    if progress:
        progress(0.1)
    out = np.empty(m, np.float32)
    offsets = np.cumsum(hist.T.ravel()).reshape(BUCKETS, threads).T  # [thread, bucket]
    offsets = np.ascontiguousarray(offsets - hist)
    parallel(_scatter, [(bits, share[t], share[t + 1], out.view(np.uint32), offsets[t])
                        for t in range(threads)])
    if progress:
        progress(0.4)
    edges = np.concatenate([[0], np.cumsum(hist.sum(axis=0))])
    pieces = threads * PIECES_PER_THREAD
    cuts = np.unique(np.concatenate([[0], np.searchsorted(
        edges, [m * i // pieces for i in range(1, pieces)]), [BUCKETS]]))
    jobs = [(out, edges, int(cuts[i]), int(cuts[i + 1])) for i in range(cuts.size - 1)]
    if threads == 1:
        for done, job in enumerate(jobs, 1):
            _sort_buckets(*job)
            if progress:
                progress(0.4 + 0.6 * done / len(jobs))
    else:
        with collector_paused():  # the pool's threads never collect (core.parallel)
            futures = [submit(_sort_buckets, *job) for job in jobs]
            for done, future in enumerate(as_completed(futures), 1):
                future.result()
                if progress:
                    progress(0.4 + 0.6 * done / len(jobs))
    return out, n - m
