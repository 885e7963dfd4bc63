"""INT4 as GPTQ and AutoAWQ compute it: the engine's parameters, codes and dequantized values
equal the tools' own formulas run in PyTorch, element for element.

The oracles are transcriptions, run in torch float32 as the tools run them:

* GPTQ: ``Quantizer.find_params(weight=True)`` with ``perchannel=True`` and ``quantize`` of
  ModelCloud/GPTQModel ``gptqmodel/quantization/quantizer.py`` (commit 008db26b0a89, the same
  rule as IST-DASLab/gptq ``quant.py``), applied to each group of 128 columns as GPTQ's
  ``fasterquant`` does with ``groupsize=128`` (round to nearest: no Hessian update);
* AWQ: the ``zero_point`` branch of ``pseudo_quantize_tensor`` of casper-hansen/AutoAWQ
  ``awq/quantize/quantizer.py``.

Neither package installs on a CPU-only machine without building CUDA kernels, so their
functions are copied here line for line (torch ops, same order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oracles import need
from quantscope.core import analyze, choose_qparams, prepare
from quantscope.core.formats.catalog import bits_per_element

torch = need("torch")

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources" / "samples"


def gptq_find_params(x, bits: int, sym: bool):
    """GPTQModel ``Quantizer.find_params(x, weight=True)``, ``perchannel=True``: rows of x."""
    maxq = torch.tensor(2**bits - 1)
    x = x.flatten(1)
    tmp = torch.zeros(x.shape[0])
    xmin = torch.minimum(x.min(1)[0], tmp)
    xmax = torch.maximum(x.max(1)[0], tmp)
    if sym:
        xmax = torch.maximum(torch.abs(xmin), xmax)
        tmp = xmin < 0
        if torch.any(tmp):
            xmin[tmp] = -xmax[tmp]
    tmp = (xmin == 0) & (xmax == 0)
    xmin[tmp] = -1
    xmax[tmp] = +1
    scale = (xmax - xmin) / maxq
    if sym:
        zero = torch.full_like(scale, (maxq + 1) / 2)
    else:
        zero = torch.round(-xmin / scale)
    return scale.reshape(-1, 1), zero.reshape(-1, 1), maxq


def gptq_quantize(x, scale, zero, maxq):
    """GPTQModel ``quantize``, returning the codes as well as ``scale * (q - zero)``."""
    q = torch.clamp(torch.round(x / scale) + zero, 0, maxq)
    return q, scale * (q - zero)


def gptq_rtn(w: np.ndarray, sym: bool, group: int = 128):
    """Each group of ``group`` columns through find_params and quantize (GPTQ's per-group
    parameters along the input dimension)."""
    wt = torch.from_numpy(w)
    codes, values, scales, zeros = [], [], [], []
    for i in range(0, w.shape[1], group):
        g = wt[:, i:i + group]
        s, z, maxq = gptq_find_params(g, 4, sym)
        q, v = gptq_quantize(g, s, z, maxq)
        codes.append(q)
        values.append(v)
        scales.append(s)
        zeros.append(z)
    return (torch.cat(codes, 1).numpy(), torch.cat(values, 1).numpy(),
            torch.cat(scales, 1).numpy(), torch.cat(zeros, 1).numpy())


def awq_pseudo_quantize(w: np.ndarray, group: int = 128, w_bit: int = 4):
    """AutoAWQ ``pseudo_quantize_tensor`` with ``zero_point=True`` (codes returned too)."""
    wt = torch.from_numpy(w)
    org_w_shape = wt.shape
    wt = wt.reshape(-1, group)
    max_val = wt.amax(dim=1, keepdim=True)
    min_val = wt.amin(dim=1, keepdim=True)
    max_int = 2**w_bit - 1
    min_int = 0
    scales = (max_val - min_val).clamp(min=1e-5) / max_int
    zeros = (-torch.round(min_val / scales)).clamp_(min_int, max_int)
    q = torch.clamp(torch.round(wt / scales) + zeros, min_int, max_int)
    wq = (q - zeros) * scales
    return (q.reshape(org_w_shape).numpy(), wq.reshape(org_w_shape).numpy(),
            scales.view(org_w_shape[0], -1).numpy(), zeros.view(org_w_shape[0], -1).numpy())


def tensors() -> dict[str, np.ndarray]:
    """Real tensors (the bundled MiniLM query weight and GELU activations as a [tokens,
    features] matrix) and constructed groups: all zero, all positive, all negative, ties at
    half a step, one outlier, a span under AWQ's floor, a constant group."""
    out = {"minilm_query": np.load(SAMPLES / "layer0_query_weight.npy"),
           "minilm_intermediate": np.load(SAMPLES / "layer0_intermediate_dense_weight.npy")}
    gelu = np.load(SAMPLES / "layer0_ffn_gelu_activations.npy")
    out["minilm_gelu"] = gelu.reshape(-1, gelu.shape[-1]).astype(np.float32)
    rng = np.random.default_rng(11)
    c = rng.standard_normal((8, 512)).astype(np.float32)
    c[0] = 0.0  # an all-zero row: four all-zero groups
    c[1] = np.abs(c[1])  # no negative value: GPTQ's symmetric xmin stays 0
    c[2] = -np.abs(c[2])
    c[3, :128] = np.arange(128, dtype=np.float32) - 63.5  # ties at half a step
    c[4, 7] = 1e3
    c[5] = np.float32(1e-6) * c[5]  # a span under AWQ's 1e-5 floor
    c[6, :128] = 3.0  # one value repeated: AWQ's min = max
    out["constructed"] = c
    return out


@pytest.mark.parametrize("name", ["gptq_int4_g128", "gptq_int4_g128_asym"])
def test_gptq_parameters_codes_and_values_equal_gptqmodel(name):
    sym = name == "gptq_int4_g128"
    compared = 0
    for label, w in tensors().items():
        codes, values, scales, zeros = gptq_rtn(w, sym)
        p = choose_qparams(w, format=name)
        assert np.array_equal(p.scale, scales), label
        assert np.array_equal(p.zero_point, zeros.astype(np.int32)), label
        q = p.quantize(w)
        assert np.array_equal(q, codes.astype(q.dtype)), label
        assert np.array_equal(p.dequantize(q), values), label
        r = analyze(w, p)
        sse = np.sum((w.astype(np.float64) - values.astype(np.float64)) ** 2)
        assert r.mse * r.n == pytest.approx(sse, rel=1e-12), label
        compared += w.size
    assert compared > 1_000_000


def test_awq_parameters_codes_and_values_equal_autoawq():
    compared = 0
    for label, w in tensors().items():
        codes, values, scales, zeros = awq_pseudo_quantize(w)
        p = choose_qparams(w, format="awq_int4_g128")
        assert np.array_equal(p.scale, scales), label
        assert np.array_equal(p.zero_point, zeros.astype(np.int32)), label
        q = p.quantize(w)
        assert np.array_equal(q, codes.astype(q.dtype)), label
        assert np.array_equal(p.dequantize(q), values), label
        compared += w.size
    assert compared > 1_000_000


def test_gptq_symmetric_is_sixteen_levels_around_eight_not_the_narrow_rule():
    """A group symmetric about zero: GPTQ's scale is 2·amax/15 and the zero point 8, a grid
    of -8..7 steps. ±amax is ±7.5 steps in exact arithmetic; the float32 scale 2/15 rounds up,
    so ±amax lands at ±7.4999996 steps and both ends round inward, to codes 1 and 15. The
    narrow rule uses the same 15 codes with a step of amax/7, 7 % wider."""
    w = np.linspace(-1, 1, 128, dtype=np.float32).reshape(1, 128)
    gptq = choose_qparams(w, format="gptq_int4_g128")
    narrow = choose_qparams(w, format="int4_g128")
    assert gptq.scale[0, 0] == np.float32(np.float32(2) / np.float32(15))
    assert gptq.zero_point[0, 0] == 8 and (gptq.qmin, gptq.qmax) == (0, 15)
    assert (narrow.qmin, narrow.qmax) == (-7, 7)
    r = analyze(w, gptq)
    assert (r.clipped_below, r.clipped_above) == (0, 0)
    assert list(np.unique(gptq.quantize(w))) == list(range(1, 16))
    assert r.sqnr_db - analyze(w, narrow).sqnr_db == pytest.approx(0.4956, abs=1e-3)


def test_bits_per_element_count_the_stored_fp16_scale_and_4_bit_zero():
    w = np.zeros((256, 4096), np.float32)
    for name in ("gptq_int4_g128", "gptq_int4_g128_asym", "awq_int4_g128"):
        assert bits_per_element(choose_qparams(w, format=name), w.size) == 4 + 20 / 128


def test_the_tools_rules_take_no_other_method_and_report_through_the_prepared_path():
    w = np.load(SAMPLES / "layer0_query_weight.npy")
    with pytest.raises(Exception, match="method 'minmax'"):
        choose_qparams(w, format="awq_int4_g128", method="mse")
    prep = prepare(w)
    for name in ("gptq_int4_g128", "awq_int4_g128"):
        p = choose_qparams(w, format=name, prepared=prep)
        assert np.array_equal(p.scale, choose_qparams(w, format=name).scale)
        fast, direct = prep.analyze(p), analyze(w, p)
        assert fast.sqnr_db == pytest.approx(direct.sqnr_db, abs=1e-8)
        assert np.array_equal(fast.code_histogram, direct.code_histogram)
