"""The plan's knapsack against every combination, on random and adversarial small problems."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.calibration.plan_knapsack import exhaustive, solve
from quantscope.core.tensors.validate import EngineValueError


def _total(costs, errors, choice):
    return (sum(costs[i][k] for i, k in enumerate(choice)),
            sum(errors[i][k] for i, k in enumerate(choice)))


@pytest.mark.parametrize("seed", range(40))
def test_solve_equals_exhaustive_search(seed):
    rng = np.random.default_rng(seed)
    items = int(rng.integers(1, 7))
    costs = [rng.integers(0, 60, int(rng.integers(1, 5))).tolist() for _ in range(items)]
    errors = [rng.choice([0.0, 0.5, 1.0, 2.0, 3.5], len(c)).tolist() if seed % 3 == 0
              else rng.random(len(c)).tolist() for c in costs]  # ties every third problem
    cheapest = sum(min(c) for c in costs)
    capacity = cheapest + int(rng.integers(0, 80))
    got, ref = solve(costs, errors, capacity), exhaustive(costs, errors, capacity)
    cost, err = _total(costs, errors, got.choice)
    assert cost == got.cost <= capacity
    assert err == pytest.approx(got.error, rel=1e-12, abs=1e-15)
    assert got.error == pytest.approx(ref.error, rel=1e-12, abs=1e-15)


def test_capacity_is_a_hard_limit_by_one_bit():
    costs, errors = [[10, 20], [10, 20]], [[1.0, 0.0], [1.0, 0.0]]
    assert solve(costs, errors, 40).choice == (1, 1)
    assert solve(costs, errors, 39).error == 1.0  # one bit short: one item must give way
    assert solve(costs, errors, 30).cost == 30


def test_refusals():
    with pytest.raises(EngineValueError, match="cheapest costs 20 bits"):
        solve([[10], [10, 12]], [[0.0], [0.0, 0.0]], 19)
    with pytest.raises(EngineValueError, match="finite"):
        solve([[1]], [[np.nan]], 5)
    with pytest.raises(EngineValueError, match="one error per cost"):
        solve([[1, 2]], [[0.0]], 5)
