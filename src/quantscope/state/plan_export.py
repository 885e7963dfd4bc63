"""A plan as the configs real quantizers load: compressed-tensors / llm-compressor, NVIDIA
ModelOpt, and quantscope's own per-tensor JSON. Qt-free; nothing here imports those tools.

Each exporter returns an :class:`Export`: the config and, for every planned tensor the target
cannot express as planned, a line saying so. Such a tensor is left out of the config (the tool
then leaves it in its stored precision) and named in ``unexpressed`` -- never swapped for a
nearby format the plan did not choose.

What each target expresses:

* compressed-tensors (``quantization_config`` of a checkpoint's ``config.json``): Linear
  weights ``[out, in]`` (a tensor named ``MODULE.weight``) as int8 per tensor / per channel,
  INT4 groups (symmetric, the GPTQ layout), FP8 E4M3 per tensor / per channel, NVFP4, MXFP4,
  MXFP6 (E2M3) and MXFP8 (E4M3). One config group per format, targets the module names;
  kept tensors' modules go to ``ignore``. Weight-only: no activation scheme is written.
* ModelOpt (``mtq.quantize(model, config)``): ``quant_cfg`` entries per weight quantizer
  (``MODULE.weight_quantizer``), everything else disabled: int8 per tensor / channel, FP8
  E4M3 / E5M2 per tensor / channel, INT4 groups (static blocks), NVFP4, MXFP4, MXFP6 (E3M2 and
  E2M3), MXFP8 (E4M3, E5M2) and MXINT8 (dynamic blocks with E8M0 scales). Conv weights
  ModelOpt quantizes too (its quantized Conv modules have a ``weight_quantizer``).
* the plain JSON (schema :data:`PLAN_SCHEMA`): every tensor, any format, with its scales and
  zero points as quantscope computes them.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantscope.core.formats.catalog import FormatParams
from quantscope.io.onnx_qdq import Int8Weight, initializers, write_qdq
from quantscope.jsonable import dumps
from quantscope.state.choices import FormatChoice
from quantscope.state.export_targets import ct_args as _ct_args
from quantscope.state.export_targets import modelopt_cfg as _mo_cfg
from quantscope.state.export_targets import module_of
from quantscope.state.formats import format_pane_params
from quantscope.state.plan import Plan, PlanRow

PLAN_SCHEMA = "quantscope.plan/1"


@dataclass
class Export:
    """A config for one tool and the planned rows it could not express (with why)."""

    target: str
    config: dict[str, Any]
    unexpressed: list[tuple[str, str, str]] = field(default_factory=list)

    def notes(self) -> list[str]:
        return [f"{self.target} cannot express {name} as {spec}: {why}; left out of the "
                f"config (the tool keeps it in its stored precision)"
                for name, spec, why in self.unexpressed]

    def to_json(self) -> str:
        return dumps(_jsonable(self.config), indent=2)

    def to_yaml(self) -> str:
        """The config as YAML, which keeps integer keys (ModelOpt's ``block_sizes`` has
        ``-1``) that JSON would turn into strings: what ``modelopt``'s ``load_config``
        reads."""
        return "\n".join(_yaml(self.config, 0)) + "\n"


# -- compressed-tensors -----------------------------------------------------------------------
_CT_FORMATS = {"int8": "int-quantized", "fp8_e4m3": "float-quantized", "nvfp4":
               "nvfp4-pack-quantized", "mxfp4": "mxfp4-pack-quantized",
               "mxfp6_e2m3": "mxfp6-pack-quantized", "mxfp8_e4m3": "mxfp8-quantized"}


def _ct_format(spec: str) -> str:
    name = FormatChoice(spec).name
    return "pack-quantized" if name.startswith("int4_g") else _CT_FORMATS[name]


def compressed_tensors_config(plan: Plan) -> Export:
    """The plan as a compressed-tensors ``quantization_config`` (see the module docstring)."""
    out = Export("compressed-tensors", {})
    groups: dict[str, list[str]] = {}
    for r in plan.planned:
        assert r.spec is not None
        module = module_of(r.name)
        why = None
        if module is None:
            why = "it quantizes a module's .weight only"
        elif len(r.shape) != 2:
            why = f"it quantizes Linear weights [out, in], not a {len(r.shape)}-D tensor"
        elif r.axis not in (0, None) and FormatChoice(r.spec).per_channel:
            why = f"its channels are the output rows, the plan's are axis {r.axis}"
        elif _ct_args(r.spec) is None:
            why = "it has no such scheme"
        if why:
            out.unexpressed.append((r.name, r.spec, why))
            continue
        assert module is not None
        groups.setdefault(r.spec, []).append(module)
    config_groups = {}
    for i, (spec, modules) in enumerate(groups.items()):
        config_groups[f"group_{i}"] = {"targets": modules, "weights": _ct_args(spec),
                                       "input_activations": None, "output_activations": None,
                                       "format": _ct_format(spec)}
    ignore = sorted({m for r in plan.kept if (m := module_of(r.name)) is not None})
    formats = {_ct_format(s) for s in groups}
    out.config = {"quant_method": "compressed-tensors",
                  "format": formats.pop() if len(formats) == 1 else "mixed-precision",
                  "quantization_status": "frozen", "config_groups": config_groups,
                  "ignore": ignore}
    return out


# -- ModelOpt -----------------------------------------------------------------------------------
def modelopt_config(plan: Plan) -> Export:
    """The plan as a ModelOpt quantization config (see the module docstring): a Python dict
    with tuples and integer keys, as ``mtq.quantize`` takes it."""
    out = Export("ModelOpt", {})
    entries: list[dict[str, Any]] = [{"quantizer_name": "*", "enable": False}]
    for r in plan.planned:
        assert r.spec is not None
        module = module_of(r.name)
        cfg = _mo_cfg(r.spec)
        why = None
        if module is None:
            why = "it quantizes a module's .weight only"
        elif cfg is None:
            why = "it has no such format"
        elif FormatChoice(r.spec).per_channel and r.axis not in (0, None):
            why = f"its per-channel weights use axis 0, the plan's axis {r.axis}"
        elif any(c in module for c in "*?[]"):
            why = "the module name holds a wildcard character"
        if why:
            out.unexpressed.append((r.name, r.spec, why))
            continue
        entries.append({"quantizer_name": f"{module}.weight_quantizer", "cfg": cfg,
                        "enable": True})
    out.config = {"quant_cfg": entries, "algorithm": "max"}
    return out


# -- quantscope's own JSON ----------------------------------------------------------------------
def plan_json(plan: Plan, with_scales: bool = True) -> Export:
    """Every tensor of the plan with its format and, if asked, its scales and zero points.

    Schema ``quantscope.plan/1``: ``{"schema", "budget_bits", "objective", "average_bits",
    "model_bits", "total_error", "tensors": [...]}``; each tensor ``{"name", "shape",
    "dtype", "params", "format" (a pane format such as ``"int8/channel"``, ``"int4_g128"``,
    ``"nvfp4"``; null when kept), "kept" (why, or null), "pinned", "bits_per_element",
    "error", "sqnr_db", "quantization"}``. ``quantization`` (null when kept) holds
    ``"kind"`` (``"int"``, ``"element"``, ``"mx"``, ``"nvfp4"``, ``"nf4"``),
    ``"granularity"`` (``"tensor"``, ``"channel"``, ``"group"``), ``"axis"``,
    ``"group_size"``, ``"scale"`` (float32 values as numbers, the layout of the engine's
    parameters: a number per tensor, a list per channel, a nested list ``[units][groups]``
    per group or block), ``"zero_point"`` (same layout, integers), and for block formats
    ``"block_scales"`` (the stored E8M0 / E4M3 scale values) and ``"tensor_scale"``
    (NVFP4's FP32 scale). Dequantization is ``(code - zero_point) * scale``.
    """
    doc = {"schema": PLAN_SCHEMA, **plan.record()}
    if with_scales:
        for rec, row in zip(doc["tensors"], plan.rows, strict=True):
            rec["quantization"] = None if row.spec is None else quantization_record(plan, row)
    return Export("quantscope", doc)


def chosen_params(plan: Plan, row: PlanRow):
    """The engine's parameters of a row's chosen format (as the plan measured them)."""
    assert row.spec is not None
    x = plan.table.tensor(row.name)
    settings = plan.table.settings
    if row.axis is not None:
        settings = dataclasses.replace(settings, axis=row.axis)
    return x, format_pane_params(x, row.spec, settings)


def quantization_record(plan: Plan, row: PlanRow) -> dict[str, Any]:
    """A planned row's scales and zero points (see :func:`plan_json`)."""
    _, p = chosen_params(plan, row)
    rec: dict[str, Any] = {"granularity": p.granularity, "axis": p.axis,
                           "group_size": p.group_size,
                           "scale": np.asarray(p.scale, np.float32).tolist(),
                           "zero_point": np.asarray(p.zero_point).astype(int).tolist()}
    if isinstance(p, FormatParams):
        rec["kind"] = p.kind
        if p.block_scales is not None:
            rec["block_scales"] = np.asarray(p.block_scales, np.float32).tolist()
        if p.tensor_scale is not None:
            rec["tensor_scale"] = float(p.tensor_scale)
    else:
        rec["kind"] = "int"
        rec["qmin"], rec["qmax"] = p.qmin, p.qmax
    return rec


def _yaml_scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_yaml_scalar(v) for v in value) + "]"
    return json.dumps(str(value))  # a double-quoted YAML string is a JSON string


def _yaml(value, indent: int) -> list[str]:
    """Block-style YAML lines of dicts and lists of scalars (tuples as flow lists)."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            key = _yaml_scalar(k)
            if (isinstance(v, dict) and v) or (isinstance(v, list) and v):
                lines.append(f"{pad}{key}:")
                lines += _yaml(v, indent + 2)
            else:
                lines.append(f"{pad}{key}: {_yaml_scalar(v) if v != {} else '{}'}")
        return lines
    for item in value:
        sub = _yaml(item, indent + 2) if isinstance(item, dict | list) else [
            f"{pad}  {_yaml_scalar(item)}"]
        lines.append(f"{pad}- {sub[0].lstrip()}")
        lines += sub[1:]
    return lines


def _jsonable(value):
    """Tuples as lists, integer keys as strings (what JSON can hold)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


# -- ONNX QDQ -----------------------------------------------------------------------------------
def onnx_qdq(plan: Plan, source, out) -> Export:
    """Write ONNX model ``source`` to ``out`` with the plan's int8 weights in QDQ form
    (:func:`quantscope.io.onnx_qdq.write_qdq`): each codes, scale and zero point exactly as
    quantscope computes them. Rows planned in another format, or naming no initializer of
    the model, are listed as unexpressed."""
    present = set(initializers(source))
    out_ = Export("ONNX QDQ", {})
    weights = {}
    for r in plan.planned:
        assert r.spec is not None
        if r.name not in present:
            out_.unexpressed.append((r.name, r.spec, "no float initializer of that name"))
            continue
        if FormatChoice(r.spec).name != "int8":
            out_.unexpressed.append((r.name, r.spec, "the QDQ export writes int8 weights"))
            continue
        x, p = chosen_params(plan, r)
        weights[r.name] = Int8Weight(p.quantize(x), p.scale, p.zero_point, p.axis)
    replaced = write_qdq(source, weights, out)
    out_.config = {"model": str(out), "replaced": replaced}
    return out_
