"""Small tensors' best formats evaluated in batches equal one tensor at a time, point for
point and to the last bit (quantscope.state.format_batch), and ``scan --formats`` uses it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from quantscope.state import Settings
from quantscope.state import format_batch as fb
from quantscope.state.formats import (
    best_formats,
    candidates,
    format_points,
    whole_blocks_only,
)


def _tensors(shape, k: int = 24, seed: int = 0) -> list[np.ndarray]:
    """Gaussian tensors of several scales, plus the cases that move a range rule's edge:
    all zeros, a loud outlier, a constant, subnormal-sized values, a single sign."""
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_normal(shape) * rng.lognormal(0, 2)).astype(np.float32)
          for _ in range(k)]
    xs[1][...] = 0
    xs[2].flat[3] = 40.0
    xs[3][...] = 1.5
    xs[4] *= np.float32(1e-30)
    xs[5] = np.abs(xs[5])
    return xs


SHAPES = [((8, 64), 0), ((8, 64), 1), ((3, 5), 0), ((256,), None), ((4, 300), 0),
          ((2, 3, 32), 0), ((16, 128), 0), ((4, 512), 0), ((3, 200), 0), ((130,), None)]


@pytest.mark.parametrize(("shape", "axis"), SHAPES, ids=[str(s) for s in SHAPES])
def test_every_format_point_equals_the_one_tensor_path(shape, axis):
    xs = _tensors(shape)
    settings = Settings() if axis is None else dataclasses.replace(Settings(), axis=axis)
    compared = 0
    for bits in (8, 4):
        for spec in candidates(bits, axis is not None):
            if whole_blocks_only(spec) and shape[-1] % whole_blocks_only(spec):
                continue  # llama.cpp's and torchao's blocks do not fit these rows
            got = fb._points(xs, spec, settings)
            for x, point in zip(xs, got, strict=True):
                (want,) = format_points(x, None, settings, (spec,), curve=False)
                assert point == want, (spec, point, want)
                compared += 1
    assert compared >= len(xs) * 15
    best = fb.best_formats_many(xs, settings, per_channel=axis is not None)
    assert best == [best_formats(x, settings, per_channel=axis is not None) for x in xs]


def test_other_settings_and_mixed_shapes_take_the_one_tensor_path():
    xs = _tensors((8, 64), k=6)
    percentile = dataclasses.replace(Settings(), method="percentile")
    assert not fb.batchable((8, 64), percentile)
    assert not fb.batchable((1 << 20,), Settings())
    assert fb.best_formats_many(xs, percentile, per_channel=True) == [
        best_formats(x, percentile, per_channel=True) for x in xs]
    with pytest.raises(ValueError, match="one shape"):
        fb.best_formats_many([xs[0], xs[0][:4]], Settings(), per_channel=True)


def test_a_scan_with_formats_batches_small_tensors_and_gets_the_same_rows(tmp_path,
                                                                          monkeypatch):
    from safetensors.numpy import save_file

    from quantscope.io.checkpoint import list_checkpoint
    from quantscope.state import model_scan
    from quantscope.state.model_scan import OK, ModelScan, channel_axis, model_rows

    rng = np.random.default_rng(5)
    tensors = {f"l.{i}.w": rng.standard_normal((8, 64)).astype(np.float32) for i in range(30)}
    tensors.update({f"l.{i}.b": rng.standard_normal(64).astype(np.float32) for i in range(5)})
    tensors["big"] = rng.standard_normal((600, 512)).astype(np.float32)  # alone, as before
    tensors["odd"] = rng.standard_normal((5, 7)).astype(np.float32)  # its shape's only one
    path = tmp_path / "m.safetensors"
    save_file(tensors, str(path))
    alone = []
    real = model_scan.best_formats
    monkeypatch.setattr(model_scan, "best_formats",
                        lambda x, *a, **k: alone.append(x.shape) or real(x, *a, **k))
    rows = ModelScan(model_rows(list_checkpoint(path)), Settings(), formats=True,
                     workers=2).run()
    assert [r.status for r in rows] == [OK] * len(tensors)
    assert sorted(alone) == [(5, 7), (600, 512)]  # every other tensor went in a batch
    for row in rows:
        axis = channel_axis(row, None)
        at = Settings() if axis is None else dataclasses.replace(Settings(), axis=axis)
        assert row.formats == real(tensors[row.name], at, per_channel=axis is not None), row.name


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize(("shape", "axis"), SHAPES, ids=[str(s) for s in SHAPES])
def test_batched_int_figures_equal_the_one_tensor_path(shape, axis, bits):
    from quantscope.state.model_scan import engine_figures, engine_figures_many

    xs = _tensors(shape, seed=7)
    settings = dataclasses.replace(Settings(), bits=bits)
    got = engine_figures_many(xs, axis, settings)
    assert got == [engine_figures(x, axis, settings) for x in xs]


def test_batched_int_figures_equal_the_one_tensor_path_on_a_taller_tensor():
    from quantscope.state.model_scan import engine_figures, engine_figures_many

    rng = np.random.default_rng(0)
    e = rng.standard_normal((158, 64)).astype(np.float32) * 0.02
    e[5, :] = 3.0
    xs = [e, e[::-1] * np.float32(0.5)]
    got = engine_figures_many(xs, 0, Settings())
    assert got == [engine_figures(x, 0, Settings()) for x in xs]
