"""Which stored tensors make up which weight: a quantized checkpoint's names, grouped.

A quantized module ``P`` stores its weight under names built from ``P`` and a role that
depends on the method (``P.weight_packed`` + ``P.weight_scale``..., ``P.qweight`` +
``P.qzeros`` + ``P.scales``, ``P.weight`` + ``P.weight.absmax``...). Grouping them gives the
weight back its own name, ``P.weight``, the name the unquantized original uses, so a
quantized checkpoint and its original can be compared tensor by tensor. Tensors that are no
part of a quantized weight (biases, norms, an ignored ``lm_head``) stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from quantscope.io.checkpoint import Checkpoint, CheckpointTensor
from quantscope.io.stored.config import QuantConfig
from quantscope.io.stored.parts import Parts

#: Roles of each method's parts, longest first so ``weight.absmax`` wins over ``weight``.
ROLES: dict[str, tuple[str, ...]] = {
    "compressed-tensors": ("weight_global_scale", "weight_zero_point", "weight_packed",
                           "weight_g_idx", "weight_scale", "weight_shape", "weight"),
    "fp8": ("weight_scale_inv", "weight_scale", "weight"),
    "fbgemm_fp8": ("weight_scale", "weight"),
    "gptq": ("qweight", "qzeros", "scales", "g_idx"),
    "awq": ("qweight", "qzeros", "scales"),
    "bitsandbytes": ("weight.quant_state.bitsandbytes__nf4",
                     "weight.quant_state.bitsandbytes__fp4", "weight.nested_quant_map",
                     "weight.nested_absmax", "weight.quant_map", "weight.absmax",
                     "weight_format", "weight", "SCB"),
}


def _is_weight(method: str, roles: dict[str, CheckpointTensor]) -> bool:
    """Whether a module's parts are a stored quantized weight (not a plain one)."""
    if method == "compressed-tensors":
        return "weight_packed" in roles or ("weight" in roles and "weight_scale" in roles)
    if method in ("fp8", "fbgemm_fp8"):
        return "weight" in roles and ("weight_scale_inv" in roles or "weight_scale" in roles)
    if method in ("gptq", "awq"):
        return "qweight" in roles
    return "weight" in roles and ("SCB" in roles or any(
        r.startswith("weight.quant_state.") for r in roles))


@dataclass(frozen=True)
class StoredEntry:
    """One stored weight: its own name, the parts it is stored as, where it is listed."""

    name: str
    parts: Parts
    position: int


def group_parts(checkpoint: Checkpoint, config: QuantConfig) -> tuple[list[StoredEntry],
                                                                         set[str]]:
    """The checkpoint's stored weights in file order, and the names of the tensors they use."""
    roles = ROLES[config.method]
    modules: dict[str, dict[str, CheckpointTensor]] = {}
    first: dict[str, int] = {}
    for i, t in enumerate(checkpoint.tensors):
        for role in roles:
            if t.name == role or t.name.endswith("." + role):
                prefix = t.name[: len(t.name) - len(role)].rstrip(".")
                modules.setdefault(prefix, {})[role] = t
                first.setdefault(prefix, i)
                break
    entries: list[StoredEntry] = []
    used: set[str] = set()
    for prefix, found in modules.items():
        if not _is_weight(config.method, found):
            continue
        used.update(t.name for t in found.values())
        found.pop("weight_format", None)  # bitsandbytes' int8 layout tag: nothing to decode
        name = f"{prefix}.weight" if prefix else "weight"
        entries.append(StoredEntry(name, Parts(name, found), first[prefix]))
    entries.sort(key=lambda e: e.position)
    return entries, used
