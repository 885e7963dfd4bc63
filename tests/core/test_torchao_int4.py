"""torchao's int4 weight-only formats equal torchao's own ``quant_primitives`` bit for bit:
``_choose_qparams_affine_tinygemm`` (scales and float zero points), ``_quantize_affine_tinygemm``
(codes) and ``_dequantize_affine_tinygemm`` (values), run by torchao on the same tensors rounded
to bfloat16 -- on every bundled real tensor, the bf16 checkpoint's weights, and constructed
tensors full of exact ties. The reports' error sums equal a float64 sum over torchao's values."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pytest

from oracles import need
from quantscope.core import analyze, choose_qparams, prepare
from quantscope.core.formats.catalog import bits_per_element
from quantscope.core.tensors.validate import EngineValueError

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources" / "samples"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "minilm"
NAMES = ("torchao_int4_g32", "torchao_int4_g64", "torchao_int4_g128")


@pytest.fixture(scope="module")
def ao():
    torch = need("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)  # torchao's notes about CUDA-only extensions
        need("torchao")
        from torchao.quantization import quant_primitives as qp
        logging.disable(logging.NOTSET)
    return torch, qp


def torchao_int4(ao, x: np.ndarray, group: int):
    """torchao on ``x`` rounded to bfloat16: codes, scales, zeros, dequantized values."""
    torch, qp = ao
    t = torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(torch.bfloat16)
    t = t.reshape(-1, x.shape[-1])
    bs = (1, group)
    s, z = qp._choose_qparams_affine_tinygemm(
        t, qp.MappingType.ASYMMETRIC, bs, torch.int32, 0, 15, scale_dtype=torch.bfloat16,
        zero_point_dtype=torch.bfloat16)
    q = qp._quantize_affine_tinygemm(t, bs, s, z, torch.int32, 0, 15)
    dq = qp._dequantize_affine_tinygemm(q, bs, s, z, torch.int32, 0, 15,
                                        output_dtype=torch.bfloat16)
    return (q.numpy().reshape(x.shape), s.float().numpy().reshape(-1),
            z.float().numpy().reshape(-1), dq.float().numpy().reshape(x.shape))


def _real_tensors() -> dict[str, np.ndarray]:
    from quantscope.io import load_for_analysis

    out = {p.stem: np.load(p) for p in sorted(SAMPLES.glob("*.npy"))}
    out.update({f"shared/{p.stem}": np.load(p) for p in sorted(SHARED.glob("*.npy"))})
    for name in ("encoder.layer.0.attention.self.key.weight",
                 "encoder.layer.0.intermediate.dense.weight",
                 "encoder.layer.0.output.dense.weight"):
        out[name] = load_for_analysis(SAMPLES / "layer0_bf16.safetensors", name)[0]
    return out


def tie_tensor(seed: int = 0) -> np.ndarray:
    """Groups whose scaled values land exactly on .5 (and on every code): a group spanning
    ``[m, m + 15 · 2^e]`` has scale ``2^e`` and zero ``m + 8 · 2^e``, so ``m + (k + 0.5) · 2^e``
    is a tie for every ``k``; powers of two keep every step exact in bfloat16."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(64):
        e = float(2.0 ** rng.integers(-8, 4))
        m = float(rng.integers(-16, 1)) * e
        body = m + (rng.integers(0, 15, 126) + rng.choice([0.0, 0.5], 126)) * e
        rows.append(np.concatenate([[m, m + 15 * e], body]))
    return np.asarray(rows, np.float32)


def _compare(ao, x: np.ndarray, name: str) -> tuple[int, int]:
    """(mismatches over codes, scales, zeros and values; values compared)."""
    group = int(name.rsplit("_g", 1)[1])
    q, s, z, dq = torchao_int4(ao, x, group)
    p = choose_qparams(x, format=name)
    codes = p.quantize(x)
    mine = p.dequantize(codes)
    bad = (np.count_nonzero(codes != q) + np.count_nonzero(p.scale.reshape(-1) != s)
           + np.count_nonzero(p.zero.reshape(-1) != z) + np.count_nonzero(mine != dq))
    return int(bad), int(q.size + s.size + z.size + dq.size)


@pytest.mark.parametrize("name", NAMES)
def test_real_tensors_bit_exact(ao, name):
    tensors = _real_tensors()
    assert len(tensors) >= 10
    compared = 0
    for label, x in tensors.items():
        if x.shape[-1] % int(name.rsplit("_g", 1)[1]):
            continue
        bad, n = _compare(ao, x, name)
        assert bad == 0, (label, bad)
        compared += n
    assert compared > 2_000_000


@pytest.mark.parametrize("name", NAMES)
def test_ties_bit_exact(ao, name):
    torch, _ = ao
    x = tie_tensor()
    bad, n = _compare(ao, x, name)
    assert bad == 0 and n > 2 * x.size
    # the constructed values are exact ties under torchao's own arithmetic (g128's groups are
    # the rows; smaller groups take their own ranges, so count where they are)
    if name == "torchao_int4_g128":
        t = torch.from_numpy(x).to(torch.bfloat16)
        lo = t.amin(1, keepdim=True)
        s = (t.amax(1, keepdim=True) - lo) / 15.0
        v = ((t - lo) / s).float().numpy()
        assert np.count_nonzero(v - np.floor(v) == 0.5) > 3000


def test_random_bf16_and_outliers(ao):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((256, 1024)) * rng.uniform(1e-3, 3, (256, 1))).astype(np.float32)
    x[:, rng.choice(1024, 6, replace=False)] *= 40  # outlier input channels, as LLM weights
    x[7, :128] = 0.0  # an all-zero group: scale clamps to bfloat16's smallest normal
    x[9, 128:256] = 1e-40  # subnormal inputs
    for name in NAMES:
        assert _compare(ao, x, name)[0] == 0


def test_report_error_equals_torchao_values(ao):
    x = np.load(SAMPLES / "layer0_query_weight.npy")
    for name in NAMES:
        _, _, _, dq = torchao_int4(ao, x, int(name.rsplit("_g", 1)[1]))
        p = choose_qparams(x, format=name)
        r = analyze(x, p)
        want = float(np.sum((x.astype(np.float64) - dq.astype(np.float64)) ** 2))
        got = (r.rounding_mse + r.clipping_mse) * x.size
        assert got == pytest.approx(want, rel=1e-12)
        assert r.codes_used == 16
        prep = prepare(x)
        again = prep.analyze(p)
        assert again.sqnr_db == r.sqnr_db
        assert prep.analyze(p) is again  # kept for the same scales and zeros
        g = int(name.rsplit("_g", 1)[1])
        assert bits_per_element(p, x.size) == 4 + 32 / g


def test_refusals():
    x = np.ones((4, 100), np.float32)
    with pytest.raises(EngineValueError, match="multiple of 128"):
        choose_qparams(x, format="torchao_int4_g128")
    y = np.ones((2, 128), np.float32)
    y[0, 3] = np.nan
    with pytest.raises(EngineValueError):
        choose_qparams(y, format="torchao_int4_g128")
    with pytest.raises(EngineValueError, match="method 'minmax'"):
        choose_qparams(np.ones((2, 128), np.float32), format="torchao_int4_g128", method="mse")
    z = np.full((1, 128), 3e38, np.float32)
    z[0, 0] = -3e38
    with pytest.raises(EngineValueError, match="bfloat16"):
        choose_qparams(z, format="torchao_int4_g128")
