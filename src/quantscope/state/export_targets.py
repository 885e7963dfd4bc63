"""Which pane formats each export target can express, and how it spells them.

Shared by the planner (``plan(..., target=...)`` chooses only among what the target runs) and
the exporters (:mod:`quantscope.state.plan_export`), so the two never disagree.
"""

from __future__ import annotations

from typing import Any

from quantscope.state.choices import FormatChoice

TARGETS = ("compressed-tensors", "modelopt", "onnx")


def ct_args(spec: str) -> dict[str, Any] | None:
    """A compressed-tensors ``QuantizationArgs`` dict for the weights, or None."""
    choice = FormatChoice(spec)
    name, gran = choice.name, choice.granularity
    if name == "int8":
        return {"num_bits": 8, "type": "int", "symmetric": True, "strategy": gran}
    if name.startswith("int4_g"):
        return {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                "group_size": int(name.removeprefix("int4_g"))}
    if name == "fp8_e4m3":
        return {"num_bits": 8, "type": "float", "symmetric": True, "strategy": gran}
    if name == "nvfp4":
        return {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group",
                "group_size": 16, "scale_dtype": "torch.float8_e4m3fn"}
    mx_bits = {"mxfp4": 4, "mxfp6_e2m3": 6, "mxfp8_e4m3": 8}
    if name in mx_bits:
        return {"num_bits": mx_bits[name], "type": "float", "symmetric": True,
                "strategy": "group", "group_size": 32, "scale_dtype": "torch.uint8"}
    return None


def modelopt_cfg(spec: str) -> dict[str, Any] | None:
    """A ModelOpt quantizer attribute dict for the weights, or None."""
    choice = FormatChoice(spec)
    name = choice.name
    axis = 0 if choice.per_channel else None
    element = {"fp8_e4m3": (4, 3), "fp8_e5m2": (5, 2)}
    if name == "int8":
        return {"num_bits": 8, "axis": axis}
    if name in element:
        return {"num_bits": element[name], "axis": axis}
    if name.startswith("int4_g"):
        return {"num_bits": 4, "block_sizes": {-1: int(name.removeprefix("int4_g")),
                                               "type": "static"}}
    if name == "nvfp4":
        return {"num_bits": (2, 1), "block_sizes": {-1: 16, "type": "dynamic",
                                                    "scale_bits": (4, 3)}}
    mx = {"mxfp4": (2, 1), "mxfp6_e3m2": (3, 2), "mxfp6_e2m3": (2, 3), "mxfp8_e4m3": (4, 3),
          "mxfp8_e5m2": (5, 2), "mxint8": 8}
    if name in mx:
        return {"num_bits": mx[name], "block_sizes": {-1: 32, "type": "dynamic",
                                                      "scale_bits": (8, 0)}}
    return None




def expresses(target: str, spec: str) -> bool:
    """True when ``target`` runs pane format ``spec`` as quantscope computes it (the ONNX
    QDQ export writes int8 only)."""
    if target == "compressed-tensors":
        return ct_args(spec) is not None
    if target == "modelopt":
        return modelopt_cfg(spec) is not None
    if target == "onnx":
        return FormatChoice(spec).name == "int8"
    raise ValueError(f"target must be one of {TARGETS}, got {target!r}")


def module_of(name: str) -> str | None:
    """``"model.layers.0.q_proj.weight"`` -> ``"model.layers.0.q_proj"``; None for a tensor
    that is not a module's weight."""
    head, dot, tail = name.rpartition(".")
    return head if dot and tail == "weight" and head else None


def tensor_refusal(target: str, name: str, shape: tuple[int, ...]) -> str | None:
    """Why ``target`` quantizes no format of this tensor, or None: compressed-tensors takes
    Linear weights ``[out, in]``, ModelOpt a module's weight; ONNX QDQ any initializer."""
    if target in ("compressed-tensors", "modelopt") and module_of(name) is None:
        return f"{target} quantizes a module's .weight only"
    if target == "compressed-tensors" and len(shape) != 2:
        return f"compressed-tensors quantizes Linear weights [out, in], not {len(shape)}-D"
    return None
