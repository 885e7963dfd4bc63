"""The exact multiple-choice knapsack behind a bits plan: one option per item, total cost within
a capacity, total error minimal.

Each item (a tensor) has options (number formats), each with an integer cost (the exact
number of bits it stores: elements times element bits plus every scale and zero point) and an
error. The textbook exact solution is a dynamic programme over the cost axis: after ``i``
items, ``best[i][c]`` is the least error of any choice for those items that costs exactly ``c``
bits, and ``best[i+1][c] = min_k best[i][c - cost_ik] + err_ik``. Costs are integers, so the
programme is exact on the grid of whole bits (any coarser step, the gcd of all costs, gives the
same cells).

:func:`solve` runs that programme over the cells that matter only: the reachable costs that no
cheaper cell beats (the Pareto frontier of ``(cost, error)``). A cell ``(c, e)`` with another
cell ``(c', e')``, ``c' <= c`` and ``e' <= e``, can be dropped: any completion of it is at least
as good, and at least as feasible, from the other. So every optimal choice's prefix is kept or
beaten by one that is, and the frontier's best final cell is the dense programme's optimum --
the same answer, in as many cells as there are distinct useful costs rather than as many as
there are bits of capacity (a model's capacity is billions of bits). Ties keep the earlier
option, so the answer is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quantscope.core.tensors.validate import EngineValueError

#: A frontier larger than this many cells is refused (memory for the back-pointers).
MAX_CELLS = 20_000_000


@dataclass(frozen=True)
class KnapsackSolution:
    """The chosen option of each item, its total cost and its total error."""

    choice: tuple[int, ...]
    cost: int
    error: float
    cells: int  # frontier cells visited, the work done


def solve(costs: Sequence[Sequence[int]], errors: Sequence[Sequence[float]],
          capacity: int) -> KnapsackSolution:
    """The options, one per item, of least total error whose total cost is at most
    ``capacity`` (see the module docstring).

    Raises
    ------
    EngineValueError
        For mismatched or empty option lists, a negative or non-finite error, or a capacity
        below the cheapest choice (the message gives that cheapest cost).
    """
    if len(costs) != len(errors):
        raise EngineValueError(f"{len(costs)} cost lists but {len(errors)} error lists")
    cost_arrays, err_arrays = [], []
    for i, (c, e) in enumerate(zip(costs, errors, strict=True)):
        ca, ea = np.asarray(c, np.int64), np.asarray(e, np.float64)
        if ca.ndim != 1 or ca.size == 0 or ca.shape != ea.shape:
            raise EngineValueError(f"item {i} needs one error per cost and at least one option")
        if not (np.isfinite(ea).all() and (ea >= 0).all()) or (ca < 0).any():
            raise EngineValueError(f"item {i}: errors must be finite and >= 0, costs >= 0")
        cost_arrays.append(ca)
        err_arrays.append(ea)
    cheapest = sum(int(c.min()) for c in cost_arrays)
    if cheapest > capacity:
        raise EngineValueError(f"no choice fits: the cheapest costs {cheapest} bits, the "
                               f"capacity is {capacity}")
    # The frontier: costs ascending, errors strictly descending.
    f_cost = np.zeros(1, np.int64)
    f_err = np.zeros(1, np.float64)
    parents: list[np.ndarray] = []
    options: list[np.ndarray] = []
    cells = 1
    # the least the items after each one must still spend: a cell above capacity minus that
    # can never be completed, so it is dropped at once
    rest_min = [*np.cumsum([int(c.min()) for c in cost_arrays][::-1])[::-1].tolist(), 0]
    for i, (ca, ea) in enumerate(zip(cost_arrays, err_arrays, strict=True)):
        limit = capacity - rest_min[i + 1]
        nc = (f_cost[:, None] + ca[None, :]).ravel()
        ne = (f_err[:, None] + ea[None, :]).ravel()
        keep = np.flatnonzero(nc <= limit)
        # by cost, then error, then (parent, option) order: np.lexsort is stable
        order = keep[np.lexsort((keep, ne[keep], nc[keep]))]
        nc, ne = nc[order], ne[order]
        best_before = np.minimum.accumulate(np.concatenate([[np.inf], ne[:-1]]))
        front = ne < best_before
        order, f_cost, f_err = order[front], nc[front], ne[front]
        parents.append(order // ca.size)
        options.append(order % ca.size)
        cells += f_cost.size
        if cells > MAX_CELLS:
            raise EngineValueError(f"the plan's frontier passed {MAX_CELLS:,} cells at item "
                                   f"{i}: too many distinct costs to solve exactly")
    at = int(f_err.size - 1)  # errors descend along the frontier: the last is the least
    cost, error = int(f_cost[at]), float(f_err[at])
    choice = []
    for i in range(len(cost_arrays) - 1, -1, -1):
        choice.append(int(options[i][at]))
        at = int(parents[i][at])
    return KnapsackSolution(tuple(reversed(choice)), cost, error, cells)


def exhaustive(costs: Sequence[Sequence[int]], errors: Sequence[Sequence[float]],
               capacity: int) -> KnapsackSolution:
    """Every combination tried (small problems only): the reference :func:`solve` is tested
    against."""
    import itertools

    best: tuple[float, int, tuple[int, ...]] | None = None
    for combo in itertools.product(*(range(len(c)) for c in costs)):
        cost = sum(int(costs[i][k]) for i, k in enumerate(combo))
        if cost > capacity:
            continue
        err = 0.0
        for i, k in enumerate(combo):
            err += float(errors[i][k])
        if best is None or err < best[0]:
            best = (err, cost, combo)
    if best is None:
        raise EngineValueError("no choice fits the capacity")
    return KnapsackSolution(best[2], best[1], best[0], 0)
