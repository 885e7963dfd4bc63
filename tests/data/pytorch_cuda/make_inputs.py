"""The inputs of the further CUDA record (``record_cuda.py``), made with NumPy from a fixed seed:
float32 values from random bit patterns (every exponent from 2^-12 to 2^11, subnormals, signed
zeros), normal values with per-channel spreads, and constructed ties -- for explicit random
scales and zero points, every half-way point between two codes and its neighbours 1 and 2 ulps
away -- plus NaN, +inf, -inf and extreme finite values. Writes ``further_inputs.npz``."""

from __future__ import annotations

import sys

import numpy as np

F32 = np.float32


def bit_patterns(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    n = shape[0] * shape[1]
    exponent = rng.integers(127 - 12, 127 + 12, n, dtype=np.uint32)
    mantissa = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    sign = rng.integers(0, 2, n, dtype=np.uint32)
    bits = (sign << 31) | (exponent << 23) | mantissa
    special = rng.random(n)
    bits = np.where(special < 0.01, (sign << 31) | mantissa, bits)  # subnormals
    bits = np.where((special >= 0.01) & (special < 0.015), sign << 31, bits)  # +0 and -0
    return bits.view(F32).reshape(shape)


def ties(rng: np.random.Generator, rows: int) -> tuple[np.ndarray, ...]:
    """Rows of half-way points for random (scale, zero point) pairs: row r is quantized with
    ``scale[r]``; signed rows (qint8) use ``zp_s8[r]``, unsigned rows ``zp_u8[r]``."""
    scale = (2.0 ** rng.uniform(-14, 4, rows) * rng.uniform(1, 2, rows)).astype(F32)
    zp_s8 = rng.integers(-128, 128, rows).astype(np.int32)
    zp_u8 = rng.integers(0, 256, rows).astype(np.int32)
    out_s8, out_u8 = [], []
    for r in range(rows):
        for zp, (qmin, qmax), out in ((zp_s8[r], (-128, 127), out_s8),
                                      (zp_u8[r], (0, 255), out_u8)):
            k = np.arange(qmin, qmax + 1, dtype=np.float64) - zp
            base = np.concatenate([(k[:-1] + 0.5) * np.float64(scale[r]),
                                   (k[[0, -1]] + [-0.5, 0.5]) * np.float64(scale[r])])
            b = base.astype(F32)
            up1, down1 = np.nextafter(b, F32(np.inf)), np.nextafter(b, F32(-np.inf))
            out.append(np.concatenate([b, up1, np.nextafter(up1, F32(np.inf)), down1,
                                       np.nextafter(down1, F32(-np.inf))]))
    return scale, zp_s8, zp_u8, np.stack(out_s8), np.stack(out_u8)


def special() -> np.ndarray:
    big = np.finfo(F32).max
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e30, -1e30,
                     big, -big, 1e-45, -1e-45, 2.5, -2.5], F32)


def main(path: str) -> None:
    rng = np.random.default_rng(20261204)
    scale, zp_s8, zp_u8, ties_s8, ties_u8 = ties(rng, 24)
    np.savez_compressed(
        path, bits=bit_patterns(rng, (256, 512)),
        normal=(rng.standard_normal((256, 512)) * np.exp(rng.standard_normal((256, 1)))
                ).astype(F32),
        ties_scale=scale, ties_zp_s8=zp_s8, ties_zp_u8=zp_u8, ties_s8=ties_s8, ties_u8=ties_u8,
        special=special())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "further_inputs.npz")
