"""The synthetic tensors: reproducible from (name, shape, seed, parameters), shaped as promised,
and each with the property that makes it worth quantizing."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core.tensors.generators import GENERATORS, MAX_ELEMENTS, GeneratorError, generate

GENERATOR_NAMES = ("normal", "uniform", "relu", "gelu", "lognormal", "laplace", "student_t",
                   "outliers", "weights", "bimodal")


def test_registry_lists_exactly_the_command_line_names():
    assert tuple(GENERATORS) == GENERATOR_NAMES


@pytest.mark.parametrize("name", GENERATOR_NAMES)
def test_same_arguments_same_bits_other_seed_other_bits(name):
    shape = (64, 96)
    a = generate(name, shape, seed=7)
    b = generate(name, shape, seed=7)
    c = generate(name, shape, seed=8)
    assert a.dtype == np.float32 and a.shape == shape and a.flags.c_contiguous
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.isfinite(a).all()


@pytest.mark.parametrize("name", GENERATOR_NAMES)
def test_defaults_in_registry_are_what_generate_uses(name):
    gen = GENERATORS[name]
    explicit = generate(name, (32, 64), seed=1, **gen.defaults())
    assert np.array_equal(explicit, generate(name, (32, 64), seed=1))
    for p in gen.params:
        assert p.minimum <= p.default <= p.maximum and p.help


def test_distribution_shapes():
    n = (200, 500)
    assert generate("relu", n).min() == 0.0
    assert 0.45 < np.mean(generate("relu", n) == 0) < 0.55
    assert generate("lognormal", n).min() > 0
    u = generate("uniform", n, low=-2.0, high=3.0)
    assert u.min() >= -2.0 and u.max() < 3.0
    g = generate("gelu", n)
    assert -0.1701 < g.min() < 0 < g.max()  # GELU's negative lobe bottoms out near -0.17
    assert np.median(generate("normal", n, mean=5.0, std=0.1)) == pytest.approx(5.0, abs=0.01)
    b = generate("bimodal", n, separation=10.0, std=0.5)
    assert np.mean(np.abs(b) < 2) < 0.001  # nothing between the modes
    heavy = generate("student_t", n, df=1.5)
    light = generate("normal", n)
    assert np.abs(heavy).max() > 10 * np.abs(light).max()


def test_outliers_are_exactly_count_values_at_magnitude():
    x = generate("outliers", (100, 100), seed=3, std=0.5, count=7, magnitude=40.0)
    big = np.abs(x) == np.float32(20.0)
    assert big.sum() == 7
    assert np.abs(x[~big]).max() < 4.0


def test_weight_channels_spread_over_the_ratio():
    w = generate("weights", (256, 2048), seed=0, std=0.01, ratio=1000.0)
    stds = w.std(axis=1)
    assert stds.min() == pytest.approx(0.01, rel=0.3)
    assert stds.max() / stds.min() > 300
    with pytest.raises(GeneratorError, match="2-D"):
        generate("weights", (4, 4, 4))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"name": "nope"}, "unknown generator"),
    ({"name": "normal", "std": -1.0}, r"outside \[1e-12"),
    ({"name": "normal", "std": float("nan")}, "outside"),
    ({"name": "normal", "sigma": 1.0}, "no parameter"),
    ({"name": "outliers", "count": 2.5}, "integer"),
    ({"name": "uniform", "low": 1.0, "high": 1.0}, "low < high"),
    ({"name": "normal", "shape": ()}, "at least one dimension"),
    ({"name": "normal", "shape": (3, 0)}, ">= 1"),
    ({"name": "normal", "shape": (MAX_ELEMENTS, 2)}, "limit"),
    ({"name": "normal", "seed": -1}, "seed"),
])
def test_bad_requests_raise_precise_errors(kwargs, match):
    with pytest.raises(GeneratorError, match=match):
        generate(**kwargs)
