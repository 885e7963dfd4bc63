"""Tensors from any framework reach the engine with their exact values: torch (every float
dtype, gradients, views), DLPack producers, nested lists; what has no real values is refused
with a message that says what to do. Nothing here needs Qt."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import quantscope as qs
from oracles import need
from quantscope.core.tensors.frameworks import as_numpy, framework_of
from quantscope.core.tensors.validate import as_float32


@pytest.fixture
def torch():
    return need("torch")


def test_torch_dtypes_convert_to_exactly_their_values(torch):
    x = torch.randn(64, 48, generator=torch.Generator().manual_seed(0)) * 3
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64,
                  torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                  torch.float8_e5m2fnuz, torch.float8_e8m0fnu):
        t = x.to(dtype)
        got = as_float32(t)
        assert got.dtype == np.float32 and got.shape == (64, 48)
        assert np.array_equal(got, t.float().numpy(), equal_nan=True), dtype


def test_bf16_with_requires_grad_is_read_without_a_float32_copy_and_keeps_its_grad(torch):
    t = torch.randn(32, 16, dtype=torch.bfloat16, requires_grad=True)
    arr = as_numpy(t)
    assert arr.dtype.name == "bfloat16"
    assert np.shares_memory(arr, t.detach().view(torch.int16).numpy())  # zero-copy view
    assert t.requires_grad and t.grad_fn is None  # the tensor itself is untouched
    non_contiguous = t.detach().T
    assert np.array_equal(as_float32(non_contiguous), non_contiguous.float().numpy())


def test_cpu_float32_is_a_zero_copy_view(torch):
    t = torch.randn(1000, requires_grad=True)
    arr = as_numpy(t)
    assert np.shares_memory(arr, t.detach().numpy())


def test_engine_api_takes_torch_tensors_and_agrees_with_numpy(torch):
    w = torch.nn.Parameter(torch.randn(96, 64, generator=torch.Generator().manual_seed(1)))
    ref = w.detach().numpy().copy()
    for granularity in ("tensor", "channel"):
        p = qs.choose_qparams(w, granularity=granularity, axis=0, symmetric=False)
        p_ref = qs.choose_qparams(ref, granularity=granularity, axis=0, symmetric=False)
        assert np.array_equal(p.scale, p_ref.scale)
        assert np.array_equal(p.zero_point, p_ref.zero_point)
        assert qs.analyze(w, p).summary() == qs.analyze(ref, p_ref).summary()
        assert np.array_equal(qs.quantize(w, p.scale, p.zero_point, axis=p.axis),
                              qs.quantize(ref, p.scale, p.zero_point, axis=p.axis))
        assert qs.prepare(w).analyze(p).summary() == qs.prepare(ref).analyze(p).summary()
    bf = w.detach().to(torch.bfloat16).requires_grad_(True)
    p = qs.choose_qparams(bf)
    assert qs.analyze(bf, p).summary() == qs.analyze(bf.detach().float().numpy(), p).summary()


@pytest.mark.parametrize("make, words", [
    (lambda t: t.randn(4, dtype=t.complex64), "complex"),
    (lambda t: t.randn(4, 4).to_sparse(), "to_dense()"),
    (lambda t: t.empty(4, device="meta"), "meta device"),
    (lambda t: t.zeros(4, dtype=t.float4_e2m1fn_x2), "packed"),
])
def test_torch_tensors_without_real_values_are_refused_with_the_fix(torch, make, words):
    with pytest.raises(qs.EngineTypeError, match=words.replace("(", r"\(").replace(")", r"\)")):
        as_float32(make(torch))


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
def test_quantized_torch_tensor_is_refused_naming_its_own_parameters(torch):
    q = torch.quantize_per_tensor(torch.randn(8), 0.05, 3, torch.qint8)
    with pytest.raises(qs.EngineTypeError, match=r"scale 0\.05, zero point 3.*dequantize"):
        qs.analyze(q, qs.choose_qparams(np.zeros(8, np.float32) + 1))


class _DLPackOnly:
    """A producer that speaks DLPack and nothing else (as many GPU libraries do)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_producers_and_nested_lists_are_read():
    a = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    got = as_numpy(_DLPackOnly(a))
    assert np.shares_memory(got, a)
    assert np.array_equal(as_float32([[1.5, -2.0], [0.25, 3.0]]),
                          np.array([[1.5, -2.0], [0.25, 3.0]], np.float32))
    with pytest.raises(qs.EngineTypeError, match="cannot be read as an array"):
        as_float32([[1.0, 2.0], [3.0]])
    with pytest.raises(qs.EngineTypeError, match="complex"):
        as_float32(np.ones(3, np.complex64))
    with pytest.raises(qs.EngineTypeError, match="object"):
        as_float32(np.array([object()]))


def test_frameworks_are_recognised_without_being_imported():
    code = ("import sys, numpy as np, quantscope as qs\n"
            "x = np.ones((4, 4), np.float32)\n"
            "qs.analyze([[1.0, 2.0]], qs.choose_qparams(x)); qs.prepare(x)\n"
            "print(','.join(m for m in ('torch', 'jax', 'cupy') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    assert framework_of(np.ones(3)) is None and framework_of([1.0]) is None


def test_reports_and_prepared_tensors_show_as_html_tables():
    x = np.random.default_rng(2).standard_normal((32, 64)).astype(np.float32)
    p = qs.choose_qparams(x, granularity="channel", axis=0)
    r = qs.prepare(x).analyze(p)
    html = r._repr_html_()
    assert html.count("<tr>") == 11 and "per channel (axis 0)" in html
    assert f"{r.sqnr_db:.2f} dB" in html and f"{r.codes_used} of {r.params.levels}" in html
    prepared = qs.prepare(x)
    prepared.layout(0, None)
    assert "32 × 64" in prepared._repr_html_() and "axis 0" in prepared._repr_html_()
