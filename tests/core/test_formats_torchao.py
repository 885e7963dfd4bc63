"""MX (OCP v1.0) and NVFP4 equal torchao's reference implementation (``mx_formats``) on the
bundled real tensors and on the bf16 checkpoint's tensors: every element code, every block
scale, NVFP4's tensor scale and every dequantized value, bit for bit."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from oracles import need
from quantscope.core import choose_qparams

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "quantscope" / "resources" / "samples"
TENSORS = sorted(p.stem for p in SAMPLES.glob("*.npy"))
MX = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4")


@pytest.fixture(scope="module")
def ao():
    torch = need("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        need("torchao")
        from torchao.prototype.mx_formats import constants, kernels, mx_tensor, nvfp4_tensor
    return torch, constants, kernels, mx_tensor, nvfp4_tensor


def _bf16_tensors() -> list[np.ndarray]:
    from quantscope.io import load_for_analysis

    path = SAMPLES / "layer0_bf16.safetensors"
    names = ("encoder.layer.0.attention.self.key.weight",
             "encoder.layer.0.output.dense.weight")
    return [load_for_analysis(path, n)[0] for n in names]


def _reference_values(ao, fmt: str, x: np.ndarray):
    """torchao's element values (float32) and stored scale bytes for ``x``."""
    torch, c, k, mx, nv = ao
    xt = torch.from_numpy(np.ascontiguousarray(x))
    if fmt == "nvfp4":
        ts = nv.per_tensor_amax_to_scale(xt.abs().max())
        scale, data = nv.nvfp4_quantize(xt, 16, ts)
        vals = k.f4_unpacked_to_f32(k.unpack_uint4(data))
        return vals.numpy().reshape(x.shape), scale.view(torch.uint8).numpy(), ts.item()
    elem = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2,
            "mxfp6_e2m3": c.DTYPE_FP6_E2M3, "mxfp6_e3m2": c.DTYPE_FP6_E3M2,
            "mxfp4": torch.float4_e2m1fn_x2}[fmt]
    scale, data = mx.to_mx(xt, elem, 32)
    if fmt == "mxfp4":
        vals = k.f4_unpacked_to_f32(k.unpack_uint4(data))
    elif fmt == "mxfp6_e2m3":
        vals = k.f6_e2m3_unpacked_to_f32(data)
    elif fmt == "mxfp6_e3m2":
        vals = k.f6_e3m2_unpacked_to_f32(data)
    else:
        vals = data.to(torch.float32)
    return vals.numpy().reshape(x.shape), scale.view(torch.uint8).numpy(), None


def _mismatch(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))


@pytest.mark.parametrize("fmt", (*MX, "nvfp4"))
def test_block_formats_equal_torchao(ao, fmt):
    tensors = [np.load(SAMPLES / f"{t}.npy") for t in TENSORS] + _bf16_tensors()
    n = bad_codes = bad_scales = bad_values = 0
    for x in tensors:
        ref_vals, ref_scales, ref_ts = _reference_values(ao, fmt, x)
        p = choose_qparams(x, format=fmt)
        codes = p.quantize(x)
        mine = p.element_values(codes)
        bad_codes += _mismatch(mine, ref_vals)
        bad_scales += int(np.count_nonzero(
            np.asarray(p.block_scales).view(np.uint8).reshape(-1) != ref_scales.reshape(-1)))
        if ref_ts is not None:
            assert p.tensor_scale == ref_ts
        # torchao dequantizes as element * scale (NVFP4: element * (tensor * block scale))
        ref_scale = np.asarray(p.block_scales).astype(np.float32)
        if ref_ts is not None:
            ref_scale = np.float32(ref_ts) * ref_scale
        ref_x = ref_vals * np.repeat(ref_scale, p.group_size, axis=-1)[..., : x.shape[-1]]
        bad_values += _mismatch(p.dequantize(codes), ref_x)
        n += x.size
    print(f"\n{fmt}: {n} elements of {len(tensors)} real tensors: mismatches {bad_codes} "
          f"codes, {bad_scales} scales, {bad_values} dequantized values")
    assert n > 10**6
    assert bad_codes == bad_scales == bad_values == 0
