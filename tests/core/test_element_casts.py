"""The element casts equal ml_dtypes bit for bit: on every float32 rounding tie of each type
(all exponents, all kept mantissas), the midpoints of its subnormals and its overflow
threshold, each with its float32 neighbours, on float32 subnormals, ±0, ±inf, NaN, and on
random float32 bit patterns. E8M0 (no mantissa) is checked on its ties 1.5 · 2^e."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from quantscope.core.formats.elements import ELEMENTS, NF4_LEVELS, cast, cast_e8m0

FLOAT_TYPES = [name for name, et in ELEMENTS.items() if et.dtype is not None]
N_RANDOM = 1 << 22


def all_ties(mbits: int) -> np.ndarray:
    """Every positive float32 that lies exactly halfway between two values with ``mbits``
    mantissa bits: every exponent (normal and subnormal float32), every kept mantissa, the
    dropped bits 100...0. Where the type is normal these are all its rounding ties."""
    drop = 23 - mbits
    exp = np.arange(0, 255, dtype=np.uint32)[:, None] << np.uint32(23)
    kept = np.arange(1 << mbits, dtype=np.uint32)[None, :] << np.uint32(drop)
    return ((exp | kept) | np.uint32(1 << (drop - 1))).reshape(-1).view(np.float32)


def constructed(values: np.ndarray, mbits: int) -> tuple[np.ndarray, int]:
    """All ties (:func:`all_ties`), the midpoints of the representable values themselves (the
    subnormal ties, the overflow threshold) scaled by 2^-4..2^4, the values, each with its
    float32 neighbours, float32 subnormals and specials, both signs; and the tie count."""
    pos = np.unique(np.abs(values))
    parts = [all_ties(mbits)]
    for shift in range(-4, 5):
        v = np.unique(np.concatenate([pos * 2.0 ** shift, [pos[-1] * 2.0 ** (shift + 1)]]))
        parts += [v, (v[:-1] + v[1:]) / 2]
    with np.errstate(over="ignore"):
        base = np.unique(np.concatenate(parts).astype(np.float32))
    base = base[np.isfinite(base)]
    n_ties = 2 * all_ties(mbits).size
    up = np.nextafter(base, np.float32(np.inf))
    down = np.nextafter(base, np.float32(0))
    sub = np.arange(1, 64, dtype=np.uint32).view(np.float32)  # float32 subnormals
    special = np.array([0.0, np.inf, np.nan, np.finfo(np.float32).max,
                        np.finfo(np.float32).tiny], np.float32)
    half = np.concatenate([base, up, down, sub, special])
    return np.concatenate([half, -half]), n_ties


def random_bits(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 32, N_RANDOM, dtype=np.uint64).astype(np.uint32).view(np.float32)


def mismatches(mine: np.ndarray, ref: np.ndarray) -> int:
    """Elements whose float32 bits differ (every NaN equals every NaN; -0 differs from +0)."""
    same = (mine.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(mine) & np.isnan(ref))
    return int(mine.size - np.count_nonzero(same))


@pytest.mark.parametrize("name", FLOAT_TYPES)
def test_cast_equals_ml_dtypes(name):
    et = ELEMENTS[name]
    made, n_ties = constructed(et.values, et.mbits)
    x = np.concatenate([made, random_bits(FLOAT_TYPES.index(name))])
    ref = x.astype(et.dtype).astype(np.float32)
    bad_plain = mismatches(cast(x, et, saturate=False), ref)
    # saturating: what torchao does (clamp to the largest finite value, then cast)
    clamped = np.clip(x, -et.max_finite, et.max_finite)
    bad_sat = mismatches(cast(x, et), clamped.astype(et.dtype).astype(np.float32))
    print(f"\n{name}: {x.size} inputs ({made.size} constructed, {n_ties} ties, "
          f"{N_RANDOM} random), mismatches {bad_plain} non-saturating, {bad_sat} saturating")
    assert bad_plain == 0
    assert bad_sat == 0


def test_cast_e8m0_equals_ml_dtypes():
    made, n_ties = constructed(np.exp2(np.arange(-127.0, 128.0)), 0)
    x = np.concatenate([made, random_bits(99)])
    bad = mismatches(cast_e8m0(x), x.astype(ml_dtypes.float8_e8m0fnu).astype(np.float32))
    print(f"\nfloat8_e8m0fnu: {x.size} inputs ({n_ties} ties), mismatches {bad}")
    assert bad == 0


def test_the_ties_really_are_ties():
    """The constructed inputs hold exact midpoints, and rounding sends them to the even one."""
    x = np.array([464.0, 61440.0, 7.0, 5.0], np.float32)  # e4m3 up, e5m2 up, e2m1 (6, 8), (4, 6)
    assert cast(x[:1], "float8_e4m3fn", saturate=False)[0] == 448.0  # 1.110 x 2^8: even
    assert np.isinf(cast(x[1:2], "float8_e5m2", saturate=False)[0])  # rounds to 2^16: inf
    assert cast(x[2:], "float4_e2m1fn").tolist() == [6.0, 4.0]


def test_overflow_named_behaviours():
    big = np.array([1e6, -1e6, np.inf], np.float32)
    assert cast(big, "float8_e4m3fn").tolist() == [448.0, -448.0, 448.0]
    assert np.isnan(cast(big, "float8_e4m3fn", saturate=False)).all()
    assert cast(big, "float8_e5m2", saturate=False).tolist() == [np.inf, -np.inf, np.inf]
    assert cast(big, "float4_e2m1fn", saturate=False).tolist() == [6.0, -6.0, 6.0]


def test_nf4_and_mxint8_grids():
    assert ELEMENTS["nf4"].values.tolist() == NF4_LEVELS.astype(np.float64).tolist()
    mid = np.float32((NF4_LEVELS[8] + NF4_LEVELS[9]) / 2)  # a tie goes to the lower level
    assert cast(np.array([mid, 0.5, 3.0], np.float32), "nf4").tolist() == [
        NF4_LEVELS[8], NF4_LEVELS[12], 1.0]
    assert cast(np.array([1 / 128, 3 / 128, 5.0], np.float32), "int8_mx").tolist() == [
        0.0, 4 / 128, 127 / 64]


def test_written_out_largest_values_are_ml_dtypes_own():
    """The element table writes each type's largest finite value out (ml_dtypes loads only at
    the first cast); it must be ml_dtypes' ``finfo(type).max`` exactly."""
    import ml_dtypes

    from quantscope.core.formats.elements import ELEMENTS, KIND_FLOAT

    floats = [et for et in ELEMENTS.values() if et.kind == KIND_FLOAT]
    assert len(floats) == 7
    for et in floats:
        assert et.dtype is getattr(ml_dtypes, et.name)
        assert et.max_finite == float(ml_dtypes.finfo(et.dtype).max), et.name


def test_the_element_table_loads_without_ml_dtypes():
    import subprocess
    import sys

    code = ("import sys; import quantscope.core.formats.catalog, quantscope.state.formats; "
            "print('ml_dtypes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
