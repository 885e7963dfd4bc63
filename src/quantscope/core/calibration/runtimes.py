"""Runtime presets: each runtime's own scale and zero-point formulas and its own arithmetic, so
``params.quantize(x)`` gives that runtime's codes bit for bit.

Every formula is evaluated in the precision the runtime uses (float32 tensors in PyTorch and
TFLite, float64 in ONNX Runtime's Python tool), and the returned :class:`QuantParams` records
the rounding rule and how ``x / scale`` is formed. The range itself comes from ``method``
(min/max by default; :mod:`quantscope.core.calibration.methods` for the others, whose searches use
the
preset's own code range and arithmetic -- the runtime's formulas then turn the range found into
its parameters). Each preset was checked against the real runtime, on real tensors and on
constructed ties (tests/core/test_runtime_oracles.py). Rules, with sources:

``pytorch`` -- PyTorch 2.13 eager, FBGEMM ``torch.quantize_per_tensor`` / ``_per_channel``
(``torch/ao/quantization/observer.py``, ``_calculate_qparams`` of MinMaxObserver /
PerChannelMinMaxObserver):
    ``min_neg = min(min, 0)``, ``max_pos = max(max, 0)``; symmetric:
    ``scale = max(-min_neg, max_pos) / ((qmax − qmin) / 2)`` (qint8: absmax/127.5), zero point
    0 (quint8 symmetric: 128); affine: ``scale = (max_pos − min_neg) / (qmax − qmin)``,
    ``zp = clamp(qmin − round(min_neg / scale))``; both ``scale = max(scale, eps)`` with
    ``eps = finfo(float32).eps``; all in float32. Codes per tensor
    ``nearbyint(fma(x, 1/scale, zp))`` (one fused step, ``arithmetic="fma"``); per channel
    ``nearbyint(float32(float32(x · 1/scale) + zp))`` (``"multiply_add"``: two roundings).
    Default codes: quint8 for affine (activations), qint8 [-128, 127] for symmetric; ``signed=True``
    gives qint8 affine, the activation type of PT2E / XNNPACK / ExecuTorch quantizers.
``pytorch-fake`` -- PyTorch 2.13 ``fake_quantize_per_tensor_affine`` /
``fake_quantize_per_channel_affine`` and PT2E ``quantized_decomposed.quantize_per_tensor`` /
``_per_channel``:
    the same observer formulas; codes ``zp + nearbyint(float32(x · float32(1/scale)))``
    (``"multiply"``: the zero point after rounding).
``pytorch-2.11`` -- PyTorch 2.11 eager on the CPU (x86-64), ``quantize_per_tensor`` /
``_per_channel``:
    the observers as ``pytorch``; codes ``zp + nearbyint(float32(x · float32(1/scale)))``
    (``"multiply"``, as fake quant), per tensor and per channel. Measured, not read: on one
    machine PyTorch 2.11's CPU kernels under ``ATEN_CPU_CAPABILITY`` AVX512, AVX2 and DEFAULT
    gave identical codes, and so did 2.13's three here, while 2.11 and 2.13 differ (the
    fused or twice-rounded sums above) -- the version decides, not the kernel path.
``pytorch-cuda`` -- PyTorch 2.11 (cu130) on CUDA, measured on an NVIDIA H200
(``aten/src/ATen/native/quantized/cuda/AffineQuantizer.cu``; the observers as above, run on
the GPU):
    the observers divide a CUDA tensor by a Python number, which PyTorch's CUDA division
    computes as a multiplication by the number's float32 reciprocal: affine
    ``scale = (max_pos − min_neg) · float32(1 / (qmax − qmin))``, symmetric
    ``scale = amax · float32(1 / ((qmax − qmin) / 2))`` (the CPU divides: 74-75 % of real
    per-channel scales differ by an ulp); the zero point as on the CPU (a tensor divided by a
    tensor is a true division on both). Codes ``nearbyint(x / scale) + zp`` with the scale a C
    ``double``: the float64 quotient, rounded half to even in float64 (``"divide64"``), per
    tensor and per channel alike.
``pytorch-cuda-fake`` -- PyTorch 2.11 (cu130) on CUDA ``fake_quantize_per_tensor_affine``
(a Python-number scale or device-tensor parameters, as the ``FakeQuantize`` module passes) and
``fake_quantize_per_channel_affine`` (``FakeQuantizeCore.cu``):
    the CUDA observers' parameters; codes ``zp + nearbyint(float32(x · float32(1/scale)))``
    (``"multiply"``), as ``pytorch-fake``.
    Both CUDA presets were checked on 7.5M recorded codes of the MiniLM tensors and constructed
    ties, and on a further 9.6M codes of random bit patterns, normal values and 123K ties at
    random scales and zero points (tests/data/pytorch_cuda/), all on PyTorch 2.11. What the
    records do not show: float32 inputs and float32 scales only (a Python-float scale that is
    not a float32 is divided by as that double; bfloat16 / float16 fake quant was not run),
    integer zero points only (fake quant also takes float ones), and one GPU; a later
    ``FakeQuantizeCore.cu`` (read, not run) clamps in float before its int64 conversion,
    which would change only the NaN / inf codes of ``overflow`` below.
``onnxruntime`` -- ONNX Runtime 1.32 (``onnxruntime/python/tools/quantization/quant_utils.py``,
``compute_scale_zp``, ``get_qmin_qmax_for_qType``, ``quantize_nparray``; ``QuantizeLinear``):
    range widened to include 0; symmetric int8 uses the narrow [-127, 127] for its parameters
    and ``±max(|rmin|, |rmax|)``; ``scale = (float64(rmax) − float64(rmin)) / (qmax − qmin)``
    (promoted *before* the subtraction, since 1.31); below float32's tiny: ``scale = 1, zp = 0``;
    else ``zp = round(qmin − rmin / scale)`` (float64, half to even; ``round((qmin + qmax) / 2)``
    when symmetric: 0 for int8, 128 for uint8) and the scale rounded to float32. Codes:
    ``x / scale`` in float32, half to even, saturated at the *type's* range (-128 for int8 even
    with narrow-range parameters). Default codes: uint8 affine (activations), int8 symmetric
    (weights); int4 / uint4 at 4 bits.
``onnxruntime-dynamic`` -- ONNX Runtime 1.32 ``DynamicQuantizeLinear`` (CPU;
``onnxruntime/core/providers/cpu/quantization/dynamicquantizelinear.cc``,
``GetQuantizationParameter``): uint8, per tensor, asymmetric only; its own parameters, all in
float32 (where ``onnxruntime``'s quantization tool subtracts in float64, an ulp apart on 3 of
20 real tensors): range widened to include 0, ``scale = (max − min) / 255.0f`` (1 when
``max == min``), ``zp = RoundHalfToEven(clamp(0 − min / scale, 0, 255))``; codes as
``QuantizeLinear``. NaN is left out of the range and quantizes to 0, as the op does; ±inf in
the input is refused (the op's scale would be inf and every code degenerate).
``tflite`` -- LiteRT 2.3 quantizer and reference kernels (``quantization_utils.cc``;
reference ``AffineQuantize``):
    weights, symmetric: [-127, 127], ``half_range = max(|min|, |max|)``,
    ``scale = half_range / 127.0f`` and the multiplier ``127.0f / half_range`` (both float32),
    codes ``TfLiteRound(x * inv)`` -- half *away* from zero (``SymmetricPerChannelQuantize``).
    Activations, affine int8 [-128, 127] (``GetAsymmetricQuantizationParams``): range widened to
    include 0, ``scale = (max − min) / 255.0f``, ``zp_from_min = qmin − min / scale`` (float32),
    nudged to qmin below, qmax above, else ``std::round`` (half away); codes
    ``TfLiteRound(x / scale) + zp`` (QUANTIZE with the reference kernels: divide, half away).
``tflite-xnnpack`` -- LiteRT 2.3's default interpreter, whose XNNPACK delegate runs QUANTIZE:
    the same parameters; activations are quantized by ``x · float32(1/scale)`` rounded half to
    even, then ``+ zp`` (XNNPACK's f32-qs8 convert). Weights are quantized by the converter,
    so the symmetric rule is ``tflite``'s.
``tflite-optimized`` -- LiteRT 2.3's optimized builtin kernels without a delegate
(``OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES``, XNNPACK off):
    the quantizer's parameters; QUANTIZE as XNNPACK (``x · float32(1/scale)``, half to even),
    NaN, inf and huge values as the reference kernels (int32 conversion, then the zero point
    with wraparound). Its int8 FULLY_CONNECTED requantizes by ruy's rule: ``requantization=
    "ruy"`` of :func:`quantscope.core.labs.matmul.int8_matmul`.
``tensorrt`` -- TensorRT / ModelOpt 0.47 (``modelopt/torch/quantization/tensor_quant.py``):
    symmetric only; ``amax`` per tensor (or per channel), narrow range [-127, 127];
    ``scale = 127 / amax`` in float32 and codes ``round(x * scale)`` half to even, so the
    multiplier is recorded as ``inv_scale = float32(127 / amax)`` next to the stored
    ``scale = float32(amax / 127)`` (the Q/DQ scale ModelOpt exports); ``amax <= 2^-24``
    quantizes everything to 0 (stored as scale 1).

NaN and ±inf in the tensor a preset calibrates on are left out of its range (the engine's
rule): PyTorch's observers, on the CPU and on CUDA alike, return a NaN or infinite scale there
(recorded in tests/data/pytorch_cuda/, ``special/observers_json``), which quantizes nothing.
What each runtime does with NaN and ±inf *values* is the parameters' ``overflow`` rule, used by
``quantize(x, nonfinite="runtime")``.

An argument a preset fixes (``signed``, ``narrow_range``, ``rounding``, ``arithmetic``) may be
left as None (the runtime's default) or given with the runtime's own value; anything else is an
:class:`EngineValueError`, never silently replaced. Degenerate ranges never give a zero or NaN
scale: where a runtime would store 0 (all-zero TFLite/TensorRT units), the stored scale is 1.0
with the same codes (all values are 0).
"""

from __future__ import annotations

import numpy as np

from quantscope.core.calibration.methods import method_range
from quantscope.core.schemes.qparams import QuantParams, code_range
from quantscope.core.tensors.validate import EngineValueError

#: Preset name -> what it reproduces (the window's preset list shows these).
PRESETS = {
    "pytorch": "PyTorch 2.13, CPU: FBGEMM quantize_per_tensor / quantize_per_channel",
    "pytorch-fake": "PyTorch 2.13, CPU: fake quant and PT2E quantized_decomposed",
    "pytorch-2.11": "PyTorch 2.11, CPU: quantize_per_tensor / quantize_per_channel",
    "pytorch-cuda": "PyTorch 2.11, CUDA (H200): observers, quantize_per_tensor / _per_channel",
    "pytorch-cuda-fake": "PyTorch 2.11, CUDA (H200): observers, fake_quantize_per_*_affine",
    "onnxruntime": "ONNX Runtime 1.32, CPU: compute_scale_zp, QuantizeLinear",
    "onnxruntime-dynamic": "ONNX Runtime 1.32, CPU: DynamicQuantizeLinear (uint8)",
    "tflite": "LiteRT 2.3, CPU: quantizer, reference kernels (QUANTIZE)",
    "tflite-xnnpack": "LiteRT 2.3, CPU: default interpreter (XNNPACK QUANTIZE)",
    "tflite-optimized": "LiteRT 2.3, CPU: optimized builtin kernels, no delegate (QUANTIZE)",
    "tensorrt": "TensorRT / ModelOpt 0.47, GPU: symmetric, x · 127/amax",
}
RUNTIMES = tuple(PRESETS)
_F32 = np.float32
_EPS32 = _F32(np.finfo(np.float32).eps)
_TINY32 = float(np.finfo(np.float32).tiny)


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """C ``round``/``std::round``: halves go away from zero."""
    t = np.trunc(v)
    return t + np.copysign((np.abs(v - t) >= 0.5).astype(v.dtype), v)


def _fixed(runtime: str, what: str, given, allowed: tuple, why: str):
    """The value of an argument the runtime decides: ``given`` if it is one of ``allowed``
    (None means the first), else a clear error."""
    if given is None:
        return allowed[0]
    if given not in allowed:
        raise EngineValueError(f"runtime {runtime!r}: {what}={given!r} contradicts the preset "
                               f"({why}); leave {what} unset for the runtime's default")
    return given


class _Scheme:
    """What a preset decides before seeing the range: codes, saturation and arithmetic."""

    def __init__(self, runtime: str, *, symmetric: bool, signed, narrow_range, bits: int,
                 per_channel: bool) -> None:
        self.runtime, self.symmetric, self.bits = runtime, symmetric, bits
        self.per_channel = per_channel
        # set by the runtime's rule below
        self.qmin = self.qmax = self.sat_min = self.sat_max = 0
        self.rounding: str = "half_even"
        self.arithmetic: str = "divide"
        #: the runtime's codes for NaN, ±inf and huge values (schemes.overflow); None: unmeasured
        self.overflow: str | None = None
        rule = _SCHEMES[runtime]
        rule(self, signed, narrow_range)

    def codes(self, signed: bool, narrow: bool) -> None:
        self.qmin, self.qmax = code_range(self.bits, symmetric=self.symmetric,
                                          narrow_range=narrow, signed=signed)
        self.sat_min, self.sat_max = self.qmin, self.qmax


def _pytorch_scheme(sc: _Scheme, signed, narrow_range) -> None:
    fake = sc.runtime.endswith("-fake")
    what = "signed codes: qint8 (default for symmetric) or quint8 (default for affine)"
    signed = _fixed(sc.runtime, "signed", signed, (True, False) if sc.symmetric
                    else (False, True), what)
    sc.codes(signed, bool(narrow_range))  # a custom quant_min / quant_max, as observers allow
    sc.rounding = "half_even"
    if fake or sc.runtime == "pytorch-2.11":
        sc.arithmetic = "multiply"
    elif sc.runtime == "pytorch-cuda":
        sc.arithmetic = "divide64"
    else:
        sc.arithmetic = "multiply_add" if sc.per_channel else "fma"
    sc.overflow = _PYTORCH_OVERFLOW[sc.runtime][sc.per_channel]


#: preset -> (per tensor, per channel) rule for NaN, ±inf and huge values, as measured
#: (schemes.overflow): CPU kernels on PyTorch 2.13 here and 2.11 beside the GPU, CUDA on an H200.
_PYTORCH_OVERFLOW = {
    "pytorch": ("nan_to_qmax", "nan_to_zero"),
    "pytorch-fake": ("nan_to_qmin", "int64_indefinite"),
    "pytorch-2.11": ("int32_capped_wrap", "nan_to_zero"),
    "pytorch-cuda": ("nan_to_qmin", "nan_to_qmin"),
    "pytorch-cuda-fake": ("nan_to_qmin", "int64_wrap"),
}


def _dynamic_scheme(sc: _Scheme, signed, narrow_range) -> None:
    if sc.symmetric or sc.per_channel or sc.bits != 8:
        raise EngineValueError("runtime 'onnxruntime-dynamic' (DynamicQuantizeLinear) is "
                               "asymmetric, per tensor and 8-bit (uint8) only")
    _fixed(sc.runtime, "signed", signed, (False,), "DynamicQuantizeLinear outputs uint8")
    _fixed(sc.runtime, "narrow_range", narrow_range, (False,), "its codes are 0 to 255")
    sc.codes(False, False)
    sc.rounding, sc.arithmetic, sc.overflow = "half_even", "divide", "nan_to_qmin"


def _onnxruntime_scheme(sc: _Scheme, signed, narrow_range) -> None:
    if sc.bits not in (4, 8):
        raise EngineValueError(f"runtime 'onnxruntime' quantizes to 4 or 8 bits (int4/uint4, "
                               f"int8/uint8), got bits={sc.bits}")
    signed = _fixed("onnxruntime", "signed", signed, (True, False) if sc.symmetric
                    else (False, True), "int8 weights, uint8 activations by default")
    narrow = sc.symmetric and signed and sc.bits == 8  # ONNX_INT_TYPE_SYMMETRIC_RANGE
    _fixed("onnxruntime", "narrow_range", narrow_range, (narrow,),
           "its code range follows from the type: only symmetric int8 is narrow")
    sc.codes(signed, narrow)
    sc.sat_min = code_range(sc.bits, symmetric=False, narrow_range=False, signed=signed)[0]
    sc.rounding, sc.arithmetic = "half_even", "divide"
    sc.overflow = "nan_to_qmin"  # MLAS clamps with max(v, lo) first: NaN gives the type's min


def _tflite_scheme(sc: _Scheme, signed, narrow_range) -> None:
    _fixed(sc.runtime, "signed", signed, (True,), "the LiteRT quantizer produces int8 codes")
    _fixed(sc.runtime, "narrow_range", narrow_range, (sc.symmetric,),
           "weights are narrow [-127, 127], activations full [-128, 127]")
    sc.codes(True, sc.symmetric)
    if sc.symmetric or sc.runtime == "tflite":  # the converter's weights; reference QUANTIZE
        sc.rounding, sc.arithmetic = "half_away", ("multiply" if sc.symmetric else "divide")
    else:  # XNNPACK's QUANTIZE: x * (1/scale), rounded half to even
        sc.rounding, sc.arithmetic = "half_even", "multiply"
    if not sc.symmetric:  # the QUANTIZE op, measured; the converter's weights were not
        # XNNPACK clamps in float first; the builtin kernels convert to int32, then add
        sc.overflow = "nan_to_qmax" if sc.runtime == "tflite-xnnpack" else "int32_indefinite_wrap"


def _tensorrt_scheme(sc: _Scheme, signed, narrow_range) -> None:
    if not sc.symmetric:
        raise EngineValueError("TensorRT int8 quantization is symmetric only (no zero point)")
    _fixed("tensorrt", "signed", signed, (True,), "TensorRT codes are signed")
    sc.codes(True, True if narrow_range is None else bool(narrow_range))
    sc.rounding, sc.arithmetic = "half_even", "multiply"


_SCHEMES = {"pytorch": _pytorch_scheme, "pytorch-fake": _pytorch_scheme,
            "pytorch-2.11": _pytorch_scheme, "pytorch-cuda": _pytorch_scheme,
            "pytorch-cuda-fake": _pytorch_scheme,
            "onnxruntime": _onnxruntime_scheme, "onnxruntime-dynamic": _dynamic_scheme,
            "tflite": _tflite_scheme,
            "tflite-xnnpack": _tflite_scheme, "tflite-optimized": _tflite_scheme,
            "tensorrt": _tensorrt_scheme}


def runtime_scheme(runtime: str, *, symmetric: bool, signed=None, narrow_range=None,
                   bits: int = 8, per_channel: bool = False, rounding: str | None = None,
                   arithmetic: str | None = None) -> _Scheme:
    """The code range, saturation range, rounding and arithmetic ``runtime`` uses, after
    checking the explicit arguments against it (see the module docstring)."""
    if runtime not in RUNTIMES:
        raise EngineValueError(f"runtime must be one of {RUNTIMES}, got {runtime!r}")
    sc = _Scheme(runtime, symmetric=symmetric, signed=signed, narrow_range=narrow_range,
                 bits=bits, per_channel=per_channel)
    _fixed(runtime, "rounding", rounding, (sc.rounding,), f"it rounds {sc.rounding}")
    _fixed(runtime, "arithmetic", arithmetic, (sc.arithmetic,),
           f"it forms x / scale by {sc.arithmetic!r} here")
    return sc


def preset_fixes(runtime: str, bits: int = 8, per_channel: bool = False
                 ) -> dict[str, dict | None]:
    """What ``runtime`` decides in place of the caller, per scheme, read from its rules
    above (nothing is quantized to find out): ``{"symmetric": ..., "asymmetric": ...}``,
    each None where the runtime refuses the scheme (TensorRT has no zero point), else a dict
    of ``qmin``, ``qmax`` (the codes that can occur), ``signed``, ``rounding``,
    ``arithmetic`` and ``narrow_range``:
    None when the runtime takes the caller's code range, else the one it fixes (True:
    narrow). A runtime may round its two schemes differently (LiteRT's XNNPACK: weights half
    away from zero, activations half to even), so a control showing one rule for both would
    say something false about one of them."""
    out: dict[str, dict | None] = {}
    for name, symmetric in (("symmetric", True), ("asymmetric", False)):
        try:
            sc = runtime_scheme(runtime, symmetric=symmetric, bits=bits, per_channel=per_channel)
        except EngineValueError:
            out[name] = None
            continue
        ranges = set()
        for narrow in (True, False):
            try:
                other = runtime_scheme(runtime, symmetric=symmetric, bits=bits,
                                       per_channel=per_channel, narrow_range=narrow)
            except EngineValueError:
                continue
            ranges.add((other.qmin, other.qmax))
        fixed = None if len(ranges) > 1 else sc.qmin == -sc.qmax
        # the codes that can occur: a runtime may saturate wider than its scale's range
        out[name] = {"qmin": sc.sat_min, "qmax": sc.sat_max, "signed": sc.sat_min < 0,
                     "rounding": sc.rounding, "arithmetic": sc.arithmetic,
                     "narrow_range": fixed}
    return out


def runtime_qparams(xf: np.ndarray, runtime: str, *, symmetric: bool, axis: int | None,
                    group_size: int | None, bits: int = 8, narrow_range: bool | None = None,
                    signed: bool | None = None, rounding: str | None = None,
                    arithmetic: str | None = None, method: str = "minmax",
                    **method_options) -> QuantParams:
    """Parameters by ``runtime``'s rules for the range that ``method`` finds (see module doc)."""
    sc = runtime_scheme(runtime, symmetric=symmetric, signed=signed, narrow_range=narrow_range,
                        bits=bits, per_channel=axis is not None, rounding=rounding,
                        arithmetic=arithmetic)
    if runtime == "onnxruntime-dynamic" and np.isinf(xf).any():
        raise EngineValueError("x holds ±inf: DynamicQuantizeLinear would compute an infinite "
                               "scale (ONNX Runtime returns scale inf and degenerate codes)")
    lo, hi = method_range(xf, method=method, symmetric=symmetric, axis=axis,
                          group_size=group_size, bits=bits, codes=(sc.qmin, sc.qmax),
                          rounding=sc.rounding, arithmetic=sc.arithmetic, **method_options)
    lo = np.asarray(lo, np.float64).astype(_F32)
    hi = np.asarray(hi, np.float64).astype(_F32)
    rule = {"pytorch": _pytorch, "pytorch-fake": _pytorch, "pytorch-2.11": _pytorch,
            "pytorch-cuda": _pytorch,
            "pytorch-cuda-fake": _pytorch, "onnxruntime": _onnxruntime,
            "onnxruntime-dynamic": _dynamic,
            "tflite": _tflite, "tflite-xnnpack": _tflite, "tflite-optimized": _tflite,
            "tensorrt": _tensorrt}[runtime]
    fields = rule(lo, hi, sc)
    return QuantParams(axis=axis, group_size=group_size, symmetric=symmetric, runtime=runtime,
                       method=method, qmin=sc.sat_min, qmax=sc.sat_max, rounding=sc.rounding,
                       arithmetic=sc.arithmetic, overflow=sc.overflow, **fields)


def _per_number(v: np.ndarray, number: float, cuda: bool) -> np.ndarray:
    """A float32 tensor divided by a Python number as PyTorch computes it: on the CPU a true
    division, on CUDA a multiplication by the number's float32 reciprocal."""
    if cuda:
        return v * (_F32(1) / _F32(number))
    return v / _F32(number)


def _pytorch(lo, hi, sc: _Scheme) -> dict:
    qmin, qmax = sc.qmin, sc.qmax
    cuda = sc.runtime.startswith("pytorch-cuda")
    min_neg = np.minimum(lo, _F32(0))
    max_pos = np.maximum(hi, _F32(0))
    if sc.symmetric:
        amax = np.maximum(-min_neg, max_pos)
        scale = np.maximum(_per_number(amax, (qmax - qmin) / 2, cuda), _EPS32)
        # quint8 symmetric: 128 on the default range, (qmin + qmax) // 2 on a custom one
        mid = 0 if qmin < 0 else (128 if (qmin, qmax) == (0, 255) else (qmin + qmax) // 2)
        zp = np.full(scale.shape, mid, np.int32)
    else:
        scale = np.maximum(_per_number(max_pos - min_neg, qmax - qmin, cuda), _EPS32)
        zp = np.clip(qmin - np.rint(min_neg / scale), qmin, qmax).astype(np.int32)
    return dict(scale=scale.astype(_F32), zero_point=zp)


def _onnxruntime(lo, hi, sc: _Scheme) -> dict:
    qmin, qmax = sc.qmin, sc.qmax
    rmin = np.minimum(lo, _F32(0))
    rmax = np.maximum(hi, _F32(0))
    if sc.symmetric:
        absmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -absmax, absmax
    scale64 = (rmax.astype(np.float64) - rmin.astype(np.float64)) / (float(qmax) - float(qmin))
    tiny = scale64 < _TINY32
    safe = np.where(tiny, 1.0, scale64)
    if sc.symmetric:
        zp = np.full(scale64.shape, np.rint((qmin + qmax) / 2.0))
    else:
        zp = np.rint(qmin - rmin.astype(np.float64) / safe)
    zp = np.where(tiny, 0, zp).astype(np.int32)
    scale = np.where(tiny, _F32(1.0), scale64.astype(_F32))
    return dict(scale=scale, zero_point=zp)


def _dynamic(lo, hi, sc: _Scheme) -> dict:
    mn = np.minimum(lo, _F32(0))
    mx = np.maximum(hi, _F32(0))
    same = mx == mn
    scale = np.where(same, _F32(1), (mx - mn) / _F32(sc.qmax - sc.qmin)).astype(_F32)
    initial = (_F32(sc.qmin) - mn / scale).astype(_F32)
    zp = np.rint(np.clip(initial, _F32(sc.qmin), _F32(sc.qmax))).astype(np.int32)
    return dict(scale=scale, zero_point=zp)


def _tflite(lo, hi, sc: _Scheme) -> dict:
    qmin, qmax = sc.qmin, sc.qmax
    if sc.symmetric:  # weights: kMinQuantizedValue = -127, kMaxQuantizedValue = 127
        half_range = np.maximum(np.abs(lo), np.abs(hi))
        zero = half_range == 0
        safe = np.where(zero, _F32(1.0), half_range)
        scale = np.where(zero, _F32(1.0), safe / _F32(qmax))
        inv = np.where(zero, _F32(1.0), _F32(qmax) / safe)
        return dict(scale=scale.astype(_F32), zero_point=np.zeros(scale.shape, np.int32),
                    inv_scale=inv.astype(_F32))
    mn = np.minimum(lo, _F32(0))
    mx = np.maximum(hi, _F32(0))
    scale = (mx - mn) / _F32(qmax - qmin)
    zero = scale == 0
    safe = np.where(zero, _F32(1.0), scale)
    zp_from_min = np.where(zero, _F32(qmin), _F32(qmin) - mn / safe)
    zp = np.where(zp_from_min < qmin, qmin,
                  np.where(zp_from_min > qmax, qmax, _round_half_away(zp_from_min)))
    return dict(scale=safe.astype(_F32), zero_point=zp.astype(np.int32))


def _tensorrt(lo, hi, sc: _Scheme) -> dict:
    amax = np.maximum(np.abs(lo), np.abs(hi))
    max_bound = _F32((1 << (sc.bits - 1)) - 1)
    zero = amax <= _F32(1.0 / (1 << 24))  # ModelOpt: amax below fp16's smallest -> all zeros
    safe = np.where(zero, _F32(1.0), amax)
    inv = np.where(zero, _F32(1.0), max_bound / safe)
    scale = np.where(zero, _F32(1.0), safe / max_bound)
    return dict(scale=scale.astype(_F32), zero_point=np.zeros(scale.shape, np.int32),
                inv_scale=inv.astype(_F32))
