"""NF4's ``method="mse"``: each block's float32 scale is within 0.001 dB of the best of every
float32 scale from ``absmax / 2`` to ``2 · absmax`` -- checked by an exhaustive search that
quantizes the block at each of those 2^24 scales with the engine's own ``quantize`` and
``dequantize`` (not the search's loop), on real blocks and constructed multi-basin ones.
"""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams
from quantscope.core.calibration.format_choose import block_amax
from quantscope.core.formats.catalog import FormatParams
from quantscope.core.formats.elements import NF4_LEVELS
from quantscope.core.formats.nf4_mse import nf4_mse_scales

SAMPLES = Path(__file__).resolve().parents[2] / "src/quantscope/resources/samples"
#: Block length of the exhaustive checks (a quarter of NF4's 64: 2^24 scales each).
SMALL = 16
#: Scales per step of the exhaustive search (its arrays stay in the processor's cache).
CHUNK = 1 << 13


def errors_at(block: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The total squared error of ``block`` at each float32 scale, by the engine's NF4
    parameters (``x · f32(1 / s)`` rounded, ``level · s``), the squared differences summed in
    float64 along the block."""
    rows = np.broadcast_to(block, (scales.size, block.size))
    s = scales.reshape(-1, 1)
    p = FormatParams("nf4", s, axis=-1, group_size=block.size,
                     inv_scale=np.float32(1.0) / s, block_scales=s)
    d = rows.astype(np.float64) - p.dequantize(p.quantize(rows)).astype(np.float64)
    squares = np.ascontiguousarray((d * d).T)  # one row per element: each sum runs in order
    total = squares[0].copy()
    for row in squares[1:]:
        total += row  # element after element, as a cumulative sum's last column
    return total


#: Per NF4 midpoint (float64, as the engine rounds): the least float32 above it, so that a
#: float32 ``q`` lies above the midpoint exactly when ``q >= threshold``.
_MIDS = (NF4_LEVELS[:-1].astype(np.float64) + NF4_LEVELS[1:]) / 2
_ABOVE = np.array([np.float32(m) if np.float32(m) > m else np.nextafter(np.float32(m), np.inf)
                   for m in _MIDS], np.float32)


@numba.njit(cache=True, nogil=True)
def _errors_loop(block, scales, above, levels, out):  # pragma: no cover - compiled
    for j in range(scales.size):
        out[j] = 0.0
    inv = np.empty(scales.size, np.float32)
    for j in range(scales.size):
        inv[j] = np.float32(1.0) / scales[j]
    for i in range(block.size):
        x = block[i]
        c = 0  # the element's code: the number of thresholds at or below its product
        for j in range(scales.size):
            q = x * inv[j]  # a float32 product, as the engine multiplies
            # from one scale to the next the product moves a little, and the same way
            # through the ascending scales: the code is found by stepping from the last one
            while c < above.size and q >= above[c]:
                c += 1
            while c > 0 and q < above[c - 1]:
                c -= 1
            d = np.float64(x) - np.float64(levels[c] * scales[j])
            out[j] += d * d  # element after element: the engine's order


def errors_written_out(block: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """:func:`errors_at` written out as one compiled loop (what makes 2^24 scales a block
    affordable): float32 products and levels, float64 squares summed along the block. Each
    element's code is counted against the thresholds by walking from its code at the previous
    scale (the same count as comparing with all fifteen, a few comparisons instead). Checked
    bit-equal against :func:`errors_at` as the search goes."""
    out = np.empty(scales.size, np.float64)
    _errors_loop(block.astype(np.float32), scales.astype(np.float32), _ABOVE, NF4_LEVELS, out)
    return out


def exhaustive(block: np.ndarray) -> tuple[float, float]:
    """The least error over every float32 scale in ``[absmax / 2, 2 · absmax)`` and one
    scale reaching it (one step in 64 checked against the engine's own quantization)."""
    amax = np.float32(np.abs(block).max())
    first = np.float32(amax / np.float32(2)).view(np.uint32)
    last = np.float32(amax * np.float32(2)).view(np.uint32)
    best, best_s = np.inf, np.nan
    for i, lo in enumerate(range(int(first), int(last), CHUNK)):
        scales = np.arange(lo, min(lo + CHUNK, int(last)), dtype=np.uint32).view(np.float32)
        err = errors_written_out(block, scales)
        if i % 64 == 0:
            assert np.array_equal(err, errors_at(block, scales))
        k = int(err.argmin())
        if err[k] < best:
            best, best_s = float(err[k]), float(scales[k])
    return best, best_s


def searched(block: np.ndarray) -> tuple[float, float]:
    """The search's scale for ``block`` (as one block) and its error."""
    amax = np.abs(block).max().astype(np.float32).reshape(1, 1)
    s = nf4_mse_scales(block.reshape(1, -1), amax, block.size)
    return float(errors_at(block, s.reshape(1))[0]), float(s[0, 0])


def _real_blocks() -> dict[str, np.ndarray]:
    """Blocks of :data:`SMALL` from the bundled MiniLM weight and activations: the ones with
    the most and least outlying absmax among a few rows."""
    out = {}
    for name in ("layer0_query_weight", "layer0_ffn_gelu_activations"):
        x = np.load(SAMPLES / f"{name}.npy", allow_pickle=False)[:4].reshape(-1, SMALL)
        peak = np.abs(x).max(axis=1) / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1))
        out[f"{name} peaked"] = x[int(peak.argmax())]
        out[f"{name} flat"] = x[int(peak.argmin())]
    return out


def _multi_basin() -> dict[str, np.ndarray]:
    """Blocks whose error has two deep minima far apart: half the elements on NF4's grid at
    scale 1, half on it at scale 1.37 (a search refining around the nearer basin stops in the
    wrong one when the other is deeper); and a block exactly on the grid at a scale that is
    not its absmax (its levels stop short of ±1), whose best error is 0."""
    lv = NF4_LEVELS.astype(np.float64)
    near = lv[[15, 14, 13, 12, 1, 2, 3, 10]]  # absmax 1: the specification's basin
    far = lv[[14, 13, 12, 11, 10, 9, 2, 3, 4, 5, 6]] * 1.37  # within ±0.99
    two = np.concatenate([near, far[:8]]).astype(np.float32)
    deeper_far = np.concatenate([near[:5], far]).astype(np.float32)
    s = np.float32(0.8130517)
    exact = (NF4_LEVELS[[1, 2, 3, 5, 8, 9, 11, 12, 13, 14, 2, 4, 6, 10, 12, 14]] * s).astype(
        np.float32)
    return {"two basins": two, "the far basin deeper": deeper_far, "exact at a scale": exact}


BLOCKS = {**_real_blocks(), **_multi_basin()}


@pytest.mark.slow
@pytest.mark.parametrize("label", list(BLOCKS))
def test_within_a_thousandth_of_a_db_of_every_float32_scale(label):
    block = BLOCKS[label]
    best, best_s = exhaustive(block)
    mine, mine_s = searched(block)
    amax = float(np.abs(block).max())
    assert amax / 2 <= mine_s < 2 * amax  # inside the exhaustive range: the two compare
    if best == 0.0:
        assert mine == 0.0, (label, mine_s, best_s)
    else:
        assert 10 * np.log10(mine / best) <= 0.001, (label, mine, best, mine_s, best_s)
    spec = float(errors_at(block, np.array([amax], np.float32))[0])
    assert mine <= spec
    if label == "exact at a scale":
        assert spec > 0.0  # absmax is not the answer here
    if label.startswith(("two", "the far")):
        assert mine < spec  # the constructed basins are met


def _blocks_of_64() -> dict[str, np.ndarray]:
    """Two blocks of NF4's own length: the bundled weight's block of the most outlying absmax
    among its first rows, and a constructed one with two basins (four copies of the
    16-element block whose far basin is deeper)."""
    x = np.load(SAMPLES / "layer0_query_weight.npy", allow_pickle=False)[:4].reshape(-1, 64)
    peak = np.abs(x).max(axis=1) / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1))
    return {"weight peaked": x[int(peak.argmax())],
            "two basins x4": np.tile(_multi_basin()["the far basin deeper"], 4)}


@pytest.mark.slow
@pytest.mark.parametrize("label", list(_blocks_of_64()))
def test_blocks_of_64_within_a_thousandth_of_a_db_of_every_float32_scale(label):
    """The search on NF4's own block length against all 2^24 float32 scales of
    ``[absmax / 2, 2 · absmax)`` (about 5 s of processor time a block)."""
    block = _blocks_of_64()[label]
    best, best_s = exhaustive(block)
    mine, mine_s = searched(block)
    assert np.abs(block).max() / 2 <= mine_s < 2 * np.abs(block).max()
    assert 10 * np.log10(mine / best) <= 0.001, (label, mine, best, mine_s, best_s)
    assert mine <= float(errors_at(block, np.abs(block).max().reshape(1))[0])


def test_real_blocks_of_64_gain_and_never_lose():
    """On every block of the bundled weight and activations the searched scale's error is at
    most the absmax's (the specification's scale is kept unless one is strictly better), and
    at most a dense grid's best over ``[absmax / 4, 4 · absmax]`` plus 0.001 dB."""
    rng = np.random.default_rng(7)
    for name in ("layer0_query_weight", "layer0_output_activations"):
        x = np.load(SAMPLES / f"{name}.npy", allow_pickle=False)
        amax = block_amax(x, -1, 64)
        s = nf4_mse_scales(x, np.where(amax > 0, amax, np.float32(1.0)))
        blocks = x.reshape(-1, 64)
        flat_s, flat_a = s.reshape(-1), amax.reshape(-1)
        for j in rng.choice(blocks.shape[0], 24, replace=False):
            block = blocks[j]
            mine = float(errors_at(block, flat_s[j:j + 1])[0])
            spec = float(errors_at(block, flat_a[j:j + 1])[0])
            grid = (flat_a[j] * np.geomspace(0.25, 4, 4001)).astype(np.float32)
            dense = float(errors_at(block, grid).min())
            assert mine <= spec, (name, j)
            assert 10 * np.log10(mine / dense) <= 0.001, (name, j, mine, dense)


def test_the_engine_takes_the_searched_scales(query_weight):
    p = choose_qparams(query_weight, format="nf4", method="mse")
    plain = choose_qparams(query_weight, format="nf4")
    assert p.method == "mse" and plain.method == "minmax"
    amax = block_amax(query_weight, -1, 64)
    assert np.array_equal(p.scale, nf4_mse_scales(query_weight, amax))
    assert np.array_equal(p.block_scales, p.scale)
    assert np.array_equal(p.inv_scale, np.float32(1.0) / p.scale)
    assert (p.scale > amax).any() and (p.scale < amax).any()  # moved both ways
    assert analyze(query_weight, p).sqnr_db > analyze(query_weight, plain).sqnr_db


def test_zero_and_partial_blocks():
    """A zero block keeps the scale 1 the format gives it; a row whose last block is partial
    is searched over its own elements."""
    rng = np.random.default_rng(3)
    x = rng.standard_t(3, size=(5, 150)).astype(np.float32)
    x[2, :64] = 0.0
    p = choose_qparams(x, format="nf4", method="mse")
    assert p.scale.shape == (5, 3)
    assert p.scale[2, 0] == 1.0
    plain = choose_qparams(x, format="nf4")
    for r in range(5):
        for k in range(3):
            block = x[r, 64 * k:64 * (k + 1)]
            mine = errors_at(block, p.scale[r, k:k + 1])[0]
            assert mine <= errors_at(block, plain.scale[r, k:k + 1])[0]
