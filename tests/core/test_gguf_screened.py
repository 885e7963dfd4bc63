"""llama.cpp's blocks screened as they are encoded (``encode_screened``, the scan's GGUF error
screen): the bytes are the encoder's, and the error is the report's own terms summed in another
order -- within the screen's roundoff of the exact report's error and of the former screen's
(the tensor against its decoded blocks), for every GGUF type, on random tensors and on
subnormals, ties, one-signed blocks and scales that overflow float16."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quantscope.core.formats.gguf import GGUF_TYPES, gguf_params
from quantscope.core.formats.gguf_kernel import encode_report_blocks
from quantscope.core.formats.gguf_types import SCREEN
from quantscope.core.kernels.read_only import read_only
from quantscope.core.kernels.unit_columns import unit_columns
from quantscope.core.stats.format_sweep import ErrorScreen
from quantscope.core.stats.gguf_stats import analyze_gguf, encode_screened
from quantscope.core.tensors.validate import EngineValueError

f32 = np.float32


def _tensors():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((6, 1024)).astype(f32) * f32(0.02)
    x[1] = (rng.standard_normal(1024) * 1e-40).astype(f32)  # subnormals
    x[2] = np.abs(x[2]) + f32(1)  # one-signed blocks
    x[3] = np.round(x[3] * 200) / f32(16)  # values on the grids' ties
    x[4, ::37] = f32(30.0)  # an outlier now and then
    x[5, :512] = 0
    return {"random": x, "overflow": np.full((2, 512), 1e38, f32)}


@pytest.mark.parametrize("name", list(GGUF_TYPES))
def test_screened_blocks_are_the_encoders_and_their_error_the_reports_terms(name):
    for kind, x in _tensors().items():
        screened = encode_screened(x, name)
        params = gguf_params(x, name)
        assert screened.params.blocks.tobytes() == params.blocks.tobytes()
        assert screened.params.shape == params.shape and screened.params.format == name
        before = ErrorScreen(x, params).slice_sum(0, 1)  # the decoded blocks' pass
        # a type whose fp16 scale overflows decodes non-finite values: the screen says so
        # (the exact report must decide, and refuses them), as the former screen did
        assert math.isfinite(screened.error) == math.isfinite(before)
        if not math.isfinite(before):
            assert kind == "overflow"
            continue
        report = analyze_gguf(x, params)
        exact = (report.rounding_mse + report.clipping_mse) * x.size
        # any two orders of n non-negative terms: within n units of roundoff of each other
        tol = 2 * x.size * 2.0 ** -53
        assert screened.error > 0
        assert abs(screened.error - before) <= tol * before
        assert abs(screened.error - exact) <= tol * exact + 1e-300


def test_one_loop_screens_any_share_of_blocks_alike():
    """The error of blocks split in shares (the engine's threads) adds up to the whole's, up to
    the order of the sum: each block's terms depend on the block alone."""
    x = _tensors()["random"]
    t = GGUF_TYPES["gguf_q4_k"]
    xb = read_only(np.ascontiguousarray(x.reshape(-1, t.block)))  # as the encoder hands it
    out = np.empty((xb.shape[0], t.type_size), np.uint8)
    units_f, units_i = unit_columns(1, 6), unit_columns(1, 4, np.int64)

    def screen(lo, hi):
        return encode_report_blocks(t.ggml_type, xb[lo:hi], out[lo:hi], SCREEN, t.levels,
                                    units_f, units_i, np.zeros(t.levels, np.int64))

    whole = screen(0, xb.shape[0])
    parts = screen(0, 5) + screen(5, 9) + screen(9, xb.shape[0])
    assert abs(whole - parts) <= 2 * x.size * 2.0 ** -53 * whole


def test_screening_refuses_what_the_encoder_refuses():
    x = np.zeros((2, 256), f32)
    x[1, 3] = np.nan
    for name in ("gguf_q8_0", "gguf_q4_k"):
        with pytest.raises(EngineValueError) as screened:
            encode_screened(x, name)
        with pytest.raises(EngineValueError) as encoded:
            gguf_params(x, name)
        assert str(screened.value) == str(encoded.value)
    with pytest.raises(EngineValueError, match="256"):
        encode_screened(np.zeros((2, 96), f32), "gguf_q4_k")
