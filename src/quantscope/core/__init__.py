"""The NumPy engine: no Qt, no file I/O, no global state.

Subpackages, each importing only those listed after it (the import contracts in
``pyproject.toml`` hold this order): :mod:`~quantscope.core.labs` (matmul, requantization,
outlier fixes, the explanatory views' data), :mod:`~quantscope.core.calibration` (range methods,
runtime presets, choosing parameters), :mod:`~quantscope.core.stats` (reports and the exact
statistics behind them), :mod:`~quantscope.core.formats` (element types and block formats),
:mod:`~quantscope.core.schemes` (integer scale, zero point and the quantize rule), then at the
bottom :mod:`~quantscope.core.tensors` (input checks, layouts), :mod:`~quantscope.core.kernels`
(the compiled loops and their threads) and :mod:`~quantscope.core.text` (numbers as text).
"""

from quantscope.core.calibration.choose import choose_qparams
from quantscope.core.labs.matmul import MatmulReport, int8_matmul
from quantscope.core.labs.outliers import (
    MatmulLabResult,
    outlier_columns,
    quantized_matmul,
    smoothquant_scales,
)
from quantscope.core.labs.requant import multiply_by_quantized_multiplier, quantize_multiplier
from quantscope.core.schemes.qparams import QuantParams, code_range, params_from_range
from quantscope.core.schemes.quantize import dequantize, quantize, quantize_fp32_to_int8
from quantscope.core.stats.analyze import analyze
from quantscope.core.stats.prepared import Prepared, clip_sweep, prepare
from quantscope.core.stats.report import QuantReport, UnitStats
from quantscope.core.stats.sweep import ClipSweep
from quantscope.core.tensors.validate import EngineTypeError, EngineValueError

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
