"""A read-only tensor (one the window opened, a memory-mapped file) and a writable one reach
the same compiled loops: the format passes are not compiled a second time for the read-only
type (quantscope.core.kernels.read_only), and the numbers are the same."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams
from quantscope.core.formats import gguf_kernel
from quantscope.core.formats.format_kernel import direct_rows
from quantscope.core.kernels.read_only import read_only
from quantscope.core.stats.format_sweep import error_sum, signal_sum


def _numbers(report) -> tuple:
    """A report's figures, exactly (float bits and counts) and its code histogram."""
    return (report.n, report.mse, report.rounding_mse, report.clipping_mse, report.sqnr_db,
            report.max_abs_error, report.clipped_below, report.clipped_above,
            report.codes_used, report.signal_power, report.code_histogram.tolist())


def _pair() -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(5).standard_normal((48, 64)).astype(np.float32)
    frozen = x.copy()
    frozen.flags.writeable = False
    return x, frozen


def test_read_only_is_a_view_that_leaves_the_tensor_writable():
    x, frozen = _pair()
    view = read_only(x)
    assert np.shares_memory(view, x) and not view.flags.writeable and x.flags.writeable
    assert read_only(frozen) is frozen


@pytest.mark.parametrize("spec", [dict(format="fp8_e4m3"),
                                  dict(format="fp4_e2m1", granularity="channel", axis=0)])
def test_a_format_pass_compiles_once_for_both_kinds_of_tensor(spec):
    x, frozen = _pair()
    params = choose_qparams(x, **spec)
    writable = _numbers(analyze(x, params))
    loops = len(direct_rows.signatures)
    assert loops >= 1
    assert _numbers(analyze(frozen, params)) == writable
    assert len(direct_rows.signatures) == loops


def test_gguf_blocks_and_the_screen_compile_once_for_both_kinds_of_tensor():
    x, frozen = _pair()
    params = choose_qparams(x, format="gguf_q8_0")
    writable = (_numbers(analyze(x, params)), error_sum(x, params), signal_sum(x))
    loops = (len(gguf_kernel.encode_blocks.signatures),
             len(gguf_kernel.report_blocks.signatures))
    assert _numbers(analyze(frozen, params)) == writable[0]
    assert choose_qparams(frozen, format="gguf_q8_0").blocks.tobytes() == params.blocks.tobytes()
    assert (error_sum(frozen, params), signal_sum(frozen)) == writable[1:]
    assert (len(gguf_kernel.encode_blocks.signatures),
            len(gguf_kernel.report_blocks.signatures)) == loops
