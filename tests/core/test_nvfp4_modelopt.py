"""NVFP4 both ways: ``nvfp4`` is torchao's (tests/core/test_formats_torchao.py checks it bit for
bit), ``nvfp4_modelopt`` is ModelOpt's ``NVFP4QTensor`` -- checked here against ModelOpt itself:
tensor scale, E4M3 block scales, E2M1 codes and dequantized values, 0 mismatches."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import numpy as np
import pytest

from oracles import need
from quantscope.core import analyze, choose_qparams, prepare
from quantscope.core.formats.catalog import bits_per_element

torch = need("torch")


@functools.cache
def _qtensor():
    """ModelOpt's quantized tensors, imported by the first test that calls ModelOpt rather
    than when the file is collected: the import (torch's compiler and transformers with it)
    took about 6 s of CPU in every test worker, and only the worker that runs this file
    uses it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return need("modelopt.torch.quantization.qtensor")

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources" / "samples"


def with_outlier(x: np.ndarray, value: float = 1e4) -> np.ndarray:
    """``x`` as a matrix with one element (a third of the way in) set to ``value``."""
    y = np.ascontiguousarray(x.reshape(-1, x.shape[-1]), np.float32).copy()
    y.flat[y.size // 3] = value
    return y


def tensors() -> dict[str, np.ndarray]:
    """The bundled tensors, each also with a 1e4 outlier (most block scales then fall below
    2^-6 of the tensor scale's range), and constructed blocks: all zero, ties of E2M1 at every
    midpoint, values at the E4M3 subnormal floor."""
    out = {}
    for stem in ("layer0_query_weight", "layer0_ffn_gelu_activations",
                 "layer0_intermediate_dense_weight"):
        x = np.load(SAMPLES / f"{stem}.npy").astype(np.float32)
        out[stem] = x.reshape(-1, x.shape[-1])
        out[stem + "+outlier"] = with_outlier(x)
    c = np.random.default_rng(5).standard_normal((6, 64)).astype(np.float32)
    c[0, :16] = 0.0  # an all-zero block: ModelOpt sets its scale to 1.0
    c[1, :16] = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -1.25, -1.75,
                 -2.5, -3.5, -5.0, 0.0]  # ties at every E2M1 midpoint (block scale 1)
    c[2] *= 1e-3
    c[3, 0] = 300.0
    out["constructed"] = c
    return out


def modelopt_nvfp4(x: np.ndarray):
    """ModelOpt's quantize and dequantize: (block scale bits, tensor scale, codes, values)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qt, bs, ts = _qtensor().NVFP4QTensor.quantize(torch.from_numpy(x.copy()), 16)
        values = qt.dequantize(dtype=torch.float32, scale=bs, double_scale=ts,
                               block_sizes={-1: 16}).numpy()
    packed = qt._quantized_data.numpy()
    codes = np.empty((*packed.shape[:-1], packed.shape[-1] * 2), np.uint8)
    codes[..., 0::2] = packed & 0x0F
    codes[..., 1::2] = packed >> 4
    return bs.view(torch.uint8).numpy(), float(ts), codes, values


def test_scales_codes_and_values_equal_modelopt():
    compared = 0
    for label, x in tensors().items():
        bs, ts, codes, values = modelopt_nvfp4(x)
        p = choose_qparams(x, format="nvfp4_modelopt")
        assert p.tensor_scale == ts, label
        assert np.array_equal(p.block_scales.view(np.uint8), bs), label
        mine = p.quantize(x).view(np.uint8)
        # ModelOpt takes its sign bit from x < 0, so an exact -0.0 becomes +0 there; the
        # cast keeps the sign (both dequantize to zero)
        negzero = (x == 0) & np.signbit(x)
        assert np.array_equal(np.where(negzero, 0, mine), codes), label
        assert np.array_equal(p.dequantize(p.quantize(x)), values), label
        r = analyze(x, p)
        sse = np.sum((x.astype(np.float64) - values.astype(np.float64)) ** 2)
        assert r.mse * r.n == pytest.approx(sse, rel=1e-12), label
        compared += x.size
    assert compared > 2_000_000


def test_the_two_nvfp4s_differ_only_where_torchao_floors_the_block_scale():
    """On the GELU activations with one 1e4 outlier, 6,479 of the 18,912 block scales differ:
    exactly the blocks whose scale torchao raised to its floor 2^-6 while ModelOpt keeps it
    down to 2^-9; every other block scale, code and value is the same."""
    gelu = np.load(SAMPLES / "layer0_ffn_gelu_activations.npy")
    x = with_outlier(gelu)
    t, m = choose_qparams(x, format="nvfp4"), choose_qparams(x, format="nvfp4_modelopt")
    assert t.tensor_scale == m.tensor_scale
    differ = t.block_scales.view(np.uint8) != m.block_scales.view(np.uint8)
    assert (int(differ.sum()), differ.size) == (6479, 18912)
    floored = t.block_scales.astype(np.float32) == np.float32(2.0 ** -6)
    assert np.array_equal(differ, floored & (m.block_scales.astype(np.float32) < 2.0 ** -6))
    rt, rm = analyze(x, t), analyze(x, m)
    assert rm.sqnr_db - rt.sqnr_db == pytest.approx(0.111, abs=0.001)
    assert bits_per_element(m, x.size) == bits_per_element(t, x.size)


def test_prepared_reports_keep_the_two_apart():
    x = with_outlier(np.load(SAMPLES / "layer0_query_weight.npy"))
    prep = prepare(x)
    t = prep.analyze(choose_qparams(x, format="nvfp4"))
    m = prep.analyze(choose_qparams(x, format="nvfp4_modelopt"))
    assert m is not t and m.sqnr_db > t.sqnr_db + 1.0
