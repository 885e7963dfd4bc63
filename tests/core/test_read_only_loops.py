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
    loops = (len(gguf_kernel.encode_report_blocks.signatures),
             len(gguf_kernel.report_blocks.signatures))
    assert _numbers(analyze(frozen, params)) == writable[0]
    assert choose_qparams(frozen, format="gguf_q8_0").blocks.tobytes() == params.blocks.tobytes()
    assert (error_sum(frozen, params), signal_sum(frozen)) == writable[1:]
    assert (len(gguf_kernel.encode_report_blocks.signatures),
            len(gguf_kernel.report_blocks.signatures)) == loops


def _loops(*dispatchers) -> tuple[int, ...]:
    return tuple(len(d.signatures) for d in dispatchers)


def test_a_format_pass_compiles_once_for_one_unit_all_units_and_a_part_of_them():
    """The report's outputs are handed to the loop in one layout (unit_columns): one unit
    (contiguous both ways), every unit (column-major) and a thread's part of them (strided)
    were three compiles of the direct pass, 20 s of CPU each on a first run."""
    x, _ = _pair()
    big = np.random.default_rng(6).standard_normal((512, 512)).astype(np.float32)
    analyze(x, choose_qparams(x, format="fp8_e4m3"))
    loops = _loops(direct_rows)
    assert loops[0] >= 1
    per_channel = choose_qparams(x, format="fp8_e4m3", granularity="channel", axis=0)
    blocks = choose_qparams(big, format="mxfp8_e4m3")
    assert analyze(x, per_channel).n == x.size and analyze(big, blocks).n == big.size
    assert _loops(direct_rows) == loops


def test_group_block_and_torchao_loops_compile_once_for_both_kinds_and_any_count_of_units():
    """Integer groups, the blocks' ranges and stored scales of least error, torchao's int4 and
    GGUF blocks: a read-only tensor reaches the writable one's loops, one unit the many's."""
    from quantscope.core.formats import mx_mse, nf4_mse, nvfp4_mse, torchao_kernel
    from quantscope.core.kernels import block_max, group_kernel
    from quantscope.core.stats.analyze import compiled_group_totals

    x, frozen = _pair()
    one = np.random.default_rng(7).standard_normal((1, 32)).astype(np.float32)

    def run(t: np.ndarray) -> tuple:
        out = [_numbers(analyze(t, choose_qparams(t, format=name)))
               for name in ("int4_g32", "torchao_int4_g32", "gguf_q8_0")]
        out += [choose_qparams(t, format=name, method="mse").scale.tobytes()
                for name in ("mxfp4", "nvfp4", "nf4")]
        tao = choose_qparams(t, format="torchao_int4_g32")
        lo, hi, bad = block_max.block_min_max(t, 32)  # groups too many to sort take these
        groups = compiled_group_totals(t, choose_qparams(t, format="int4_g32"))
        return (*out, tao.quantize(t).tobytes(), lo.tobytes(), hi.tobytes(), bad,
                groups.round_err.tobytes(), groups.hist.tolist())

    writable = run(x)
    assert all(_loops(group_kernel.group_rows, block_max._rows_block_min_max))
    loops = _loops(group_kernel.group_rows, block_max._rows_block_min_max,
                   block_max._rows_block_max, mx_mse.mse_exponents,
                   nvfp4_mse.mse_block_scales, nf4_mse.mse_block_scales,
                   torchao_kernel.group_params, torchao_kernel.group_codes,
                   torchao_kernel.group_report, gguf_kernel.report_blocks)
    assert run(frozen) == writable
    run(one)
    assert _loops(group_kernel.group_rows, block_max._rows_block_min_max,
                  block_max._rows_block_max, mx_mse.mse_exponents,
                  nvfp4_mse.mse_block_scales, nf4_mse.mse_block_scales,
                  torchao_kernel.group_params, torchao_kernel.group_codes,
                  torchao_kernel.group_report, gguf_kernel.report_blocks) == loops


def test_encoding_alone_and_with_its_report_are_one_loop_and_the_same_bytes():
    """GGUF's encoding without a report runs the encoding-with-report loop (no second loop of
    every encoder), and writes the bytes that pass writes."""
    from quantscope.core.stats.gguf_stats import kept_gguf_params
    from quantscope.core.stats.prepared import prepare

    x = np.random.default_rng(8).standard_normal((6, 512)).astype(np.float32)
    for name in ("gguf_q8_0", "gguf_q4_k"):
        alone = choose_qparams(x, format=name).blocks.tobytes()
        loops = _loops(gguf_kernel.encode_report_blocks)
        assert loops[0] >= 1
        assert kept_gguf_params(prepare(x), name).blocks.tobytes() == alone
        assert _loops(gguf_kernel.encode_report_blocks) == loops
