"""Which axis holds the channels, and along which axis the groups run: derived per tensor.

A channel axis carried over from the previous tensor silently splits the next one along the
wrong dimension (a conv weight along its kernel width, a weight along its inputs), so every new
tensor gets its own from its *role*, and the rule that decided is kept to be shown:

1. an axis given explicitly (``--axis``, a saved session) wins;
2. a role the user picks: ``"weight"`` (``[out, in, ...]``: axis 0) or ``"activation"``
   (``[..., features]``: axis -1);
3. the source's name: ``weight`` in the tensor's, file's or generator's name means a weight,
   ``activation`` an activation;
4. otherwise the shape: an N-D tensor (3 or more dimensions) is taken as a conv weight
   ``[out, in, kh, kw]`` and a 2-D one as a weight ``[out, in]``, both axis 0 (the engine's
   default and PyTorch's ``ch_axis`` for weights).

A 1-D tensor has no per-channel scheme at all (4096 one-element "channels" say nothing and
cost a layout as large as the tensor).

Groups are what GPTQ and AWQ use: blocks of ``group_size`` consecutive elements along the
reduction (input) dimension, inside each output channel of a weight ``[out, in]`` -- so along
axis 1 when the channels are axis 0. For an activation ``[tokens, features]`` the reduction
dimension is the features axis itself: blocks of features inside each token. The engine's
groups run along the axis it is given (:mod:`quantscope.core.tensors.layout`, ONNX's blocked
quantization), so the mapping below hands it that reduction axis.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from quantscope.state.errors import SettingsError

#: Roles a user can pick for a tensor (None: decided by its name and shape).
ROLES = (None, "weight", "activation")
#: Channel axis of each role.
ROLE_AXIS = {"weight": 0, "activation": -1}


@dataclass(frozen=True)
class AxisChoice:
    """The channel axis chosen for one tensor and the sentence that says why."""

    axis: int
    rule: str
    role: str | None = None


def _names(source) -> list[str]:
    if source is None:
        return []
    names = [source.tensor] if source.tensor else []
    if source.kind == "file":
        names.append(os.path.basename(str(source.name)))
    elif source.kind in ("sample", "generator", "array"):
        names.append(str(source.name))
    return [n for n in names if n]


def role_from_name(source) -> tuple[str | None, str | None]:
    """(role, the name that says so) from the source's names, or (None, None)."""
    for name in _names(source):
        low = name.lower()
        if "activation" in low:
            return "activation", name
        if "weight" in low:
            return "weight", name
    return None, None


def choose_axis(shape: tuple[int, ...], source=None, role: str | None = None) -> AxisChoice:
    """The channel axis for a new tensor of ``shape`` from ``source`` (see the module doc)."""
    ndim = len(shape)
    if ndim <= 1:
        return AxisChoice(0, "1-D: no channel axis", None)
    given = getattr(source, "axis", None)
    if given is not None and -ndim <= given < ndim:
        return AxisChoice(int(given), f"axis {given} given (--axis or a session)", None)
    role = role or getattr(source, "role", None)
    if role is not None:
        if role not in ROLE_AXIS:
            raise SettingsError(f"role must be one of {ROLES}, got {role!r}")
        return AxisChoice(ROLE_AXIS[role], f"you picked {role}", role)
    named, name = role_from_name(source)
    if named is not None:
        return AxisChoice(ROLE_AXIS[named], f'name "{name}" says {named}', named)
    if ndim >= 3:
        return AxisChoice(0, f"{ndim}-D: taken as a conv weight [out, in, k…]", "weight")
    return AxisChoice(0, "2-D: taken as a weight [out, in]", "weight")


def group_axis(ndim: int, channel_axis: int) -> int:
    """The axis the groups run along: the reduction dimension (see the module docstring).

    Channels on the last axis (an activation's features): the groups are blocks of that axis
    inside each token. Otherwise (a weight's output channels on axis 0): blocks along axis 1
    inside each output channel.
    """
    if ndim <= 1:
        return 0
    ax = channel_axis % ndim
    if ax == ndim - 1:
        return ndim - 1
    return 1 if ax == 0 else ndim - 1


@dataclass(frozen=True)
class Units:
    """What the per-channel (or per-group) panes quantize by, for one tensor and settings.

    ``refusal`` says why there is no such scheme (then the panes show it instead of numbers).
    """

    kind: str  # "channel" or "group"
    axis: int  # the channel axis as the settings hold it
    engine_axis: int | None  # what the engine is given (the group axis for groups)
    group_size: int | None
    n_channels: int
    n_units: int
    last_group: int | None  # length of a ragged last group, None when groups divide evenly
    refusal: str | None = None

    def title(self) -> str:
        """The per-channel panes' heading after the scheme, e.g.
        ``per-channel · axis 0 · 384 channels``."""
        if self.kind == "channel":
            if self.refusal:
                return "per-channel"
            return f"per-channel · axis {self.axis} · {self.n_channels:,} channels"
        text = f"per-group of {self.group_size}"
        if self.refusal:
            return text
        text += f" · axis {self.engine_axis} · {self.n_units:,} groups"
        if self.last_group is not None:
            text += f" (last {self.last_group})"
        return text


def units(shape: tuple[int, ...], axis: int, group_size: int | None) -> Units:
    """The per-channel / per-group layout the mapping uses for ``shape`` (see :class:`Units`)."""
    ndim = len(shape)
    kind = "group" if group_size else "channel"
    if ndim == 0:
        return Units(kind, axis, None, group_size, 0, 0, None, "a 0-d tensor has no axis")
    if not -ndim <= axis < ndim:
        return Units(kind, axis, None, group_size, 0, 0, None,
                     f"axis {axis} is out of range for a {ndim}-d tensor")
    n_channels = shape[axis]
    if not group_size:
        if ndim == 1:
            return Units(kind, axis, None, None, 0, 0, None,
                         f"a 1-D tensor ({shape[0]:,} values) has no channels: per-channel "
                         "needs a 2-D or larger tensor (groups work: set a group size)")
        return Units(kind, axis, axis, None, n_channels, n_channels, None)
    if ndim >= 3:
        return Units(kind, axis, None, group_size, n_channels, 0, None,
                     f"groups on a {ndim}-D tensor: GPTQ/AWQ groups run along the flattened "
                     "input dimension of a 2-D weight; reshape it to [out, in·k…] to see them")
    gax = group_axis(ndim, axis)
    length = shape[gax]
    per_row = -(-length // group_size)
    others = 1
    for i, d in enumerate(shape):
        if i != gax:
            others *= d
    return Units(kind, axis, gax, group_size, n_channels, others * per_row,
                 length % group_size or None)
