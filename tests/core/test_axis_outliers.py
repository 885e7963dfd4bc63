"""Outlier channels are counted along every axis: an input-channel outlier of a weight
quantized per output channel is invisible per output channel (every one of them holds one of
its values) and shows along axis 1."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams
from quantscope.core.labs.explain import channel_table
from quantscope.core.labs.outliers import axis_outliers, axis_outliers_text
from quantscope.core.tensors.channels import channel_abs_max
from quantscope.core.tensors.validate import EngineValueError
from quantscope.state.source import overview


def weight_with_outlier_input(column: int = 17) -> np.ndarray:
    """[1024 out, 4096 in], std 0.02, input channel ``column`` 60 times larger."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((1024, 4096)) * 0.02).astype(np.float32)
    w[:, column] *= 60
    return w


def test_a_60x_input_channel_is_one_outlier_along_axis_1_and_none_along_axis_0():
    w = weight_with_outlier_input()
    # per output channel (the weight's quantization axis) nothing stands out: 0 of 1024
    table = channel_table(analyze(w, choose_qparams(w, granularity="channel", axis=0)))
    assert table.outliers.size == 0 and len(table) == 1024
    maxima = channel_abs_max(w)
    np.testing.assert_array_equal(maxima[0], np.abs(w).max(axis=1))
    np.testing.assert_array_equal(maxima[1], np.abs(w).max(axis=0))
    rows, cols = axis_outliers(maxima)
    assert (rows.axis, rows.count, rows.channels) == (0, 0, 1024)
    assert (cols.axis, cols.channels) == (1, 4096)
    np.testing.assert_array_equal(cols.indices, [17])
    assert 40 < cols.ratio < 90
    text = axis_outliers_text([rows, cols])
    assert text.startswith("outlier channels by axis: 0: 0/1024, 1: 1/4096 (#17, ")


def test_the_absolute_threshold_still_counts_and_non_finite_values_are_skipped():
    x = np.ones((3, 5), np.float32)
    x[1, 2] = 7.0  # LLM.int8()'s 6.0, although only 7x the median
    x[2, 4] = np.inf
    x[0, 0] = np.nan
    maxima = channel_abs_max(x)
    np.testing.assert_array_equal(maxima[0], [1.0, 7.0, 1.0])
    np.testing.assert_array_equal(maxima[1], [1.0, 1.0, 7.0, 1.0, 1.0])
    rows, cols = axis_outliers(maxima, threshold=6.0, ratio=100.0)
    assert rows.indices.tolist() == [1] and cols.indices.tolist() == [2]
    assert axis_outliers(maxima, threshold=100.0, ratio=100.0)[0].count == 0


def test_the_overview_carries_the_maxima_of_every_axis():
    w = weight_with_outlier_input(5)[:64, :256]
    ov = overview(w)
    assert ov.channel_abs_max is not None and len(ov.channel_abs_max) == 2
    assert axis_outliers(ov.channel_abs_max)[1].indices.tolist() == [5]
    assert overview(w[0]).channel_abs_max is None  # 1-D: no channels


def test_bad_input_is_refused():
    with pytest.raises(EngineValueError):
        channel_abs_max(np.zeros(4, np.float32))
    with pytest.raises(EngineValueError):
        axis_outliers((np.ones(3),), threshold=-1.0)
    with pytest.raises(EngineValueError):
        axis_outliers((np.ones(3),), ratio=0.5)
