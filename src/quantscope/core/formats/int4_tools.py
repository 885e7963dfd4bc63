"""INT4 per group of 128 as the quantization tools compute it, each named for its rule.

The engine's own ``int4_g32`` / ``int4_g64`` / ``int4_g128`` are the narrow symmetric rule
(15 codes -7..7, scale ``amax / 7`` rounded to float16) or, asymmetric, the engine's rule with
an fp16 scale; the tools' round-to-nearest rules differ from it, and by more than the last
digit (a 16th level is 0.3-0.6 dB on real tensors). The rules, transcribed from the tools'
sources (the tests run each transcription in PyTorch against these parameters):

* ``gptq_int4_g128`` (GPTQ's ``Quantizer.find_params`` with ``sym=True``, IST-DASLab/gptq
  ``quant.py``; GPTQModel's ``quantizer.py`` keeps it): ``xmin = min(x_min, 0)``,
  ``xmax = max(x_max, 0)``; ``xmax = max(|xmin|, xmax)`` and, where ``xmin < 0``,
  ``xmin = -xmax``; an all-zero group takes ``[-1, 1]``; ``scale = (xmax - xmin) / 15``
  (= ``2·amax/15``) in float32, zero point ``(maxq + 1) / 2 = 8``. A group without negative
  values keeps ``xmin = 0``, so its scale is ``xmax / 15`` and codes above 15 clip: GPTQ's
  own quirk, reproduced;
* ``gptq_int4_g128_asym`` (the same with ``sym=False``): ``scale = (xmax - xmin) / 15``,
  zero point ``round(-xmin / scale)`` (half to even), the range widened to include 0;
* ``awq_int4_g128`` (AutoAWQ's ``pseudo_quantize_tensor`` with ``zero_point=True``,
  awq/quantize/quantizer.py): the group's own ``min`` and ``max`` (not widened to 0),
  ``scale = clamp(max - min, 1e-5) / 15``, zero point ``clamp(-round(min / scale), 0, 15)``.

All three quantize as ``clamp(round(x / scale) + zero, 0, 15)`` (float32 division, half to
even) and dequantize as ``scale · (q - zero)``: the engine's ``"divide"`` arithmetic on codes
0..15, so they are ordinary :class:`~quantscope.core.schemes.qparams.QuantParams` and every
report path (direct, prepared, kept) applies. The arithmetic is float32, as GPTQ runs it (it
converts the layer's weight to float32 first); AutoAWQ runs the same formula in the model's
float16, so on a float16 model its scales may differ from these in the last bit. Both tools
store the scale in float16 and the zero point in 4 bits: bits per element ``4 + 20/128``.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.tensors.validate import EngineValueError

#: name -> (rule, symmetric, group size).
TOOL_INT4: dict[str, tuple[str, bool, int]] = {
    "gptq_int4_g128": ("gptq", True, 128),
    "gptq_int4_g128_asym": ("gptq", False, 128),
    "awq_int4_g128": ("awq", False, 128),
}
_MAXQ = np.float32(15)


def gptq_scale_zero(lo: np.ndarray, hi: np.ndarray, symmetric: bool
                    ) -> tuple[np.ndarray, np.ndarray]:
    """GPTQ's ``find_params`` on each group's finite ``(min, max)``: float32 scale and the
    zero point (see the module docstring)."""
    xmin = np.minimum(np.asarray(lo, np.float32), np.float32(0))
    xmax = np.maximum(np.asarray(hi, np.float32), np.float32(0))
    if symmetric:
        xmax = np.maximum(np.abs(xmin), xmax)
        xmin = np.where(xmin < 0, -xmax, xmin)
    both_zero = (xmin == 0) & (xmax == 0)
    xmin = np.where(both_zero, np.float32(-1), xmin).astype(np.float32)
    xmax = np.where(both_zero, np.float32(1), xmax).astype(np.float32)
    with np.errstate(over="ignore"):
        scale = ((xmax - xmin) / _MAXQ).astype(np.float32)
    if symmetric:
        zero = np.full(scale.shape, 8.0, np.float32)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            zero = np.rint(-xmin / scale).astype(np.float32)
    return scale, zero


def awq_scale_zero(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """AutoAWQ's zero-point branch of ``pseudo_quantize_tensor`` on each group's finite
    ``(min, max)``: float32 scale and the clamped zero point."""
    lo32 = np.asarray(lo, np.float32)
    with np.errstate(over="ignore"):
        span = np.asarray(hi, np.float32) - lo32
    scale = (np.maximum(span, np.float32(1e-5)) / _MAXQ).astype(np.float32)
    zero = np.clip(-np.rint(lo32 / scale), 0, 15).astype(np.float32)
    return scale, zero


def tool_int4_params(xf: np.ndarray, name: str, *, method: str = "minmax",
                     prepared=None) -> QuantParams:
    """The parameters of ``name`` (one of :data:`TOOL_INT4`) for ``xf``, groups along the last
    axis (the input dimension of an ``[out, in]`` weight)."""
    from quantscope.core.schemes.qparams import unit_min_max

    rule, symmetric, group = TOOL_INT4[name]
    if method != "minmax":
        raise EngineValueError(f"format {name!r} takes each group's range as {rule.upper()} "
                               f"does (method 'minmax'), got method {method!r}")
    if xf.ndim == 0:
        raise EngineValueError(f"format {name!r} needs an axis for its groups")
    if prepared is not None:
        lo, hi = prepared.min_max(-1, group)
    else:
        lo, hi, _ = unit_min_max(xf, -1, group)
    if rule == "gptq":
        scale, zero = gptq_scale_zero(lo, hi, symmetric)
    else:
        scale, zero = awq_scale_zero(lo, hi)
    bad = ~(np.isfinite(scale) & (scale > 0))
    if bad.any():
        raise EngineValueError(
            f"format {name!r}: {int(bad.sum())} group(s) have no finite positive float32 "
            f"scale (a range beyond float32 or below its subnormals), e.g. group "
            f"{int(np.argmax(bad.ravel()))}")
    return QuantParams(scale, zero.astype(np.int32), qmin=0, qmax=15, axis=-1,
                       group_size=group, symmetric=symmetric, method="minmax",
                       extra={"format": name, "rule": rule})
