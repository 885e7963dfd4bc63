"""The rounding box tells the truth under every runtime preset: greyed with the preset's
declared rule(s) while the preset computes the panes, and the user's own rule, live, under a
manual clip window (which no preset has, so the engine's rules compute the panes). Each pane's
parameters are run on exact ties to see what the engine really does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from quantscope.core.tensors.generators import generate
from quantscope.gui.controls import ROUNDING_LABELS, ControlsPanel
from quantscope.state import RUNTIMES, ExplorerState, PaneKey, Source

TIES = np.array([0.5, 1.5, 2.5, 3.5], np.float32)
#: What each rule makes of TIES at scale 1, zero point 0.
ON_TIES = {"half_even": [0, 2, 2, 4], "half_away": [1, 2, 3, 4]}


def rule_on_ties(params) -> str:
    """The rounding rule ``params``' own arithmetic applies to exact ties."""
    one = dataclasses.replace(params, scale=np.ones(1, np.float32)[0],
                              zero_point=np.zeros((), np.int32), axis=None, group_size=None,
                              inv_scale=None, extra={})
    codes = one.quantize(TIES).tolist()
    rules = [rule for rule, want in ON_TIES.items() if codes == want]
    assert len(rules) == 1, codes
    return rules[0]


def rule_said(text: str, pane: PaneKey) -> str:
    """The rule the box's text gives ``pane``: one label for all, or
    ``"preset: sym LABEL / asym LABEL"``."""
    by_label = {label: rule for rule, label in ROUNDING_LABELS.items()}
    if not text.startswith("preset: "):
        return by_label[text]
    parts = dict(p.split(" ", 1) for p in text.removeprefix("preset: ").split(" / "))
    return by_label[parts["sym" if pane.symmetric else "asym"]]


@pytest.mark.parametrize("manual", [False, True], ids=["preset-rules", "manual-window"])
@pytest.mark.parametrize("runtime", [r for r in RUNTIMES if r])
def test_the_rounding_box_says_what_each_pane_does_on_ties(qtbot, runtime, manual):
    state = ExplorerState()
    x = generate("normal", (64, 128), seed=0)
    assert state.set_tensor(x, Source("file", "w.npy"))
    window = {"method": "manual", "manual_clip": (-1.0, 1.5)} if manual else {}
    # the user's own rule differs from most presets', so a box showing the wrong one fails
    assert state.update_settings(runtime=runtime, rounding="half_away", **window)
    reports = state.compute()
    panel = ControlsPanel(state)
    qtbot.addWidget(panel)
    panel.sync()
    text = panel.rounding.currentText()
    assert panel.rounding.isEnabled() == manual, text
    checked = 0
    for pane in PaneKey:
        if pane in reports:
            assert rule_said(text, pane) == rule_on_ties(reports[pane].params), (pane, text)
            checked += 1
    assert checked  # every preset computes some panes (DynamicQuantizeLinear: one)
