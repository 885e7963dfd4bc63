"""Range methods beyond min/max: exact percentiles, the exact MSE-optimal clip, and TensorRT's
entropy (KL-divergence) calibration as NVIDIA implements it.

``choose_qparams(x, method=...)`` lands here for every method but ``"minmax"``:

* ``"percentile"`` (``percentile=99.99``): symmetric schemes take that percentile of ``|x|``;
  asymmetric ones cut ``(100 − p)/2`` % from each tail. Exact order statistics of the sorted
  data (numpy's linear interpolation), not a histogram estimate;
* ``"mse"``: the scale and zero point with the smallest exact total squared error (rounding
  + clipping) over the whole (scale, zero point) space of the code range -- windows may reach
  past the data's minimum or maximum, and the zero point is searched exactly for each scale
  (:mod:`quantscope.core.stats.mse_search`, which says the search space): a branch and bound
  that proves its result within 1e-7 (relative) of the least error of every float32 scale and
  zero point; never worse than min/max, which is one of the candidates;
* ``"entropy"``: ModelOpt's ``HistogramCalibrator`` entropy method (TensorRT's KL calibration):
  2048-bin histogram of ``|x|``, ``2^(bits-1)`` quantized bins, candidates from bin 128, the
  *last* argmin of the divergence, ``amax`` = the left edge of the chosen bin. Per tensor and
  symmetric only, as in ModelOpt.

NaN and inf are excluded from every range and counted by the report.
"""

from __future__ import annotations

import numpy as np

from quantscope.core.schemes.qparams import QuantParams, params_from_range, unit_min_max
from quantscope.core.stats.prepared import prepare
from quantscope.core.stats.sweep import mse_optimal_windows
from quantscope.core.tensors.binning import equal_bins
from quantscope.core.tensors.layout import param_shape
from quantscope.core.tensors.validate import EngineValueError

METHODS = ("minmax", "percentile", "mse", "entropy")
#: ModelOpt HistogramCalibrator defaults (modelopt/torch/quantization/calib/histogram.py).
ENTROPY_BINS = 2048
ENTROPY_START_BIN = 128


def _check_options(method: str, options: dict, allowed: tuple[str, ...]) -> None:
    extra = sorted(set(options) - set(allowed))
    if extra:
        raise EngineValueError(f"method {method!r} takes {list(allowed) or 'no options'}, "
                               f"got {extra}")


def method_range(xf: np.ndarray, *, method: str, symmetric: bool, axis: int | None,
                 group_size: int | None, bits: int = 8, narrow_range: bool | None = None,
                 signed: bool = True, rounding: str = "half_even", arithmetic: str = "divide",
                 codes: tuple[int, int] | None = None,
                 **options) -> tuple[np.ndarray, np.ndarray]:
    """The range ``(lo, hi)`` of each unit by ``method``, in the parameter array's shape.

    Runtime presets (:mod:`quantscope.core.calibration.runtimes`) apply their own scale rules to
    it, and
    pass their code range as ``codes`` (instead of ``bits``, ``narrow_range``, ``signed``).
    ``options`` may hold ``prepared`` (``prepare(xf)``), which the order-statistic methods
    reuse instead of sorting the tensor again.
    """
    if method not in METHODS:
        raise EngineValueError(f"method must be one of {METHODS}, got {method!r}")
    prepared = options.pop("prepared", None)

    def prepare_once():
        return prepared if prepared is not None else prepare(xf)

    if method == "minmax":
        _check_options(method, options, ())
        if prepared is not None:  # the ends of the sorted rows: no pass over the tensor
            return prepared.min_max(axis, group_size)
        lo, hi, _ = unit_min_max(xf, axis, group_size)
        return lo, hi
    shape = param_shape(xf.shape, axis, group_size)
    if method == "percentile":
        _check_options(method, options, ("percentile",))
        p = float(options.get("percentile", 99.99))
        if not 0.0 < p <= 100.0:
            raise EngineValueError(f"percentile must lie in (0, 100], got {p}")
        prep = prepare_once()
        if symmetric:
            amax = np.asarray(prep.percentile(p, absolute=True, axis=axis,
                                              group_size=group_size))
            return (-amax).reshape(shape), amax.reshape(shape)
        tail = (100.0 - p) / 2.0
        lo = np.asarray(prep.percentile(tail, axis=axis, group_size=group_size))
        hi = np.asarray(prep.percentile(100.0 - tail, axis=axis, group_size=group_size))
        return lo.reshape(shape), hi.reshape(shape)
    if method == "mse":
        _check_options(method, options, ())
        rows = prepare_once().layout(axis, group_size)
        # presets turn a symmetric window into a scale by their own (qmax - qmin) / 2
        half = None if codes is None else (codes[1] - codes[0]) / 2
        lo, hi = mse_optimal_windows(rows, symmetric=symmetric, bits=bits,
                                     narrow_range=narrow_range, signed=signed,
                                     rounding=rounding, arithmetic=arithmetic, codes=codes,
                                     half_steps=half)
        return lo.reshape(shape), hi.reshape(shape)
    _check_options(method, options, ("num_bins", "start_bin"))
    if not symmetric or axis is not None:
        raise EngineValueError("entropy calibration is per tensor and symmetric (as in "
                               "ModelOpt's HistogramCalibrator, which works on |x|)")
    t = entropy_amax(xf, bits=bits, num_bins=int(options.get("num_bins", ENTROPY_BINS)),
                     start_bin=int(options.get("start_bin", ENTROPY_START_BIN)))
    return np.asarray(-t, np.float64), np.asarray(t, np.float64)  # the per-tensor shape, ()


def calibrated_qparams(xf: np.ndarray, *, method: str, symmetric: bool, bits: int,
                       narrow_range: bool | None, signed: bool, axis: int | None,
                       group_size: int | None, rounding: str, arithmetic: str,
                       **options) -> QuantParams:
    """Parameters from the range ``method`` finds, under the engine's rules
    (:func:`quantscope.core.schemes.qparams.params_from_range`)."""
    lo, hi = method_range(xf, method=method, symmetric=symmetric, axis=axis,
                          group_size=group_size, bits=bits, narrow_range=narrow_range,
                          signed=signed, rounding=rounding, arithmetic=arithmetic, **options)
    return params_from_range(lo, hi, symmetric=symmetric, bits=bits, narrow_range=narrow_range,
                             signed=signed, axis=axis, group_size=group_size, rounding=rounding,
                             arithmetic=arithmetic, method=method)


def abs_histogram(xf: np.ndarray, num_bins: int = ENTROPY_BINS) -> tuple[np.ndarray, np.ndarray]:
    """ModelOpt's histogram of ``|x|``: ``num_bins`` equal bins on ``[0, max|x|]`` (finite values;
    numpy's binning, as ModelOpt's ``calibrate_weights`` and its non-torch path)."""
    a = np.abs(xf[np.isfinite(xf)]).astype(np.float32)
    top = float(a.max()) if a.size else 0.0
    if top <= 0.0:
        return np.histogram(a, bins=num_bins, range=(0.0, top))
    return equal_bins(a, num_bins, 0.0, top)  # a subnormal max|x| has too few float32 steps


def entropy_amax(xf: np.ndarray, *, bits: int = 8, num_bins: int = ENTROPY_BINS,
                 start_bin: int = ENTROPY_START_BIN, stride: int = 1) -> float:
    """``amax`` by KL-divergence minimisation, step for step as ModelOpt's
    ``_compute_amax_entropy`` (modelopt/torch/quantization/calib/histogram.py).

    For each candidate ``i`` from ``start_bin`` to ``num_bins``: the outliers beyond bin ``i``
    fold into bin ``i − 1`` of the reference; the first ``i`` bins are merged into
    ``2^(bits−1)`` quantized bins, each spread evenly over its *non-empty* bins only; the KL
    divergence (scipy ``entropy``) of reference to candidate is taken. The last ``i`` with the
    smallest divergence wins and ``amax`` is the left edge of bin ``i``. As in ModelOpt, bin 0
    (the zeros) is first overwritten with bin 1's count. Loops vectorised; same numbers.
    """
    if not 1 <= start_bin <= num_bins:
        raise EngineValueError(f"start_bin must lie in [1, num_bins], got {start_bin}")
    hist, edges = abs_histogram(xf, num_bins)
    if edges[-1] <= 0.0 or hist.sum() == 0:
        return 0.0
    bins = hist.copy()
    bins[0] = bins[1]
    nbins = 1 << (bits - 1)
    divergences = []
    for i in range(start_bin, bins.size + 1, stride):
        space = np.linspace(0, i, num=nbins + 1)
        digitized = np.digitize(range(i), space) - 1
        head = bins[:i]
        keep = head != 0
        sums = np.bincount(digitized[keep], weights=head[keep], minlength=nbins)
        counts = np.bincount(digitized[keep], minlength=nbins)
        with np.errstate(divide="ignore", invalid="ignore"):
            per = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
        new = np.where(keep, per[np.clip(digitized, 0, nbins - 1)], 0.0)
        ref = head.astype(np.float64)
        ref[-1] += bins[i:].sum()
        divergences.append(_kl(ref, new))
    div = np.array(divergences)
    last_argmin = len(div) - 1 - int(np.argmin(div[::-1]))
    return float(edges[last_argmin * stride + start_bin])


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    """``scipy.stats.entropy(p, q)``: both normalised, ``Σ rel_entr(p, q)`` (inf where ``q``
    is 0 but ``p`` is not)."""
    p = p / p.sum()
    sq = q.sum()
    q = q / sq if sq else q
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, np.where(q > 0, p * np.log(p / q), np.inf), 0.0)
    return float(np.sum(terms))
