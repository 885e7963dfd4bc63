"""Synthetic tensors with known shapes: the distributions whose quantization people argue about.

Each generator is reproducible from ``(name, shape, seed, parameters)`` alone, so a screenshot, a
session file or a bug report can name a tensor in one line and anyone can rebuild it bit for bit.
The registry :data:`GENERATORS` describes every parameter (default, bounds, meaning) so the
window's source panel builds its form from it instead of hard-coding widgets.

>>> from quantscope.core.tensors.generators import generate
>>> x = generate("outliers", (64, 128), seed=1, count=3, magnitude=30.0)
>>> x.dtype, x.shape
(dtype('float32'), (64, 128))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quantscope.errors import QuantscopeError

#: Largest tensor a generator will build (2^28 float32 values = 1 GiB): beyond that a typo in a
#: shape field would freeze the machine instead of raising.
MAX_ELEMENTS = 1 << 28


class GeneratorError(QuantscopeError, ValueError):
    """An unknown generator, a bad shape or a parameter outside its documented bounds."""


@dataclass(frozen=True)
class Param:
    """One numeric parameter of a generator, with what a form needs to edit it."""

    name: str
    default: float | int
    minimum: float | int
    maximum: float | int
    help: str
    integer: bool = False

    def check(self, value) -> float | int:
        """Return ``value`` converted to the parameter's type, or raise if out of bounds."""
        try:
            v = int(value) if self.integer else float(value)
        except (TypeError, ValueError):
            raise GeneratorError(f"parameter {self.name!r} must be a number, got {value!r}"
                                 ) from None
        if self.integer and v != value and not isinstance(value, str):
            raise GeneratorError(f"parameter {self.name!r} must be an integer, got {value!r}")
        if not (self.minimum <= v <= self.maximum) or (not self.integer and not math.isfinite(v)):
            raise GeneratorError(f"parameter {self.name!r} = {value!r} is outside "
                                 f"[{self.minimum}, {self.maximum}]")
        return v


@dataclass(frozen=True)
class Generator:
    """A named distribution: its label for menus, its parameters and its default shape."""

    name: str
    label: str
    description: str
    params: tuple[Param, ...]
    default_shape: tuple[int, ...]
    draw: Callable[..., np.ndarray]
    needs_2d: bool = False

    def defaults(self) -> dict[str, float | int]:
        """Parameter name -> default value."""
        return {p.name: p.default for p in self.params}


def _normal(rng, shape, mean, std):
    x = rng.standard_normal(shape, dtype=np.float32)
    x *= np.float32(std)
    x += np.float32(mean)
    return x


def _uniform(rng, shape, low, high):
    if not low < high:
        raise GeneratorError(f"uniform needs low < high, got low={low}, high={high}")
    return rng.uniform(low, high, shape).astype(np.float32)


def _relu(rng, shape, mean, std):
    x = _normal(rng, shape, mean, std)
    np.maximum(x, 0, out=x)
    return x


def _gelu(rng, shape, mean, std):
    # The tanh form of GELU (Hendrycks & Gimpel), as BERT/GPT-2 compute it: skewed, a long
    # positive tail and a small negative lobe down to about -0.17.
    x = _normal(rng, shape, mean, std)
    inner = np.float32(math.sqrt(2 / math.pi)) * (x + np.float32(0.044715) * x * x * x)
    return (np.float32(0.5) * x * (np.float32(1) + np.tanh(inner))).astype(np.float32)


def _lognormal(rng, shape, mean, sigma):
    return rng.lognormal(mean, sigma, shape).astype(np.float32)


def _laplace(rng, shape, loc, scale):
    return rng.laplace(loc, scale, shape).astype(np.float32)


def _student_t(rng, shape, df, scale):
    return (rng.standard_t(df, shape) * scale).astype(np.float32)


def _outliers(rng, shape, std, count, magnitude):
    x = _normal(rng, shape, 0.0, std)
    count = min(int(count), x.size)
    if count:
        where = rng.choice(x.size, size=count, replace=False)
        signs = np.where(rng.random(count) < 0.5, -1.0, 1.0)
        x.reshape(-1)[where] = (signs * magnitude * std).astype(np.float32)
    return x


def _weights(rng, shape, std, ratio):
    # Channel scales spread log-uniformly over [std, std * ratio]: the per-channel spread that
    # makes per-tensor weight quantization waste most codes on the small channels.
    out = shape[0]
    channel_std = std * ratio ** rng.random(out)
    x = rng.standard_normal(shape, dtype=np.float32)
    x *= channel_std.astype(np.float32)[:, None]
    return x


def _bimodal(rng, shape, separation, std, weight):
    x = _normal(rng, shape, 0.0, std)
    right = rng.random(shape) < weight
    x += np.where(right, np.float32(separation / 2), np.float32(-separation / 2))
    return x


_F = float("inf")
_SHAPE = (256, 1024)

#: Every generator by its command-line name, in menu order.
GENERATORS: dict[str, Generator] = {g.name: g for g in (
    Generator("normal", "Normal", "Gaussian values: the textbook case, symmetric, light tails.",
              (Param("mean", 0.0, -1e6, 1e6, "centre"),
               Param("std", 1.0, 1e-12, 1e6, "standard deviation")), _SHAPE, _normal),
    Generator("uniform", "Uniform", "Flat between low and high: every code equally busy.",
              (Param("low", -1.0, -1e6, 1e6, "lower bound"),
               Param("high", 1.0, -1e6, 1e6, "upper bound")), _SHAPE, _uniform),
    Generator("relu", "ReLU(normal)", "max(normal, 0): half the values are exactly zero, none "
              "negative, so a symmetric scheme wastes its negative codes.",
              (Param("mean", 0.0, -1e6, 1e6, "centre before the ReLU"),
               Param("std", 1.0, 1e-12, 1e6, "spread before the ReLU")), _SHAPE, _relu),
    Generator("gelu", "GELU(normal)", "GELU of a normal: skewed activations like a transformer "
              "FFN's, a long positive tail and a small negative lobe.",
              (Param("mean", 0.0, -1e6, 1e6, "centre before the GELU"),
               Param("std", 1.5, 1e-12, 1e6, "spread before the GELU")), _SHAPE, _gelu),
    Generator("lognormal", "Log-normal", "Strictly positive with a heavy right tail.",
              (Param("mean", 0.0, -50, 50, "mean of the log"),
               Param("sigma", 1.0, 1e-6, 10, "std of the log")), _SHAPE, _lognormal),
    Generator("laplace", "Laplace", "A sharp peak at the centre and exponential tails, like "
              "most trained weights.",
              (Param("loc", 0.0, -1e6, 1e6, "centre"),
               Param("scale", 1.0, 1e-12, 1e6, "spread")), _SHAPE, _laplace),
    Generator("student_t", "Student-t", "Heavy polynomial tails: rare values far out stretch "
              "min/max ranges.",
              (Param("df", 3.0, 0.5, 1e6, "degrees of freedom (smaller: heavier tails)"),
               Param("scale", 1.0, 1e-12, 1e6, "spread")), _SHAPE, _student_t),
    Generator("outliers", "Normal + outliers", "A normal tensor with a few injected outliers "
              "at ±magnitude × std: the case where min/max scaling wastes the buckets.",
              (Param("std", 1.0, 1e-12, 1e6, "spread of the bulk"),
               Param("count", 4, 0, 1_000_000, "how many outliers", integer=True),
               Param("magnitude", 20.0, 0.0, 1e6, "outlier size in units of std")),
              _SHAPE, _outliers),
    Generator("weights", "Weight [out, in]", "A weight matrix whose output-channel scales "
              "spread log-uniformly over a ratio: why weights are quantized per channel.",
              (Param("std", 0.02, 1e-12, 1e6, "smallest channel's std"),
               Param("ratio", 100.0, 1.0, 1e6, "largest / smallest channel std")),
              (512, 1024), _weights, needs_2d=True),
    Generator("bimodal", "Bimodal", "Two normal modes: a gap in the middle that still costs "
              "codes.",
              (Param("separation", 6.0, 0.0, 1e6, "distance between the modes"),
               Param("std", 1.0, 1e-12, 1e6, "spread of each mode"),
               Param("weight", 0.5, 0.0, 1.0, "share of values in the right mode")),
              _SHAPE, _bimodal),
)}


def check_shape(shape, *, needs_2d: bool = False) -> tuple[int, ...]:
    """Validate a shape: positive integer dimensions, at least one, at most MAX_ELEMENTS."""
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise GeneratorError(f"shape must be a sequence of integers, got {shape!r}") from None
    if not dims:
        raise GeneratorError("shape needs at least one dimension (a 0-d tensor has no buckets "
                             "worth looking at)")
    if any(d < 1 for d in dims):
        raise GeneratorError(f"every dimension must be >= 1, got {dims}")
    if needs_2d and len(dims) != 2:
        raise GeneratorError(f"this generator builds an [out, in] matrix; shape {dims} is not 2-D")
    if math.prod(dims) > MAX_ELEMENTS:
        raise GeneratorError(f"shape {dims} has {math.prod(dims):,} elements; the limit is "
                             f"{MAX_ELEMENTS:,}")
    return dims


def generate(name: str, shape=None, seed: int = 0, **params) -> np.ndarray:
    """Build the tensor ``name`` (float32) from its shape, seed and parameters.

    Parameters not given take their defaults; unknown names and out-of-bounds values raise
    :class:`GeneratorError` with the bounds in the message. The same arguments always give the
    same bits (NumPy's PCG64 generator, seeded).
    """
    gen = GENERATORS.get(name)
    if gen is None:
        raise GeneratorError(f"unknown generator {name!r}; available: {', '.join(GENERATORS)}")
    dims = check_shape(gen.default_shape if shape is None else shape, needs_2d=gen.needs_2d)
    unknown = set(params) - {p.name for p in gen.params}
    if unknown:
        raise GeneratorError(f"generator {name!r} has no parameter(s) {sorted(unknown)}; it "
                             f"takes {[p.name for p in gen.params]}")
    values = {p.name: p.check(params.get(p.name, p.default)) for p in gen.params}
    try:
        seed = int(seed)
    except (TypeError, ValueError):
        raise GeneratorError(f"seed must be an integer, got {seed!r}") from None
    if seed < 0:
        raise GeneratorError(f"seed must be >= 0, got {seed}")
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        x = gen.draw(rng, dims, **values)
    return np.ascontiguousarray(x, dtype=np.float32)
