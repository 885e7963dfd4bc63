"""The integer matmul an int8 kernel runs: int8 x int8 -> int32 -> int8, bit-exact with TFLite.

``y = a @ b`` with ``a_q`` [M, K] (activations, per tensor, or per row as LLM.int8() does),
``b_q`` [K, N] (weights, per tensor or per output channel along axis 1), accumulated in int32
with the zero-point convention ``real = scale * (q - zp)``:

    acc[m, n] = sum_k (a[m,k] - za)(b[k,n] - zb[n]) + bias[n]
              = (A·B)[m,n] - zb[n]·rowsum(A)[m] - za·colsum(B)[n] + K·za·zb[n] + bias[n]

The second line is gemmlowp's expansion: the kernel multiplies the raw codes and pays for the
zero points with one row sum per activation row, one column sum per weight column (constant,
so computed once offline) and up to three extra terms per output. Then the requantization by
``M = s_a * s_b / s_out`` (LiteRT's reference single rounding by default; gemmlowp's double
rounding or XNNPACK's float32 path by name, see :mod:`.requant`), ``+ zp_out`` and saturation.

Exactness without a slow integer matmul (numpy has no integer BLAS): every product of two codes
is an integer of magnitude <= ``max|a|·max|b|`` and every partial sum a BLAS kernel can form,
in any order or blocking, is bounded by ``K·max|a|·max|b|``. While that bound is <= 2^24 a
float32 GEMM is exact (every integer up to 2^24 is a float32); up to 2^53 a float64 GEMM is.
For int8 codes that is K <= 1024 in float32 and K <= 2^39 in float64; the report names the path.

The int32 accumulator of a device wraps (two's complement). Integer addition is associative
modulo 2^32, so whatever the summation order, the device's value is the exact sum reduced
modulo 2^32: we compute the exact sum in int64, report whether it left int32, and feed the
wrapped value to the requantization as the device would.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantscope.core.labs.requant import (
    INT32_MAX,
    INT32_MIN,
    MAX_SHIFT,
    REQUANT_RULES,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    requantize_fp32,
    requantize_ruy,
    wrap_int32,
)
from quantscope.core.schemes.qparams import QuantParams
from quantscope.core.stats.report import sqnr_db
from quantscope.core.tensors.validate import EngineTypeError, EngineValueError

__all__ = ["ErrorStats", "MatmulReport", "accumulate_int32", "error_stats", "int8_matmul"]

_F32_EXACT = 2**24
_F64_EXACT = 2**53


@dataclass(frozen=True, eq=False)
class ErrorStats:
    """Error of an output against a reference: ``error = output - reference`` (float64)."""

    error: np.ndarray
    mse: float
    max_abs_error: float
    sqnr_db: float
    sqnr_db_per_channel: np.ndarray  # one per output column n


@dataclass(frozen=True, eq=False)
class MatmulReport:
    """Everything the integer path did, in the terms a kernel engineer checks.

    Accumulator figures are the exact sums (bias included) before the int32 wrap.
    ``max_safe_k`` is the largest depth K for which *no* operand values within the observed
    ranges could overflow int32 (``max_safe_k_codes``: within the full code ranges); ``None``
    means no K can (all products are zero). Requantization fields are empty when the
    accumulator is dequantized to float instead (``out_params=None``).
    """

    m: int
    k: int
    n: int
    gemm_path: str
    accumulator_min: int
    accumulator_max: int
    headroom_bits: float
    accumulator_overflows: int
    product_min: int
    product_max: int
    max_safe_k: int | None
    max_safe_k_codes: int | None
    real_multiplier: np.ndarray
    multiplier_q31: np.ndarray
    shift: np.ndarray
    shift_overflows: int
    saturated_low: int
    saturated_high: int
    macs: int
    zero_point_terms_per_output: int
    zero_point_ops: int
    zero_point_offline_ops: int
    vs_dequantized: ErrorStats
    vs_float: ErrorStats | None

    @property
    def saturated(self) -> int:
        """Outputs clamped to qmin or qmax by the final saturation."""
        return self.saturated_low + self.saturated_high

    @property
    def saturated_fraction(self) -> float:
        return self.saturated / (self.m * self.n) if self.m * self.n else 0.0

    @property
    def zero_point_overhead(self) -> float:
        """Run-time zero-point work per multiply-accumulate of the main product."""
        return self.zero_point_ops / self.macs if self.macs else 0.0


def error_stats(output: np.ndarray, reference: np.ndarray) -> ErrorStats:
    """SQNR (total and per output column), MSE and max |error| of ``output`` vs ``reference``."""
    ref = np.asarray(reference, np.float64)
    err = np.asarray(output, np.float64) - ref
    col_err = np.einsum("ij,ij->j", err, err)  # no squared temporaries: this runs per drag
    col_ref = np.einsum("ij,ij->j", ref, ref)
    total_err = float(col_err.sum())
    return ErrorStats(
        error=err,
        mse=total_err / err.size if err.size else float("nan"),
        max_abs_error=float(max(err.max(), -err.min())) if err.size else 0.0,
        sqnr_db=sqnr_db(col_ref.sum(), total_err),
        sqnr_db_per_channel=np.atleast_1d(sqnr_db(col_ref, col_err)),
    )


def _codes(x: object, what: str, params) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu" or arr.dtype.itemsize > 2:
        raise EngineTypeError(f"{what} must hold integer codes (int8/uint8), got {arr.dtype}")
    if arr.ndim != 2:
        raise EngineValueError(f"{what} must be 2-D, got shape {arr.shape}")
    if arr.size and (arr.min() < params.qmin or arr.max() > params.qmax):
        raise EngineValueError(
            f"{what} has codes in [{arr.min()}, {arr.max()}], outside its parameters' "
            f"range [{params.qmin}, {params.qmax}]"
        )
    return arr


def _side(params, what: str, along: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Scale (float64) and zero point (int64) shaped to broadcast over [M, N]: scalars per
    tensor, a column [M, 1] per row of ``a`` (along=0), a row [1, N] per column (along=1)."""
    if not isinstance(params, QuantParams):
        raise EngineTypeError(f"{what} must be a QuantParams, got {type(params).__name__}")
    if params.group_size is not None:
        raise EngineValueError(
            f"{what}: per-group parameters need one accumulator per group; the int8 matmul "
            "takes per-tensor or per-channel parameters"
        )
    scale = np.asarray(params.scale, np.float64)
    zp = np.asarray(params.zero_point, np.int64)
    if params.axis is None:
        return scale.reshape(()), zp.reshape(())
    if params.axis % 2 != along:
        raise EngineValueError(
            f"{what} is per-channel along axis {params.axis}; here only axis {along} "
            f"(the {'rows of a' if along == 0 else 'output columns'}) can carry a scale"
        )
    if scale.shape != (length,):
        raise EngineValueError(f"{what} has {scale.size} channel scales, expected {length}")
    shape = (length, 1) if along == 0 else (1, length)
    return scale.reshape(shape), np.broadcast_to(zp, (length,)).reshape(shape)


def _exact_gemm(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, str]:
    """Integer A·B through a float GEMM that provably makes no rounding (module docstring)."""
    k = a.shape[1]
    amax = int(np.abs(a.astype(np.int32)).max()) if a.size else 0
    bmax = int(np.abs(b.astype(np.int32)).max()) if b.size else 0
    bound = k * amax * bmax
    prod: np.ndarray  # float32, float64 or int64: whichever GEMM is exact
    if bound <= _F32_EXACT:
        prod = a.astype(np.float32) @ b.astype(np.float32)
        path = f"float32 GEMM, exact: K·max|a|·max|b| = {bound} <= 2^24"
    elif bound <= _F64_EXACT:
        prod = a.astype(np.float64) @ b.astype(np.float64)
        path = f"float64 GEMM, exact: K·max|a|·max|b| = {bound} <= 2^53"
    else:  # unreachable for 8-bit codes below K = 2^37; kept so the result is never wrong
        prod = a.astype(np.int64) @ b.astype(np.int64)
        path = "int64 GEMM (bound exceeds 2^53)"
    return prod.astype(np.int64), path


def accumulate_int32(a_q, b_q, za, zb, bias=None) -> tuple[np.ndarray, str]:
    """Exact accumulator ``sum_k (a - za)(b - zb) + bias`` as int64, by gemmlowp's expansion.

    ``za`` broadcasts as a scalar or an [M, 1] column, ``zb`` as a scalar or a [1, N] row.
    Returns the int64 sums (not yet wrapped to int32) and a description of the GEMM path.
    """
    a = np.asarray(a_q)
    b = np.asarray(b_q)
    k = a.shape[1]
    acc, path = _exact_gemm(a, b)
    za = np.asarray(za, np.int64)
    zb = np.asarray(zb, np.int64)
    if zb.any():
        acc -= zb * a.sum(axis=1, dtype=np.int64)[:, None]
    if za.any():
        acc -= za * b.sum(axis=0, dtype=np.int64)[None, :]
        if zb.any():
            acc += k * za * zb
    if bias is not None:
        acc += bias
    return acc, path


def _max_safe_k(a_lo, a_hi, b_lo, b_hi, bias_col) -> tuple[int | None, int, int]:
    """Largest K such that K products within the given ranges, plus the bias, stay in int32.

    ``a_lo/a_hi`` are scalars, ``b_lo/b_hi/bias_col`` 1-D per output column. A product of two
    ranges is extreme at a corner; the sum of K of them lies in ``[K·pmin, K·pmax] + bias``.
    """
    corners = np.stack([a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi])
    pmax = corners.max(axis=0)
    pmin = corners.min(axis=0)
    big = np.iinfo(np.int64).max
    with np.errstate(divide="ignore"):
        k_up = np.where(pmax > 0, (INT32_MAX - bias_col) // np.maximum(pmax, 1), big)
        k_dn = np.where(pmin < 0, (bias_col - INT32_MIN) // np.maximum(-pmin, 1), big)
    k = int(np.minimum(k_up, k_dn).min()) if pmax.size else big
    return (None if k == big else max(k, 0)), int(pmin.min(initial=0)), int(pmax.max(initial=0))


def int8_matmul(
    a_q,
    b_q,
    *,
    a_params,
    b_params,
    out_params,
    bias=None,
    float_reference=None,
    requantization: str = "single",
) -> tuple[np.ndarray, MatmulReport]:
    """Run the integer kernel ``y = a @ b`` and report where it overflows, saturates and errs.

    Parameters
    ----------
    a_q : int8/uint8 array [M, K]
        Activation codes; ``a_params`` per tensor (TFLite) or per row (axis 0, LLM.int8()).
    b_q : int8/uint8 array [K, N]
        Weight codes; ``b_params`` per tensor or per output channel (axis 1).
    out_params : QuantParams or None
        Output scale/zero point (per tensor, or per column along axis 1). ``None`` skips the
        requantization and returns the accumulator dequantized to float64,
        ``s_a·s_b·acc``, as LLM.int8() / bitsandbytes do.
    bias : int array [N], optional
        int32 bias at scale ``s_a·s_b`` and zero point 0 (TFLite's convention).
    float_reference : float array [M, N], optional
        The original float matmul, for the ``vs_float`` error.
    requantization : {"single", "double", "fp32", "ruy"}
        ``"single"`` (default): LiteRT's reference kernels, one rounding of the Q31 product;
        ``"double"``: gemmlowp's two roundings; ``"fp32"``: XNNPACK's
        ``rint(f32(acc) · f32(f32(s_a·s_b) / s_out))``; ``"ruy"``: LiteRT's optimized
        builtin kernels, two roundings with ties up (see :mod:`.requant`). The report's
        ``multiplier_q31`` and ``shift`` are those of the single rounding for ``"fp32"`` too
        (what the reference kernel would use), ``real_multiplier`` is exact.

    Returns
    -------
    (output, report)
        int8/uint8 codes [M, N] (float64 values when ``out_params`` is None) and a
        :class:`MatmulReport`. ``report.vs_dequantized`` compares the output with the exact
        product of the dequantized inputs, ``s_a·s_b·acc`` in float64 (the same numbers a float64
        matmul of ``scale·(q - zp)`` would give, without its rounding).
    """
    for what, params in (("a_params", a_params), ("b_params", b_params)):
        if not isinstance(params, QuantParams):
            raise EngineTypeError(f"{what} must be a QuantParams, got {type(params).__name__}")
    if requantization not in REQUANT_RULES:
        raise EngineValueError(f"requantization must be one of {tuple(REQUANT_RULES)}, got "
                               f"{requantization!r}")
    a = _codes(a_q, "a_q", a_params)
    b = _codes(b_q, "b_q", b_params)
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k:
        raise EngineValueError(f"a_q is [{m}, {k}] but b_q is {list(b.shape)}: K differs")
    sa, za = _side(a_params, "a_params", 0, m)
    sb, zb = _side(b_params, "b_params", 1, n)
    bias_vec = np.zeros(n, np.int64)
    if bias is not None:
        bias_arr = np.asarray(bias)
        if bias_arr.dtype.kind not in "iu" or bias_arr.shape != (n,):
            raise EngineValueError(f"bias must be an integer array of shape ({n},)")
        if sa.ndim:
            raise EngineValueError(
                "an int32 bias needs one activation scale (bias scale = s_a·s_b); with per-row "
                "activation scales add the bias in float after dequantizing"
            )
        bias_vec = bias_arr.astype(np.int64)
        if bias_vec.size and (bias_vec.min() < INT32_MIN or bias_vec.max() > INT32_MAX):
            raise EngineValueError("bias values must fit int32")

    acc, path = accumulate_int32(a, b, za, zb, bias_vec if bias is not None else None)
    overflows = int(np.count_nonzero((acc < INT32_MIN) | (acc > INT32_MAX)))
    acc32 = wrap_int32(acc)
    acc_lo = int(acc.min()) if acc.size else 0
    acc_hi = int(acc.max()) if acc.size else 0
    peak = max(abs(acc_lo), abs(acc_hi))
    headroom = float(np.log2(2.0**31 / peak)) if peak else float("inf")

    # worst case over the observed operand ranges, and over the full code ranges
    zb_row = np.broadcast_to(zb, (1, n)).ravel()
    za_col = np.broadcast_to(za, (m, 1)).ravel()
    za_any = za_col if m else np.zeros(1, np.int64)
    a_lo = int((a.min(axis=1) - za_col).min()) if a.size else 0
    a_hi = int((a.max(axis=1) - za_col).max()) if a.size else 0
    b_lo = (b.min(axis=0).astype(np.int64) - zb_row) if k else np.zeros(n, np.int64)
    b_hi = (b.max(axis=0).astype(np.int64) - zb_row) if k else np.zeros(n, np.int64)
    safe_k, p_lo, p_hi = _max_safe_k(a_lo, a_hi, b_lo, b_hi, bias_vec)
    safe_k_codes, _, _ = _max_safe_k(
        int(a_params.qmin - za_any.max()),
        int(a_params.qmax - za_any.min()),
        b_params.qmin - zb_row,
        b_params.qmax - zb_row,
        bias_vec,
    )

    product_scale = sa * sb  # [M|1, N|1] broadcast
    dequantized_ref = acc.astype(np.float64) * product_scale
    zb_nonzero = bool(np.any(zb))
    za_nonzero = bool(np.any(za))
    terms = int(zb_nonzero) + int(za_nonzero) + int(zb_nonzero and za_nonzero)

    empty: np.ndarray = np.zeros(0)
    if out_params is None:  # what the device dequantizes is the wrapped accumulator
        output = acc32.astype(np.float64) * product_scale
        real = mult = shifts = empty
        wraps = sat_lo = sat_hi = 0
        out_values = output
    else:
        so, zo = _side(out_params, "out_params", 1, n)
        real = np.broadcast_to(product_scale / so, (1, n) if sa.ndim == 0 else (m, n))
        real = real.ravel() if sa.ndim == 0 else real
        single = requantization != "double"
        mult, shifts = quantize_multiplier(real)  # shifts above 30 are refused, not saturated
        if shifts.size and shifts.max() > MAX_SHIFT:
            raise EngineValueError(
                "s_a·s_b/s_out >= 2^30: the output scale is far too small for these inputs"
            )
        mult_b = mult if sa.ndim else mult.reshape(1, n)
        shift_b = shifts if sa.ndim else shifts.reshape(1, n)
        if requantization == "fp32":  # XNNPACK: float32 product of the float32 scales
            f32 = np.float32
            scale32 = (sa.astype(f32) * sb.astype(f32)).astype(f32) / so.astype(f32)
            scaled, wraps = requantize_fp32(acc32, scale32.astype(f32)), 0
        elif requantization == "ruy":
            scaled, wraps = requantize_ruy(acc32, mult_b, shift_b), 0
        else:
            scaled, wraps = multiply_by_quantized_multiplier(
                acc32, mult_b, shift_b, single_rounding=single, ties="away",
                return_shift_overflows=True)
        pre = wrap_int32(scaled.astype(np.int64) + zo).astype(np.int64)
        sat_lo = int(np.count_nonzero(pre < out_params.qmin))
        sat_hi = int(np.count_nonzero(pre > out_params.qmax))
        code_type = np.int8 if out_params.qmin < 0 else np.uint8
        output = np.clip(pre, out_params.qmin, out_params.qmax).astype(code_type)
        out_values = (output.astype(np.float64) - zo) * so

    vs_float = None
    if float_reference is not None:
        ref = np.asarray(float_reference, np.float64)
        if ref.shape != (m, n):
            raise EngineValueError(f"float_reference has shape {ref.shape}, expected {(m, n)}")
        vs_float = error_stats(out_values, ref)
    report = MatmulReport(
        m=m,
        k=k,
        n=n,
        gemm_path=path,
        accumulator_min=acc_lo,
        accumulator_max=acc_hi,
        headroom_bits=headroom,
        accumulator_overflows=overflows,
        product_min=p_lo,
        product_max=p_hi,
        max_safe_k=safe_k,
        max_safe_k_codes=safe_k_codes,
        real_multiplier=np.asarray(real, np.float64),
        multiplier_q31=np.asarray(mult),
        shift=np.asarray(shifts),
        shift_overflows=wraps,
        saturated_low=sat_lo,
        saturated_high=sat_hi,
        macs=m * n * k,
        zero_point_terms_per_output=terms,
        zero_point_ops=(m * k if zb_nonzero else 0) + m * n * terms,
        zero_point_offline_ops=k * n if za_nonzero else 0,
        vs_dequantized=error_stats(out_values, dequantized_ref),
        vs_float=vs_float,
    )
    return output, report
