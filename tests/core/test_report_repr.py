"""A report's repr stays one short line whatever the number of channels; the details stay a
call away."""

from __future__ import annotations

import numpy as np

import quantscope as qs


def test_per_channel_repr_is_short_and_names_what_was_done():
    x = np.random.default_rng(0).standard_normal((1536, 384)).astype(np.float32)
    r = qs.analyze(x, qs.choose_qparams(x, granularity="channel", axis=1))
    text = repr(r)
    assert len(text) < 300 and "\n" not in text
    assert text.startswith("<QuantReport symmetric int8 per-channel (384 units): SQNR ")
    assert f"{r.sqnr_db:.2f} dB" in text and f"codes used {r.codes_used}/255" in text
    assert r.per_channel is not None and len(r.per_channel.sqnr_db) == 384  # on demand


def test_format_repr_names_the_format():
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    r = qs.analyze(x, qs.choose_qparams(x, format="nvfp4"))
    assert repr(r).startswith("<QuantReport nvfp4 ")
