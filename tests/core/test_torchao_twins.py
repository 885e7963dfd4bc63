"""The NumPy twins of torchao int4's compiled loops give the loops' outputs byte for byte:
scales and zeros, codes, values, and every group's report totals and code counts."""

from __future__ import annotations

import numpy as np
import pytest
from loop_recorder import assert_same_report, recorded, the_loop

from quantscope.core import choose_qparams
from quantscope.core.kernels import compiled
from quantscope.core.stats import loop_twins, torchao_twins
from quantscope.core.stats.torchao_stats import analyze_torchao


def _cases() -> dict[str, np.ndarray]:
    from quantscope.io.samples import sample_path

    rng = np.random.default_rng(7)
    ties = (np.round(rng.standard_normal((8, 256)) * 16) / 16).astype(np.float32)
    ties[0, :5] = [-0.0, 0.0, -0.0, 0.0, 0.0]
    ties[1] = 0.0
    ties[2] = -0.0
    ties[3, ::2] = -0.0  # zeros of both signs, each first in turn
    ties[4] = 3.0  # a constant group: the smallest scale
    wide = (rng.standard_normal((4, 512)) * np.float32(1e30)).astype(np.float32)
    return {"query_weight": np.load(sample_path("query_weight")).astype(np.float32),
            "ties": ties, "wide": wide,
            "normal": rng.standard_normal((64, 384)).astype(np.float32)}


@pytest.mark.parametrize("fmt", ["torchao_int4_g32", "torchao_int4_g128"])
@pytest.mark.parametrize("case", ["query_weight", "ties", "wide", "normal"])
def test_the_twins_are_the_loops(case, fmt):
    x = _cases()[case]
    steps = {
        "group_params": lambda: choose_qparams(x, format=fmt),
        "group_codes": lambda: choose_qparams(x, format=fmt).quantize(x),
        "group_values": lambda: (lambda p: p.dequantize(p.quantize(x)))(
            choose_qparams(x, format=fmt)),
        "group_report": lambda: analyze_torchao(x, choose_qparams(x, format=fmt)),
    }
    for name, run in steps.items():
        want = recorded(name, the_loop(name), run)
        assert want, name  # the step reached the loop
        assert recorded(name, torchao_twins.TWINS[name], run) == want, name


def test_installed_twins_serve_a_whole_report():
    x = _cases()["normal"]
    want = analyze_torchao(x, choose_qparams(x, format="torchao_int4_g64"))
    loop_twins.install()
    try:
        assert compiled.group_report is torchao_twins.group_report
        got = analyze_torchao(x, choose_qparams(x, format="torchao_int4_g64"))
    finally:
        loop_twins.remove()
    assert_same_report(got, want)
