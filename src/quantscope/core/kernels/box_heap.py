"""The heap of scale boxes that the branch-and-bound searches keep, lowest bound first:
compiled loops shared by the integer search (:mod:`quantscope.core.kernels.mse_bound`) and the
number formats' (:mod:`quantscope.core.formats.grid_bound`).

A box is five parallel arrays' entries: its bound (the key), its scales ``s1 .. s2`` and the
zero points ``za .. zb`` still open in it. The arrays are a unit's scratch, reused from one
unit to the next, so :func:`heap_add` grows them itself when a push would overflow: the
search keeps whatever arrays it returns.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels.jit_cache import njit

_jit = njit(nogil=True, error_model="numpy")
#: Inlined into each search's loop: a call per push would be a call per box.
_inline = njit(nogil=True, error_model="numpy", inline="always")


@_jit
def heap_push(key, s1, s2, za, zb, size, v_key, v_s1, v_s2, v_za, v_zb):
    """Add a box to a heap of ``size`` entries that has room for it."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if key[parent] <= v_key:
            break
        key[i], s1[i], s2[i], za[i], zb[i] = key[parent], s1[parent], s2[parent], \
            za[parent], zb[parent]
        i = parent
    key[i], s1[i], s2[i], za[i], zb[i] = v_key, v_s1, v_s2, v_za, v_zb


@_inline
def heap_add(key, s1, s2, za, zb, size, v_key, v_s1, v_s2, v_za, v_zb):
    """:func:`heap_push`, first doubling the arrays when they are full: returns the arrays
    to keep (the same ones unless they grew)."""
    if size + 1 > key.size:
        cap = 2 * key.size
        key = grow(key, cap)
        s1 = grow(s1, cap)
        s2 = grow(s2, cap)
        za = grow_int(za, cap)
        zb = grow_int(zb, cap)
    heap_push(key, s1, s2, za, zb, size, v_key, v_s1, v_s2, v_za, v_zb)
    return key, s1, s2, za, zb


@_jit
def heap_pop(key, s1, s2, za, zb, size):
    """Remove the root of a heap of ``size`` entries (the caller read it first)."""
    last = size - 1
    v_key, v_s1, v_s2, v_za, v_zb = key[last], s1[last], s2[last], za[last], zb[last]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= last:
            break
        if c + 1 < last and key[c + 1] < key[c]:
            c += 1
        if v_key <= key[c]:
            break
        key[i], s1[i], s2[i], za[i], zb[i] = key[c], s1[c], s2[c], za[c], zb[c]
        i = c
    if last > 0:
        key[i], s1[i], s2[i], za[i], zb[i] = v_key, v_s1, v_s2, v_za, v_zb


@_inline
def heap_take(key, s1, s2, za, zb, size):
    """The root of a heap of ``size`` entries ``(key, s1, s2, za, zb)``, removed."""
    root = key[0], s1[0], s2[0], za[0], zb[0]
    heap_pop(key, s1, s2, za, zb, size)
    return root


@_inline
def heap_halves(key, s1, s2, za, zb, size, v_key, lo, mid, hi, v_za, v_zb):
    """:func:`heap_add` of the two halves ``lo .. mid`` and ``mid .. hi`` of a box, both with
    bound ``v_key`` and zero points ``v_za .. v_zb``: the arrays to keep, and the new size."""
    key, s1, s2, za, zb = heap_add(key, s1, s2, za, zb, size, v_key, lo, mid, v_za, v_zb)
    key, s1, s2, za, zb = heap_add(key, s1, s2, za, zb, size + 1, v_key, mid, hi, v_za, v_zb)
    return key, s1, s2, za, zb, size + 2


@_inline
def heap_of(key, s1, s2, za, zb, pts, v_za, v_zb):
    """A heap of the boxes between consecutive scales ``pts`` (bound ``-inf``, zero points
    ``v_za .. v_zb``): the arrays to keep, and its size."""
    size = 0
    for i in range(pts.size - 1):
        key, s1, s2, za, zb = heap_add(key, s1, s2, za, zb, size, -np.inf, pts[i], pts[i + 1],
                                       v_za, v_zb)
        size += 1
    return key, s1, s2, za, zb, size


@_jit
def grow(v, cap):
    """A copy of float array ``v`` with room for ``cap`` entries."""
    w = np.empty(cap, v.dtype)
    w[:v.size] = v
    return w


@_jit
def grow_int(v, cap):
    """A copy of integer array ``v`` with room for ``cap`` entries."""
    w = np.empty(cap, np.int64)
    w[:v.size] = v
    return w
