"""``quantscope.plan`` and ``quantscope plan``: the exact optimum, the keep rules, re-planning."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import quantscope as qs
from oracles import need
from quantscope.cli import main
from quantscope.core.formats.catalog import bits_per_element
from quantscope.errors import UserError
from quantscope.state.formats import format_pane_params
from quantscope.state.plan import plan
from tiny_models import tiny_lm

torch = need("torch")
safetensors_torch = need("safetensors.torch")

FORMATS = ["int8/channel", "fp8_e4m3/tensor", "int4_g32", "nvfp4", "mxfp4"]


@pytest.fixture(scope="module")
def table():
    return qs.scan(tiny_lm(torch))


def _exhaustive(p, budget):
    """Every combination of the planned tensors' candidates: the least error within budget."""
    rows = p.planned
    params = sum(r.params for r in rows)
    best = None
    for combo in itertools.product(*(r.candidates for r in rows)):
        bits = sum(c.bits for c in combo)
        if bits > budget * params:
            continue
        err = sum(c.error for c in combo)
        if best is None or err < best[0]:
            best = (err, combo)
    return best


@pytest.mark.parametrize("budget", [4.25, 4.4, 4.5, 5.0, 6.3, 8.2])
def test_plan_is_the_exhaustive_optimum(table, budget):
    p = plan(table, budget, formats=FORMATS, keep=("embed", "lm_head", "norm", "conv"))
    assert len(p.planned) == 6 and all(len(r.candidates) == 5 for r in p.planned)
    err, combo = _exhaustive(p, budget)  # 5^6 = 15625 combinations
    assert p.total_error == pytest.approx(err, rel=1e-12)
    assert p.average_bits <= budget
    got = {r.name: r.spec for r in p.planned}
    ref = {r.name: c.spec for r, c in zip(p.planned, combo, strict=True)}
    # equal error to the last bits: the same formats unless two choices tie exactly
    if got != ref:
        assert p.total_error == err


def test_candidates_are_the_panes_exact_numbers(table):
    p = plan(table, 5.5, formats=FORMATS)
    row = p["layers.1.up_proj.weight"]
    x = table.tensor(row.name)
    signal = float(np.mean(np.square(x, dtype=np.float64)))
    for c in row.candidates:
        params = format_pane_params(x, c.spec, table.settings)
        r = qs.analyze(x, params) if not hasattr(params, "element") else None
        assert c.bits == round(bits_per_element(params, x.size) * x.size)
        if r is not None:
            assert c.mse == pytest.approx(r.mse, rel=1e-12)
        assert c.error == pytest.approx(c.mse / signal, rel=1e-12)
    assert {c.spec for c in row.candidates} == set(FORMATS)
    nvfp4 = next(c for c in row.candidates if c.spec == "nvfp4")
    assert nvfp4.bits == 4 * x.size + 8 * (x.size // 16) + 32  # E4M3 per 16 + FP32 tensor


def test_keep_patterns_and_one_d_tensors(table):
    p = plan(table, 5.5, formats=FORMATS)
    kept = {r.name for r in p.kept}
    assert {"embed_tokens.weight", "lm_head.weight", "final_norm.weight",
            "layers.0.norm.weight", "conv.bias", "layers.0.q_proj.bias"} <= kept
    assert "conv.weight" not in kept and all(r.spec is None for r in p.kept)
    p2 = plan(table, 5.5, formats=FORMATS, keep=("q_proj",))
    assert "layers.0.q_proj.weight" in {r.name for r in p2.kept}
    assert "lm_head.weight" not in {r.name for r in p2.kept}


def test_choose_pins_a_row_and_replans_within_budget(table):
    p = plan(table, 5.5, formats=FORMATS)
    name = "layers.1.q_proj.weight"
    q = p.choose(name, "int8/channel")
    assert q[name].spec == "int8/channel" and q[name].pinned
    assert q.average_bits <= 5.5 and q.total_error >= p.total_error
    # the others are the optimum given the pin: exhaustive over the free rows
    free = [r for r in q.planned if not r.pinned]
    params = sum(r.params for r in q.planned)
    cap = 5.5 * params - q[name].bits
    best = min(sum(c.error for c in combo) for combo in itertools.product(
        *(r.candidates for r in free)) if sum(c.bits for c in combo) <= cap)
    assert q.total_error - q[name].error == pytest.approx(best, rel=1e-12)
    assert q.unpin(name).total_error == pytest.approx(p.total_error, rel=1e-12)
    kept = p.choose(name, None)
    assert kept[name].spec is None and kept[name].kept == "kept by you"
    with pytest.raises(UserError, match="not a candidate"):
        p.choose(name, "nf4")


def test_refusals(table):
    with pytest.raises(UserError, match="no plan fits 2 bits"):
        plan(table, 2, formats=FORMATS)
    with pytest.raises(UserError, match="budget"):
        plan(table, -1)
    with pytest.raises(UserError, match="unknown format"):
        plan(table, 4.5, formats=["int3"])
    with pytest.raises(UserError, match="objective"):
        plan(table, 4.5, objective="psnr")


def test_cli_plan_json_equals_python(tmp_path, capsys):
    model = tiny_lm(torch)
    path = tmp_path / "tiny.safetensors"
    safetensors_torch.save_file(model.state_dict(), str(path))
    assert main(["plan", str(path), "--budget", "5.5", "--formats", ",".join(FORMATS),
                 "--json", "--pin", "layers.0.up_proj.weight=nvfp4"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ref = plan(qs.scan(model), 5.5, formats=FORMATS,
               pins={"layers.0.up_proj.weight": "nvfp4"}).record()
    from quantscope.jsonable import dumps
    from quantscope.state.plan_export import PLAN_SCHEMA

    ref = json.loads(dumps({"schema": PLAN_SCHEMA, **ref}))  # the plain JSON's schema
    for d in (doc, ref):  # safetensors stores its tensors sorted by name
        d["tensors"].sort(key=lambda t: t["name"])
    assert doc == ref
    assert main(["plan", str(path), "--budget", "4.5"]) == 0
    out = capsys.readouterr().out
    assert "bits/element (budget 4.5)" in out and "keep float32" in out
    assert main(["plan", str(path), "--budget", "1"]) == 2
    assert "no plan fits 1 bits" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["compressed-tensors", "modelopt", "onnx"])
def test_target_keeps_only_what_the_tool_runs(table, target):
    from quantscope.state.export_targets import expresses
    from quantscope.state.plan_export import compressed_tensors_config, modelopt_config

    p = plan(table, 9.0, target=target, keep=("embed", "lm_head", "norm", "conv"))
    assert p.planned and all(expresses(target, c.spec) for r in p.planned
                             for c in r.candidates)
    if target == "compressed-tensors":
        assert not compressed_tensors_config(p).unexpressed
    if target == "modelopt":
        assert not modelopt_config(p).unexpressed
    if target == "onnx":
        assert {r.spec for r in p.planned} <= {"int8/tensor", "int8/channel"}
    with pytest.raises(UserError, match="target"):
        plan(table, 5, target="tensorrt")
