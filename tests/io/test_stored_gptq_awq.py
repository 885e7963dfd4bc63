"""GPTQ and AWQ checkpoints. Their packages (auto-gptq / gptqmodel, autoawq) need CUDA builds
that do not install here, so each layout is built by a transcription of its package's
``pack`` and checked against a transcription of its torch dequantize, in torch."""

from __future__ import annotations

import numpy as np
import pytest

from oracles import need
from quantscope.io.stored import open_stored
from stored_builders import as_f32, mismatches, write_checkpoint

torch = need("torch")

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]


def _group_params(w, bits, group_size, g_idx, symmetric):
    """GPTQ's RTN parameters per group of input columns: (groups, out) scales and zeros."""
    maxq = 2 ** bits - 1
    groups = int(g_idx.max()) + 1
    scales = torch.empty(groups, w.shape[0])
    zeros = torch.empty(groups, w.shape[0], dtype=torch.int32)
    for g in range(groups):
        cols = w[:, g_idx == g].float()
        lo, hi = cols.amin(1).clamp(max=0), cols.amax(1).clamp(min=0)
        if symmetric:
            hi = torch.maximum(-lo, hi)
            lo = -hi
        s = ((hi - lo) / maxq).clamp(min=1e-8)
        scales[g] = s
        zeros[g] = torch.full_like(s, (maxq + 1) // 2) if symmetric else torch.round(-lo / s)
    return scales.half(), zeros


def gptq_pack(w, bits, group_size, g_idx, symmetric, v1=True):
    """auto-gptq ``QuantLinear.pack``: codes down the input rows, zeros along columns,
    zeros stored less one in the original format."""
    scales, zeros = _group_params(w, bits, group_size, g_idx, symmetric)
    maxq = 2 ** bits - 1
    s = scales.float()[g_idx.long()].t()  # (out, in)
    z = zeros[g_idx.long()].t()
    intweight = torch.clamp(torch.round(w.float() / s) + z, 0, maxq).to(torch.int64).t()
    per = 32 // bits
    qweight = torch.zeros(intweight.shape[0] // per, intweight.shape[1], dtype=torch.int64)
    for j in range(per):
        qweight |= intweight[j::per] << (bits * j)
    stored_zeros = (zeros - 1 if v1 else zeros).to(torch.int64) & maxq
    qzeros = torch.zeros(zeros.shape[0], zeros.shape[1] // per, dtype=torch.int64)
    for j in range(per):
        qzeros |= stored_zeros[:, j::per] << (bits * j)
    return _as_int32(qweight), _as_int32(qzeros), scales


def _as_int32(words):
    """Unsigned 32-bit words (held in int64) as the int32 tensors the packages store."""
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def gptq_dequantize(qweight, qzeros, scales, g_idx, bits, v1=True):
    """auto-gptq's torch path: shift and mask the words, add one to the zeros (v1), then
    ``scales * (weight - zeros)`` in fp16; returned as (out, in)."""
    wf = torch.arange(0, 32, bits, dtype=torch.int32)
    small = torch.int16 if bits == 8 else torch.int8
    zeros = torch.bitwise_right_shift(qzeros.unsqueeze(2).expand(-1, -1, 32 // bits),
                                      wf.unsqueeze(0)).to(small)
    zeros = torch.bitwise_and(zeros, 2 ** bits - 1)
    zeros = (zeros + (1 if v1 else 0)).reshape(zeros.shape[0], -1)
    weight = torch.bitwise_right_shift(qweight.unsqueeze(1).expand(-1, 32 // bits, -1),
                                       wf.unsqueeze(-1)).to(small)
    weight = torch.bitwise_and(weight, 2 ** bits - 1).reshape(-1, weight.shape[2])
    g = g_idx.long()
    return (scales[g] * (weight - zeros[g])).t()


def awq_pack(w, bits, group_size):
    """autoawq ``WQLinear_GEMM.from_linear``: asymmetric codes, both packed along the output
    columns in the order [0, 2, 4, 6, 1, 3, 5, 7]."""
    g_idx = torch.arange(w.shape[1]) // group_size
    scales, zeros = _group_params(w, bits, group_size, g_idx, symmetric=False)
    maxq = 2 ** bits - 1
    s = scales.float()[g_idx].t()
    z = zeros[g_idx].t()
    intweight = torch.clamp(torch.round(w.float() / s) + z, 0, maxq).to(torch.int64).t()
    per = 32 // bits

    def pack(values):
        out = torch.zeros(values.shape[0], values.shape[1] // per, dtype=torch.int64)
        for col in range(values.shape[1] // per):
            for i in range(per):
                out[:, col] |= values[:, col * per + AWQ_ORDER[i]] << (i * bits)
        return _as_int32(out)
    return pack(intweight), pack(zeros.to(torch.int64)), scales


def awq_dequantize(qweight, qzeros, scales, bits, group_size):
    """autoawq ``dequantize_gemm`` (unpack_awq, reverse_awq_order, then (w - z) * s)."""
    shifts = torch.arange(0, 32, bits)
    iw = torch.bitwise_right_shift(qweight[:, :, None], shifts[None, None, :]).to(torch.int8)
    iw = iw.view(iw.shape[0], -1)
    iz = torch.bitwise_right_shift(qzeros[:, :, None], shifts[None, None, :]).to(torch.int8)
    iz = iz.view(iz.shape[0], -1)
    order = torch.arange(iw.shape[-1], dtype=torch.int32).view(-1, 32 // bits)
    order = order[:, AWQ_REVERSE_ORDER].view(-1)
    iw = torch.bitwise_and(iw[:, order], 2 ** bits - 1)
    iz = torch.bitwise_and(iz[:, order], 2 ** bits - 1)
    scales = scales.repeat_interleave(group_size, dim=0)
    iz = iz.repeat_interleave(group_size, dim=0)
    return ((iw - iz) * scales).t()


@pytest.fixture
def weight():
    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(11)) * 0.03
    w[3, 7] = 0.5
    return w.half()


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("desc_act", [False, True])
def test_gptq(tmp_path, weight, bits, symmetric, desc_act):
    group = 64
    g_idx = torch.arange(256) // group
    if desc_act:
        g_idx = g_idx[torch.randperm(256, generator=torch.Generator().manual_seed(2))]
    g_idx = g_idx.to(torch.int32)
    qweight, qzeros, scales = gptq_pack(weight, bits, group, g_idx, symmetric)
    expected = gptq_dequantize(qweight, qzeros, scales, g_idx, bits)
    write_checkpoint(tmp_path, {"model.layers.0.self_attn.q_proj.qweight": qweight,
                                "model.layers.0.self_attn.q_proj.qzeros": qzeros,
                                "model.layers.0.self_attn.q_proj.scales": scales,
                                "model.layers.0.self_attn.q_proj.g_idx": g_idx},
                     {"quant_method": "gptq", "bits": bits, "group_size": group,
                      "desc_act": desc_act, "sym": symmetric})
    d = open_stored(tmp_path).decode("model.layers.0.self_attn.q_proj.weight")
    assert d.values.shape == (64, 256)
    assert mismatches(d.values, as_f32(expected)) == 0
    assert d.decoded_dtype == "float16" and d.format.label == f"gptq uint{bits} g64" + (
        "" if symmetric else " asym")
    # the v1 convention: a symmetric 4-bit checkpoint stores 7 and means zero point 8
    if symmetric:
        assert (d.zero_points == 2 ** (bits - 1)).all()


def test_gptq_v2_zero_points_stored_as_they_are(tmp_path, weight):
    g_idx = (torch.arange(256) // 128).to(torch.int32)
    qweight, qzeros, scales = gptq_pack(weight, 4, 128, g_idx, False, v1=False)
    expected = gptq_dequantize(qweight, qzeros, scales, g_idx, 4, v1=False)
    write_checkpoint(tmp_path, {"l.qweight": qweight, "l.qzeros": qzeros, "l.scales": scales},
                     {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": False,
                      "checkpoint_format": "gptq_v2"})
    d = open_stored(tmp_path).decode("l.weight")
    assert mismatches(d.values, as_f32(expected)) == 0
    # read as v1 instead, every value would be off by one step of its scale
    (tmp_path / "config.json").write_text(
        '{"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, '
        '"sym": false}}')
    assert mismatches(open_stored(tmp_path).decode("l.weight").values, as_f32(expected)) > 0


def test_gptq_per_channel(tmp_path, weight):
    g_idx = torch.zeros(256, dtype=torch.int32)
    qweight, qzeros, scales = gptq_pack(weight, 4, 256, g_idx, True)
    write_checkpoint(tmp_path, {"l.qweight": qweight, "l.qzeros": qzeros, "l.scales": scales},
                     {"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": True})
    d = open_stored(tmp_path).decode("l.weight")
    assert mismatches(d.values, as_f32(gptq_dequantize(qweight, qzeros, scales, g_idx, 4))) == 0
    assert d.format.granularity == "channel"


def test_awq(tmp_path, weight):
    qweight, qzeros, scales = awq_pack(weight, 4, 128)
    expected = awq_dequantize(qweight, qzeros, scales, 4, 128)
    write_checkpoint(tmp_path, {"model.layers.0.mlp.down_proj.qweight": qweight,
                                "model.layers.0.mlp.down_proj.qzeros": qzeros,
                                "model.layers.0.mlp.down_proj.scales": scales},
                     {"quant_method": "awq", "bits": 4, "group_size": 128,
                      "zero_point": True, "version": "gemm"})
    d = open_stored(tmp_path).decode("model.layers.0.mlp.down_proj.weight")
    assert mismatches(d.values, as_f32(expected)) == 0
    assert d.format.label == "awq uint4 g128 asym"
    assert d.bits_per_element == pytest.approx(4 + (16 + 4) / 128)
    # reading AWQ's words in GPTQ's plain order scrambles columns within each eight
    plain = np.asarray(qweight.numpy()).view(np.uint32)
    first = (plain[0, 0] >> np.arange(0, 32, 4, dtype=np.uint32)) & 15
    assert list(d.codes[[0, 2, 4, 6, 1, 3, 5, 7], 0]) == list(first)
