"""The compiled per-group pass (an LLM weight's groups of 32 are too many to sort) gives the
blocked NumPy pass's numbers: the same codes, counts, clips, extremes and largest error bit for
bit, the error sums to the last bits, under every rounding rule and arithmetic, with NaN, inf
and ties, groups along any axis and a ragged last group; and the groups' minimum and maximum
from one compiled pass are NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams
from quantscope.core.schemes import qparams as qparams_module
from quantscope.core.stats import analyze as analyze_module

EXACT = ("n", "below", "above", "codes", "x_min", "x_max", "max_abs")


def _tensor(shape, seed=1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 0.02).astype(np.float32)
    pick = rng.choice(x.size, 400, replace=False)
    x.flat[pick] = np.round(x.flat[pick] * 400) / 400  # values on code ties
    x.flat[rng.choice(x.size, 30, replace=False)] *= 40  # outliers beyond a clip
    return x


def _numpy_pass(x, p, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(analyze_module, "GROUP_COMPILED_MIN", 1 << 62)
        return analyze(x, p)


@pytest.fixture
def compiled_from_small(monkeypatch):
    """The compiled passes from a few hundred thousand elements (not only from LLM sizes)."""
    monkeypatch.setattr(analyze_module, "GROUP_COMPILED_MIN", 1 << 18)
    monkeypatch.setattr(qparams_module, "GROUP_MIN_MAX_COMPILED", 1 << 18)


@pytest.mark.parametrize(("shape", "axis", "group"), [
    ((1100, 256), -1, 32), ((1100, 250), -1, 32), ((1030, 260), 0, 64)])
@pytest.mark.parametrize(("arithmetic", "rounding"), [
    ("divide", "half_even"), ("multiply", "half_even"), ("divide", "half_away"),
    ("fma", "half_even"), ("multiply_add", "half_away"), ("divide64", "half_even")])
def test_the_compiled_group_pass_is_the_numpy_pass(shape, axis, group, arithmetic, rounding,
                                                   monkeypatch, compiled_from_small):
    x = _tensor(shape)
    x.flat[:7] = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0]
    for symmetric in (True, False):
        p = choose_qparams(x, bits=4, symmetric=symmetric, granularity="group", axis=axis,
                           group_size=group)
        # a scale below the range's: clipped elements on both sides
        p = p.with_(arithmetic=arithmetic, rounding=rounding, scale=p.scale * np.float32(0.6))
        assert x.size >= analyze_module.GROUP_COMPILED_MIN  # the compiled pass runs
        fast, ref = analyze(x, p), _numpy_pass(x, p, monkeypatch)
        assert fast.clipped_below > 0 and fast.clipped_above > 0 and fast.n_nonfinite == 3
        assert np.array_equal(fast.code_histogram, ref.code_histogram)
        for k in EXACT:
            assert np.array_equal(getattr(fast.unit_totals, k), getattr(ref.unit_totals, k)), k
        for k in ("round_err", "clip_err", "sig"):
            np.testing.assert_allclose(getattr(fast.unit_totals, k),
                                       getattr(ref.unit_totals, k), rtol=1e-12, atol=0)


@pytest.mark.parametrize(("shape", "group"), [((700, 512), 32), ((3, 300, 333), 128)])
def test_the_compiled_group_min_max_is_numpys(shape, group, monkeypatch, compiled_from_small):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    for bad in (np.nan, np.inf, -np.inf):
        x.flat[rng.choice(x.size, 40, replace=False)] = bad
    x[..., :group] = np.nan  # groups with no finite value: (0, 0)
    assert x.size >= qparams_module.GROUP_MIN_MAX_COMPILED
    fast = qparams_module.unit_min_max(x, -1, group)
    monkeypatch.setattr(qparams_module, "GROUP_MIN_MAX_COMPILED", 1 << 62)
    ref = qparams_module.unit_min_max(x, -1, group)
    assert fast[2] == ref[2] > 0
    for a, b in zip(fast[:2], ref[:2], strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
