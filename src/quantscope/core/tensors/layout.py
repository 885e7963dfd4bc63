"""Where each scale applies: per tensor, per channel along an axis, or per block of
``group_size`` consecutive elements along an axis.

Shapes of the parameters (scale and zero point alike):

* per tensor: a scalar;
* per channel: 1-D, one entry per index along ``axis``;
* per group: ``x``'s shape with ``x.shape[axis]`` replaced by ``ceil(x.shape[axis] / group_size)``
  -- one entry per block, for every index of the other axes (the last block may be shorter).

Two views serve the engine: :func:`expand_params` broadcasts the parameters against ``x`` (for
quantize and dequantize, element by element), and :func:`param_rows` lays ``x`` out as rows that
each share one scale (for statistics per channel or per group).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantscope.core.tensors.validate import EngineValueError, check_axis_group, check_unit_count


def normalize_axis(axis: int, ndim: int) -> int:
    """Turn a possibly negative axis into its index, with a message that names the shape."""
    if not -ndim <= axis < ndim:
        raise EngineValueError(f"axis {axis} is out of range for a tensor with {ndim} dimension(s)")
    return axis % ndim


def granularity_of(axis: int | None, group_size: int | None) -> str:
    """Name the granularity that ``axis`` and ``group_size`` describe."""
    check_axis_group(axis, group_size)
    if axis is None:
        if group_size is not None:
            raise EngineValueError("group_size needs an axis along which the groups run")
        return "tensor"
    return "channel" if group_size is None else "group"


def param_shape(x_shape: tuple[int, ...], axis: int | None, group_size: int | None) -> tuple:
    """The shape that scale and zero point must have for this granularity (see module doc)."""
    kind = granularity_of(axis, group_size)
    if axis is None:  # per tensor
        return ()
    ax = normalize_axis(axis, len(x_shape))
    if group_size is None:  # per channel
        return check_unit_count((x_shape[ax],), kind, len(x_shape))
    if group_size < 1:
        raise EngineValueError(f"group_size must be >= 1, got {group_size}")
    shape = list(x_shape)
    shape[ax] = -(-x_shape[ax] // group_size)
    return check_unit_count(tuple(shape), kind, len(x_shape))


def _check_shape(p: np.ndarray, want: tuple, what: str) -> np.ndarray:
    if p.ndim == 0:  # one value for every channel/group: broadcast it
        return np.broadcast_to(p, want)
    if p.shape != want:
        raise EngineValueError(f"{what} has shape {p.shape}; this granularity needs {want}")
    return p


def expand_params(
    x_shape: tuple[int, ...], p: np.ndarray, axis: int | None, group_size: int | None, what: str
) -> np.ndarray:
    """Return ``p`` in a shape that broadcasts element by element against ``x``."""
    want = param_shape(x_shape, axis, group_size)
    if axis is None:  # per tensor: the shape is ()
        if p.size != 1:
            raise EngineValueError(f"{what} must be a scalar without an axis, got shape {p.shape}")
        return p.reshape(())
    p = _check_shape(p, want, what)
    ax = normalize_axis(axis, len(x_shape))
    if group_size is None:
        shape = [1] * len(x_shape)
        shape[ax] = x_shape[ax]
        return p.reshape(shape)
    # a group longer than the axis is one group of the whole axis: repeating its entry more
    # than the axis length would only build a bigger array to cut back
    repeats = min(group_size, x_shape[ax])
    return np.repeat(p, repeats, axis=ax)[(slice(None),) * ax + (slice(0, x_shape[ax]),)]


@dataclass(frozen=True)
class RowSet:
    """Rows of ``x`` that each share one scale: ``x2d[i]`` uses ``scale[i]``, ``zero_point[i]``.

    ``index`` says which entry of the flattened per-channel/per-group arrays row ``i`` feeds.
    """

    x2d: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    index: np.ndarray


def param_rows(
    x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, axis: int | None,
    group_size: int | None,
) -> tuple[list[RowSet], int]:
    """Lay ``x`` out as row sets sharing one scale per row; return them and the number of units.

    A unit is the tensor, one channel, or one group (groups numbered in C order of the
    per-group parameter array). A ragged last group becomes a second row set.
    """
    granularity_of(axis, group_size)
    if axis is None:  # per tensor
        s = np.asarray(scale, np.float32).reshape(1)
        z = np.asarray(zero_point, np.int32).reshape(1)
        return [RowSet(x.reshape(1, -1), s, z, np.zeros(1, np.intp))], 1
    want = param_shape(x.shape, axis, group_size)
    s = np.ascontiguousarray(_check_shape(np.asarray(scale, np.float32), want, "scale"))
    z = np.ascontiguousarray(_check_shape(np.asarray(zero_point, np.int32), want, "zero_point"))
    ax = normalize_axis(axis, x.ndim)
    if group_size is None:  # per channel
        x2d = np.moveaxis(x, ax, 0).reshape(x.shape[ax], -1)
        return [RowSet(x2d, s, z, np.arange(x.shape[ax]))], x.shape[ax]
    n = x.shape[ax]
    xm = np.moveaxis(x, ax, -1).reshape(-1, n)  # [P, n]: groups run along the last axis
    sm = np.moveaxis(s, ax, -1).reshape(xm.shape[0], -1)  # [P, G]
    zm = np.moveaxis(z, ax, -1).reshape(xm.shape[0], -1)
    n_groups = sm.shape[1]
    # Unit numbering follows the C order of the per-group array, whose group axis is `ax`.
    unit = np.moveaxis(np.arange(s.size).reshape(s.shape), ax, -1).reshape(xm.shape[0], -1)
    full = n // group_size
    sets = []
    if full:
        body = xm[:, : full * group_size].reshape(-1, group_size)
        sets.append(RowSet(body, sm[:, :full].ravel(), zm[:, :full].ravel(),
                           unit[:, :full].ravel()))
    if full < n_groups:
        tail = xm[:, full * group_size:]
        sets.append(RowSet(tail, sm[:, full], zm[:, full], unit[:, full]))
    return sets, s.size
