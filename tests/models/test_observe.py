"""``quantscope.observe``: each layer's inputs captured value for value, hooks always removed."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import quantscope as qs
from oracles import need
from quantscope.errors import Cancelled, UserError
from tiny_models import tiny_lm

torch = need("torch")

LINEARS = ["layers.0.q_proj", "layers.0.up_proj", "layers.0.down_proj", "layers.1.q_proj",
           "layers.1.up_proj", "layers.1.down_proj", "lm_head"]


def _batches(n=3):
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 100, (2, 5 + 3 * i), generator=g) for i in range(n)]


def _reference(model, batches):
    """The inputs each Linear / Conv1d received, by torch's own hooks."""
    seen: dict[str, list[np.ndarray]] = {}
    handles = []
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear | torch.nn.Conv1d):
            conv = isinstance(m, torch.nn.Conv1d)

            def hook(mod, args, name=name, conv=conv):
                x = args[0].detach().float()
                x = x.transpose(1, -1) if conv else x
                seen.setdefault(name, []).append(x.reshape(-1, x.shape[-1]).numpy().copy())

            handles.append(m.register_forward_pre_hook(hook))
    with torch.no_grad():
        for b in batches:
            model(b)
    for h in handles:
        h.remove()
    return {k: np.concatenate(v) for k, v in seen.items()}


def _no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inputs_captured_value_for_value(dtype):
    model = tiny_lm(torch, dtype=dtype)
    batches = _batches()
    ref = _reference(model, batches)
    table = qs.observe(model, batches, methods=("minmax",))
    assert _no_hooks(model)
    inputs = {a.module: a for a in table.activations if a.port == "input"}
    assert set(inputs) == set(LINEARS) | {"conv"}
    compared = 0
    for name, a in inputs.items():
        np.testing.assert_array_equal(a.values, ref[name])
        compared += a.values.size
        assert a.dtype == str(dtype).removeprefix("torch.")
        assert len(a.batch_shapes) == 3
    tokens = sum(b.numel() for b in batches)
    assert inputs["lm_head"].tokens == tokens and compared == sum(v.size for v in ref.values())
    assert [r.name for r in table] == list(model.state_dict())  # the weight rows too


def test_figures_are_the_engines_on_the_captured_values():
    model = tiny_lm(torch)
    table = qs.observe(model, _batches(), layers=["layers.1.up_proj"])
    (a,) = table.activations
    x = a.values
    for gran, axis in (("token", 0), ("channel", 1)):
        p = qs.choose_qparams(x, granularity="channel", axis=axis)
        assert a.figures[f"int8/{gran}/minmax"]["sqnr_db"] == qs.analyze(x, p).sqnr_db
    p = qs.choose_qparams(x, format="fp8_e4m3", granularity="tensor", method="mse")
    assert a.figures["fp8_e4m3/tensor/mse"]["sqnr_db"] == qs.analyze(x, p).sqnr_db
    assert set(a.figures) == {f"{f}/{g}/{m}" for f in ("int8", "fp8_e4m3")
                              for g in ("tensor", "token", "channel")
                              for m in ("minmax", "percentile", "mse", "entropy")}
    doc = json.loads(table.to_json())
    assert doc["activations"][0]["name"] == "layers.1.up_proj:input"
    assert doc["activations"][0]["tokens"] == a.tokens


def test_spill_to_a_memory_map_keeps_every_value(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model = tiny_lm(torch)
    batches = _batches(4)
    ref = _reference(model, batches)
    table = qs.observe(model, batches, layers=["layers\\.0\\..*"], cap_bytes=4096,
                       methods=("minmax",))
    a = table.activation("layers.0.up_proj:input")
    assert a.spilled and isinstance(a.values, np.memmap)
    np.testing.assert_array_equal(a.values, ref["layers.0.up_proj"])
    assert os.listdir(tmp_path) == []  # the spill files are already unlinked
    assert {x.module for x in table.activations} == {"layers.0.q_proj", "layers.0.up_proj",
                                                     "layers.0.down_proj"}


def test_hooks_removed_on_error_and_cancel():
    model = tiny_lm(torch)
    with pytest.raises(IndexError):
        qs.observe(model, [torch.full((1, 4), 1000)])  # an id past the embedding
    assert _no_hooks(model)
    calls = []
    with pytest.raises(Cancelled, match=r"after 2 batches"):
        qs.observe(model, _batches(4), should_stop=lambda: len(calls) == 2,
                   on_progress=calls.append, methods=("minmax",))
    assert _no_hooks(model)
    assert calls[-1].done == 2 and calls[-1].total == 4 and calls[-1].eta_s >= 0
    assert "batch 2/4" in calls[-1].line()


def test_matmul_operands_and_outputs():
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(16, 48)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            p = torch.softmax(q @ k.transpose(-1, -2) / 4, dim=-1)
            return torch.matmul(p, v)

    torch.manual_seed(0)
    model = Attention()
    x = torch.randn(2, 6, 16)
    table = qs.observe(model, [x], outputs=True, methods=("minmax",))
    names = {a.name for a in table.activations}
    assert names == {"qkv:input", "qkv:output", "model:matmul0.a", "model:matmul0.b",
                     "model:matmul1.a", "model:matmul1.b"}
    q, k, _ = model.qkv(x).detach().chunk(3, dim=-1)
    # Q·Kᵀ: the right operand [.., K=8, N=6] has its channels on axis -2
    np.testing.assert_array_equal(table.activation("model:matmul0.a").values,
                                  q.reshape(-1, 16).numpy())
    kt = k.transpose(-1, -2)
    np.testing.assert_array_equal(table.activation("model:matmul0.b").values,
                                  kt.transpose(-1, -2).reshape(-1, 16).numpy())
    assert table.activation("model:matmul1.b").channels == 6  # P·V: K is the 6 positions
    assert _no_hooks(model)


def test_refusals():
    with pytest.raises(UserError, match=r"nn\.Module"):
        qs.observe({"w": np.ones(3)}, [])
    with pytest.raises(UserError, match="no Linear"):
        qs.observe(tiny_lm(torch), _batches(1), layers=["nothing_here"])
