"""Record what PyTorch computes on a device: observers' scales and zero points, the codes of
``quantize_per_tensor`` / ``quantize_per_channel`` and of ``fake_quantize_per_*_affine``.

Run on a CUDA machine as ``python record_cuda.py DIR OUT`` (DIR holds ``further_inputs.npz``
from ``make_inputs.py`` and the MiniLM ``.npy`` tensors): it writes ``OUT/cuda_further.npz``
and, with the CPU kernels of the same PyTorch under each ``ATEN_CPU_CAPABILITY``,
``OUT/cpu_<capability>.npz`` (one child process per capability, since PyTorch reads the
variable once at start-up), and ``OUT/meta.json``.

Layout: ``NAME/tensor/SCHEME/...`` and ``NAME/channelAXIS/SCHEME/...`` with ``scale``,
``zero_point``, ``codes`` (``int_repr()``) and ``fake_delta``: the fake-quantized value
``float32((q - zp) * s)`` turned back into its code q (exact, |q - zp| <= 255), stored as
``q - codes`` (int16, almost all 0, so the file stays small); per tensor also
``fake_t_delta``, the same op given its parameters as device tensors (the path of the
``FakeQuantize`` module, whose reciprocal is taken on the device). ``ties/...`` rows use
explicit random scales and zero points; ``special/...`` holds raw outputs for NaN, inf and
extreme values (``fake`` as float32, since NaN has no code), and what the observers return on
a tensor holding them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback

import numpy as np
import torch
from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver

F32 = np.float32
#: scheme -> (observer qscheme, dtype, quant_min, quant_max); None: the dtype's own range.
PER_TENSOR = {
    "sym_qint8": (torch.per_tensor_symmetric, torch.qint8, None),
    "affine_quint8": (torch.per_tensor_affine, torch.quint8, None),
    "affine_qint8": (torch.per_tensor_affine, torch.qint8, None),
    "affine_quint4": (torch.per_tensor_affine, torch.quint8, (0, 15)),
}
PER_CHANNEL = {
    "sym_qint8": (torch.per_channel_symmetric, torch.qint8, None),
    "affine_quint8": (torch.per_channel_affine, torch.quint8, None),
    "affine_qint8": (torch.per_channel_affine, torch.qint8, None),
}
MINILM = {"gelu": ("layer0_ffn_gelu_activations.npy", 1),
          "output_act": ("layer0_output_activations.npy", 1),
          "query_w": ("layer0_query_weight.npy", 0),
          "inter_w": ("layer0_intermediate_dense_weight.npy", 0)}


def fake_codes(out: torch.Tensor, scale, zp) -> np.ndarray:
    """Codes back from fake-quantized values (float64: exact for |q - zp| <= 255)."""
    o = out.double().cpu().numpy()
    q = np.rint(o / np.asarray(scale, np.float64)) + np.asarray(zp, np.float64)
    q = np.where(np.isfinite(q), q, -32768)
    return q.astype(np.int16)


def observe(x: torch.Tensor, scheme, axis):
    qscheme, dtype, rng = scheme
    kw = {} if rng is None else {"quant_min": rng[0], "quant_max": rng[1]}
    if axis is None:
        obs = MinMaxObserver(dtype=dtype, qscheme=qscheme, **kw)
    else:
        obs = PerChannelMinMaxObserver(ch_axis=axis, dtype=dtype, qscheme=qscheme, **kw)
    obs.to(x.device)
    obs(x)
    s, z = obs.calculate_qparams()
    return s, z, obs.quant_min, obs.quant_max, dtype


def record_tensor(out: dict, name: str, x: torch.Tensor, axis: int) -> None:
    for sname, scheme in PER_TENSOR.items():
        key = f"{name}/tensor/{sname}/"
        s, z, qmin, qmax, dtype = observe(x, scheme, None)
        sf, zi = float(s), int(z)
        out[key + "scale"] = s.cpu().numpy().astype(F32).reshape(1)
        out[key + "zero_point"] = z.cpu().numpy().astype(np.int32).reshape(1)
        out[key + "codes"] = torch.quantize_per_tensor(x, sf, zi, dtype).int_repr().cpu().numpy()
        f = torch.fake_quantize_per_tensor_affine(x, sf, zi, qmin, qmax)
        out[key + "fake_delta"] = fake_codes(f, sf, zi) - out[key + "codes"]
        ft = torch.fake_quantize_per_tensor_affine(
            x, s.to(x.device).float(), z.to(x.device).int(), qmin, qmax)
        out[key + "fake_t_delta"] = fake_codes(ft, sf, zi) - out[key + "codes"]
    for sname, scheme in PER_CHANNEL.items():
        key = f"{name}/channel{axis}/{sname}/"
        s, z, qmin, qmax, dtype = observe(x, scheme, axis)
        out[key + "scale"] = s.cpu().numpy().astype(F32)
        out[key + "zero_point"] = z.cpu().numpy().astype(np.int32)
        out[key + "codes"] = torch.quantize_per_channel(
            x, s.to(x.device), z.to(x.device), axis, dtype).int_repr().cpu().numpy()
        f = torch.fake_quantize_per_channel_affine(
            x, s.to(x.device).float(), z.to(x.device).int(), axis, qmin, qmax)
        shape = [1] * x.dim()
        shape[axis] = -1
        out[key + "fake_delta"] = fake_codes(f, s.cpu().numpy().reshape(shape),
                                             z.cpu().numpy().reshape(shape)) - out[key + "codes"]


def record_ties(out: dict, inp, device: str) -> None:
    scale = inp["ties_scale"]
    for sname, dtype, zps, rows, (qmin, qmax) in (
            ("qint8", torch.qint8, inp["ties_zp_s8"], inp["ties_s8"], (-128, 127)),
            ("quint8", torch.quint8, inp["ties_zp_u8"], inp["ties_u8"], (0, 255))):
        x = torch.from_numpy(rows).to(device)
        codes, fake, fake_t = [], [], []
        for r in range(rows.shape[0]):
            sf, zi = float(scale[r]), int(zps[r])
            codes.append(torch.quantize_per_tensor(x[r], sf, zi, dtype).int_repr().cpu().numpy())
            fake.append(fake_codes(torch.fake_quantize_per_tensor_affine(
                x[r], sf, zi, qmin, qmax), sf, zi))
            fake_t.append(fake_codes(torch.fake_quantize_per_tensor_affine(
                x[r], torch.tensor([sf], device=device), torch.tensor([zi], device=device,
                                                                      dtype=torch.int32),
                qmin, qmax), sf, zi))
        key = f"ties/{sname}/"
        out[key + "tensor_codes"] = np.stack(codes)
        out[key + "tensor_fake_codes"] = np.stack(fake)
        out[key + "tensor_fake_t_codes"] = np.stack(fake_t)
        s_t = torch.from_numpy(scale).to(device)
        z_t = torch.from_numpy(zps.astype(np.int64)).to(device)
        out[key + "channel_codes"] = torch.quantize_per_channel(
            x, s_t, z_t, 0, dtype).int_repr().cpu().numpy()
        out[key + "channel_fake_codes"] = fake_codes(torch.fake_quantize_per_channel_affine(
            x, s_t.float(), z_t.int(), 0, qmin, qmax), scale[:, None], zps[:, None])


def record_special(out: dict, inp, device: str) -> None:
    """NaN, +inf, -inf and extremes under several zero points; observers on tensors that hold
    them."""
    x = torch.from_numpy(inp["special"]).to(device)
    cases = [("qint8", torch.qint8, -128, 127, zp) for zp in (0, -100, 100, -128, 127)]
    cases += [("quint8", torch.quint8, 0, 255, zp) for zp in (0, 128, 255, 7)]
    for dname, dtype, qmin, qmax, zp in cases:
        key = f"special/{dname}_zp{zp}/"
        out[key + "tensor_codes"] = torch.quantize_per_tensor(
            x, 0.5, zp, dtype).int_repr().cpu().numpy()
        out[key + "tensor_fake"] = torch.fake_quantize_per_tensor_affine(
            x, 0.5, zp, qmin, qmax).cpu().numpy()
        out[key + "tensor_fake_t"] = torch.fake_quantize_per_tensor_affine(
            x, torch.tensor([0.5], device=device),
            torch.tensor([zp], device=device, dtype=torch.int32), qmin, qmax).cpu().numpy()
        x2 = x.reshape(1, -1)
        s_t = torch.tensor([0.5], device=device, dtype=torch.float64)
        z_t = torch.tensor([zp], device=device, dtype=torch.int64)
        out[key + "channel_codes"] = torch.quantize_per_channel(
            x2, s_t, z_t, 0, dtype).int_repr().cpu().numpy()
        out[key + "channel_fake"] = torch.fake_quantize_per_channel_affine(
            x2, s_t.float(), z_t.int(), 0, qmin, qmax).cpu().numpy()
    observed = {}
    for what, vals in (("nan", [1.0, np.nan, -2.0]), ("inf", [1.0, np.inf, -2.0]),
                       ("ninf", [1.0, -np.inf, -2.0]), ("nan_first", [np.nan, 1.0, -2.0])):
        t = torch.tensor(vals, dtype=torch.float32, device=device)
        for sname, scheme in PER_TENSOR.items():
            try:
                s, z, *_ = observe(t, scheme, None)
                observed[f"{what}/{sname}"] = [float(s), int(z)]
            except Exception as exc:  # what the runtime says is the record
                observed[f"{what}/{sname}"] = f"{type(exc).__name__}: {exc}"
    out["special/observers_json"] = np.frombuffer(json.dumps(observed).encode(), np.uint8)


def record_all(inp, minilm_dir: str, device: str) -> dict:
    out: dict = {}
    for name, (fname, axis) in MINILM.items():
        x = torch.from_numpy(np.load(os.path.join(minilm_dir, fname)).astype(F32)).to(device)
        record_tensor(out, name, x, axis)
    record_tensor(out, "bits", torch.from_numpy(inp["bits"]).to(device), 1)
    record_tensor(out, "normal", torch.from_numpy(inp["normal"]).to(device), 0)
    record_ties(out, inp, device)
    record_special(out, inp, device)
    return out


def main(src: str, dst: str, device: str = "cuda") -> None:
    inp = np.load(os.path.join(src, "further_inputs.npz"))
    meta = {"torch": torch.__version__, "device": device,
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if device == "cuda":
        meta["gpu"] = torch.cuda.get_device_name(0)
        meta["cuda"] = torch.version.cuda
    out = record_all(inp, src, device)
    tag = "cuda_further" if device == "cuda" else f"cpu_{meta['cpu_capability'].lower()}"
    out["meta_json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez_compressed(os.path.join(dst, tag + ".npz"), **out)
    print(tag, json.dumps(meta), flush=True)


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:  # a child: the CPU kernels under one capability
        main(src, dst, "cpu")
        sys.exit(0)
    try:
        main(src, dst, "cuda")
    except Exception:  # keep going to the CPU records
        traceback.print_exc()
    for cap in ("", "avx2", "default"):
        env = dict(os.environ)
        if cap:
            env["ATEN_CPU_CAPABILITY"] = cap
        subprocess.run([sys.executable, __file__, src, dst, "cpu"], env=env, check=False)
