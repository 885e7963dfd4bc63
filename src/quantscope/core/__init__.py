"""The NumPy engine: no Qt, no file I/O, no global state.

Modules: :mod:`~quantscope.core.quantize` (codes and values), :mod:`~quantscope.core.qparams`
(scale and zero point), :mod:`~quantscope.core.layout` (per-channel / per-group shapes),
:mod:`~quantscope.core.analyze` (exact error split, direct pass) and
:mod:`~quantscope.core.report` (what a report holds).
"""

from quantscope.core.analyze import analyze
from quantscope.core.choose import choose_qparams
from quantscope.core.matmul import MatmulReport, int8_matmul
from quantscope.core.outliers import (
    MatmulLabResult,
    outlier_columns,
    quantized_matmul,
    smoothquant_scales,
)
from quantscope.core.prepared import Prepared, clip_sweep, prepare
from quantscope.core.qparams import QuantParams, code_range, params_from_range
from quantscope.core.quantize import dequantize, quantize, quantize_fp32_to_int8
from quantscope.core.report import QuantReport, UnitStats
from quantscope.core.requant import multiply_by_quantized_multiplier, quantize_multiplier
from quantscope.core.sweep import ClipSweep
from quantscope.core.validate import EngineTypeError, EngineValueError

__all__ = [
    "ClipSweep",
    "EngineTypeError",
    "EngineValueError",
    "MatmulLabResult",
    "MatmulReport",
    "Prepared",
    "QuantParams",
    "QuantReport",
    "UnitStats",
    "analyze",
    "choose_qparams",
    "clip_sweep",
    "code_range",
    "dequantize",
    "int8_matmul",
    "multiply_by_quantized_multiplier",
    "outlier_columns",
    "params_from_range",
    "prepare",
    "quantize",
    "quantize_fp32_to_int8",
    "quantize_multiplier",
    "quantized_matmul",
    "smoothquant_scales",
]
