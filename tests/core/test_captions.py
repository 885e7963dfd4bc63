"""Captions: each rule fires on a hand-built tensor whose story is known, and the sentence
carries the numbers of the report it explains."""

from __future__ import annotations

import numpy as np
import pytest

from quantscope.core import analyze, choose_qparams, params_from_range
from quantscope.core.labs.captions import (
    Caption,
    bulk_code_span,
    caption,
    finite_range,
    pane_captions,
)
from quantscope.core.text.formatting import fmt_percent, fmt_value


def _cap(x, params) -> Caption:
    lo, hi = finite_range(x)
    return caption(analyze(x, params), x_min=lo, x_max=hi)


def test_one_outlier_stretches_the_window():
    # 10,000 values within ±1 and one at 24.8: symmetric scale 24.8/127, so the bulk fits in
    # codes -6..6 (13 codes).
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, 10_000).astype(np.float32)
    x[123] = 24.8
    c = _cap(x, choose_qparams(x))
    assert c.kind == "outlier"
    assert c.text.startswith("one value at 24.8 stretches the window: 99% of values share ")
    span = int(c.text.split("share ")[1].split(" of")[0])
    assert 11 <= span <= 13
    assert c.text.endswith("of 255 codes")


def test_several_outliers_are_counted():
    x = np.concatenate([np.linspace(-1, 1, 5000), [20.0, 21.0, 22.5]]).astype(np.float32)
    c = _cap(x, choose_qparams(x))
    assert c.kind == "outlier"
    assert c.text.startswith("3 values up to 22.5 stretch the window")


def test_outlier_below_names_the_minimum():
    x = np.concatenate([np.linspace(-1, 1, 5000), [-30.0]]).astype(np.float32)
    c = _cap(x, choose_qparams(x, symmetric=False))
    assert c.kind == "outlier"
    assert c.text.startswith("one value at -30 stretches")
    assert c.text.endswith("of 256 codes")


def test_all_nonnegative_symmetric_uses_half_the_codes():
    x = np.linspace(0, 5, 1001, dtype=np.float32)
    c = _cap(x, choose_qparams(x, symmetric=True))
    assert c == Caption("one_sided", "all values ≥ 0: symmetric can use only 128 of 255 codes")
    # asymmetric has no such problem: the uniform ramp uses the whole window
    assert _cap(x, choose_qparams(x, symmetric=False)).kind == "rounding"


def test_all_nonpositive_full_range():
    x = -np.linspace(0, 5, 1001, dtype=np.float32)
    c = _cap(x, choose_qparams(x, symmetric=True, narrow_range=False))
    assert c.text == "all values ≤ 0: symmetric can use only 129 of 256 codes"


def test_clipping_dominates_with_the_shares_of_the_report():
    # window [-1, 1]; 30 of 10,000 values at 5.0 are clipped, each with error ~4
    x = np.concatenate([np.linspace(-1, 1, 9970), np.full(30, 5.0)]).astype(np.float32)
    params = params_from_range(-1.0, 1.0, symmetric=True)
    rep = analyze(x, params)
    c = caption(rep, x_min=-1.0, x_max=5.0)
    assert c.kind == "clipping"
    share = rep.clipping_mse / rep.mse
    assert share > 0.99
    assert c.text == f"clipping dominates: 0.3% of values clipped cause {fmt_percent(share)} " \
                     "of the error"


def test_rounding_only_on_a_uniform_tensor():
    x = np.linspace(-3, 3, 20_001, dtype=np.float32)
    params = choose_qparams(x)
    rep = analyze(x, params)
    c = caption(rep, x_min=-3.0, x_max=3.0)
    assert c.kind == "rounding"
    assert c.text == (f"rounding only: values use {rep.codes_used} of 255 codes, each error ≤ "
                      f"half a step ({fmt_value(float(params.scale) / 2)})")


def test_exact_and_empty():
    x = np.array([-2.0, 0.0, 1.0, 2.0], np.float32)  # scale 2/127: 1.0 is not exact...
    params = params_from_range(-127.0, 127.0, symmetric=True)  # ...but at scale 1 all are
    assert _cap(x, params).kind == "exact"
    nan = np.full(4, np.nan, np.float32)
    rep = analyze(nan, params)
    assert caption(rep, x_min=0.0, x_max=0.0).kind == "empty"


def test_worst_channel_is_named_per_channel_and_per_group():
    # channel 2 holds one large value among small ones: its SQNR is far below the others
    rng = np.random.default_rng(3)
    w = rng.normal(size=(4, 256)).astype(np.float32)
    w[2, 7] = 60.0
    params = choose_qparams(w, granularity="channel", axis=0)
    rep = analyze(w, params)
    c = caption(rep, x_min=float(w.min()), x_max=60.0)
    assert c.kind == "channel"
    sq = rep.per_channel.sqnr_db
    assert c.text.startswith(f"worst channel 2: {sq[2]:.1f} dB vs median "
                             f"{np.median(sq):.1f} dB; its values use "
                             f"{rep.per_channel.codes_used[2]} of 255 codes")
    gp = choose_qparams(w, granularity="group", axis=1, group_size=64)
    grep = analyze(w, gp)
    gc = caption(grep, x_min=float(w.min()), x_max=60.0)
    assert gc.kind == "channel"
    # group index in C order of the [4, 4] per-group array: row 2, block 0 -> unit 8
    assert gc.text.startswith("worst group 8:")


def test_even_channels_fall_through_to_rounding():
    w = np.tile(np.linspace(-1, 1, 255, dtype=np.float32), (8, 1))
    rep = analyze(w, choose_qparams(w, granularity="channel", axis=0))
    c = caption(rep, x_min=-1.0, x_max=1.0)
    assert c.kind == "rounding"
    assert c.text.endswith("each error ≤ half its unit's step")


def test_bulk_code_span_leaves_half_a_percent_each_side():
    hist = np.zeros(256, np.int64)
    hist[100:110] = 99  # 990 values in 10 codes
    hist[0] = 5
    hist[255] = 5
    assert bulk_code_span(hist) == (100, 109)
    hist[255] = 6  # now the top tail holds more than 0.5%: it must be included
    assert bulk_code_span(hist)[1] == 255


def test_pane_captions_take_the_range_from_a_per_channel_report():
    rng = np.random.default_rng(0)
    x = np.abs(rng.normal(size=(8, 64))).astype(np.float32)
    results = {
        "symmetric/tensor": analyze(x, choose_qparams(x)),
        "symmetric/channel": analyze(x, choose_qparams(x, granularity="channel")),
    }
    caps = pane_captions(results)
    assert caps["symmetric/tensor"].kind == "one_sided"
    with pytest.raises(ValueError, match="x_min/x_max"):
        pane_captions({"symmetric/tensor": results["symmetric/tensor"]})


@pytest.mark.parametrize(("value", "text"), [(24.7876, "24.8"), (0.0, "0"), (-30.0, "-30"),
                                             (0.00312, "0.003"), (1.5e-6, "1.50e-06")])
def test_fmt_value(value, text):
    assert fmt_value(value) == text


@pytest.mark.parametrize(("fraction", "text"), [(0.003, "0.3%"), (0.8, "80%"), (0.99, "99%"),
                                                (0.0, "0%"), (2e-5, "0.002%"), (0.05, "5%")])
def test_fmt_percent(fraction, text):
    assert fmt_percent(fraction) == text


def test_outliers_on_both_sides_are_both_named():
    x = np.concatenate([np.linspace(-1, 1, 5000), [-20.0, 20.0]]).astype(np.float32)
    c = _cap(x, choose_qparams(x))
    assert c.kind == "outlier"
    assert c.text.startswith("two values, at -20 and 20, stretch the window")
    y = np.concatenate([np.linspace(-1, 1, 5000), [-20.0, -19.0, 18.0, 20.0]]).astype(np.float32)
    assert _cap(y, choose_qparams(y)).text.startswith("4 values out to -20 and 20 stretch")


def test_clipped_values_never_read_as_rounding_only_or_as_stretching():
    x = np.random.default_rng(0).normal(size=100_000).astype(np.float32)
    x[:12] = 20.0
    # a window that ends just below the 12 values: they are clipped, not in the window
    rep = analyze(x, params_from_range(-20.0, 19.99, symmetric=False))
    assert rep.clipped_above == 12
    c = caption(rep, x_min=float(x.min()), x_max=20.0)
    assert "stretch" not in c.text and "only" not in c.text
    assert c.kind == "rounding" and "0.012% clipped" in c.text
    # a uniform tensor with one value past the edge: "rounding dominates", with the count
    u = np.linspace(-1, 1, 200_001, dtype=np.float32)
    rep = analyze(u, params_from_range(-1.0, 0.99999, symmetric=False))
    assert rep.clipped_above == 1
    c = caption(rep, x_min=-1.0, x_max=1.0)
    assert c.text.startswith("rounding dominates") and "one value clipped" in c.text


def test_a_share_below_a_thousandth_of_a_percent_is_a_count():
    from quantscope.core.labs.captions import values_share

    assert values_share(1, 10_000_000) == "one value"
    assert values_share(12, 10_000_000) == "12 values"
    assert values_share(3_000, 1_000_000) == "0.3% of values"
