"""The block pass of small floating-point grids (MXFP4, MXFP6, NVFP4) gives ``direct_rows``'s
totals bit for bit: on random blocks, on every tie and overflow threshold of each grid, on
non-finite, signed-zero, subnormal and huge elements, with tiny and huge scales, multiplied or
divided, at every row length it takes; and a format's report is the same whichever loop made
it."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams
from quantscope.core.formats import float_blocks
from quantscope.core.formats.catalog import element_of
from quantscope.core.formats.format_kernel import direct_rows
from quantscope.core.kernels.read_only import read_only
from quantscope.core.kernels.unit_columns import unit_columns
from quantscope.core.stats import format_stats, format_twins
from quantscope.core.stats.format_stats import _kernel_args, takes_float_blocks

GRIDS = ["mxfp4", "mxfp6_e2m3", "mxfp6_e3m2", "nvfp4", "nvfp4_modelopt"]


def _constructed(name: str, width: int, rng) -> np.ndarray:
    """Rows of ``width`` at scale 1: every grid value, every midpoint (a tie) and its two
    float32 neighbours, the overflow threshold and beyond, and the hard elements."""
    et = element_of(name)
    mids = et.midpoints
    over = et.max_finite + 2.0 ** (et.emax - et.mbits) / 2
    pos = np.concatenate([et.values, mids, [over, over * 1.5, 2 * over, 1e30]])
    pos = pos.astype(np.float32)
    near = np.concatenate([pos, np.nextafter(pos, np.float32(np.inf)),
                           np.nextafter(pos, np.float32(-np.inf))])
    hard = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-40, 3.4e38,
                     -3.4e38], np.float32)
    vals = np.concatenate([near, -near, hard])
    n = -(-vals.size // width) * width
    flat = np.resize(vals, n)
    rng.shuffle(flat)
    rows = flat.reshape(-1, width)
    rows[0, :] = np.nan  # a block with no finite element
    rows[1, :] = -0.0
    rows[1, width // 2:] = 0.0  # +0.0 after -0.0: min and max keep the first
    rows[2, :] = 0.0
    rows[2, width // 2:] = -0.0
    return rows


def _totals(loop, x2d, s, inv, use_inv, p) -> tuple[np.ndarray, ...]:
    # the arguments as the report hands them (read-only rows, the report's unit columns):
    # the loops the compile-ahead made, not a compile of other layouts in the test
    x2d = read_only(np.ascontiguousarray(x2d))
    h = np.zeros(p.levels + 1, np.int64)
    f = unit_columns(x2d.shape[0], 6)
    i = unit_columns(x2d.shape[0], 4, np.int64)
    et = p.element
    if loop in ("blocks", "twin"):
        rows = float_blocks.float_block_rows if loop == "blocks" else format_twins.float_block_rows
        rows(x2d, s, inv, use_inv, et.mbits, et.emin, et.emax, et.max_finite, et.levels, h, f,
             i)
    else:
        direct_rows(x2d, s, inv, use_inv, *_kernel_args(p), h, f, i)
    return f, i, h


def _same(x2d, s, inv, use_inv, p, twin: bool = False) -> None:
    assert takes_float_blocks(p, x2d, s, inv, use_inv)
    got = _totals("blocks", x2d, s, inv, use_inv, p)
    want = _totals("direct", x2d, s, inv, use_inv, p)
    for name, g, w in zip(("totals", "counts", "histogram"), got, want, strict=True):
        assert g.tobytes() == w.tobytes(), name
    if twin:  # the NumPy twin that serves while the loop compiles (a first run)
        for name, g, w in zip(("totals", "counts", "histogram"),
                              _totals("twin", x2d, s, inv, use_inv, p), want, strict=True):
            assert g.tobytes() == w.tobytes(), name


@pytest.mark.parametrize("name", GRIDS)
@pytest.mark.parametrize("width", [16, 32, 7, 64])
@pytest.mark.parametrize("use_inv", [True, False])
def test_constructed_blocks_give_the_direct_totals(name, width, use_inv):
    rng = np.random.default_rng(width)
    p = choose_qparams(np.ones((1, 32), np.float32), format=name)
    rows = _constructed(name, width, rng)
    m = rows.shape[0]
    # scale 1 puts every tie on its midpoint; the others move them, and tiny and huge
    # multipliers overflow or flush the scaled values
    for s in (np.ones(m, np.float32), rng.uniform(0.01, 100, m).astype(np.float32),
              np.full(m, 2.0 ** -120, np.float32), np.full(m, 1e-30, np.float32),
              np.full(m, 1e30, np.float32)):
        inv = (np.float32(1.0) / s).astype(np.float32)
        if not use_inv:
            inv = s
        _same(rows, s, inv, use_inv, p, twin=width == 16)


@pytest.mark.parametrize("name", GRIDS)
def test_random_blocks_at_their_own_scales_give_the_direct_totals(name):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 256)).astype(np.float32) * np.float32(0.02)
    x[:, 5] *= 50.0  # an outlier channel
    x[3, :40] = 0.0
    p = choose_qparams(x, format=name)
    bs = p.group_size
    x2d = x.reshape(-1, bs)
    s = np.ascontiguousarray(np.asarray(p.scale, np.float32).reshape(-1))
    use_inv = p.inv_scale is not None
    inv = np.ascontiguousarray(np.asarray(p.inv_scale if use_inv else p.scale,
                                          np.float32).reshape(-1))
    _same(x2d, s, inv, use_inv, p, twin=True)
    # scales a quarter of the block's own: most elements clip
    s4 = (s / np.float32(4)).astype(np.float32)
    _same(x2d, s4, (inv * np.float32(4)).astype(np.float32) if use_inv else s4, use_inv, p)


def test_the_pass_takes_only_what_it_matches():
    x = np.ones((2, 32), np.float32)
    p = choose_qparams(x, format="mxfp4")
    s = np.ones(2, np.float32)
    assert takes_float_blocks(p, x, s, s, False)
    for bad in (np.nan, np.inf, 0.0, -1.0):
        assert not takes_float_blocks(p, x, np.array([1.0, bad], np.float32), s, False)
        assert not takes_float_blocks(p, x, s, np.array([1.0, bad], np.float32), True)
    for other in ("mxfp8_e4m3", "mxint8", "nf4"):  # too many values, or not a float grid
        q = choose_qparams(x, format=other)
        assert not takes_float_blocks(q, x, s, s, False)
    assert not takes_float_blocks(p, np.ones((2, 65), np.float32), s, s, False)


@pytest.mark.parametrize("name", GRIDS)
def test_a_report_is_the_same_from_either_loop(name, monkeypatch):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((48, 160)).astype(np.float32)
    x[7, 3] = np.nan
    x[9, 20] = np.inf
    p = choose_qparams(x, format=name)
    fast = analyze(x, p)
    monkeypatch.setattr(format_stats, "takes_float_blocks", lambda *a: False)
    slow = analyze(x, p)
    assert fast.code_histogram.tobytes() == slow.code_histogram.tobytes()
    for k in ("n", "mse", "rounding_mse", "clipping_mse", "sqnr_db", "max_abs_error",
              "clipped_below", "clipped_above", "codes_used"):
        assert getattr(fast, k) == getattr(slow, k) or (
            np.isnan(getattr(fast, k)) and np.isnan(getattr(slow, k))), k
    for k in ("sqnr_db", "mse", "x_min", "x_max", "codes_used", "n"):
        assert getattr(fast.per_channel, k).tobytes() == getattr(slow.per_channel, k).tobytes()
