"""The NumPy twins of the GGUF loops give the loops' outputs byte for byte for Q8_0 blocks --
bytes, values, codes, the span of values and every block's report -- and hand every other
block type to the compiled loops."""

from __future__ import annotations

import numpy as np
import pytest
from loop_recorder import assert_same_report, recorded, the_loop

from quantscope.core import choose_qparams
from quantscope.core.formats.gguf import decode, encode, representable_span
from quantscope.core.kernels import compiled
from quantscope.core.stats import gguf_twins, loop_twins
from quantscope.core.stats.gguf_stats import analyze_gguf, kept_gguf_params
from quantscope.core.stats.prepared import prepare


def _cases() -> dict[str, np.ndarray]:
    from quantscope.io.samples import sample_path

    rng = np.random.default_rng(11)
    ties = (np.round(rng.standard_normal((16, 256)) * 8) / 8).astype(np.float32)
    ties[0, :4] = [-0.0, 0.0, -0.0, 0.0]
    ties[1] = 0.0  # a block of zeros: d = 0
    ties[2] = -0.0
    ties[3, ::2] = -0.0
    ties[4, :32] = np.float32(127.0) * np.arange(-16, 16)  # codes on rounding ties
    tiny = (rng.standard_normal((8, 256)) * np.float32(1e-6)).astype(np.float32)  # fp16 d
    return {"query_weight": np.load(sample_path("query_weight")).astype(np.float32),
            "ties": ties, "tiny": tiny,
            "wide": (rng.standard_normal((8, 256)) * np.float32(3e3)).astype(np.float32)}


@pytest.mark.parametrize("case", ["query_weight", "ties", "tiny", "wide"])
def test_the_twins_are_the_loops_for_q8_0(case):
    x = _cases()[case]
    steps = {
        "encode_blocks": lambda: encode(x, "gguf_q8_0"),
        "decode_blocks": lambda: decode(encode(x, "gguf_q8_0"), "gguf_q8_0", x.shape,
                                        codes=True),
        "report_blocks": lambda: analyze_gguf(x, choose_qparams(x, format="gguf_q8_0")),
        "encode_report_blocks": lambda: kept_gguf_params(prepare(x), "gguf_q8_0"),
        "value_span": lambda: representable_span(choose_qparams(x, format="gguf_q8_0")),
    }
    for name, run in steps.items():
        want = recorded(name, the_loop(name), run)
        assert want, name  # the step reached the loop
        assert recorded(name, gguf_twins.TWINS[name], run) == want, name
    params = choose_qparams(x, format="gguf_q8_0")
    want_span = representable_span(params)  # what value_span returns, not only its inputs
    compiled.stand_in({"value_span": gguf_twins.value_span})
    try:
        got_span = representable_span(params)
    finally:
        compiled.stand_in({})
    assert [v.hex() for v in got_span] == [v.hex() for v in want_span]


def test_other_types_go_to_the_compiled_loops(monkeypatch):
    x = _cases()["ties"]  # super-blocks of 256
    want = encode(x, "gguf_q4_k")
    asked = []
    real = compiled.loop
    monkeypatch.setattr(compiled, "loop", lambda name: asked.append(name) or real(name))
    loop_twins.install()
    try:
        assert compiled.encode_blocks is gguf_twins.encode_blocks
        got = encode(x, "gguf_q4_k")
    finally:
        loop_twins.remove()
    assert got.tobytes() == want.tobytes() and set(asked) == {"encode_blocks"}


def test_installed_twins_serve_a_whole_q8_0_report():
    x = _cases()["query_weight"]
    want = analyze_gguf(x, choose_qparams(x, format="gguf_q8_0"))
    loop_twins.install()
    try:
        got = analyze_gguf(x, choose_qparams(x, format="gguf_q8_0"))
    finally:
        loop_twins.remove()
    assert_same_report(got, want)
