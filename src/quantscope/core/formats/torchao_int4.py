"""torchao's int4 weight-only quantization as engine formats: ``torchao_int4_g32``,
``torchao_int4_g64``, ``torchao_int4_g128``.

What ``quantize_(model, Int4WeightOnlyConfig(group_size=G, int4_packing_format=
"tile_packed_to_4d"))`` -- the classic ``int4_weight_only`` behind the tinygemm kernel --
stores for a bfloat16 ``[out, in]`` weight: groups of ``G`` along the input (last) axis,
asymmetric codes 0..15 with a *float* zero point (``ZeroPointDomain.FLOAT``: the zero is the
group's value at mid-code 8, it need not be representable), bfloat16 scales and zeros as
``torchao.quantization.quant_primitives`` computes them (the arithmetic, bfloat16 operation by
operation, in :mod:`~quantscope.core.formats.torchao_kernel`).

torchao takes bfloat16 weights only, so the tensor is rounded to bfloat16 first (as a model is
cast before it is quantized); the report's error is against the tensor as given, so for a
float32 tensor it includes that rounding (none for a tensor loaded from bf16). Like the GGUF
types, the scales follow from the data by the tool's own rule (no calibration method), so
the parameters are the stored scales and zeros and a report is one compiled pass against
them. Bits per element: 4 + 32 / G (a bfloat16 scale and zero per group).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quantscope.core.formats.catalog import FORMAT_TABLE, FormatParams
from quantscope.core.kernels import compiled
from quantscope.core.kernels.parallel import parallel, shares
from quantscope.core.kernels.read_only import read_only
from quantscope.core.tensors.validate import EngineValueError, as_float32, check_nonfinite

#: name -> group size (the catalog's rows of kind ``"torchao"``).
TORCHAO_INT4: dict[str, int] = {
    name: int(row[2] or 0) for name, row in FORMAT_TABLE.items() if row[0] == "torchao"}


def group_size_of(name: str) -> int:
    """The group size of format ``name``, else a clear error listing the formats."""
    if name not in TORCHAO_INT4:
        raise EngineValueError(f"torchao int4 format must be one of {', '.join(TORCHAO_INT4)}; "
                               f"got {name!r}")
    return TORCHAO_INT4[name]


def check_shape(shape: tuple[int, ...], name: str) -> int:
    """The group size, after refusing a shape whose last axis is no whole number of groups.

    torchao pads a weight's input axis with zeros before it groups it, so a partial last
    group would take those zeros into its range: quantscope refuses rather than guess."""
    g = group_size_of(name)
    if len(shape) == 0:
        raise EngineValueError(f"format {name!r} needs at least one axis for its groups")
    if shape[-1] == 0 or shape[-1] % g:
        raise EngineValueError(
            f"format {name!r} quantizes groups of {g} along the last axis (a weight's input "
            f"features); the last axis has {shape[-1]} elements, not a positive multiple of "
            f"{g}")
    return g


def ranges(n_groups: int, group: int) -> list[tuple[int, int]]:
    """Ranges of groups for the engine's threads (one per thread for a large tensor)."""
    k = max(1, min(len(shares(n_groups * group)), n_groups))
    return [(j * n_groups // k, (j + 1) * n_groups // k) for j in range(k)]


def groups_of(x, name: str) -> tuple[np.ndarray, int]:
    """``x`` as finite float32 ``[n_groups, group]`` (refusing NaN and inf: torchao's
    min/max would carry them into the scales of whole groups), read-only: the loops that
    take it are compiled once for either kind of tensor (a read-only view is no copy)."""
    xf = np.ascontiguousarray(as_float32(x))
    g = check_shape(tuple(xf.shape), name)
    check_nonfinite(xf, "raise")
    return read_only(xf.reshape(-1, g)), g


@dataclass(frozen=True, eq=False)
class TorchaoInt4Params(FormatParams):
    """torchao's int4 weight-only parameters of a tensor of ``shape``: ``scale`` and
    ``zero`` (bfloat16 values held as float32), one per group in the per-group parameter
    shape. Code ``q`` of a group dequantizes to ``bf16(bf16((q - 8) · scale) + zero)``."""

    zero: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    shape: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        g = check_shape(tuple(self.shape), self.format)
        want = (*tuple(self.shape[:-1]), self.shape[-1] // g)
        zero = np.asarray(self.zero, np.float32)
        if self.scale.shape != want or zero.shape != want:
            raise EngineValueError(f"{self.format}: scales and zeros must have shape {want} "
                                   f"for a tensor of shape {self.shape}; got "
                                   f"{self.scale.shape} and {zero.shape}")
        if not np.isfinite(zero).all():
            raise EngineValueError(f"{self.format}: zero points must be finite")
        object.__setattr__(self, "zero", zero)

    @property
    def kind(self) -> str:
        return "torchao"

    @property
    def element(self):
        raise EngineValueError(f"format {self.format!r} has integer codes with a float zero "
                               "point per group, not an element type")

    @property
    def values(self) -> np.ndarray:
        """Code ``k``'s value in units of its group's scale, from the zero: ``k - 8``."""
        return np.arange(16, dtype=np.float64) - 8.0

    @property
    def levels(self) -> int:
        return 16

    @property
    def bits(self) -> int:
        return 4

    @property
    def rounding(self) -> str:
        return "torchao"

    @property
    def arithmetic(self) -> str:
        return "torchao"

    def _flat(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.ascontiguousarray(self.scale).reshape(-1),
                np.ascontiguousarray(self.zero).reshape(-1))

    def quantize(self, x, *, nonfinite: str = "raise") -> np.ndarray:
        """The codes 0..15 (uint8, ``x``'s shape) by torchao's ``_quantize_affine_tinygemm``
        with these scales and zeros. NaN and inf are refused under every rule (torchao has
        no code for them)."""
        xf = as_float32(x)
        if tuple(xf.shape) != tuple(self.shape):
            raise EngineValueError(f"{self.format}: these scales are for a tensor of shape "
                                   f"{self.shape}, not {xf.shape}")
        if nonfinite not in ("raise", "saturate"):
            check_nonfinite(xf, nonfinite)  # the usual message for an unknown rule
        xg, g = groups_of(xf, self.format)
        s, z = self._flat()
        out = np.empty(xg.shape, np.uint8)

        def share(lo: int, hi: int) -> None:
            compiled.group_codes(xg[lo:hi], s[lo:hi], z[lo:hi], out[lo:hi])

        parallel(share, ranges(xg.shape[0], g))
        return out.reshape(xf.shape)

    def dequantize(self, codes) -> np.ndarray:
        """torchao's ``_dequantize_affine_tinygemm`` to bfloat16 (the scales' dtype), as
        float32."""
        q = np.asarray(codes)
        if tuple(q.shape) != tuple(self.shape):
            raise EngineValueError(f"{self.format}: codes of shape {q.shape}, parameters for "
                                   f"shape {self.shape}")
        if q.size and (q.min() < 0 or q.max() > 15):
            raise EngineValueError(f"{self.format}: codes must lie in 0..15")
        g = self.shape[-1] // (self.scale.shape[-1] or 1)
        qg = np.ascontiguousarray(q, np.uint8).reshape(-1, g)
        s, z = self._flat()
        out = np.empty(qg.shape, np.float32)

        def share(lo: int, hi: int) -> None:
            compiled.group_values(qg[lo:hi], s[lo:hi], z[lo:hi], out[lo:hi])

        parallel(share, ranges(qg.shape[0], g))
        return out.reshape(self.shape)

    def archive_members(self, codes: np.ndarray) -> dict[str, np.ndarray]:
        """What an export archive holds: ``codes`` (uint8 0..15), ``scale`` and ``zero``
        (each group's bfloat16 value as float32; ``.astype(ml_dtypes.bfloat16)`` is exact)."""
        return {"codes": np.asarray(codes, np.uint8), "scale": np.asarray(self.scale),
                "zero": self.zero}

    def scheme(self, n: int) -> dict:
        """The export metadata's ``scheme`` entry: the rule and how to dequantize."""
        g = self.shape[-1] // self.scale.shape[-1]
        return {"format": self.format, "bits": 4, "block_size": g, "granularity": "group",
                "axis": -1, "method": self.method, "zero_point_domain": "float",
                "scale_dtype": "bfloat16", "zero_dtype": "bfloat16",
                "bits_per_element": 4 + 32 / g,
                "dequantize": "x = bf16(bf16((codes - 8) * scale) + zero) per group of "
                              "block_size along the last axis (torchao's "
                              "_dequantize_affine_tinygemm, output bfloat16)"}


def torchao_params(x, name: str, *, method: str = "minmax") -> TorchaoInt4Params:
    """torchao's scales and zeros for ``x`` (``_choose_qparams_affine_tinygemm`` on ``x``
    rounded to bfloat16, groups along the last axis)."""
    if method != "minmax":
        raise EngineValueError(f"format {name!r} takes each group's range as torchao does "
                               f"(method 'minmax'), got method {method!r}")
    xf = as_float32(x)
    xg, g = groups_of(xf, name)
    n = xg.shape[0]
    scale = np.empty(n, np.float32)
    zero = np.empty(n, np.float32)

    def share(lo: int, hi: int) -> None:
        compiled.group_params(xg[lo:hi], scale[lo:hi], zero[lo:hi])

    parallel(share, ranges(n, g))
    bad = ~(np.isfinite(scale) & np.isfinite(zero))
    if bad.any():
        raise EngineValueError(
            f"format {name!r}: {int(bad.sum())} group(s) have a range beyond what bfloat16 "
            f"scales and zeros hold, e.g. group {int(np.argmax(bad))}")
    pshape = (*xf.shape[:-1], xf.shape[-1] // g)
    return TorchaoInt4Params(name, scale.reshape(pshape), axis=-1, group_size=g,
                             symmetric=False, zero=zero.reshape(pshape), shape=tuple(xf.shape))
