"""Number formats beyond int8: FP8/FP6/FP4 elements with a scale, OCP MX blocks, NVFP4, NF4
and INT4 groups, by the names the engine, the window and the CLI share.

A format is a monotone grid of representable values (:mod:`quantscope.core.formats.elements`) with a
scale rule:

* element formats (``fp8_e4m3``, ``fp8_e5m2``, ``fp8_e4m3fnuz``, ``fp8_e5m2fnuz``,
  ``fp6_e2m3``, ``fp6_e3m2``, ``fp4_e2m1``): one float32 scale per tensor or per channel,
  ``amax / max_finite`` where ``amax`` comes from the calibration methods integers use
  (min/max, percentile, exact MSE search, entropy); ``x / scale`` in float32, then the cast;
* OCP MX v1.0 (``mxfp8_e4m3``, ``mxfp8_e5m2``, ``mxfp6_e2m3``, ``mxfp6_e3m2``, ``mxfp4``,
  ``mxint8``): blocks of 32 along the last axis, one E8M0 scale ``2^(floor(log2 amax) -
  emax_elem)`` per block (the float32 exponent of the block's amax, clamped to -127..127),
  elements ``x / 2^e`` cast with saturation;
* ``nvfp4``: E2M1 elements in blocks of 16, an E4M3 block scale and an FP32 tensor scale, as
  torchao's ``nvfp4_quantize`` does it: tensor scale ``amax / (448 · 6)``, block scale
  ``e4m3(clamp((block_amax / 6) / tensor_scale, 2^-6, 448))``, elements
  ``x · ((1 / tensor_scale) / block_scale)`` cast, dequantized by ``tensor_scale · block_scale``;
* ``nvfp4_modelopt``: the same layout as ModelOpt's ``NVFP4QTensor`` (and TensorRT-LLM's
  checkpoints from it) computes it: block scale ``e4m3(clamp(block_amax / (6 · tensor_scale),
  2^-9, 448))`` -- the floor is E4M3's smallest subnormal, not its smallest normal 2^-6, and an
  all-zero block takes 1.0 -- elements ``x / (block_scale · tensor_scale)`` (a division) cast
  to E2M1, dequantized by the same product. The two differ only in blocks whose amax is below
  ``2^-6 · 6 · tensor_scale``: beside an outlier, most blocks of the tensor;
* ``nf4``: QLoRA's 16 levels in blocks of 64, scaled by the block's absmax (float32), elements
  ``x · (1 / absmax)`` rounded to the nearest level (bitsandbytes' arithmetic);
* ``int4_g32`` / ``int4_g64`` / ``int4_g128``: int4 per group along the input (last) axis by
  the engine's rules: symmetric is the narrow range (15 codes -7..7, scale ``amax / 7``),
  asymmetric uint4 with a zero point, the scale rounded to float16; ordinary
  :class:`~quantscope.core.schemes.qparams.QuantParams`;
* ``gptq_int4_g128``, ``gptq_int4_g128_asym``, ``awq_int4_g128``: INT4 as GPTQ and AutoAWQ
  compute it (16 codes 0..15 with a zero point; their rules in
  :mod:`quantscope.core.formats.int4_tools`);
* ``torchao_int4_g32`` / ``_g64`` / ``_g128``: torchao's int4 weight-only (tinygemm) rule,
  codes 0..15 with a float zero point, bfloat16 scales and zeros computed in bfloat16
  (:mod:`quantscope.core.formats.torchao_int4`; their parameters are the scales and zeros).

* ``gguf_q8_0`` ... ``gguf_q6_k``: llama.cpp's block types, bit for bit with its reference
  quantizers (:mod:`quantscope.core.formats.gguf`; their parameters are the stored blocks).

Bits per element count the scale overhead: MXFP4 4.25, NVFP4 4.5 (plus 32 bits per tensor),
INT4 g128 with its fp16 scale 4.125 (4.15625 with a 4-bit zero point, as GPTQ and AWQ
store it even when symmetric).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quantscope.core.formats.elements import ELEMENTS, ElementType, cast
from quantscope.core.formats.gguf_types import CATALOG_ROWS as GGUF_ROWS
from quantscope.core.kernels import compiled
from quantscope.core.tensors.layout import (
    expand_params,
    granularity_of,
    normalize_axis,
    param_shape,
)
from quantscope.core.tensors.validate import EngineValueError, as_float32, check_nonfinite

#: The block formats (by kind) whose ``method="mse"`` searches each block's stored scale for
#: the least error: MX's E8M0 exponent (:mod:`quantscope.core.formats.mx_mse`), NVFP4's E4M3
#: block scale given its tensor scale (:mod:`quantscope.core.formats.nvfp4_mse`), NF4's float32
#: block scale (:mod:`quantscope.core.formats.nf4_mse`).
BLOCK_MSE_KINDS = ("mx", "nvfp4", "nf4")

#: name -> (kind, element type, block, scale bits per block or unit).
FORMAT_TABLE: dict[str, tuple[str, str | None, int | None, int]] = {
    "int8": ("int", None, None, 32),
    "int4_g32": ("int", None, 32, 16),
    "int4_g64": ("int", None, 64, 16),
    "int4_g128": ("int", None, 128, 16),
    "gptq_int4_g128": ("int", None, 128, 20),
    "gptq_int4_g128_asym": ("int", None, 128, 20),
    "awq_int4_g128": ("int", None, 128, 20),
    "torchao_int4_g32": ("torchao", None, 32, 32),
    "torchao_int4_g64": ("torchao", None, 64, 32),
    "torchao_int4_g128": ("torchao", None, 128, 32),
    "fp8_e4m3": ("element", "float8_e4m3fn", None, 32),
    "fp8_e5m2": ("element", "float8_e5m2", None, 32),
    "fp8_e4m3fnuz": ("element", "float8_e4m3fnuz", None, 32),
    "fp8_e5m2fnuz": ("element", "float8_e5m2fnuz", None, 32),
    "fp6_e2m3": ("element", "float6_e2m3fn", None, 32),
    "fp6_e3m2": ("element", "float6_e3m2fn", None, 32),
    "fp4_e2m1": ("element", "float4_e2m1fn", None, 32),
    "mxfp8_e4m3": ("mx", "float8_e4m3fn", 32, 8),
    "mxfp8_e5m2": ("mx", "float8_e5m2", 32, 8),
    "mxfp6_e2m3": ("mx", "float6_e2m3fn", 32, 8),
    "mxfp6_e3m2": ("mx", "float6_e3m2fn", 32, 8),
    "mxfp4": ("mx", "float4_e2m1fn", 32, 8),
    "mxint8": ("mx", "int8_mx", 32, 8),
    "nvfp4": ("nvfp4", "float4_e2m1fn", 16, 8),
    "nvfp4_modelopt": ("nvfp4", "float4_e2m1fn", 16, 8),
    "nf4": ("nf4", "nf4", 64, 32),
    **GGUF_ROWS,
}
FORMATS = tuple(FORMAT_TABLE)
_TINY = float(np.finfo(np.float32).tiny)
#: torchao's NVFP4 constants: E4M3's max and smallest normal, E2M1's max.
_E4M3_MAX, _E4M3_TINY, _E2M1_MAX = 448.0, 2.0 ** -6, 6.0
#: ModelOpt's floor for an NVFP4 block scale: E4M3's smallest subnormal.
_E4M3_SUBNORMAL = 2.0 ** -9


def check_format(name: str) -> str:
    """``name`` if it is a known format, else a clear error listing them."""
    if name not in FORMAT_TABLE:
        raise EngineValueError(f"format must be one of {', '.join(FORMATS)}; got {name!r}")
    return name


def format_kind(name: str) -> str:
    """``"int"``, ``"element"``, ``"mx"``, ``"nvfp4"``, ``"nf4"``, ``"torchao"`` or ``"gguf"``."""
    return FORMAT_TABLE[check_format(name)][0]


def element_of(name: str) -> ElementType:
    """The element type of format ``name`` (the integer formats have none: refused)."""
    element = FORMAT_TABLE[check_format(name)][1]
    if element is None:
        raise EngineValueError(f"format {name!r} is an integer format: it has no element type")
    return ELEMENTS[element]


@dataclass(frozen=True, eq=False)
class FormatParams:
    """A quantization to a non-integer format: the element type, the scales and the rule.

    ``scale`` (float32) is what dequantization multiplies each element's value by: a scalar per
    tensor, 1-D per channel, or one entry per block (the per-group layout of
    :mod:`quantscope.core.tensors.layout`, blocks of ``group_size`` along ``axis``). ``inv_scale``
    is
    the multiplier quantization applies where the format multiplies (NVFP4, NF4) instead of
    dividing. ``block_scales`` are the stored scales (E8M0 / E4M3 as ``ml_dtypes`` arrays, NF4's
    float32 absmax) and ``tensor_scale`` NVFP4's FP32 tensor scale. Codes index ``values``
    (ascending), so ``qmin`` is 0 and ``qmax`` is ``levels - 1``.
    """

    format: str
    scale: np.ndarray
    axis: int | None = None
    group_size: int | None = None
    inv_scale: np.ndarray | None = None
    block_scales: np.ndarray | None = None
    tensor_scale: float | None = None
    saturate: bool = True
    method: str = "minmax"
    symmetric: bool = True
    runtime: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_format(self.format)
        granularity_of(self.axis, self.group_size)
        scale = np.asarray(self.scale, np.float32)
        if not (np.isfinite(scale).all() and (scale > 0).all()):
            raise EngineValueError("format scales must be finite and > 0")
        object.__setattr__(self, "scale", scale)

    @property
    def element(self) -> ElementType:
        return element_of(self.format)

    @property
    def kind(self) -> str:
        return FORMAT_TABLE[self.format][0]

    @property
    def values(self) -> np.ndarray:
        """The element grid (float64, ascending): code ``k`` stands for ``values[k] · scale``."""
        return self.element.values

    @property
    def levels(self) -> int:
        return self.element.levels

    @property
    def qmin(self) -> int:
        return 0

    @property
    def qmax(self) -> int:
        return self.levels - 1

    @property
    def bits(self) -> int:
        return self.element.bits

    @property
    def zero_point(self) -> np.ndarray:
        return np.zeros(self.scale.shape, np.int32)

    @property
    def rounding(self) -> str:
        return "nearest_lower" if self.kind == "nf4" else "half_even"

    @property
    def arithmetic(self) -> str:
        return "multiply" if self.inv_scale is not None else "divide"

    @property
    def granularity(self) -> str:
        return granularity_of(self.axis, self.group_size)

    def quantize(self, x, *, nonfinite: str = "raise") -> np.ndarray:
        """The codes: the element type's bits as its ``ml_dtypes`` array (FP8/FP6/FP4),
        int8 ``k`` for MXINT8 (value ``k / 64``), uint8 level indices 0..15 for NF4."""
        xf = as_float32(x)
        check_nonfinite(xf, nonfinite)
        v = self._scaled(xf)
        out = cast(v, self.element, saturate=self.saturate)
        if self.kind == "nf4":
            return np.searchsorted(self.values, out.astype(np.float64)).astype(np.uint8)
        if self.element.dtype is None:  # MXINT8: the integer k of k / 64
            return np.rint(out * 64.0).astype(np.int8)
        return out.astype(self.element.dtype)

    def element_values(self, codes) -> np.ndarray:
        """The element values (float32, before the scale) that ``codes`` stand for."""
        q = np.asarray(codes)
        if self.kind == "nf4":
            return self.values.astype(np.float32)[q.astype(np.intp)]
        if self.element.dtype is None:
            return q.astype(np.float32) / np.float32(64.0)
        return q.astype(np.float32)

    def dequantize(self, codes) -> np.ndarray:
        """Float32 ``element · scale`` (one float32 multiplication, as torchao dequantizes)."""
        v = self.element_values(codes)
        return v * expand_params(v.shape, self.scale, self.axis, self.group_size, "scale")

    def _scaled(self, xf: np.ndarray) -> np.ndarray:
        """``x / scale`` (or ``x · inv_scale``) in float32, element by element."""
        if self.inv_scale is not None:
            inv = expand_params(xf.shape, self.inv_scale, self.axis, self.group_size, "scale")
            return xf * inv
        return xf / expand_params(xf.shape, self.scale, self.axis, self.group_size, "scale")


def bits_per_element(params, n: int) -> float:
    """Storage bits per element of ``n`` elements, scales (and zero points) included."""
    fmt = getattr(params, "format", None) or params.extra.get("format", "int8")
    _, _, _, scale_bits = FORMAT_TABLE[fmt]
    n_scales = int(np.asarray(params.scale).size)
    extra = 0
    if fmt.startswith("int") and not params.symmetric:
        extra = n_scales * (params.bits if fmt != "int8" else 32)  # stored zero points
    if getattr(params, "tensor_scale", None) is not None:
        extra += 32
    return float(params.bits) + (n_scales * scale_bits + extra) / max(int(n), 1)


def block_amax(xf: np.ndarray, axis: int, block: int) -> np.ndarray:
    """max |x| of each block (finite values only; empty or all-non-finite blocks give 0), in
    the per-group parameter shape."""
    from quantscope.core.schemes.qparams import unit_min_max

    if xf.ndim and normalize_axis(axis, xf.ndim) == xf.ndim - 1 and xf.size:
        n = xf.shape[-1]  # one compiled pass: NumPy's three took 15 copies' time
        amax = compiled.block_abs_max(xf.reshape(-1, n), block)
        return amax.reshape(param_shape(xf.shape, axis, block))
    lo, hi, _ = unit_min_max(xf, axis, block)
    return np.maximum(-lo, hi).astype(np.float32)


def mx_exponents(amax: np.ndarray, element: ElementType) -> np.ndarray:
    """The shared E8M0 exponent of each block: the float32 exponent field of ``amax`` minus
    127 (so a subnormal or zero amax gives -127), minus the element's ``emax``, clamped to
    -127..127 (OCP MX v1.0, section 6.3; torchao's FLOOR mode)."""
    bits = np.ascontiguousarray(amax, np.float32).view(np.uint32)
    e = ((bits >> 23) & 0xFF).astype(np.int32) - 127 - element.emax
    return np.clip(e, -127, 127)
