"""NVFP4's ``method="mse"``: each block's E4M3 scale is the exact minimiser of its error
among every E4M3 scale the flavour stores, given the tensor scale -- checked against an
exhaustive search that quantizes the whole tensor at every candidate with the engine's own
``quantize`` and ``dequantize`` (not the search's loop), on real tensors and constructed ties.
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams
from quantscope.core.calibration.format_choose import (
    block_amax,
    nvfp4_modelopt_scales,
    nvfp4_params,
    nvfp4_torchao_scales,
)
from quantscope.core.formats.elements import cast
from quantscope.core.formats.nvfp4_mse import E2M1_MIDPOINTS, _errors, e4m3_candidates

SAMPLES = Path(__file__).resolve().parents[2] / "src/quantscope/resources/samples"
FLAVOURS = ("nvfp4", "nvfp4_modelopt")


def _spec(x: np.ndarray, name: str):
    amax = block_amax(x, -1, 16)
    return (nvfp4_modelopt_scales if name == "nvfp4_modelopt" else nvfp4_torchao_scales)(amax)


def exhaustive(x: np.ndarray, name: str) -> tuple[np.ndarray, int]:
    """Every block's scale of least error by trying every candidate on every block, and the
    number of blocks with several minimisers, the specification's scale not among them. Each
    block's error is the sequential float64 sum of its elements'
    ``(x - dequantize(quantize(x)))²``; ties go to the specification's scale, else to the
    first minimiser above it, else to the last one below it (the order the search meets)."""
    ts, spec = _spec(x, name)
    cands = e4m3_candidates(2.0 ** -9 if name == "nvfp4_modelopt" else 2.0 ** -6)
    n = x.shape[-1]
    nb = -(-n // 16)
    k0 = np.searchsorted(cands, spec.astype(np.float32))
    assert np.array_equal(cands[k0], spec.astype(np.float32))
    errors = np.empty((cands.size, *spec.shape))
    for k, c in enumerate(cands):
        bs8 = np.full(spec.shape, c, np.float32).astype(ml_dtypes.float8_e4m3fn)
        p = nvfp4_params(name, ts, bs8, -1, True, "minmax")
        d = x.astype(np.float64) - p.dequantize(p.quantize(x)).astype(np.float64)
        d2 = np.zeros((*x.shape[:-1], nb * 16))
        d2[..., :n] = d * d  # a partial block's padding adds +0.0 after its terms: no change
        errors[k] = np.cumsum(d2.reshape(*x.shape[:-1], nb, 16), axis=-1)[..., -1]
    ks = np.arange(cands.size).reshape(-1, *([1] * spec.ndim))
    rank = np.where(ks == k0, 0, np.where(ks > k0, ks - k0, cands.size - 1 - ks))
    best = errors.min(axis=0)
    chosen = np.where(errors == best, rank, cands.size).argmin(axis=0)
    spec_error = np.take_along_axis(errors, k0[None], 0)[0]
    ties = int((((errors == best).sum(axis=0) > 1) & (spec_error != best)).sum())
    return cands[chosen], ties


def _real() -> dict[str, np.ndarray]:
    out = {}
    for name in ("layer0_query_weight", "layer0_ffn_gelu_activations",
                 "layer0_output_activations", "layer0_intermediate_dense_weight"):
        out[name] = np.load(SAMPLES / f"{name}.npy", allow_pickle=False)
    return out


REAL = _real()


def _constructed() -> dict[str, np.ndarray]:
    """Small dyadic values (exact errors: many candidates tie), an outlier beside blocks far
    below it (torchao's floor 2^-6 and ModelOpt's 2^-9 differ there), zero blocks, and rows
    whose last block is partial."""
    rng = np.random.default_rng(31)
    dyadic = (rng.integers(-12, 13, size=(64, 96)) / 8.0).astype(np.float32)
    dyadic[::7, 5] = 40.0
    dyadic[3, 16:32] = 0.0
    outlier = rng.normal(0, 0.01, size=(48, 300)).astype(np.float32)
    outlier[7, 123] = 1e4
    outlier[9, :] = 0.0
    tiny = (rng.standard_t(3, size=(33, 77)) * 1e-3).astype(np.float32)
    return {"dyadic": dyadic, "outlier": outlier, "tiny_partial": tiny}


CONSTRUCTED = _constructed()


@pytest.mark.parametrize("name", FLAVOURS)
@pytest.mark.parametrize("label", [*REAL, *CONSTRUCTED])
def test_block_scales_are_the_exhaustive_minimisers(name, label):
    x = {**REAL, **CONSTRUCTED}[label]
    p = choose_qparams(x, format=name, method="mse")
    want, _ = exhaustive(x, name)
    got = p.block_scales.astype(np.float32)
    assert np.array_equal(got, want), (label, int((got != want).sum()))
    ts, spec = _spec(x, name)
    assert p.tensor_scale == float(ts)  # the tensor scale is the format's, not searched
    assert p.method == "mse"
    plain = choose_qparams(x, format=name)
    mse, minmax = analyze(x, p), analyze(x, plain)
    assert mse.mse <= minmax.mse
    if label in REAL:  # the search moves real blocks both ways and gains on every tensor
        assert (got > spec.astype(np.float32)).any() and (got < spec.astype(np.float32)).any()
        assert mse.sqnr_db > minmax.sqnr_db


@pytest.mark.parametrize("name", FLAVOURS)
def test_constructed_ties_are_met_and_resolved_in_order(name):
    """The dyadic tensor (and the real weight) have blocks whose least error is reached by
    several scales, none the specification's: the search and the exhaustive order agree on
    which one (above), so the tie rule was put to the test."""
    assert exhaustive(CONSTRUCTED["dyadic"], name)[1] > 0
    assert exhaustive(REAL["layer0_query_weight"], name)[1] > 0


def test_zero_blocks_keep_the_specification_scale():
    x = CONSTRUCTED["outlier"]
    for name in FLAVOURS:
        p = choose_qparams(x, format=name, method="mse")
        _, spec = _spec(x, name)
        assert np.array_equal(p.block_scales[9].astype(np.float32),
                              spec[9].astype(np.float32))


def test_the_flavours_floors_bound_the_search():
    x = CONSTRUCTED["outlier"]
    torchao = choose_qparams(x, format="nvfp4", method="mse").block_scales.astype(np.float32)
    modelopt = choose_qparams(x, format="nvfp4_modelopt",
                              method="mse").block_scales.astype(np.float32)
    assert torchao.min() >= 2.0 ** -6
    assert modelopt.min() < 2.0 ** -6  # beside the outlier ModelOpt's subnormal scales win


@pytest.mark.compiles("the search's inlined error sum, called on its own only here")
def test_the_searchs_cast_is_the_engines_on_every_midpoint():
    """The search casts ``|x|`` scaled by counting E2M1's midpoints below it: on each midpoint
    (a tie), its float32 neighbours, and values from 0 to 8 and beyond, the error it sums is
    the engine's cast's (block scale 1, tensor scale 1: the scaled value is ``|x|``)."""
    mids = np.array(E2M1_MIDPOINTS, np.float32)
    near = np.concatenate([mids, np.nextafter(mids, np.float32(0)),
                           np.nextafter(mids, np.float32(np.inf)),
                           np.linspace(0, 8, 4001, dtype=np.float32),
                           np.array([0.0, 6.0, 6.5, 7.0, 1e30, np.inf, np.nan], np.float32)])
    x = np.concatenate([near, -near]).astype(np.float32)
    finite = np.where(np.isfinite(x), x, np.float32(0.0))
    want = (finite.astype(np.float64) - cast(finite, "float4_e2m1fn").astype(np.float64)) ** 2
    for i in range(x.size):
        err, zero = _errors(x, i, i + 1, np.float32(1.0), np.float32(1.0), np.float32(1.0),
                            True)
        assert err == want[i], (x[i], err, want[i])
        assert zero == (want[i] if cast(finite[i:i + 1], "float4_e2m1fn")[0] == 0 else 0.0)
