"""The presets of PyTorch runs that CI cannot repeat, against their records: ``pytorch-cuda``,
``pytorch-cuda-fake`` (what PyTorch computed on a GPU) and ``pytorch-2.11`` (its CPU kernels),
bit for bit: observer scales and zero points, ``quantize_per_tensor`` / ``quantize_per_channel``
codes and ``fake_quantize_per_*_affine`` codes.

CI has no GPU, so the GPU's results were recorded and the presets are held to the records:

* ``shared/data/pytorch_cuda/`` (beside the checkout): PyTorch 2.11 (cu130) on an NVIDIA H200
  over the bundled MiniLM tensors and constructed ties (its NOTICE says what was run);
* ``tests/data/pytorch_cuda/``: a further record on the same kind of machine by
  ``record_cuda.py`` over ``further_inputs.npz`` (``make_inputs.py``): random float32 bit
  patterns with subnormals and signed zeros, normal values with per-channel spreads, every
  half-way point at 24 random scales and zero points with its neighbours 1 and 2 ulps away,
  and NaN / inf / extreme values.

``COUNTS`` keeps, per path, the values compared, the ties among them and the mismatches; run
with ``-s`` to see the table.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from quantscope.core import choose_qparams
from quantscope.core.calibration.runtimes import runtime_scheme
from quantscope.core.schemes.qparams import QuantParams
from quantscope.io import samples

F32 = np.float32
HERE = Path(__file__).resolve().parent
FURTHER = HERE.parent / "data" / "pytorch_cuda"
SHARED = HERE.parents[1].parent / "shared" / "data" / "pytorch_cuda"
MINILM = {"gelu": ("gelu_activations", 1), "output_act": ("output_activations", 1),
          "query_w": ("query_weight", 0), "inter_w": ("ffn_weight", 0)}
#: scheme -> (symmetric, signed, bits): the observers' dtype and range.
SCHEMES = {"sym_qint8": (True, None, 8), "affine_quint8": (False, None, 8),
           "affine_qint8": (False, True, 8), "affine_quint4": (False, None, 4)}
COUNTS: dict[str, list[int]] = {}


@pytest.fixture(scope="module", autouse=True)
def _print_counts():
    yield
    print("\npath: values compared, ties among them, mismatches")
    for path, (n, ties, bad) in sorted(COUNTS.items()):
        print(f"  {path}: {n:,}, {ties:,}, {bad}")


def _shared_record() -> np.lib.npyio.NpzFile:
    path = SHARED / "pytorch_cuda_reference.npz"
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing under CI: the shared data must sit beside the clone")
        pytest.skip(f"{path} is not here (the shared data sits beside the checkout)")
    return np.load(path)


def _ties(x: np.ndarray, p: QuantParams) -> int:
    """How many of ``x`` are ties: exactly half-way between two codes, or rounded onto a
    half-way point by float32 division or by the float32 product with ``1 / scale``."""
    s = np.asarray(p.scale, F32)
    if p.axis is not None:
        shape = [1] * x.ndim
        shape[p.axis] = -1
        s = s.reshape(shape)
    with np.errstate(invalid="ignore", over="ignore"):
        tie = np.zeros(x.shape, bool)
        for q in (x.astype(np.float64) / s, x / s, x * (F32(1) / s)):
            tie |= q - np.floor(q) == 0.5
    return int(np.count_nonzero(tie))


def same(path: str, ours, theirs, ties: int = 0) -> None:
    """Record and assert that ``ours`` equals ``theirs`` element for element (bit patterns for
    float scales)."""
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape, (path, a.shape, b.shape)
    if a.dtype.kind == "f":
        a, b = a.astype(F32).view(np.int32), b.astype(F32).view(np.int32)
    else:
        a, b = a.astype(np.int64), b.astype(np.int64)
    bad = int(np.count_nonzero(a != b))
    entry = COUNTS.setdefault(path, [0, 0, 0])
    entry[0] += a.size
    entry[1] += ties
    entry[2] += bad
    assert bad == 0, f"{path}: {bad} of {a.size} differ"


CUDA = ("pytorch-cuda", "pytorch-cuda-fake")


def _check_unit(where: str, x: np.ndarray, rec, base: str, scheme: str, axis: int | None,
                fake_key: str, fake_t_key: str | None = None, runtimes=CUDA) -> None:
    """One recorded tensor and scheme: parameters, quantize codes and fake-quant codes by the
    ``runtimes`` (quantize preset, fake-quant preset)."""
    symmetric, signed, bits = SCHEMES[scheme]
    kw = dict(symmetric=symmetric, signed=signed, bits=bits,
              granularity="tensor" if axis is None else "channel", axis=axis or 0)
    p = choose_qparams(x, runtime=runtimes[0], **kw)
    f = choose_qparams(x, runtime=runtimes[1], **kw)
    gran = "tensor" if axis is None else "channel"
    same(f"{where}: observer scale per {gran}", p.scale, rec[base + "scale"].reshape(
        p.scale.shape))
    same(f"{where}: observer zero point per {gran}", p.zero_point,
         rec[base + "zero_point"].reshape(p.zero_point.shape))
    np.testing.assert_array_equal(f.scale, p.scale)
    ties = _ties(x, p)
    codes = rec[base + "codes"].astype(np.int64)
    # quantize_per_* saturates at the quantized dtype's range even where the observer's
    # quant_min / quant_max are narrower (the 4-bit scheme)
    q = dataclasses.replace(p, qmin=-128 if p.qmin < 0 else 0, qmax=127 if p.qmin < 0 else 255)
    same(f"{where}: quantize_per_{gran}", q.quantize(x), codes, ties)
    fake = f.quantize(x)
    same(f"{where}: fake_quantize_per_{gran}_affine", fake, codes + rec[base + fake_key], ties)
    if fake_t_key is not None:
        same(f"{where}: fake_quantize_per_{gran}_affine, tensor qparams", fake,
             codes + rec[base + fake_t_key], ties)


@pytest.mark.parametrize("name", [*MINILM, "ties"])
def test_recorded_minilm_and_ties(name):
    """The shared record: the MiniLM tensors and the constructed ties, every scheme."""
    rec = _shared_record()
    if name == "ties":
        x, axis_of = rec["ties/x"].astype(F32), 1
    else:
        sample, axis_of = MINILM[name]
        x = np.load(samples.sample_path(sample)).astype(F32)
    # the shared record stores fake-quant codes; turn them into deltas like the further one
    keys = [k for k in rec.files if k.startswith(name + "/") and k.endswith("/scale")]
    assert keys, name
    for key in keys:
        base = key[: -len("scale")]
        gran, scheme = base.split("/")[1:3]
        axis = None if gran == "tensor" else axis_of
        delta = {"fake_delta": rec[base + "fake_codes"].astype(np.int64)
                 - rec[base + "codes"].astype(np.int64)}
        view = {**{k[len(base):]: rec[k] for k in rec.files if k.startswith(base)}, **delta}
        _check_unit(f"H200 {name} {scheme}", x, {base + k: v for k, v in view.items()}, base,
                    scheme, axis, "fake_delta")


def _further():
    return np.load(FURTHER / "cuda_further.npz"), np.load(FURTHER / "further_inputs.npz")


@pytest.mark.parametrize("name, axis", [("bits", 1), ("normal", 0)])
def test_further_record(name, axis):
    """Random bit patterns (subnormals and signed zeros among them) and normal values."""
    rec, inputs = _further()
    x = inputs[name]
    for scheme in SCHEMES:
        _check_unit(f"H200 {name} {scheme}", x, rec, f"{name}/tensor/{scheme}/", scheme, None,
                    "fake_delta", "fake_t_delta")
        if scheme != "affine_quint4":
            _check_unit(f"H200 {name} {scheme}", x, rec, f"{name}/channel{axis}/{scheme}/",
                        scheme, axis, "fake_delta")


def _check_ties(where: str, rec, inputs, dtype: str, runtimes=CUDA) -> None:
    """Every half-way point between two codes, for 24 random scales and zero points."""
    tag = "s8" if dtype == "qint8" else "u8"
    x, scale, zp = inputs[f"ties_{tag}"], inputs["ties_scale"], inputs[f"ties_zp_{tag}"]
    qmin, qmax = (-128, 127) if dtype == "qint8" else (0, 255)
    for runtime, keys in ((runtimes[0], ("tensor_codes", "channel_codes")),
                          (runtimes[1], ("tensor_fake_codes", "tensor_fake_t_codes",
                                         "channel_fake_codes"))):
        sc = runtime_scheme(runtime, symmetric=False, signed=dtype == "qint8")
        p = QuantParams(scale=scale, zero_point=zp, qmin=qmin, qmax=qmax, axis=0,
                        symmetric=False, rounding=sc.rounding, arithmetic=sc.arithmetic,
                        runtime=runtime)
        codes = p.quantize(x)
        for key in keys:
            same(f"{where} ties {dtype}: {runtime} {key}", codes, rec[f"ties/{dtype}/{key}"],
                 _ties(x, p))


@pytest.mark.parametrize("dtype", ["qint8", "quint8"])
def test_further_ties_at_random_scales(dtype):
    rec, inputs = _further()
    _check_ties("H200", rec, inputs, dtype)


def test_pytorch_211_cpu_record():
    """PyTorch 2.11's CPU kernels, recorded beside the GPU (identical under AVX512, AVX2 and
    DEFAULT): ``pytorch-2.11`` and ``pytorch-fake`` on the MiniLM activations and the ties."""
    rec = np.load(FURTHER / "cpu211_avx512.npz")
    _, inputs = _further()
    runtimes = ("pytorch-2.11", "pytorch-fake")
    for name in ("gelu", "output_act"):
        x = np.load(samples.sample_path(MINILM[name][0])).astype(F32)
        for scheme in SCHEMES:
            _check_unit(f"CPU 2.11 {name} {scheme}", x, rec, f"{name}/tensor/{scheme}/", scheme,
                        None, "fake_delta", "fake_t_delta", runtimes)
            if scheme != "affine_quint4":
                _check_unit(f"CPU 2.11 {name} {scheme}", x, rec, f"{name}/channel1/{scheme}/",
                            scheme, 1, "fake_delta", None, runtimes)
    for dtype in ("qint8", "quint8"):
        _check_ties("CPU 2.11", rec, inputs, dtype, runtimes)


def test_cuda_rules_differ_from_the_cpu_ones():
    """Why the CUDA presets are their own: the observers multiply by a float32 reciprocal
    where the CPU divides, and the quantize kernels round the float64 quotient, which float32
    division can round onto a half-way point (a value of the further record's ties)."""
    gelu = np.load(samples.sample_path("gelu_activations")).astype(F32)
    kw = dict(symmetric=True, granularity="channel", axis=1)
    cpu = choose_qparams(gelu, runtime="pytorch", **kw)
    gpu = choose_qparams(gelu, runtime="pytorch-cuda", **kw)
    amax = np.abs(gelu).max(axis=0)
    np.testing.assert_array_equal(cpu.scale, amax / F32(127.5))
    np.testing.assert_array_equal(gpu.scale, amax * (F32(1) / F32(127.5)))
    assert 0.5 < np.mean(cpu.scale != gpu.scale) < 0.9
    s = np.int32(1009269551).view(F32)  # 0.010268017
    x = np.array([np.int32(-1093687026).view(F32)])  # -0.40558666: x / s in float32 is -39.5
    assert x[0] / s == F32(-39.5)
    codes = {a: QuantParams(scale=s, zero_point=0, arithmetic=a).quantize(x)[0]
             for a in ("divide", "divide64")}
    assert codes == {"divide": -40, "divide64": -39}
