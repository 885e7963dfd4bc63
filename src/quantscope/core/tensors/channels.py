"""Per-channel extremes along every axis of a tensor.

Which axis holds the outliers decides what helps: an outlier *input* channel of a weight
[out, in] puts one large value in every output channel, so counting per output channel (the
axis a weight is quantized along) sees nothing unusual in any one of them, while along axis 1
one channel stands 60 times above the rest. The view counts outlier channels along every axis
from these maxima (:func:`quantscope.core.labs.outliers.axis_outliers`).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.tensors.validate import EngineValueError, as_float32


def channel_abs_max(x) -> tuple[np.ndarray, ...]:
    """For every axis of ``x`` (at least 2-D), the largest finite ``|x|`` of each index along
    it: one array per axis, of that axis's length (0 for a channel with no finite value).
    An outlier input channel of a weight quantized per output channel shows along axis 1,
    though every output channel (axis 0) holds one of its values."""
    xf = as_float32(x)
    if xf.ndim < 2:
        raise EngineValueError(f"channels need a tensor of 2 or more dimensions, got {xf.ndim}")
    if xf.size == 0:
        return tuple(np.zeros(n) for n in xf.shape)
    # NaN is what fmax/fmin skip: infinities become NaN (a copy only when there are any)
    finite = xf if np.isfinite(xf).all() else np.where(np.isfinite(xf), xf, np.nan)
    out = []
    for axis in range(xf.ndim):
        others = tuple(a for a in range(xf.ndim) if a != axis)
        hi = np.fmax.reduce(finite, axis=others)
        lo = np.fmin.reduce(finite, axis=others)
        amax = np.fmax(-lo.astype(np.float64), hi.astype(np.float64))
        out.append(np.where(np.isnan(amax), 0.0, amax))
    return tuple(out)
