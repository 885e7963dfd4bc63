"""Record PyTorch's codes for NaN, ±inf and values beyond int32 / int64 conversion, on a
device: ``python record_specials.py OUT`` writes ``OUT/specials_cuda.npz`` and, for the CPU
kernels of the same PyTorch under each ``ATEN_CPU_CAPABILITY`` (a child process each),
``OUT/specials_cpu_<capability>.npz``.

The values (``x``, 3 rows of 37 at scale 0.5) put each special value in a vector loop's body
and in its tail. Keys: ``{qint8,quint8}_zp{ZP}/tensor_codes``, ``.../tensor_fake``,
``.../tensor_fake_t`` (per tensor, one zero point), and ``{qint8,quint8}/axis{A}/codes``,
``.../fake`` (per channel along axis A, zero points ``zps_{qint8,quint8}`` repeated); fake
quant outputs are raw float32.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import torch

F32 = np.float32
SCALE = 0.5
ZPS = {"qint8": (0, -100, 100, -128, 127, -1, 1), "quint8": (0, 7, 127, 128, 255)}


def specials() -> np.ndarray:
    k = [2.0**30, 2.0**31 - 128, 2.0**31, 2.0**31 + 256, 2.0**63 - 2.0**39, 2.0**63, 2.0**64]
    big = [v * SCALE for v in k]
    vals = [np.nan, np.inf, -np.inf, 3.4028235e38, -3.4028235e38, 1e30, -1e30, 0.0, -0.0,
            1.0, -1.0, 2.5, -2.5, 63.0, -64.0, *big, *(-v for v in big), 1e-45]
    row = np.array(vals, F32)
    rows = [row, np.roll(row, 11), np.roll(row[::-1], 5)]
    return np.stack([np.resize(r, 37) for r in rows])


def record(device: str) -> dict:
    x = specials()
    xt = torch.from_numpy(x).to(device)
    out = {"x": x}
    for dname, zps in ZPS.items():
        dtype = torch.qint8 if dname == "qint8" else torch.quint8
        qmin, qmax = (-128, 127) if dname == "qint8" else (0, 255)
        for zp in zps:
            key = f"{dname}_zp{zp}/"
            out[key + "tensor_codes"] = torch.quantize_per_tensor(
                xt, SCALE, zp, dtype).int_repr().cpu().numpy()
            out[key + "tensor_fake"] = torch.fake_quantize_per_tensor_affine(
                xt, SCALE, zp, qmin, qmax).cpu().numpy()
            out[key + "tensor_fake_t"] = torch.fake_quantize_per_tensor_affine(
                xt, torch.tensor([SCALE], device=device),
                torch.tensor([zp], dtype=torch.int32, device=device), qmin, qmax).cpu().numpy()
        for axis in (0, 1):
            z = np.resize(np.array(zps, np.int64), x.shape[axis])
            s = torch.full((x.shape[axis],), SCALE, dtype=torch.float64, device=device)
            zt = torch.from_numpy(z).to(device)
            out[f"{dname}/axis{axis}/codes"] = torch.quantize_per_channel(
                xt, s, zt, axis, dtype).int_repr().cpu().numpy()
            out[f"{dname}/axis{axis}/fake"] = torch.fake_quantize_per_channel_affine(
                xt, s.float(), zt.int(), axis, qmin, qmax).cpu().numpy()
    meta = {"torch": torch.__version__, "device": device,
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if device == "cuda":
        meta["gpu"] = torch.cuda.get_device_name(0)
    out["meta_json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    return out


def main(dst: str, device: str) -> None:
    out = record(device)
    meta = json.loads(bytes(out["meta_json"]))
    tag = "cuda" if device == "cuda" else f"cpu_{meta['cpu_capability'].lower()}"
    np.savez_compressed(os.path.join(dst, f"specials_{tag}.npz"), **out)
    print(tag, json.dumps(meta), flush=True)


if __name__ == "__main__":
    dst = sys.argv[1]
    if len(sys.argv) > 2:
        main(dst, "cpu")
        sys.exit(0)
    if torch.cuda.is_available():
        main(dst, "cuda")
    for cap in ("", "avx2", "default"):
        env = dict(os.environ)
        if cap:
            env["ATEN_CPU_CAPABILITY"] = cap
        subprocess.run([sys.executable, __file__, dst, "cpu"], env=env, check=False)
